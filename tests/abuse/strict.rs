//! Signals, private state files, strict parameters, and the binary protocol's threads.

use super::*;

/// SIGHUP and SIGINT drain and release like SIGTERM: clean exit, no socket file left, the
/// mark written down to the highest issued time.
#[tokio::test]
async fn sighup_and_sigint_drain_and_release() {
    for sig in [Signal::SIGHUP, Signal::SIGINT] {
        let mut idcar = Idcar::start(&["--generator-id", "9"]).await;
        idcar.wait_ready(Duration::from_secs(10)).await;
        let ids = idcar.take(100).await.unwrap();
        let highest = ids
            .iter()
            .map(|id| {
                idcar::layout::lable64::Fields::unpack(*id)
                    .unwrap()
                    .timestamp_ms
            })
            .max()
            .unwrap();
        idcar.signal(sig);
        let st = idcar.wait_exit(Duration::from_secs(20)).await;
        assert!(st.success(), "{sig}: {st:?}: {}", idcar.logs());
        assert!(!idcar.socket.exists(), "{sig}: socket file left behind");
        assert_eq!(idcar.stored_mark("lable64/0/9"), Some(highest), "{sig}");
    }
}

/// State and lock files are owner-only even under `umask 000`; a state file that is a
/// symbolic link is refused with a clear error and left alone.
#[tokio::test]
async fn state_files_are_private_and_links_refused() {
    use std::os::unix::fs::PermissionsExt;
    let mut idcar = Idcar::start_under("umask 000", &[]).await;
    idcar.wait_ready(Duration::from_secs(10)).await;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&idcar.state), 0o600);
    assert_eq!(mode(&idcar.dir.path().join("state.json.lock")), 0o600);
    idcar.stop_ok().await;
    assert_eq!(mode(&idcar.state), 0o600);

    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.json");
    write_state(&real, "lable64/0/0", 5);
    std::os::unix::fs::symlink(&real, dir.path().join("state.json")).unwrap();
    let out = serve_cmd(dir.path(), "none", &[]).status().unwrap();
    assert!(!out.success());
    let log = std::fs::read_to_string(dir.path().join("idcar.log")).unwrap();
    assert!(log.contains("symbolic link"), "{log}");
    assert!(std::fs::symlink_metadata(dir.path().join("state.json"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(!dir.path().join("idcar.sock").exists());
}

/// Query parameters are percent-decoded; repeated parameters and signed numbers are refused.
#[tokio::test]
async fn query_parameters_are_strict() {
    let mut idcar = Idcar::start(&[]).await;
    idcar.wait_ready(Duration::from_secs(10)).await;
    let mut h = idcar.http().await;
    let r = h.get("/ids?count=%32", false).await.unwrap();
    assert_eq!((r.status, r.body.lines().count()), (200, 2), "{}", r.body);
    let r = h.get("/ids?%63ount=3&format=%68ex", false).await.unwrap();
    assert_eq!((r.status, r.body.lines().count()), (200, 3), "{}", r.body);
    for q in [
        "/ids?count=2&count=3",
        "/ids?count=+5",
        "/ids?count=%2B5",
        "/ids?count=-1",
        "/ids?count=%205",
        "/ids?count=0x10",
        "/ids?count=2&format=hex&format=dec",
    ] {
        let r = h.get(q, false).await.unwrap();
        assert_eq!(r.status, 400, "{q}: {}", r.body);
    }
    let r = h.get("/ids?count=2&count=3", false).await.unwrap();
    assert!(r.body.contains("more than once"), "{}", r.body);
    idcar.stop_ok().await;
}

pub(crate) fn threads(idcar: &Idcar) -> usize {
    std::fs::read_dir(format!("/proc/{}/task", idcar.child.id()))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Binary connections are served on threads of their own: at the cap a newcomer evicts the
/// quietest of them (its thread ends, its place is given back), and threads end with their
/// connections — none is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_connection_threads_are_evicted_and_end() {
    let mut idcar = Idcar::start(&args(&["--max-connections", "4", "--idle-timeout", "30s"])).await;
    idcar.wait_ready(Duration::from_secs(10)).await;
    let before = threads(&idcar);
    let mut clients = Vec::new();
    for _ in 0..4 {
        let mut b = idcar.binary().await;
        b.ids(1).await.unwrap();
        clients.push(b);
    }
    assert_eq!(
        threads(&idcar),
        before + 4,
        "one thread per binary connection"
    );
    let started = Instant::now();
    let mut newcomer = idcar.binary().await;
    tokio::time::timeout(Duration::from_secs(5), newcomer.ids(1))
        .await
        .expect("the newcomer is served")
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(2));
    let mut closed = 0;
    for c in clients.iter_mut() {
        if c.ids(1).await.is_err() {
            closed += 1;
        }
    }
    assert_eq!(closed, 1, "exactly the quietest one was evicted");
    assert_eq!(
        idcar
            .metric("idcar_connections_closed_total{listener=\"socket\",reason=\"evicted\"}")
            .await,
        Some(1.0)
    );
    drop(clients);
    drop(newcomer);
    let deadline = Instant::now() + Duration::from_secs(5);
    while threads(&idcar) > before {
        assert!(
            Instant::now() < deadline,
            "threads left: {}",
            threads(&idcar)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    lease_untouched(&idcar).await;
    idcar.stop_ok().await;
}

/// A binary client that pipelines large requests and never reads the answers: its thread's
/// write blocks, and the response deadline closes the connection (counted `slow_reader`); a
/// well-behaved client is served meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_slow_reader_is_closed() {
    let idcar = Idcar::start(&args(&["--idle-timeout", "2s"])).await;
    idcar.wait_ready(Duration::from_secs(10)).await;
    let mut s = UnixStream::connect(&idcar.socket).await.unwrap();
    // 64 requests of 4,096 IDs: 2 MiB of answers, far beyond the socket's buffers.
    let frame = [0xD1u8, 0x01, 0x00, 0x04, 0x00, 0x00, 0x10, 0x00];
    let started = Instant::now();
    for _ in 0..64 {
        s.write_all(&frame).await.unwrap();
    }
    idcar
        .wait_metric(
            "idcar_connections_closed_total{listener=\"socket\",reason=\"slow_reader\"}",
            Duration::from_secs(10),
            |v| v == 1.0,
        )
        .await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(1_900),
        "closed after {took:?}"
    );
    assert!(time_to_serve(&idcar).await < Duration::from_secs(1));
    assert!(closed_within(&mut s, Duration::from_secs(2)).await);
}
