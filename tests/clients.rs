//! The client libraries of clients/<language>/, each run from here so `cargo test` (the
//! README's test command) covers them. Each suite runs the way its ecosystem runs it, against
//! real `idcar serve` processes it starts from `$IDCAR_BIN`:
//!
//! - Rust: `cargo test -p idcar-client --all-features` (its own target directory);
//! - Python: clients/python/run-tests.sh (a fresh venv, `pip install`, `mypy --strict`,
//!   unittest on the installed package);
//! - Go: `go vet ./...` and `go test -race ./...` (offline: no modules to fetch);
//! - Node.js: `npm ci` (the pinned TypeScript of the test tooling), then `npm test`, which also
//!   installs the `npm pack` tarball into an empty project, requires, imports and type-checks it;
//! - Java: `mvn -o package` against Debian's Maven repository (JUnit 5 tests, then the jar).
//!
//! Every suite also runs its README's example. Then the uniform `fetch` example against a
//! server of every layout: N unique lines, each one `idcar decode` accepts, and a one-line error
//! with exit status 1 for a socket that does not exist and for bad flags.
//!
//! Toolchains come from tests/ensure-deps.sh; the pinned test tools (mypy, TypeScript) from
//! PyPI and npm. The suites run one at a time: they have timing assertions (retry deadlines)
//! and the machine is small.

mod common;

use common::*;
use std::collections::HashSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const LAYOUTS: [&str; 6] = ["lable64", "ugd60", "si53", "sno80", "muid128", "uuid7"];

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
        // Layouts whose text sorts as they were issued: a prefetching client hands them out
        // in that order, across refills (200 IDs through a buffer of 50).
        let ordered = ["sno80", "muid128", "uuid7"].contains(&layout);
        for prefetch in [0, 50] {
            let count = if ordered && prefetch > 0 { 200 } else { 20 };
            let (code, out, err) = fetch(cmd, &i.socket, count, prefetch);
            assert_eq!(code, 0, "{cmd:?} {layout}: {err}");
            let lines: Vec<&str> = out.lines().collect();
            assert_eq!(lines.len(), count as usize, "{cmd:?} {layout}: {out}");
            for (n, l) in lines.iter().enumerate() {
                assert!(seen.insert(l.to_string()), "{cmd:?} {layout}: {l} twice");
                if n < 20 {
                    let (code, _, err) = run(&["decode", "--layout", layout, l]);
                    assert_eq!(code, 0, "{cmd:?} {layout}: idcar decode {l}: {err}");
                }
            }
            if ordered && prefetch > 0 {
                assert!(
                    lines.windows(2).all(|w| w[0] < w[1]),
                    "{cmd:?} {layout} --prefetch 50: out of issue order: {out}"
                );
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.sock");
    // A missing socket is retried until the retry deadline (here 2.5 s)...
    let deadline = strings(&["--count", "1", "--retry-deadline", "2.5"]);
    let started = Instant::now();
    let (code, out, err) = fetch_with(cmd, &missing, &deadline);
    one_line_error(cmd, code, &out, &err);
    let retried = started.elapsed();
    assert!(
        retried >= Duration::from_millis(2_500),
        "{cmd:?}: {retried:?}"
    );
    // ...but a directory that does not exist cannot appear by waiting: an error at once,
    // saying so.
    let no_dir = dir.path().join("nodir").join("idcar.sock");
    let started = Instant::now();
    let (code, out, err) = fetch_with(cmd, &no_dir, &deadline);
    one_line_error(cmd, code, &out, &err);
    assert!(
        started.elapsed() + Duration::from_millis(1_500) < retried,
        "{cmd:?}: a missing directory took {:?} to fail, a missing socket {retried:?}",
        started.elapsed()
    );
    assert!(err.contains("does not exist"), "{cmd:?}: {err}");
    for bad in [
        ["--count", "abc"],
        ["--count", "0"],
        ["--bogus", "1"],
        ["--retry-deadline", "soon"],
    ] {
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

/// The Rust crate's own suite (`cargo test -p idcar-client`, every feature), in a target
/// directory of its own: this test runs inside a `cargo test` that holds the main one.
fn cargo(args: &[&str]) -> Command {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.args(args).current_dir(repo()).env(
        "CARGO_TARGET_DIR",
        repo().join("target/test-tools/rust-client"),
    );
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_client() {
    let _one = ONE_AT_A_TIME.lock().await;
    suite(
        "cargo test -p idcar-client",
        &mut cargo(&["test", "-p", "idcar-client", "--all-features"]),
        Duration::from_secs(900),
    );
    suite(
        "cargo build fetch",
        &mut cargo(&["build", "-p", "idcar-client", "--example", "fetch"]),
        Duration::from_secs(300),
    );
    let bin = repo().join("target/test-tools/rust-client/debug/examples/fetch");
    fetch_agrees(&[bin.to_string_lossy().into_owned()]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client() {
    let _one = ONE_AT_A_TIME.lock().await;
    // A fresh venv, `pip install clients/python`, `mypy --strict`, then unittest against the
    // installed package (clients/python/run-tests.sh).
    suite(
        "python (pip install, mypy --strict, unittest)",
        Command::new("bash")
            .current_dir(repo())
            .arg("clients/python/run-tests.sh"),
        Duration::from_secs(600),
    );
    let python = repo().join("target/test-tools/python-client-venv/bin/python");
    fetch_agrees(&[
        python.to_string_lossy().into_owned(),
        "clients/python/examples/fetch.py".into(),
    ])
    .await;
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
    let dir = repo().join("clients/go");
    suite(
        "go vet",
        go(&["vet", "./..."]).current_dir(&dir),
        Duration::from_secs(300),
    );
    suite(
        "go test -race",
        go(&["test", "-race", "-count=1", "./..."]).current_dir(&dir),
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

/// npm with its cache inside target/.
fn npm(args: &[&str]) -> Command {
    let mut c = Command::new(tool("npm"));
    c.args(args)
        .current_dir(repo().join("clients/node"))
        .env(
            "npm_config_cache",
            repo().join("target/test-tools/npm-cache"),
        )
        .env("npm_config_update_notifier", "false");
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_client() {
    let _one = ONE_AT_A_TIME.lock().await;
    // The pinned test tooling (typescript, @types/node) from package-lock.json, then the suite
    // and the check of the package as `npm pack` makes it (clients/node/test/pack.test.js).
    suite(
        "npm ci",
        &mut npm(&["ci", "--no-audit", "--no-fund"]),
        Duration::from_secs(300),
    );
    suite("npm test", &mut npm(&["test"]), Duration::from_secs(600));
    fetch_agrees(&strings(&["node", "clients/node/examples/fetch.js"])).await;
}

/// Maven offline against Debian's Maven repository (the `debian-maven-repo` profile of
/// clients/java/pom.xml pins the plugin versions Debian ships).
fn mvn(args: &[&str]) -> Command {
    let mut c = Command::new(tool("mvn"));
    c.args(["-o", "-B", "-Dmaven.repo.local=/usr/share/maven-repo"])
        .args(args)
        .current_dir(repo().join("clients/java"));
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_client() {
    let _one = ONE_AT_A_TIME.lock().await;
    // `mvn package` runs the JUnit 5 suite (`mvn test`), then makes the jar.
    suite(
        "mvn package",
        &mut mvn(&["package"]),
        Duration::from_secs(900),
    );
    let jar = repo().join("clients/java/target/idcar-client-0.2.0.jar");
    assert!(jar.exists(), "mvn package makes {}", jar.display());
    fetch_agrees(&[
        tool("java").to_string_lossy().into_owned(),
        "-cp".into(),
        jar.to_string_lossy().into_owned(),
        "clients/java/examples/Fetch.java".into(),
    ])
    .await;
}
