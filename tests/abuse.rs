//! Bad clients, floods and tight limits against the real binary: no client behaviour, no
//! flood of the admin port and no descriptor limit may stop idcar issuing IDs to a
//! well-behaved client for longer than `--idle-timeout` (+1 s), and none may cost the lease.
//!
//! Each test prints what it measured (time to serve a well-behaved client, RSS) with
//! `--nocapture`.

mod common;

use common::*;
use nix::sys::signal::Signal;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};

/// A short lease, so that holding an attack for a few seconds outlasts several horizons.
const SHORT_LEASE: [&str; 6] = [
    "--lease-horizon",
    "1s",
    "--renew-interval",
    "250ms",
    "--max-clock-wait",
    "5s",
];

fn args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = SHORT_LEASE.to_vec();
    v.extend_from_slice(extra);
    v
}

/// Time for a fresh client to connect and get one ID over HTTP (bounded by 20 s).
async fn time_to_serve(idcar: &Idcar) -> Duration {
    let started = Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(20), async {
        let mut h = idcar.http().await;
        h.get("/id", false).await.unwrap()
    })
    .await
    .expect("a well-behaved client is served at all");
    assert_eq!(r.status, 200, "{}", r.body);
    started.elapsed()
}

/// The lease was never lost nor failed to renew, and the log never saw descriptors run out.
async fn lease_untouched(idcar: &Idcar) {
    assert_eq!(
        idcar
            .metric("idcar_lease_renewals_total{result=\"error\"}")
            .await,
        Some(0.0),
        "{}",
        idcar.logs()
    );
    assert_eq!(idcar.metric_sum("idcar_lease_losses_total").await, 0.0);
    assert!(idcar
        .metric("idcar_lease_renewals_total{result=\"ok\"}")
        .await
        .is_some_and(|n| n > 0.0));
    assert!(
        !idcar.logs().contains("Too many open files"),
        "{}",
        idcar.logs()
    );
}

/// Is the stream closed by the server (EOF or an error), within `limit`?
async fn closed_within(s: &mut UnixStream, limit: Duration) -> bool {
    let mut buf = vec![0u8; 1 << 16];
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
        }
    }
}

/// Eight clients pipeline HTTP requests and never read the answers, holding every place of
/// `--max-connections 8`. A well-behaved client is still served within the idle timeout plus
/// a second, and every stuck reader is closed by the response deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_http_readers_are_closed_and_others_served() {
    let mut idcar = Idcar::start(&args(&["--max-connections", "8", "--idle-timeout", "2s"])).await;
    idcar.wait_ready(Duration::from_secs(10)).await;
    let rss_before = idcar.rss_kib();
    let mut stuck = Vec::new();
    for _ in 0..8 {
        let s = UnixStream::connect(&idcar.socket).await.unwrap();
        let (r, mut w) = s.into_split();
        tokio::spawn(async move {
            let req = b"GET /ids?count=1000 HTTP/1.1\r\nHost: x\r\n\r\n".repeat(200);
            let _ = tokio::time::timeout(Duration::from_secs(15), w.write_all(&req)).await;
            w
        });
        stuck.push(r);
    }
    // Let them fill their socket buffers with answers nobody reads (~12,000 IDs each).
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let rss_attack = idcar.rss_kib();
    let took = time_to_serve(&idcar).await;
    eprintln!(
        "slow HTTP readers: served in {took:?}; RSS {rss_before} KiB before, {rss_attack} KiB under attack"
    );
    assert!(took < Duration::from_secs(3), "served after {took:?}");
    // Every stuck reader is closed: evicted by the newcomer or past its response deadline.
    let closed = idcar
        .wait_metric(
            "idcar_connections_closed_total{listener=\"socket\",reason=\"slow_reader\"}",
            Duration::from_secs(6),
            |v| v >= 7.0,
        )
        .await;
    assert!(closed >= 7.0);
    lease_untouched(&idcar).await;
    idcar.stop_ok().await;
}

/// A binary client that sends one byte of a frame every 400 ms is cut off two seconds after
/// its first byte (the deadline is not restarted by each read), and never answered.
#[tokio::test]
async fn binary_slowloris_is_cut_off_from_its_first_byte() {
    let mut idcar = Idcar::start(&args(&["--idle-timeout", "2s"])).await;
    idcar.wait_ready(Duration::from_secs(10)).await;
    let s = UnixStream::connect(&idcar.socket).await.unwrap();
    let (mut r, mut w) = s.into_split();
    let frame = [0xD1u8, 0x01, 0x00, 0x04, 0x00, 0x00, 0x00, 0x01];
    let started = Instant::now();
    let trickle = tokio::spawn(async move {
        for b in frame {
            if w.write_all(&[b]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(400)).await;
        }
        // Holds the connection open past the frame's end.
        tokio::time::sleep(Duration::from_secs(5)).await;
    });
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(6), r.read(&mut buf))
        .await
        .expect("the server closes the connection")
        .unwrap_or(0);
    let took = started.elapsed();
    trickle.abort();
    assert_eq!(n, 0, "no answer to a frame trickled past the deadline");
    assert!(
        took >= Duration::from_millis(1_900) && took < Duration::from_millis(2_900),
        "closed after {took:?}"
    );
    assert_eq!(
        idcar
            .metric("idcar_connections_closed_total{listener=\"socket\",reason=\"slow_request\"}")
            .await,
        Some(1.0)
    );
    // HTTP headers trickled the same way meet the same deadline.
    let mut s = UnixStream::connect(&idcar.socket).await.unwrap();
    let started = Instant::now();
    for b in b"GET /id HTTP/1.1\r\nHost: x\r\n" {
        if s.write_all(&[*b]).await.is_err() || started.elapsed() > Duration::from_secs(4) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(closed_within(&mut s, Duration::from_secs(4)).await);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    lease_untouched(&idcar).await;
    idcar.stop_ok().await;
}

/// The idle deadline on a binary connection: a client that keeps asking every 600 ms stays
/// connected well past the 2 s timeout; one that asks twice, 1.2 s apart, and then says
/// nothing is closed about 2 s after its second answer (counted `idle`): the answer restarted
/// the idle wait.
#[tokio::test]
async fn binary_idle_connection_is_closed_after_the_timeout() {
    let idcar = Idcar::start(&args(&["--idle-timeout", "2s"])).await;
    idcar.wait_ready(Duration::from_secs(10)).await;
    let frame = [0xD1u8, 0x01, 0x00, 0x04, 0x00, 0x00, 0x00, 0x01];
    let mut busy = UnixStream::connect(&idcar.socket).await.unwrap();
    let mut quiet = UnixStream::connect(&idcar.socket).await.unwrap();
    let mut answer = [0u8; 16];
    quiet.write_all(&frame).await.unwrap();
    quiet.read_exact(&mut answer).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    quiet.write_all(&frame).await.unwrap();
    quiet
        .read_exact(&mut answer)
        .await
        .expect("answered within the deadline");
    let answered = Instant::now();
    let watch = tokio::spawn(async move {
        let closed = closed_within(&mut quiet, Duration::from_secs(6)).await;
        closed.then(|| answered.elapsed())
    });
    for i in 0..10u32 {
        busy.write_all(&frame).await.unwrap();
        busy.read_exact(&mut answer)
            .await
            .unwrap_or_else(|e| panic!("the busy client's request {i} failed: {e}"));
        tokio::time::sleep(Duration::from_millis(600)).await;
    }
    let closed = watch
        .await
        .unwrap()
        .expect("the quiet connection is closed within 6 s");
    assert!(
        closed >= Duration::from_millis(1_950) && closed < Duration::from_millis(3_500),
        "closed {closed:?} after the last answer (idle timeout 2 s)"
    );
    assert_eq!(
        idcar
            .metric("idcar_connections_closed_total{listener=\"socket\",reason=\"idle\"}")
            .await,
        Some(1.0)
    );
    lease_untouched(&idcar).await;
}

/// Thousands of TCP connections to the admin port, under a descriptor limit of 256: the
/// admin cap keeps descriptors for the lease (no renewal fails, IDs keep flowing), newer
/// connections evict older idle ones, and a probe still gets its answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_flood_costs_neither_descriptors_nor_the_lease() {
    raise_nofile();
    let mut idcar = Idcar::start_under("ulimit -n 256", &args(&[])).await;
    idcar.wait_ready(Duration::from_secs(10)).await;
    let flood = {
        let admin = idcar.admin.clone();
        tokio::spawn(async move {
            let mut held = Vec::new();
            let until = Instant::now() + Duration::from_secs(3);
            while held.len() < 2_000 && Instant::now() < until {
                if let Ok(Ok(s)) =
                    tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(&admin)).await
                {
                    held.push(s);
                }
            }
            // Hold them past several lease horizons.
            tokio::time::sleep(Duration::from_millis(2_500)).await;
            held.len()
        })
    };
    let mut worst = Duration::ZERO;
    let mut ids = 0;
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        let t = Instant::now();
        ids += idcar.take(10).await.expect("IDs during the flood").len();
        worst = worst.max(t.elapsed());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let probe = Instant::now();
    let (status, body) = idcar.admin_get("/readyz").await;
    let probe = probe.elapsed();
    let opened = flood.await.unwrap();
    eprintln!(
        "admin flood: {opened} connections opened; IDs served throughout (slowest {worst:?}); \
         /readyz answered in {probe:?}; RSS {} KiB",
        idcar.rss_kib()
    );
    assert!(opened > 500, "the flood opened only {opened}");
    assert_eq!(status, 200);
    assert!(body.starts_with("ready\n"), "{body}");
    assert!(ids >= 300);
    let evicted = idcar
        .metric("idcar_connections_closed_total{listener=\"admin\",reason=\"evicted\"}")
        .await
        .unwrap();
    let idle = idcar
        .metric("idcar_connections_closed_total{listener=\"admin\",reason=\"idle\"}")
        .await
        .unwrap();
    assert!(
        evicted + idle >= (opened - 65) as f64,
        "{evicted} + {idle} of {opened}"
    );
    lease_untouched(&idcar).await;
    idcar.stop_ok().await;
}

/// The default `--max-connections 1024` under a descriptor limit of 200: lowered with a
/// warning naming the flag; a thousand idle clients then cost the lease nothing, and a
/// well-behaved client is served at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn descriptor_limit_lowers_max_connections_and_the_lease_holds() {
    raise_nofile();
    let mut idcar = Idcar::start_under("ulimit -n 200", &args(&["--idle-timeout", "10s"])).await;
    idcar.wait_ready(Duration::from_secs(10)).await;
    let warned = idcar.logs();
    assert!(
        warned.contains("--max-connections lowered to 72"),
        "{warned}"
    );
    let mut idle = Vec::new();
    let mut refused = 0;
    for _ in 0..1_000 {
        match tokio::time::timeout(
            Duration::from_millis(200),
            UnixStream::connect(&idcar.socket),
        )
        .await
        {
            Ok(Ok(s)) => idle.push(s),
            _ => refused += 1,
        }
    }
    let mut worst = Duration::ZERO;
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        worst = worst.max(time_to_serve(&idcar).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let open = idcar.metric_sum("idcar_open_connections").await;
    eprintln!(
        "descriptor limit 200: {} idle clients connected ({refused} refused by the backlog); \
         {open} served at once; slowest well-behaved client {worst:?}; RSS {} KiB",
        idle.len(),
        idcar.rss_kib()
    );
    assert!(open <= 72.0, "{open} open connections");
    assert!(worst < Duration::from_secs(11), "{worst:?}");
    lease_untouched(&idcar).await;
    drop(idle);
    idcar.stop_ok().await;
}

/// Every place of `--max-connections` held by slow clients (trickling frames, pipelining
/// without reading) and clients hammering the server, for four lease horizons: the lease is
/// held throughout, renewals never fail, and a well-behaved client is served within the idle
/// timeout plus a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saturated_server_keeps_its_lease() {
    let mut idcar = Idcar::start(&args(&[
        "--max-connections",
        "16",
        "--idle-timeout",
        "2s",
        "--threads",
        "1",
    ]))
    .await;
    idcar.wait_ready(Duration::from_secs(10)).await;
    let until = Instant::now() + Duration::from_secs(4);
    let mut tasks = Vec::new();
    for i in 0..13 {
        let socket = idcar.socket.clone();
        tasks.push(tokio::spawn(async move {
            let Ok(mut s) = UnixStream::connect(&socket).await else {
                return 0;
            };
            if i % 2 == 0 {
                // Trickles a frame, a byte every 450 ms.
                for b in [0xD1u8, 0x01, 0x00, 0x04, 0x00, 0x00, 0x00, 0x01] {
                    if s.write_all(&[b]).await.is_err() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(450)).await;
                }
            } else {
                // Pipelines and never reads.
                let req = b"GET /ids?count=1000 HTTP/1.1\r\nHost: x\r\n\r\n".repeat(100);
                let _ = tokio::time::timeout_at(until.into(), s.write_all(&req)).await;
            }
            tokio::time::sleep_until(until.into()).await;
            0
        }));
    }
    for _ in 0..3 {
        let socket = idcar.socket.clone();
        tasks.push(tokio::spawn(async move {
            let mut b = idcar_client::tokio::Connection::connect(&socket)
                .await
                .unwrap();
            let mut n = 0;
            while Instant::now() < until {
                match b.ids(1_000).await {
                    Ok(ids) => n += ids.len(),
                    Err(_) => {
                        b = idcar_client::tokio::Connection::connect(&socket)
                            .await
                            .unwrap();
                    }
                }
            }
            n
        }));
    }
    let mut held_samples = 0;
    let mut worst = Duration::ZERO;
    while Instant::now() < until {
        assert_eq!(idcar.metric("idcar_lease_held").await, Some(1.0));
        held_samples += 1;
        worst = worst.max(time_to_serve(&idcar).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut hammered = 0;
    for t in tasks {
        hammered += t.await.unwrap();
    }
    eprintln!(
        "saturated: {held_samples} samples all held; {hammered} IDs hammered; slowest \
         well-behaved client {worst:?}; RSS {} KiB",
        idcar.rss_kib()
    );
    assert!(held_samples >= 3, "{held_samples} samples");
    assert!(worst < Duration::from_secs(3), "{worst:?}");
    assert!(hammered > 10_000, "{hammered}");
    lease_untouched(&idcar).await;
    idcar.stop_ok().await;
}

/// `idcar_open_connections` counts a connection from accept, before its first byte.
#[tokio::test]
async fn open_connections_count_from_accept() {
    let mut idcar = Idcar::start(&[]).await;
    let mut silent = Vec::new();
    for _ in 0..5 {
        silent.push(UnixStream::connect(&idcar.socket).await.unwrap());
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while idcar.metric_sum("idcar_open_connections").await != 5.0 {
        assert!(Instant::now() < deadline, "silent connections not counted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        idcar
            .metric("idcar_open_connections{interface=\"pending\"}")
            .await,
        Some(5.0)
    );
    drop(silent);
    let deadline = Instant::now() + Duration::from_secs(5);
    while idcar.metric_sum("idcar_open_connections").await != 0.0 {
        assert!(
            Instant::now() < deadline,
            "closed connections still counted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    idcar.stop_ok().await;
}

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

fn threads(idcar: &Idcar) -> usize {
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
