//! The client libraries of clients/<language>/, each run from here so `cargo test` (the
//! README's test command) covers them: the language's own test suite against real `idcar
//! serve` processes (it starts them from `$IDCAR_BIN`), then the uniform `fetch` example
//! against a server of every layout — N unique lines, each one `idcar decode` accepts, and a
//! one-line error with exit status 1 for a socket that does not exist.
//!
//! Toolchains (python3, go, node, javac) come from tests/ensure-deps.sh. The four run one at a
//! time: their suites have timing assertions (retry deadlines) and the machine is small.

mod common;

use common::*;
use std::collections::HashSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const LAYOUTS: [&str; 5] = ["lable64", "ugd60", "si53", "sno80", "muid128"];

/// Runs a language's suite (in the directory `cmd` names) with `$IDCAR_BIN` set, bounded;
/// panics with its output unless it succeeds.
fn suite(name: &str, cmd: &mut Command, limit: Duration) {
    let (ok, out) = run_tool(cmd.env("IDCAR_BIN", BIN), limit);
    eprintln!("--- {name} ---\n{out}");
    assert!(ok, "{name} failed:\n{out}");
}

/// Runs one language's fetch example; (exit code, stdout, stderr).
fn fetch(cmd: &[String], socket: &Path, count: u32, prefetch: u32) -> (i32, String, String) {
    let mut args = vec!["--count".to_string(), count.to_string()];
    if prefetch > 0 {
        args.extend(["--prefetch".to_string(), prefetch.to_string()]);
    }
    fetch_with(cmd, socket, &args)
}

fn fetch_with(cmd: &[String], socket: &Path, args: &[String]) -> (i32, String, String) {
    let mut c = Command::new(&cmd[0]);
    c.args(&cmd[1..]).arg("--socket").arg(socket).args(args);
    let mut child = c
        .current_dir(repo())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "{cmd:?} did not finish in 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The uniform fetch example against a server of every layout, and against no server.
async fn fetch_agrees(cmd: &[String]) {
    for layout in LAYOUTS {
        let i = Idcar::start(&["--layout", layout]).await;
        i.wait_ready(Duration::from_secs(10)).await;
        let mut seen = HashSet::new();
        for prefetch in [0, 50] {
            let (code, out, err) = fetch(cmd, &i.socket, 20, prefetch);
            assert_eq!(code, 0, "{cmd:?} {layout}: {err}");
            let lines: Vec<&str> = out.lines().collect();
            assert_eq!(lines.len(), 20, "{cmd:?} {layout}: {out}");
            for l in lines {
                assert!(seen.insert(l.to_string()), "{cmd:?} {layout}: {l} twice");
                let (code, _, err) = run(&["decode", "--layout", layout, l]);
                assert_eq!(code, 0, "{cmd:?} {layout}: idcar decode {l}: {err}");
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.sock");
    let (code, out, err) = fetch(cmd, &missing, 1, 0);
    one_line_error(cmd, code, &out, &err);
    for bad in [["--count", "abc"], ["--count", "0"], ["--bogus", "1"]] {
        let (code, out, err) = fetch_with(cmd, &missing, &strings(&bad));
        one_line_error(cmd, code, &out, &err);
    }
}

/// A failure is exit status 1, one line `error: ...` on stderr, nothing on stdout.
fn one_line_error(cmd: &[String], code: i32, out: &str, err: &str) {
    assert_eq!(code, 1, "{cmd:?}: {out} {err}");
    let line = err.trim();
    assert!(
        line.starts_with("error:") && line.lines().count() == 1,
        "{cmd:?}: {err}"
    );
    assert!(out.is_empty(), "{cmd:?}: {out}");
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client() {
    let _one = ONE_AT_A_TIME.lock().await;
    suite(
        "python unittest",
        Command::new(tool("python3")).current_dir(repo()).args([
            "-m",
            "unittest",
            "discover",
            "-s",
            "clients/python/tests",
            "-t",
            "clients/python",
        ]),
        Duration::from_secs(300),
    );
    fetch_agrees(&strings(&["python3", "clients/python/examples/fetch.py"])).await;
}

/// Go's caches stay inside target/, and nothing is fetched from the network.
fn go(args: &[&str]) -> Command {
    let tools = repo().join("target/test-tools");
    let mut c = Command::new(tool("go"));
    c.args(args)
        .env("GOCACHE", tools.join("go-cache"))
        .env("GOPATH", tools.join("go-path"))
        .env("GOFLAGS", "-mod=mod")
        .env("GOPROXY", "off")
        .env("GOTOOLCHAIN", "local");
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_client() {
    let _one = ONE_AT_A_TIME.lock().await;
    suite(
        "go test",
        go(&["test", "-count=1", "./..."]).current_dir(repo().join("clients/go")),
        Duration::from_secs(600),
    );
    // Built once, then run like `go run ./examples/fetch` would.
    let bin = repo().join("target/test-tools/go-fetch");
    suite(
        "go build fetch",
        go(&["build", "-o", bin.to_str().unwrap(), "./examples/fetch"])
            .current_dir(repo().join("clients/go")),
        Duration::from_secs(300),
    );
    fetch_agrees(&[bin.to_string_lossy().into_owned()]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_client() {
    let _one = ONE_AT_A_TIME.lock().await;
    suite(
        "node --test",
        Command::new(tool("node"))
            .current_dir(repo())
            .args(["--test", "clients/node/test/"]),
        Duration::from_secs(300),
    );
    fetch_agrees(&strings(&["node", "clients/node/examples/fetch.js"])).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_client() {
    let _one = ONE_AT_A_TIME.lock().await;
    suite(
        "java tests",
        Command::new("bash")
            .current_dir(repo())
            .arg("clients/java/test.sh"),
        Duration::from_secs(600),
    );
    let jar = repo().join("clients/java/build/idcar-client.jar");
    assert!(jar.exists(), "test.sh builds {}", jar.display());
    fetch_agrees(&[
        tool("java").to_string_lossy().into_owned(),
        "-cp".into(),
        jar.to_string_lossy().into_owned(),
        "dev.idcar.client.examples.Fetch".into(),
    ])
    .await;
}
