//! A holder cut off from its store: partitioned, and frozen past its expiry (the invariant test).

use super::*;

/// A silent partition between the holder and its store (packets dropped, connections kept)
/// while a successor waits; both are hammered throughout. The holder stops within its
/// horizon, the successor serves after the holder's session or lease expired and only above
/// the holder's ticks, and after the partition heals the old holder never issues from the
/// slot again. No ID is shared.
pub(crate) async fn a_partitioned_holder_stops_and_its_successor_takes_over<S: Store>() {
    let s = S::single();
    let proxy = Proxy::start(s.endpoint()).await;
    let via = format!("127.0.0.1:{}", proxy.port);
    let args = [
        "--pool-size",
        "1",
        "--cluster-id",
        "6",
        s.expiry_flag(),
        "2s",
        "--idle-horizon",
        "30s",
    ];
    let a = s.start_at(&via, &args).await;
    a.wait_ready(Duration::from_secs(15)).await;
    let b = s.start(&args).await;
    // The successor waits, and the holder's mark comes down to its horizon within a second.
    wait_waiting(&s, 6, 1).await;
    let (mut ids, _) = hammer(&a, Instant::now() + Duration::from_millis(1_500)).await;
    let cut = Instant::now();
    let cut_ms = now_ms();
    proxy.blackhole(true);
    let until = cut + Duration::from_secs(9);
    let ((from_a, _), (from_b, _)) = tokio::join!(hammer(&a, until), hammer(&b, until));
    let last_a = from_a.iter().map(|id| ts(*id)).max().unwrap_or(0);
    let first_b = from_b.iter().map(|id| ts(*id)).min();
    let first_b = first_b.expect("the successor issued");
    eprintln!(
        "partition: holder issued {} IDs after the cut, the last {} ms after it (horizon 2 s); \
         successor issued {} IDs, the first {} ms after the cut",
        from_a.len(),
        last_a.saturating_sub(cut_ms),
        from_b.len(),
        first_b.saturating_sub(cut_ms)
    );
    assert!(
        last_a <= cut_ms + 2_500,
        "the holder issued past its horizon"
    );
    assert!(first_b > last_a, "the successor overlapped the holder");
    ids.extend(&from_a);
    ids.extend(&from_b);
    proxy.blackhole(false);
    let (after, _) = hammer(&a, Instant::now() + Duration::from_secs(3)).await;
    assert!(
        after.is_empty(),
        "the old holder issued {} IDs",
        after.len()
    );
    let (more, refused) = hammer(&b, Instant::now() + Duration::from_millis(500)).await;
    assert_eq!(refused, 0);
    ids.extend(&more);
    assert_unique(&ids);
    assert_eq!(b.metric("idcar_lease_slot").await, Some(0.0));
}

/// The invariant test: a holder frozen (SIGSTOP) past its session's or lease's expiry while a
/// successor takes its slot, resumed with requests already waiting on its socket. It reaches
/// its store through a proxy that goes silent while it is frozen, so on resume it cannot learn
/// at once that it lost the slot, and its clock runs 1 s ahead of the successor's
/// (`--clock-skew`), so its IDs carry times the successor's clock has not reached: it really
/// issues after its expiry, within its own mark. Every ID from both must be unique, and the
/// successor's must all lie above the holder's, because the successor waits past the mark
/// (the holder reaches its store again only once the successor took the slot).
pub(crate) async fn a_frozen_holder_never_duplicates_its_successor<S: Store>() {
    use tokio::io::AsyncWriteExt;
    let s = S::single();
    let proxy = Proxy::start(s.endpoint()).await;
    let via = format!("127.0.0.1:{}", proxy.port);
    let (timing, resume_after) = s.frozen_holder();
    let args = [&["--pool-size", "1", "--cluster-id", "2"][..], &timing[..]].concat();
    let a = s
        .start_at(&via, &[&args[..], &["--clock-skew", "1s"]].concat())
        .await;
    a.wait_ready(Duration::from_secs(15)).await;
    let mut from_a = a.take(1_000).await.unwrap();
    let mut b = s.start(&args).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.blackhole(true);
    a.signal(Signal::SIGSTOP);
    let paused = Instant::now();
    // The successor finds the slot free once the frozen holder's session or lease expires
    // (it waits for the mark before the take, or holds the slot and waits after it)...
    let deadline = Instant::now() + Duration::from_secs(20);
    while b.metric("idcar_lease_claims_total").await != Some(1.0)
        && !b.logs().contains("waiting for a free slot's mark to pass")
    {
        assert!(Instant::now() < deadline, "no claim: {}", b.logs());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // ...and waits past the mark the holder wrote with its fast clock.
    assert_eq!(b.admin_get("/readyz").await.0, 503, "waiting past the mark");
    // Requests queue up on the frozen holder's socket; it resumes within its own mark.
    let mut pending = Vec::new();
    for _ in 0..4 {
        let mut c = tokio::net::UnixStream::connect(&a.socket).await.unwrap();
        let mut req = Vec::new();
        idcar::server::frame::encode_get_ids(100, &Default::default(), &mut req);
        c.write_all(&req).await.unwrap();
        pending.push(c);
    }
    tokio::time::sleep_until((paused + resume_after).into()).await;
    a.signal(Signal::SIGCONT);
    let mut a_after = answered(pending).await;
    assert!(
        !a_after.is_empty(),
        "the resumed holder issued nothing: the test missed its window"
    );
    // The successor takes the slot once the clock is past the mark; only then does the holder
    // reach its store again (sooner, it would take its own slot back, its mark still its own).
    let deadline = Instant::now() + Duration::from_secs(30);
    while b.metric("idcar_lease_claims_total").await != Some(1.0) {
        assert!(Instant::now() < deadline, "no claim: {}", b.logs());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    proxy.blackhole(false);
    // Both keep being asked until the successor has served for a while.
    b.wait_ready(Duration::from_secs(30)).await;
    let until = Instant::now() + Duration::from_secs(1);
    let ((more_a, _), (from_b, _)) = tokio::join!(hammer(&a, until), hammer(&b, until));
    a_after.extend(more_a);
    assert!(!from_b.is_empty());
    let b_min = from_b.iter().map(|id| ts(*id)).min().unwrap();
    let a_max = from_a
        .iter()
        .chain(&a_after)
        .map(|id| ts(*id))
        .max()
        .unwrap();
    eprintln!(
        "resumed holder issued {} IDs; the successor's first tick {} ms above the holder's last",
        a_after.len(),
        b_min.saturating_sub(a_max)
    );
    assert!(
        b_min > a_max,
        "the successor issued at or below the holder's ticks"
    );
    from_a.extend(a_after);
    assert_unique(&[from_a, from_b].concat());
    b.stop_ok().await;
}

/// The IDs answered on connections whose requests were sent before (bounded waits); refused
/// requests give none.
async fn answered(pending: Vec<tokio::net::UnixStream>) -> Vec<u64> {
    use tokio::io::AsyncReadExt;
    let mut ids = Vec::new();
    for mut c in pending {
        let mut head = [0u8; 8];
        tokio::time::timeout(Duration::from_secs(10), c.read_exact(&mut head))
            .await
            .expect("the resumed holder answers the requests queued while it was frozen")
            .unwrap();
        let head = idcar::server::frame::parse_response_header(&head)
            .expect("a valid response header")
            .expect("a whole header");
        let mut body = vec![0u8; head.len as usize];
        tokio::time::timeout(Duration::from_secs(10), c.read_exact(&mut body))
            .await
            .unwrap()
            .unwrap();
        if head.status == idcar::server::frame::Status::Ok {
            ids.extend(
                body.chunks(8)
                    .map(|c| u64::from_be_bytes(c.try_into().unwrap())),
            );
        }
    }
    ids
}
