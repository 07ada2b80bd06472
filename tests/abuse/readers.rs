//! Slow and idle clients: cut off by their deadlines, others served.

use super::*;

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
