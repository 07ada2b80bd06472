//! A full pool: a crash taken over within the bound, exhaustion reported, parameters that differ refused.

use super::*;

/// A crash in a full pool: every slot held (one instance of one slot, one of `--slots 3`
/// holding two, its third a spare), nobody waiting, default timings (expiry 6 s, horizon 5 s).
/// The pool gauges see it full, so every mark stays within twice the horizon; the holder of
/// one slot killed and a replacement started right after, the replacement serves within
/// expiry + horizon + 2 s of the kill; that one killed with no one after it, the spare takes
/// its slot within the same bound. No ID shared.
pub(crate) async fn a_crash_in_a_full_pool_is_taken_over_within_the_bound<S: Store>() {
    let s = S::single();
    let mut args = vec!["--pool-size", "3", "--cluster-id", "8"];
    args.extend(idcar_defaults(&s));
    let bound = Duration::from_secs(6 + 5 + 2);
    let a = s.start(&args).await;
    a.wait_ready(Duration::from_secs(15)).await;
    let hot: Vec<&str> = args.iter().copied().chain(["--slots", "3"]).collect();
    let mut b = s.start(&hot).await;
    b.wait_ready(Duration::from_secs(15)).await;
    let deadline = Instant::now() + Duration::from_secs(15);
    while held(&b).await < 2 {
        assert!(
            Instant::now() < deadline,
            "the hot instance never held two slots"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for slot in 0..3 {
        wait_mark_within(&s, 8, slot, 10_500, Duration::from_secs(12)).await;
    }
    let mut issued = a.take(300).await.unwrap();
    issued.extend(b.take(300).await.unwrap());
    let killed = Instant::now();
    a.signal(Signal::SIGKILL);
    let c = s.start(&args).await;
    c.wait_ready(bound + Duration::from_secs(10)).await;
    let took = killed.elapsed();
    eprintln!("the replacement served {took:?} after the kill");
    assert!(took <= bound, "the replacement served only after {took:?}");
    issued.extend(c.take(300).await.unwrap());

    // Full again: c's mark within twice the horizon; then c crashes and nobody replaces it.
    let c_slot = generator(*issued.last().unwrap()) as u32;
    wait_mark_within(&s, 8, c_slot, 10_500, Duration::from_secs(12)).await;
    let killed = Instant::now();
    c.signal(Signal::SIGKILL);
    let deadline = killed + bound + Duration::from_secs(10);
    while held(&b).await < 3 {
        assert!(Instant::now() < deadline, "the spare never took the slot");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let took = killed.elapsed();
    eprintln!("the spare took the dead holder's slot {took:?} after the kill");
    assert!(took <= bound, "the spare took the slot only after {took:?}");
    issued.extend(b.take(3_000).await.unwrap());
    assert_unique(&issued);
    b.stop_ok().await;
}

pub(crate) async fn an_exhausted_pool_is_reported_and_the_waiter_takes_the_first_free_slot<
    S: Store,
>() {
    let s = S::single();
    let args = ["--pool-size", "2", "--cluster-id", "1"];
    let mut all = Vec::new();
    for _ in 0..3 {
        all.push(s.start(&args).await);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let (ready, waiting) = loop {
        let mut ready = Vec::new();
        let mut waiting = Vec::new();
        for (i, a) in all.iter().enumerate() {
            if a.admin_get("/readyz").await.0 == 200 {
                ready.push(i);
            } else {
                waiting.push(i);
            }
        }
        if ready.len() == 2
            && waiting.len() == 1
            && all[waiting[0]].metric("idcar_pool_exhausted").await == Some(1.0)
        {
            break (ready, waiting[0]);
        }
        assert!(Instant::now() < deadline, "{} ready", ready.len());
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let s0 = all[ready[0]].metric("idcar_lease_slot").await.unwrap();
    let s1 = all[ready[1]].metric("idcar_lease_slot").await.unwrap();
    assert_ne!(s0, s1);
    let (status, body) = all[waiting].admin_get("/readyz").await;
    assert_eq!(status, 503);
    assert!(body.contains("pool exhausted"), "{body}");
    let limit = Duration::from_secs(15);
    all[ready[0]]
        .wait_metric("idcar_pool_slots_held", limit, |v| v == 2.0)
        .await;
    all[ready[0]]
        .wait_metric("idcar_pool_contenders_waiting", limit, |v| v >= 1.0)
        .await;
    let p = s.pool(1, 2);
    assert_eq!(p["free"], 0, "{p}");
    assert_eq!(p["waiting"].as_array().unwrap().len(), 1, "{p}");
    // Without --pool-size, `idcar pool` counts in the size recorded with the pool: the same
    // figures, in both stores.
    let target = s.pool_target();
    let mut args: Vec<&str> = vec!["pool"];
    args.extend(target.iter().map(String::as_str));
    args.extend(["--cluster-id", "1"]);
    let text = run(&args);
    assert_eq!(text.0, 0, "{}", text.2);
    assert!(
        text.1
            .contains("lable64 cluster 1: 2/2 slots held, 0 free, 1 waiting"),
        "{}",
        text.1
    );
    // `since` is when the slot was taken, not when its holder started or queued.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let released = now_ms();
    all[ready[1]].stop_ok().await;
    all[waiting].wait_ready(limit).await;
    assert_eq!(all[waiting].metric("idcar_lease_slot").await, Some(s1));
    assert_eq!(all[waiting].metric("idcar_pool_exhausted").await, Some(0.0));
    let p = s.pool(1, 2);
    let taken = p["held"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["owner"]["pid"] == all[waiting].child.id())
        .unwrap_or_else(|| panic!("the waiter holds no slot: {p}"));
    let since = rfc3339_ms(taken["since"].as_str().unwrap());
    assert!(
        since + 200 >= released,
        "since {} is before the slot was released ({released}): {p}",
        taken["since"]
    );
    let ids = all[waiting].take(10).await.unwrap();
    assert!(ids.iter().all(|id| f64::from(generator(*id)) == s1));
}

/// An instance whose ID-shaping parameters differ from the pool's refuses to start, naming
/// the parameter and both values (si53's MID bits and base clock, muid128's medallion base);
/// one that agrees joins.
pub(crate) async fn mismatched_pool_parameters_are_refused<S: Store>() {
    let s = S::single();
    let mut first = s.start(&["--layout", "si53", "--mid-bits", "5"]).await;
    first.wait_ready(Duration::from_secs(15)).await;
    let refused = [
        (
            vec!["--layout", "si53", "--mid-bits", "7"],
            "--mid-bits: the pool has 5, this instance 7",
        ),
        (
            vec!["--layout", "si53", "--base-clock", "1600000000000"],
            "--base-clock: the pool has",
        ),
    ];
    for (args, why) in &refused {
        let mut odd = s.start_refused(args).await;
        let (st, log) = odd.exit_and_logs(Duration::from_secs(15)).await;
        assert!(!st.success() && log.contains(why), "{log}");
    }
    let mut same = s.start(&["--layout", "si53", "--mid-bits", "5"]).await;
    same.wait_ready(Duration::from_secs(15)).await;
    let mut m = s.start(&["--layout", "muid128"]).await;
    m.wait_ready(Duration::from_secs(15)).await;
    let other = ["--layout", "muid128", "--medallion-base", "0x20000000000"];
    let mut odd = s.start_refused(&other).await;
    let (st, log) = odd.exit_and_logs(Duration::from_secs(15)).await;
    assert!(
        !st.success() && log.contains("--medallion-base: the pool has"),
        "{log}"
    );
    for i in [&mut first, &mut same, &mut m] {
        i.stop_ok().await;
    }
}
