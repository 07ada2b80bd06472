//! Running idcar the way a platform runs it: `idcar probe` for exec probes and healthchecks,
//! start-up errors that name the flag to change, log configuration, and the socket's
//! permissions as a Kubernetes pod arranges them (non-root idcar, fsGroup, another uid).

mod common;

use common::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(30);

fn probe(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let mut cmd = Command::new(BIN);
    cmd.arg("probe").args(args).env_remove("IDCAR_ADMIN_ADDR");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// `idcar probe` tells ready from alive, reads IDCAR_ADMIN_ADDR like `serve`, reaches a
/// listener bound to 0.0.0.0 on loopback, and never consumes an ID.
#[tokio::test]
async fn probe_reports_readiness_and_liveness_without_consuming_ids() {
    let dir = tempfile::tempdir().unwrap();
    // A stored mark 1.5 s ahead: alive at once, ready only once the clock has passed it.
    let mark = now_ms() + 1_500;
    write_state(&dir.path().join("state.json"), "lable64/0/0", mark);
    let port = free_port();
    let bound = format!("0.0.0.0:{port}");
    let mut cmd = serve_cmd(dir.path(), &bound, &[]);
    let mut child = cmd.spawn().unwrap();
    let deadline = Instant::now() + LIMIT;
    let alive = loop {
        let (code, out) = probe(&["--live"], &[("IDCAR_ADMIN_ADDR", &bound)]);
        if code == 0 {
            break out;
        }
        assert!(Instant::now() < deadline, "never alive: {out}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(alive.trim(), "alive");
    let (code, out) = probe(&[], &[("IDCAR_ADMIN_ADDR", &bound)]);
    if code != 0 || now_ms() + 300 < mark {
        // Still waiting for the clock to pass the stored mark.
        assert_eq!(code, 1, "{out}");
        assert!(out.starts_with("not ready: "), "{out}");
        assert_eq!(out.lines().count(), 1, "{out}");
    }
    let ready = loop {
        let (code, out) = probe(&["--admin-addr", &format!("127.0.0.1:{port}")], &[]);
        if code == 0 {
            break out;
        }
        assert_eq!(code, 1, "{out}");
        assert!(Instant::now() < deadline, "never ready: {out}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(ready.trim(), "ready");
    // Nothing was issued, nothing asked of the socket.
    let (_, m) = probe(&["--admin-addr", &bound], &[]);
    assert_eq!(m.trim(), "ready");
    let body = {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        let mut b = String::new();
        s.read_to_string(&mut b).unwrap();
        b
    };
    let issued = body
        .lines()
        .find(|l| l.starts_with("idcar_ids_issued_total"))
        .unwrap();
    assert!(issued.ends_with(" 0"), "{issued}");
    assert!(
        !body
            .lines()
            .any(|l| l.starts_with("idcar_requests_total") && !l.ends_with(" 0")),
        "{body}"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(child.wait().unwrap().success());
    // Nobody listening: not ready, with the reason, at once.
    let started = Instant::now();
    let (code, out) = probe(&["--admin-addr", &bound], &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("cannot reach") && out.contains("IDCAR_ADMIN_ADDR"),
        "{out}"
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    // No admin listener configured: a usage error.
    let (code, out) = probe(&["--admin-addr", "none"], &[]);
    assert_eq!(code, 2, "{out}");
    let (code, out) = probe(&["--admin-addr", "nonsense"], &[]);
    assert_eq!(code, 2, "{out}");
}

/// Errors that point the right way: a socket in a missing directory is a usage error that
/// says so, once; a probe of a listener that is not idcar's says that; `idcar pool` against a
/// port with nothing listening names the endpoint flag, not a credential.
#[tokio::test]
async fn errors_name_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let no_dir = dir.path().join("nodir").join("idcar.sock");
    let (code, out, err) = run(&[
        "serve",
        "--admin-addr",
        "none",
        "--socket",
        no_dir.to_str().unwrap(),
        "--state-file",
        dir.path().join("s.json").to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{out}{err}");
    let parent = dir.path().join("nodir");
    assert!(
        err.contains(&format!(
            "the directory {} does not exist",
            parent.display()
        )) && err.contains("--socket/IDCAR_SOCKET"),
        "{err}"
    );
    assert!(err.matches("No such file").count() <= 1, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(!dir.path().join("s.json").exists(), "started anyway");

    // A state file of a later format: refused at start, naming both formats, left as it was.
    let state = dir.path().join("newer.json");
    let newer = r#"{"version":2,"marks":{"lable64/15/1":"later"}}"#;
    std::fs::write(&state, newer).unwrap();
    let (code, out, err) = run(&[
        "serve",
        "--admin-addr",
        "none",
        "--socket",
        dir.path().join("s.sock").to_str().unwrap(),
        "--state-file",
        state.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("state-file format 2") && err.contains("reads format 1"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&state).unwrap(), newer);

    // An HTTP server that is not idcar's admin listener.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let other = std::thread::spawn(move || {
        use std::io::{Read, Write};
        if let Ok((mut s, _)) = l.accept() {
            // The whole request read first: closing with unread data would reset the answer.
            let mut got = Vec::new();
            let mut b = [0u8; 1024];
            for _ in 0..64 {
                if got.windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
                match s.read(&mut b) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&b[..n]),
                }
            }
            let _ = s.write_all(b"HTTP/1.1 426 Upgrade Required\r\nContent-Length: 0\r\n\r\n");
            let _ = s.shutdown(std::net::Shutdown::Write);
        }
    });
    let (code, out) = probe(&["--admin-addr", &addr], &[]);
    other.join().unwrap();
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("not idcar's admin listener")
            && out.contains("HTTP 426")
            && out.contains("--admin-addr/IDCAR_ADMIN_ADDR"),
        "{out}"
    );

    // Nothing listens on the etcd endpoint: the endpoint is what to check.
    let port = free_port();
    let (code, out, err) = run(&["pool", "--etcd", &format!("127.0.0.1:{port}")]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("--etcd/IDCAR_ETCD"), "{err}");
    assert!(!err.contains("credential"), "{err}");
}

/// Start-up errors name the flag and the environment variable to change.
#[tokio::test]
async fn start_up_errors_name_the_flag_to_change() {
    let mut first = Idcar::start(&[]).await;
    first.wait_ready(Duration::from_secs(10)).await;
    let dir = tempfile::tempdir().unwrap();
    // A second `serve` on `socket` and `admin`: (exit code, stderr).
    let second = |socket: &std::path::Path, admin: &str| {
        let out = Command::new(BIN)
            .args(["serve", "--admin-addr", admin, "--socket"])
            .arg(socket)
            .arg("--state-file")
            .arg(dir.path().join("s.json"))
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code(), err)
    };
    let (code, err) = second(&first.socket, "none");
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("--socket/IDCAR_SOCKET"), "{err}");
    assert!(err.contains("another process is listening"), "{err}");
    let (code, err) = second(&dir.path().join("other.sock"), &first.admin);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("--admin-addr/IDCAR_ADMIN_ADDR"), "{err}");
    assert!(!dir.path().join("other.sock").exists());
    first.stop_ok().await;
}

/// Runs `serve` briefly with `args` and `env`, stops it, and returns its log.
async fn serve_log(args: &[&str], env: &[(&str, &str)]) -> String {
    serve_log_for(args, env, Duration::from_millis(200)).await
}

/// Runs `serve` with `args` and `env` for `run` after its socket appears, stops it, and
/// returns its log.
async fn serve_log_for(args: &[&str], env: &[(&str, &str)], run: Duration) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(BIN);
    cmd.arg("serve")
        .args(["--admin-addr", "none", "--socket"])
        .arg(dir.path().join("s.sock"));
    if !args.iter().any(|a| *a == "--zk" || *a == "--etcd") {
        cmd.arg("--state-file").arg(dir.path().join("s.json"));
    }
    cmd.args(args)
        .env_remove("RUST_LOG")
        .env_remove("IDCAR_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("log")).unwrap());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let deadline = Instant::now() + LIMIT;
    while !dir.path().join("s.sock").exists() {
        assert!(Instant::now() < deadline, "did not start");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(run).await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(child.wait().unwrap().success());
    std::fs::read_to_string(dir.path().join("log")).unwrap()
}

/// RUST_LOG is honoured when --log (IDCAR_LOG) is not given, and --log wins over it; JSON
/// logs carry the message at the top level.
#[tokio::test]
async fn logs_honour_rust_log_and_json_is_flat() {
    let default = serve_log(&[], &[]).await;
    assert!(default.contains("idcar listening"), "{default}");
    let quiet = serve_log(&[], &[("RUST_LOG", "warn")]).await;
    assert!(!quiet.contains("idcar listening"), "{quiet}");
    let loud = serve_log(&["--log", "info"], &[("RUST_LOG", "warn")]).await;
    assert!(loud.contains("idcar listening"), "{loud}");
    let json = serve_log(&["--log-format", "json"], &[]).await;
    let mut seen = 0;
    for line in json.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(
            v["message"].is_string(),
            "message not at the top level: {line}"
        );
        assert!(v["level"].is_string(), "{line}");
        seen += 1;
    }
    assert!(seen >= 2, "{json}");
    assert!(
        json.contains("\"message\":\"idcar listening; ready once a lease is held\""),
        "{json}"
    );
}

/// A store that does not answer is logged when it starts failing, not once per retry; `idcar
/// listening` at start and `idcar ready` only once IDs can be issued.
#[tokio::test]
async fn a_repeated_failure_is_logged_once_and_ready_is_its_own_event() {
    let dead = format!("127.0.0.1:{}", free_port());
    for (flag, says) in [
        ("--zk", "cannot connect to ZooKeeper"),
        ("--etcd", "cannot reach etcd"),
    ] {
        let log = serve_log_for(&[flag, &dead], &[], Duration::from_secs(1)).await;
        let retries = log.lines().filter(|l| l.contains(says)).count();
        assert!(retries >= 1, "{flag}: the failure is not logged: {log}");
        assert!(log.contains("idcar listening"), "{log}");
        assert!(
            !log.contains("idcar ready"),
            "{flag}: ready without a store: {log}"
        );
    }
    // Long enough for several retries (every 0.5 s to 1 s): still one line.
    let log = serve_log_for(&["--etcd", &dead], &[], Duration::from_secs(4)).await;
    let retries = log
        .lines()
        .filter(|l| l.contains("cannot reach etcd"))
        .count();
    assert_eq!(retries, 1, "one line per failure, not per retry: {log}");
    let ready = serve_log_for(&[], &[], Duration::from_secs(2)).await;
    let listening = ready.find("idcar listening").expect(&ready);
    let at = ready.find("idcar ready").expect(&ready);
    assert!(listening < at, "{ready}");
}

const IDCAR_UID: u32 = 10_001;
const APP_UID: u32 = 10_002;
const STRANGER_UID: u32 = 10_003;
const FS_GROUP: u32 = 20_001;

/// `idcar` run as `uid` (its primary group the same number) with supplementary `groups`, no
/// capabilities.
fn as_user(uid: u32, groups: Option<u32>) -> Command {
    let mut c = Command::new(tool("setpriv"));
    c.arg(format!("--reuid={uid}"))
        .arg(format!("--regid={uid}"));
    match groups {
        Some(g) => c.arg(format!("--groups={g}")),
        None => c.arg("--clear-groups"),
    };
    c.arg("--inh-caps=-all").arg("--").arg(BIN);
    c.env_remove("RUST_LOG").stdin(Stdio::null());
    c
}

/// `idcar serve` as the image's user in the pod's group (socket mode 660), once its socket
/// exists (bounded wait).
fn serve_as_idcar(socket: &Path, state_dir: &Path, log: &Path) -> std::process::Child {
    let mut server = as_user(IDCAR_UID, Some(FS_GROUP))
        .arg("serve")
        .arg("--socket")
        .arg(socket)
        .args([
            "--socket-mode",
            "660",
            "--admin-addr",
            "none",
            "--state-file",
        ])
        .arg(state_dir.join("idcar.state"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + LIMIT;
    while !socket.exists() {
        assert!(
            Instant::now() < deadline && server.try_wait().unwrap().is_none(),
            "idcar did not start: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    server
}

/// As a pod arranges it: idcar runs as a non-root uid with the pod's fsGroup as a supplementary
/// group, its socket directory is group-owned by that fsGroup and setgid (like an emptyDir
/// with fsGroup). A client running as another non-root uid in that group can use the socket;
/// one outside the group cannot. Needs root (it switches uids with setpriv).
#[test]
fn socket_is_usable_by_the_pods_group_and_no_one_else() {
    if !nix::unistd::geteuid().is_root() {
        if std::env::var_os("IDCAR_SKIP_ROOT_TESTS").is_some() {
            eprintln!("skipped on request (IDCAR_SKIP_ROOT_TESTS): needs root");
            return;
        }
        panic!("this test switches uids and needs root; run it as root (CI does), or set IDCAR_SKIP_ROOT_TESTS=1 to skip it knowingly");
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let sock_dir = dir.path().join("run");
    let state_dir = dir.path().join("state");
    std::fs::create_dir(&sock_dir).unwrap();
    std::fs::create_dir(&state_dir).unwrap();
    std::os::unix::fs::chown(&sock_dir, Some(0), Some(FS_GROUP)).unwrap();
    std::fs::set_permissions(&sock_dir, std::fs::Permissions::from_mode(0o2777)).unwrap();
    std::os::unix::fs::chown(&state_dir, Some(IDCAR_UID), Some(IDCAR_UID)).unwrap();
    let socket = sock_dir.join("idcar.sock");
    let log = dir.path().join("idcar.log");
    let mut server = serve_as_idcar(&socket, &state_dir, &log);
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.id())).unwrap();
    let uid_line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    assert!(
        uid_line.split_whitespace().nth(1) == Some("10001"),
        "{uid_line}"
    );
    let meta = std::fs::metadata(&socket).unwrap();
    assert_eq!(
        (meta.uid(), meta.gid(), meta.mode() & 0o777),
        (IDCAR_UID, FS_GROUP, 0o660),
        "socket owner, group (inherited from the setgid directory) and mode"
    );
    let get = |uid: u32, groups: Option<u32>| {
        let mut c = as_user(uid, groups);
        c.arg("get").arg("--socket").arg(&socket);
        run_tool(&mut c, LIMIT)
    };
    // Retry briefly: the socket file appears just before the lease is held.
    let deadline = Instant::now() + LIMIT;
    let (ok, out) = loop {
        let (ok, out) = get(APP_UID, Some(FS_GROUP));
        if ok || Instant::now() > deadline || out.contains("ermission denied") {
            break (ok, out);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(ok, "the app in the pod's group is refused: {out}");
    assert_eq!(out.trim().len(), 16, "one lable64 ID: {out}");
    let (ok, out) = get(STRANGER_UID, None);
    assert!(!ok, "a uid outside the group got in: {out}");
    assert!(out.contains("ermission denied"), "{out}");
    let (ok, out) = get(APP_UID, None);
    assert!(!ok, "the app's uid without the group got in: {out}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(server.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let st = server.wait().unwrap();
    assert!(
        st.success(),
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert!(!socket.exists());
}

/// `serve --help` lists every variable the Kubernetes example sets, the pod name's included.
#[test]
fn serve_help_lists_the_pod_name_variable() {
    let (code, out, _) = run(&["serve", "--help"]);
    assert_eq!(code, 0);
    for var in [
        "IDCAR_POD_NAME",
        "POD_NAME",
        "IDCAR_ADMIN_ADDR",
        "IDCAR_ADMIN_MAX_CONNECTIONS",
    ] {
        assert!(out.contains(var), "{var} missing from serve --help");
    }
}
