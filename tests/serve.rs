//! End-to-end tests of `idcar serve` with a static slot: the real binary on a temporary socket.

mod common;

use common::*;
use idcar::layout::lable64::Fields;
use idcar_client::Error as ClientError;
use nix::sys::signal::Signal;
use std::collections::HashSet;
use std::time::{Duration, Instant};

fn fields(id: &[u8]) -> Fields {
    Fields::unpack(u64::from_be_bytes(id.try_into().unwrap())).expect("valid lable64 ID")
}

/// 8 concurrent clients (4 binary, 4 HTTP) take 1,000,000 IDs in batches: all unique, all
/// with the configured generator and cluster, all stamped within the test's time window.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_clients_one_million_unique_ids() {
    let mut idcar = Idcar::start(&["--generator-id", "42", "--cluster-id", "11"]).await;
    idcar.wait_ready(Duration::from_secs(10)).await;
    let start_ms = now_ms();
    const PER_CLIENT: usize = 125_000;
    const BATCH: u32 = 1_000;
    let mut tasks = Vec::new();
    for c in 0..8 {
        let socket = idcar.socket.clone();
        tasks.push(tokio::spawn(async move {
            let mut ids: Vec<u64> = Vec::with_capacity(PER_CLIENT);
            if c % 2 == 0 {
                let mut b = idcar_client::tokio::Connection::connect(&socket)
                    .await
                    .unwrap();
                while ids.len() < PER_CLIENT {
                    let got = b.ids(BATCH).await.expect("batch");
                    assert_eq!(got.len(), BATCH as usize);
                    ids.extend(
                        got.iter()
                            .map(|id| u64::from_be_bytes(id.try_into().unwrap())),
                    );
                }
            } else {
                let mut h = idcar::client::HttpClient::connect(&socket).await.unwrap();
                while ids.len() < PER_CLIENT {
                    let r = h.get(&format!("/ids?count={BATCH}"), false).await.unwrap();
                    assert_eq!(r.status, 200, "{}", r.body);
                    for line in r.body.lines() {
                        ids.push(u64::from_str_radix(line, 16).unwrap());
                    }
                }
            }
            ids
        }));
    }
    let mut all = Vec::with_capacity(8 * PER_CLIENT);
    for t in tasks {
        let ids = tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .expect("clients finish in time")
            .unwrap();
        all.extend(ids);
    }
    assert_unique(&all);
    let end_ms = now_ms();
    assert_eq!(all.len(), 8 * PER_CLIENT);
    for id in &all {
        let f = fields(&id.to_be_bytes());
        assert_eq!((f.generator, f.cluster), (42, 11), "{id:016x}");
        assert!(
            f.timestamp_ms >= start_ms && f.timestamp_ms <= end_ms,
            "{id:016x}: {} outside [{start_ms}, {end_ms}]",
            f.timestamp_ms
        );
    }
    idcar.stop_ok().await;
}

/// SIGTERM: the socket file is gone and the state file holds the highest issued timestamp.
#[tokio::test]
async fn sigterm_removes_socket_and_writes_mark_down_to_highest_issued() {
    let mut idcar = Idcar::start(&["--generator-id", "3"]).await;
    idcar.wait_ready(Duration::from_secs(10)).await;
    let mut b = idcar.binary().await;
    let mut highest = 0;
    for _ in 0..20 {
        for id in b.ids(100).await.unwrap().iter() {
            highest = highest.max(fields(id).timestamp_ms);
        }
    }
    drop(b);
    let st = idcar.stop().await;
    assert!(st.success(), "exit {st:?}: {}", idcar.logs());
    assert!(!idcar.socket.exists(), "socket file left behind");
    assert_eq!(idcar.stored_mark("lable64/0/3"), Some(highest));
}

/// A state file whose mark is ahead of the clock: the server answers 503 until the clock has
/// passed it, then issues only later timestamps.
#[tokio::test]
async fn restart_with_future_mark_waits_then_issues_above_it() {
    let dir = tempfile::tempdir().unwrap();
    let mark = now_ms() + 1_500;
    write_state(&dir.path().join("state.json"), "lable64/0/0", mark);
    let mut idcar = Idcar::start_in(dir, &["--max-clock-wait", "10s"]).await;
    let mut h = idcar.http().await;
    let r = h.get("/id", false).await.unwrap();
    if now_ms() <= mark {
        assert_eq!(r.status, 503, "{}", r.body);
        assert_eq!(r.retry_after.as_deref(), Some("1"));
        assert_eq!(idcar.admin_get("/readyz").await.0, 503);
    }
    idcar.wait_ready(Duration::from_secs(10)).await;
    let r = h.get("/ids?count=200", false).await.unwrap();
    assert_eq!(r.status, 200);
    for line in r.body.lines() {
        let id = u64::from_str_radix(line, 16).unwrap();
        assert!(fields(&id.to_be_bytes()).timestamp_ms > mark);
    }
    idcar.stop_ok().await;
}

/// A mark further ahead than --max-clock-wait (the clock was set back, or the file came
/// from a host whose clock ran ahead): waited for, not ready saying why — never an exit that
/// a supervisor would turn into a crash loop — then IDs above it.
#[tokio::test]
async fn mark_beyond_the_wait_bound_is_waited_for_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    let mark = now_ms() + 3_000;
    write_state(&dir.path().join("state.json"), "lable64/0/0", mark);
    let args = [
        "--max-clock-wait",
        "1s",
        "--lease-horizon",
        "1s",
        "--renew-interval",
        "300ms",
    ];
    let mut idcar = Idcar::start_in(dir, &args).await;
    let (status, body) = idcar.admin_get("/readyz").await;
    if now_ms() < mark {
        assert_eq!(status, 503, "{body}");
        assert!(
            body.contains("--max-clock-wait") && body.contains("ahead of this host's clock"),
            "{body}"
        );
    }
    idcar.wait_ready(Duration::from_secs(10)).await;
    for id in idcar.take(200).await.unwrap() {
        assert!(fields(&id.to_be_bytes()).timestamp_ms > mark);
    }
    idcar.stop_ok().await;
}

/// Every kind of bad input gets its error; the server keeps serving.
#[tokio::test]
async fn bad_input_gets_clear_errors_and_server_keeps_serving() {
    let mut idcar = Idcar::start(&["--max-batch", "500"]).await;
    idcar.wait_ready(Duration::from_secs(10)).await;
    let mut h = idcar.http().await;
    for (path, status, says) in [
        ("/ids?count=0", 400, "between 1 and 500"),
        ("/ids?count=501", 400, "between 1 and 500"),
        (
            "/ids?count=99999999999999999999999",
            400,
            "between 1 and 500, got 99999999999999999999999",
        ),
        ("/ids?count=-1", 400, "whole number"),
        ("/ids", 400, "missing parameter count"),
        ("/id?count=2", 400, "takes no count"),
        ("/id?format=base99", 400, "unknown text form"),
        ("/id?colour=red", 400, "unknown parameter"),
        ("/nope", 404, "no such path"),
        ("/decode/xyz", 400, "cannot decode"),
        ("/decode/0000000000000400", 400, "reserved bits"),
        (
            "/decode/18446744073709551616?format=dec",
            400,
            "out of range",
        ),
    ] {
        let r = h.get(path, false).await.unwrap();
        assert_eq!(r.status, status, "{path}: {}", r.body);
        assert!(r.body.contains(says), "{path}: {}", r.body);
        assert_eq!(
            r.body.trim_end().lines().count(),
            1,
            "one-line reason: {}",
            r.body
        );
        let j = h.get(path, true).await.unwrap();
        let v: serde_json::Value = serde_json::from_str(&j.body).expect("JSON error body");
        assert!(v["error"].as_str().unwrap().contains(says));
    }

    raw_http_abuse_is_refused(&idcar).await;
    bad_binary_requests_are_refused(&idcar).await;

    // Still serving, and the refusals were counted.
    let mut b = idcar.binary().await;
    assert_eq!(b.ids(500).await.unwrap().len(), 500);
    let n = idcar
        .metric("idcar_requests_total{interface=\"http\",outcome=\"bad_request\"}")
        .await
        .unwrap();
    assert!(n >= 22.0, "{n}");
    idcar.stop_ok().await;
}

/// A stale socket file is replaced; a live one is not taken over; a shared state file is
/// refused.
#[tokio::test]
async fn stale_socket_replaced_live_socket_and_locked_state_refused() {
    let dir = tempfile::tempdir().unwrap();
    let stale = std::os::unix::net::UnixListener::bind(dir.path().join("idcar.sock")).unwrap();
    drop(stale);
    let idcar = Idcar::start_in(dir, &[]).await;
    idcar.wait_ready(Duration::from_secs(10)).await;

    // Same socket, other state file: refused because the socket is live.
    let other = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(BIN)
        .args(["serve", "--admin-addr", "none", "--socket"])
        .arg(&idcar.socket)
        .arg("--state-file")
        .arg(other.path().join("s"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("another process is listening"));
    assert!(
        !other.path().join("s").exists(),
        "a failed start wrote a time mark"
    );

    // Same state file, other socket: refused because the state file is locked.
    let out = std::process::Command::new(BIN)
        .args(["serve", "--admin-addr", "none", "--socket"])
        .arg(other.path().join("s.sock"))
        .arg("--state-file")
        .arg(&idcar.state)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("locked by another process"));

    let mut h = idcar.http().await;
    assert_eq!(h.get("/id", false).await.unwrap().status, 200);
}

/// Admin endpoints and the metrics an operator alerts on.
#[tokio::test]
async fn admin_endpoints_and_metric_names() {
    let mut idcar = Idcar::start(&["--generator-id", "7"]).await;
    idcar.wait_ready(Duration::from_secs(10)).await;
    assert_eq!(idcar.admin_get("/healthz").await.0, 200);
    assert_eq!(idcar.admin_get("/nope").await.0, 404);
    let mut h = idcar.http().await;
    assert_eq!(h.get("/ids?count=10", false).await.unwrap().status, 200);
    let (status, m) = idcar.admin_get("/metrics").await;
    assert_eq!(status, 200);
    for (query, value) in [
        ("idcar_ids_issued_total", Some(10.0)),
        ("idcar_lease_held", Some(1.0)),
        ("idcar_lease_slot", Some(7.0)),
        (
            "idcar_requests_total{interface=\"http\",outcome=\"ok\"}",
            Some(1.0),
        ),
        ("idcar_request_duration_seconds_bucket", None),
        ("idcar_batch_size_bucket", None),
        ("idcar_sequence_exhausted_waits_total", None),
        ("idcar_clock_regressions_total", Some(0.0)),
        ("idcar_lease_remaining_seconds", None),
        ("process_resident_memory_bytes", None),
        ("process_open_fds", None),
    ] {
        let got = idcar.metric(query).await;
        assert!(got.is_some(), "missing {query:?} in\n{m}");
        if value.is_some() {
            assert_eq!(got, value, "{query}");
        }
    }
    // Every idcar series names its pool; the build info names only the version.
    let pool = [
        ("layout".to_string(), "lable64".to_string()),
        ("cluster".to_string(), "0".to_string()),
    ];
    let mut series = 0;
    for (name, labels) in m.lines().filter_map(parse_sample) {
        if name == "idcar_build_info" {
            let version = ("version".to_string(), env!("CARGO_PKG_VERSION").to_string());
            assert_eq!(labels.len(), 2, "{labels:?}");
            assert!(labels.contains(&version), "{labels:?}");
            let commit = labels.iter().find(|(k, _)| k == "commit").map(|(_, v)| v);
            let commit = commit.unwrap_or_else(|| panic!("no commit label: {labels:?}"));
            assert!(commit == "unknown" || commit.len() >= 12, "{labels:?}");
            let (code, out, _) = run(&["--version"]);
            assert_eq!(code, 0);
            assert_eq!(
                out.trim(),
                format!("idcar {} (commit {commit})", env!("CARGO_PKG_VERSION"))
            );
        } else if name.starts_with("idcar_") {
            assert!(pool.iter().all(|l| labels.contains(l)), "{name} {labels:?}");
            series += 1;
        }
    }
    assert!(series > 50, "{series}");
    idcar.stop_ok().await;
}

/// A second signal ends the process at once, even while a request is still open.
#[tokio::test]
async fn second_signal_exits_at_once() {
    use tokio::io::AsyncWriteExt;
    let mut idcar = Idcar::start(&["--shutdown-grace", "60s", "--idle-timeout", "60s"]).await;
    idcar.wait_ready(Duration::from_secs(10)).await;
    // A request whose headers never finish keeps the drain waiting.
    let mut s = tokio::net::UnixStream::connect(&idcar.socket)
        .await
        .unwrap();
    s.write_all(b"GET /id HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    idcar.signal(Signal::SIGTERM);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(idcar.child.try_wait().unwrap().is_none(), "still draining");
    let (status, body) = idcar.admin_get("/readyz").await;
    let first = body.lines().next().unwrap_or_default();
    assert_eq!((status, first), (503, "not ready: shutting down"));
    let t = Instant::now();
    idcar.signal(Signal::SIGTERM);
    let st = idcar.wait_exit(Duration::from_secs(5)).await;
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(st.code(), Some(130));
    assert!(
        !idcar.socket.exists(),
        "the second signal removes the socket file too"
    );
}

/// Binary connections: a pipelined burst is answered in order; an idle one is closed; the
/// socket file gets the requested mode.
#[tokio::test]
async fn pipelining_idle_timeout_and_socket_mode() {
    use std::os::unix::fs::PermissionsExt;
    let mut idcar = Idcar::start(&["--idle-timeout", "1s", "--socket-mode", "600"]).await;
    idcar.wait_ready(Duration::from_secs(10)).await;
    let mode = std::fs::metadata(&idcar.socket)
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);

    let mut b = idcar.binary().await;
    let mut burst = Vec::new();
    for i in 0..2_000u32 {
        idcar::server::frame::encode_get_ids(1 + i % 3, &Default::default(), &mut burst);
    }
    b.send_raw(&burst).await.unwrap();
    let mut seen = HashSet::new();
    for i in 0..2_000u32 {
        let ids = tokio::time::timeout(Duration::from_secs(30), b.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(ids.len() as u32, 1 + i % 3, "response {i} out of order");
        for id in ids.iter() {
            assert!(seen.insert(id.to_vec()));
        }
    }

    // A client that sends the magic byte and then nothing is closed after the idle timeout.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::UnixStream::connect(&idcar.socket)
        .await
        .unwrap();
    s.write_all(&[0xD1]).await.unwrap();
    let mut buf = [0u8; 16];
    let t = Instant::now();
    let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
        .await
        .unwrap();
    assert_eq!(n.unwrap_or(0), 0, "closed without an answer");
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "{:?}",
        t.elapsed()
    );
    idcar.stop_ok().await;
}

/// Raw HTTP abuse: a bad method, a malformed request line, an oversized header — each answered with a 4xx or closed.
async fn raw_http_abuse_is_refused(idcar: &Idcar) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    for raw in [
        b"POST /id HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n".to_vec(),
        b"\x01\x02 garbage\r\n\r\n".to_vec(),
        [
            b"GET /id HTTP/1.1\r\nX: ".to_vec(),
            vec![b'a'; 200_000],
            b"\r\n\r\n".to_vec(),
        ]
        .concat(),
    ] {
        let mut s = tokio::net::UnixStream::connect(&idcar.socket)
            .await
            .unwrap();
        let _ = s.write_all(&raw).await;
        let mut buf = vec![0u8; 512];
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
            .await
            .expect("server answers or closes")
            .unwrap_or(0);
        let head = String::from_utf8_lossy(&buf[..n]);
        assert!(n == 0 || head.starts_with("HTTP/1.1 4"), "{head}");
    }
}

/// Binary protocol: well-framed bad requests keep the connection; a bad magic closes it.
async fn bad_binary_requests_are_refused(idcar: &Idcar) {
    let mut b = idcar.binary().await;
    for (raw, says) in [
        (vec![0xD1, 0x09, 0, 0], "unknown opcode"),
        (vec![0xD1, 0x01, 0, 2, 0, 1], "payload must be 4 or 8 bytes"),
        (
            vec![0xD1, 0x01, 0, 8, 0, 0, 0, 1, 0x01, 7, 0, 0],
            "meta is not an option of layout lable64",
        ),
        (
            vec![0xD1, 0x01, 0, 8, 0, 0, 0, 1, 0x02, 0, 0, 0],
            "transaction is not an option of layout lable64",
        ),
        (
            vec![0xD1, 0x01, 0, 8, 0, 0, 0, 1, 0x80, 0, 0, 0],
            "unknown get-IDs flags",
        ),
        (vec![0xD1, 0x01, 0, 4, 0, 0, 0, 0], "between 1 and 500"),
        (
            vec![0xD1, 0x01, 0, 4, 0xff, 0xff, 0xff, 0xff],
            "between 1 and 500",
        ),
    ] {
        b.send_raw(&raw).await.unwrap();
        match b.recv().await {
            Err(ClientError::BadRequest(reason)) => {
                assert!(reason.contains(says), "{reason}")
            }
            other => panic!("{raw:?}: {other:?}"),
        }
    }
    assert_eq!(
        b.ids(5).await.unwrap().len(),
        5,
        "connection survives framed errors"
    );
    b.send_raw(&[0xD1, 0x01, 0xff, 0xff]).await.unwrap();
    assert!(matches!(b.recv().await, Err(ClientError::BadRequest(_))));
    assert!(
        b.recv().await.is_err(),
        "oversized payload closes the connection"
    );
}
