//! An idle holder and a waiter; holders taking their own slots back after a store outage.

use super::*;

/// Until `idcar pool` shows a contender waiting in cluster `c` (a pool of `size`).
pub(crate) async fn wait_waiting<S: Store>(s: &S, c: u8, size: u32) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let p = s.pool(c, size);
        if p["waiting"].as_array().is_some_and(|w| !w.is_empty()) {
            return;
        }
        assert!(Instant::now() < deadline, "no one waits: {p}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What a holder costs its store, counted by the store (ZooKeeper's zxid, etcd's revision):
/// nothing at all for seconds on end while the pool has room and no one waits, its mark the
/// idle horizon ahead; once every slot is held its mark comes down to twice the short horizon
/// (the pool gauges see it: at once in ZooKeeper, within their 5 s poll in etcd); a contender
/// that starts waiting has it down at the short horizon within a second (bound: 1 s, with 1 s
/// of slack for a loaded test machine), so that after the holder's crash the successor serves
/// within expiry + short horizon + 1 s; and no ID is shared.
pub(crate) async fn an_idle_holder_writes_seldom_and_a_waiter_brings_its_mark_down<S: Store>() {
    let s = S::single();
    let args = [
        "--pool-size",
        "2",
        "--cluster-id",
        "3",
        s.expiry_flag(),
        "3s",
        "--lease-horizon",
        "2s",
        "--idle-horizon",
        "40s",
    ];
    let a = s.start(&args).await;
    a.wait_ready(Duration::from_secs(15)).await;
    let before = a.take(300).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Counted before the mark is read: the harness's own reader is a session, a write.
    let w0 = s.writes();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let idle_writes = s.writes() - w0;
    assert!(
        idle_writes <= s.idle_writes_in(6),
        "{idle_writes} store writes by an idle holder in 6 s"
    );
    let ahead = s.mark(3, 0).saturating_sub(now_ms());
    assert!(ahead > 30_000, "the idle mark is {ahead} ms ahead");
    let more = a.take(300).await.unwrap();

    // The pool fills: the holder's mark comes down to twice the horizon.
    let mut b = s.start(&args).await;
    b.wait_ready(Duration::from_secs(15)).await;
    wait_mark_within(&s, 3, 0, 4_200, Duration::from_secs(8)).await;

    let mut c = s.start(&args).await;
    wait_waiting(&s, 3, 2).await;
    let waited = Instant::now();
    let down = loop {
        let ahead = s.mark(3, 0).saturating_sub(now_ms());
        if ahead <= 2_200 {
            break waited.elapsed();
        }
        assert!(
            waited.elapsed() < Duration::from_secs(2),
            "the mark still {ahead} ms ahead {:?} after a contender started waiting",
            waited.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    eprintln!("idle: {idle_writes} writes in 6 s; mark down to the short horizon {down:?} after the waiter queued");
    let last = a.take(300).await.unwrap();
    let killed = Instant::now();
    a.signal(Signal::SIGKILL);
    c.wait_ready(Duration::from_secs(20)).await;
    let took = killed.elapsed();
    // Expiry 3 s + horizon 2 s + 1 s, and 2 s of slack for a loaded machine.
    assert!(
        took < Duration::from_secs(8),
        "the successor served after {took:?}"
    );
    let after = c.take(300).await.unwrap();
    let issued = [before, more, last].concat();
    let highest = issued.iter().map(|id| ts(*id)).max().unwrap();
    assert!(after.iter().all(|id| ts(*id) > highest));
    let from_b = b.take(300).await.unwrap();
    assert_unique(&[issued, after, from_b].concat());
    c.stop_ok().await;
    b.stop_ok().await;
}

/// Waits (at most `limit`) until `slot`'s mark in lable64 `cluster` is at most `ahead` ms
/// past the clock.
pub(crate) async fn wait_mark_within<S: Store>(
    s: &S,
    cluster: u8,
    slot: u32,
    ahead: u64,
    limit: Duration,
) {
    let deadline = Instant::now() + limit;
    loop {
        let now_ahead = s.mark(cluster, slot).saturating_sub(now_ms());
        if now_ahead <= ahead {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "slot {slot}'s mark still {now_ahead} ms ahead after {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// idcar's own timings (expiry 6 s, horizon 5 s, idle horizon 60 s, renewals every second),
/// where the harness's shorter ones would hide what a user meets.
pub(crate) fn idcar_defaults<S: Store>(s: &S) -> [&'static str; 8] {
    [
        s.expiry_flag(),
        "6s",
        "--lease-horizon",
        "5s",
        "--idle-horizon",
        "60s",
        "--renew-interval",
        "1s",
    ]
}

/// How many slots `i` holds now.
pub(crate) async fn held(i: &Idcar) -> u32 {
    i.metric("idcar_lease_slots_held").await.unwrap_or(0.0) as u32
}

/// A holder whose store is frozen past its session or lease: once the store answers again it
/// claims its own slot back — the mark still at its own last write — without waiting out that
/// mark, and IDs flow again within 2 s of the store answering (ZooKeeper stops it while
/// frozen; etcd lets it serve on until it answers and ends the lease). IDs after are above
/// every ID before. Two pools:
///
/// - idle, at the default flags (a pool with room: the mark the idle horizon, 60 s, ahead),
///   frozen 10 s. etcd ends the lease before the holder claims again, so its slot is free and
///   taken back; a ZooKeeper server may not have expired the old session yet when the new one
///   claims, and the holder then takes the pool's other free slot (its mark long passed) —
///   as fast;
/// - full (one slot, expiry 2 s: the mark twice the 5 s horizon ahead), frozen 4 s: the only
///   slot, so it is its own again, taken back instead of waiting the rest of the mark.
pub(crate) async fn an_idle_holder_takes_its_own_slot_back_after_a_store_outage<S: Store>() {
    let s = S::own();
    let mut idle = vec!["--pool-size", "2", "--cluster-id", "7"];
    idle.extend(idcar_defaults(&s));
    let back = own_slot_back(&s, &idle, 7, Duration::from_secs(10), 30_000).await;
    let other = back.1.iter().all(|id| generator(*id) == 1);
    // Kubernetes keeps the session through an outage everyone shared: the slot never changed
    // hands, nothing to claim back.
    let kept = !s.outage_ends_sessions() && back.1.iter().all(|id| generator(*id) == 0);
    assert!(
        back.0 || kept || (other && s.target()[0] == "--zk"),
        "IDs again, but neither from its own slot claimed back nor from the other free slot"
    );
    let mut full = vec!["--pool-size", "1", "--cluster-id", "9"];
    full.extend(idcar_defaults(&s));
    full[5] = "2s";
    let back = own_slot_back(&s, &full, 9, Duration::from_secs(4), 5_000).await;
    assert!(
        back.0 || !s.outage_ends_sessions(),
        "the only slot was not claimed back"
    );
}

/// Instances of several slots (`--slots 2`) filling a pool of 4, nobody waiting (expiry 2 s;
/// every mark twice the 5 s horizon ahead), the store frozen 4 s: once it answers, each
/// instance takes both its slots back — whichever of its leases claims first — and issues
/// again within 2 s, where waiting out a mark would cost 6 s. IDs after are above every ID
/// before.
pub(crate) async fn instances_of_several_slots_take_their_own_back_after_a_store_outage<
    S: Store,
>() {
    let s = S::own();
    let mut args = vec!["--pool-size", "4", "--cluster-id", "11", "--slots", "2"];
    args.extend(idcar_defaults(&s));
    args[7] = "2s";
    let mut both = Vec::new();
    for _ in 0..2 {
        let i = s.start(&args).await;
        let deadline = Instant::now() + Duration::from_secs(20);
        while held(&i).await < 2 {
            assert!(
                Instant::now() < deadline,
                "never held two slots: {}",
                i.logs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        both.push(i);
    }
    for slot in 0..4 {
        let deadline = Instant::now() + Duration::from_secs(15);
        while s.mark(11, slot).saturating_sub(now_ms()) < 8_000 {
            assert!(
                Instant::now() < deadline,
                "slot {slot}'s mark never 8 s ahead"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let mut before = Vec::new();
    for i in &both {
        before.extend(i.take(300).await.unwrap());
    }
    s.pause(0);
    tokio::time::sleep(Duration::from_secs(4)).await;
    s.resume(0);
    let answered = Instant::now();
    let mut last_refused = [None, None];
    let mut after = Vec::new();
    while answered.elapsed() < Duration::from_secs(4) {
        for (k, i) in both.iter().enumerate() {
            match i.take(10).await {
                Ok(ids) => after.extend(ids),
                Err(_) => last_refused[k] = Some(answered.elapsed()),
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!("refused until {last_refused:?} after the store answered");
    for (k, i) in both.iter().enumerate() {
        let logs = i.logs();
        let refused = last_refused[k].unwrap_or_default();
        assert!(
            refused < Duration::from_secs(2),
            "instance {k}: IDs again only {refused:?} after the store answered: {logs}"
        );
        let deadline = Instant::now() + Duration::from_secs(5);
        while held(i).await < 2 {
            assert!(
                Instant::now() < deadline,
                "instance {k} holds fewer than two slots again"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let logs = i.logs();
        let back = logs.matches("slot claimed back").count();
        assert!(
            back == 2 || (back == 0 && !s.outage_ends_sessions()),
            "instance {k} did not take both its slots back: {logs}"
        );
        assert!(
            !logs.contains("waiting for the clock to pass"),
            "instance {k} waited: {logs}"
        );
    }
    let highest = before.iter().map(|id| ts(*id)).max().unwrap();
    for i in &both {
        let again = i.take(300).await.unwrap();
        assert!(again.iter().all(|id| ts(*id) > highest));
        after.extend(again);
    }
    assert_unique(&[before, after].concat());
    for mut i in both {
        i.stop_ok().await;
    }
}

/// Starts a holder with `args` (lable64 cluster `cluster`), waits until its mark of slot 0 is
/// `ahead` ms past the clock, freezes the store for `freeze`, and takes IDs every 20 ms for 4 s
/// after it answers: the last refusal must end within 2 s. Whether the log says it claimed its
/// slot back, and the IDs after the outage.
pub(crate) async fn own_slot_back<S: Store>(
    s: &S,
    args: &[&str],
    cluster: u8,
    freeze: Duration,
    ahead: u64,
) -> (bool, Vec<u64>) {
    let mut a = s.start(args).await;
    a.wait_ready(Duration::from_secs(15)).await;
    let before = a.take(300).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.mark(cluster, 0).saturating_sub(now_ms()) < ahead {
        assert!(
            Instant::now() < deadline,
            "the mark {} never reached {ahead} ms ahead: {}",
            s.mark(cluster, 0),
            a.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    s.pause(0);
    tokio::time::sleep(freeze).await;
    s.resume(0);
    let answered = Instant::now();
    let (mut last_refused, mut after) = (None, Vec::new());
    while answered.elapsed() < Duration::from_secs(4) {
        match a.take(10).await {
            Ok(ids) => after.extend(ids),
            Err(_) => last_refused = Some(answered.elapsed()),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let logs = a.logs();
    eprintln!("refused until {last_refused:?} after the store answered");
    let refused = last_refused.unwrap_or_default();
    assert!(
        refused < Duration::from_secs(2),
        "IDs again only {refused:?} after the store answered: {logs}"
    );
    assert!(
        !s.outage_ends_sessions() || logs.contains("session lost") || logs.contains("lease lost"),
        "the outage did not end the holder's session: {logs}"
    );
    let highest = before.iter().map(|id| ts(*id)).max().unwrap();
    let again = a.take(300).await.unwrap();
    assert!(again.iter().all(|id| ts(*id) > highest));
    after.extend(again);
    assert_unique(&[before, after.clone()].concat());
    a.stop_ok().await;
    (logs.contains("slot claimed back"), after)
}
