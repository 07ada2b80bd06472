//! Floods, descriptor limits and saturation: the lease holds.

use super::*;

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
