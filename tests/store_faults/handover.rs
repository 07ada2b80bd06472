//! A release, a start beside a holder, a holder killed, the leader of three killed: the slot changes hands as it should.

use super::*;

/// Claim, serve, release: the pool report shows the holder and its live mark, the mark is
/// written down to the highest issued timestamp on release, nothing of the holder is left,
/// and the successor waits (almost) nothing, then issues only later timestamps.
pub(crate) async fn a_release_hands_over_at_once<S: Store>() {
    let s = S::single();
    let args = ["--pool-size", "1", "--cluster-id", "4"];
    let mut a = s.start(&args).await;
    a.wait_ready(Duration::from_secs(15)).await;
    let first = a.take(500).await.unwrap();
    assert!(first.iter().all(|id| generator(*id) == 0));
    let highest = first.iter().map(|id| ts(*id)).max().unwrap();
    let p = s.pool(4, 1);
    assert_eq!(p["held"].as_array().unwrap().len(), 1, "{p}");
    assert_eq!(p["held"][0]["owner"]["pid"], a.child.id());
    // The live holder's mark (written with its claim's token): the one stored, a horizon
    // ahead of what was issued.
    let shown = p["held"][0]["mark"].as_u64();
    let shown = shown.unwrap_or_else(|| panic!("a mark, not null: {p}"));
    let stored = s.mark(4, 0);
    assert!(
        shown > highest && shown <= stored,
        "{shown} vs {stored}, {highest}"
    );
    a.stop_ok().await;

    let p = s.pool(4, 1);
    assert!(p["held"].as_array().unwrap().is_empty(), "released: {p}");
    assert_eq!(s.mark(4, 0), highest, "written down to the highest issued");
    s.check_released();

    // A start in a pool that exists writes only its claim (ZooKeeper: the session, the queue
    // entry, the take, the first mark; etcd: the last three): the namespace, `params` and the
    // pool's identity are read, not created again (a create that finds its node is still a
    // ZooKeeper transaction). Counted by the store; one of slack.
    let w0 = s.writes();
    let mut b = s.start(&args).await;
    b.wait_ready(Duration::from_secs(15)).await;
    let start_writes = s.writes() - w0;
    assert!(
        start_writes <= 5.max(4 + s.claim_extra()),
        "a start cost {start_writes} store writes"
    );
    let wait = b.metric("idcar_lease_mark_wait_seconds_sum").await.unwrap();
    assert!(wait < 0.1, "the successor waited {wait}s after a release");
    let second = b.take(500).await.unwrap();
    assert!(second.iter().all(|id| ts(*id) > highest));
    assert_unique(&[first, second].concat());
    b.stop_ok().await;
}

/// A start beside a holder, with no one queued, does not queue: in a slot used before it
/// writes only the take and its first mark (and ZooKeeper's session), counted by the store —
/// where queueing would add the queue entry. It takes the free slot above its last mark.
pub(crate) async fn a_start_beside_a_holder_does_not_queue<S: Store>() {
    let s = S::single();
    let args = [
        "--pool-size",
        "2",
        "--cluster-id",
        "6",
        "--lease-horizon",
        "2s",
        "--idle-horizon",
        "40s",
    ];
    let mut a = s.start(&args).await;
    a.wait_ready(Duration::from_secs(15)).await;
    let from_a = a.take(100).await.unwrap();
    let mut b = s.start(&args).await;
    b.wait_ready(Duration::from_secs(15)).await;
    let from_b = b.take(100).await.unwrap();
    b.stop_ok().await;
    // The holder's own writes after its start are over (it is idle from here on).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let w0 = s.writes();
    let mut c = s.start(&args).await;
    c.wait_ready(Duration::from_secs(15)).await;
    let writes = s.writes() - w0;
    // The start fills the pool: the holder's mark may come down to a full pool's reach.
    assert!(
        writes <= 3 + s.claim_extra(),
        "a start beside a holder cost {writes} store writes"
    );
    let from_c = c.take(100).await.unwrap();
    assert!(from_a.iter().all(|id| generator(*id) == 0));
    assert!(from_b.iter().chain(&from_c).all(|id| generator(*id) == 1));
    let b_highest = from_b.iter().map(|id| ts(*id)).max().unwrap();
    assert!(from_c.iter().all(|id| ts(*id) > b_highest));
    assert_unique(&[from_a, from_b, from_c].concat());
    c.stop_ok().await;
    a.stop_ok().await;
}

/// kill -9 of a holder: its slot frees when the store expires its session or lease (not
/// before: with 6 s to expiry and a mark only 1 s ahead, the slot outlives the process and its
/// mark by 4 s or more), and the successor waits past the mark: no ID shared.
pub(crate) async fn a_killed_holder_is_taken_over_after_expiry<S: Store>() {
    let s = S::single();
    let args = [
        "--pool-size",
        "1",
        s.expiry_flag(),
        "6s",
        "--lease-horizon",
        "1s",
        "--idle-horizon",
        "30s",
    ];
    let a = s.start(&args).await;
    a.wait_ready(Duration::from_secs(15)).await;
    let before = a.take(300).await.unwrap();
    let mut b = s.start(&args).await;
    // The waiter queues; within a second the holder's mark is down to its 1 s horizon.
    wait_waiting(&s, 0, 1).await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(b.admin_get("/readyz").await.0, 503, "still held");
    let killed = Instant::now();
    a.signal(Signal::SIGKILL);
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let p = s.pool(0, 1);
    let held = p["held"].as_array().unwrap().len();
    assert_eq!(held, 1, "the slot went before its expiry: {p}");
    assert_eq!(
        b.admin_get("/readyz").await.0,
        503,
        "taken before the expiry"
    );
    b.wait_ready(Duration::from_secs(20)).await;
    let took = killed.elapsed();
    assert!(took >= Duration::from_millis(3_500), "taken after {took:?}");
    assert!(took < Duration::from_secs(12), "taken only after {took:?}");
    let after = b.take(300).await.unwrap();
    let last_before = before.iter().map(|id| ts(*id)).max().unwrap();
    assert!(after.iter().all(|id| ts(*id) > last_before));
    assert_unique(&[before, after].concat());
    b.stop_ok().await;
}

/// The leader of three killed under load (the member idcar talks to, where the store lets
/// the test choose): no request refused, no lease lost, the same slot throughout, renewals
/// going on through the two left.
pub(crate) async fn killing_the_leader_of_three_loses_nothing<S: Store>() {
    let mut s = S::three();
    // The mark renewed every interval (as while someone waits), so that writes go on
    // through the failover and are seen to.
    let args = [
        s.expiry_flag(),
        "6s",
        "--lease-horizon",
        "4s",
        "--idle-horizon",
        "4s",
        "--renew-interval",
        "300ms",
    ];
    let mut a = s.start(&args).await;
    a.wait_ready(Duration::from_secs(20)).await;
    let slot = a.metric("idcar_lease_slot").await;
    s.lead_from(a.child.id());
    let leader = s.leader().expect("a leader");
    let until = Instant::now() + Duration::from_secs(7);
    let load = hammer(&a, until);
    let kill = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        s.kill(leader);
    };
    let ((ids, refused), ()) = tokio::join!(load, kill);
    assert_eq!(refused, 0, "requests refused in the failover: {}", a.logs());
    assert!(ids.len() > 1_000, "{} IDs", ids.len());
    assert_unique(&ids);
    assert_eq!(a.metric("idcar_lease_slot").await, slot);
    for reason in ["expired", "stolen", "unreachable"] {
        let m = a
            .metric(&format!("idcar_lease_losses_total{{reason=\"{reason}\"}}"))
            .await;
        assert_eq!(m, Some(0.0), "loss {reason}: {}", a.logs());
    }
    assert_eq!(a.metric("idcar_lease_claims_total").await, Some(1.0));
    let renewed = a.metric("idcar_lease_renewals_total{result=\"ok\"}").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(a.metric("idcar_lease_renewals_total{result=\"ok\"}").await > renewed);
    assert_eq!(a.admin_get("/readyz").await.0, 200);
    a.stop_ok().await;
}
