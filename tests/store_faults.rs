//! What every coordinating store must survive, written once and run against each (real
//! ZooKeeper servers and real etcd members, started per test on loopback ports, through
//! `common::store::Store`): a release that hands over at once, kill -9 of a holder, a holder
//! frozen past its expiry, the leader of three killed under load, a silent partition, an exhausted pool, and instances
//! whose parameters differ. What only one store has stays in its own file (`zk*.rs`, `etcd*.rs`).

mod common;

use common::etcd::Etcd;
use common::proxy::Proxy;
use common::release::Older;
use common::store::Store;
use common::zk::Zk;
use common::*;
use idcar::layout::lable64::Fields;
use nix::sys::signal::Signal;
use std::time::{Duration, Instant};

fn ts(id: u64) -> u64 {
    Fields::unpack(id).expect("valid lable64 ID").timestamp_ms
}

/// Milliseconds since the Unix epoch of `2026-11-27T10:01:02.345Z`.
fn rfc3339_ms(t: &str) -> u64 {
    let n = |a: usize, b: usize| t[a..b].parse::<i64>().unwrap();
    let (y, m, d) = (n(0, 4), n(5, 7), n(8, 10));
    // Days from 1970-01-01 (Howard Hinnant's days_from_civil).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    let secs = days * 86_400 + n(11, 13) * 3_600 + n(14, 16) * 60 + n(17, 19);
    (secs * 1_000 + n(20, 23)) as u64
}

#[test]
fn rfc3339_ms_reads_what_idcar_pool_prints() {
    assert_eq!(rfc3339_ms("2026-11-27T10:01:02.345Z"), 1_795_773_662_345);
    assert_eq!(rfc3339_ms("1970-01-01T00:00:00.000Z"), 0);
}

fn generator(id: u64) -> u8 {
    Fields::unpack(id).expect("valid lable64 ID").generator
}

/// Claim, serve, release: the pool report shows the holder and its live mark, the mark is
/// written down to the highest issued timestamp on release, nothing of the holder is left,
/// and the successor waits (almost) nothing, then issues only later timestamps.
async fn a_release_hands_over_at_once<S: Store>() {
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
        start_writes <= 5,
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
async fn a_start_beside_a_holder_does_not_queue<S: Store>() {
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
    let session = u64::from(s.target()[0] == "--zk");
    // The start fills the pool: the holder's mark may come down to a full pool's reach.
    assert!(
        writes <= 3 + session,
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
async fn a_killed_holder_is_taken_over_after_expiry<S: Store>() {
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
async fn killing_the_leader_of_three_loses_nothing<S: Store>() {
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

/// Until `idcar pool` shows a contender waiting in cluster `c` (a pool of `size`).
async fn wait_waiting<S: Store>(s: &S, c: u8, size: u32) {
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
async fn an_idle_holder_writes_seldom_and_a_waiter_brings_its_mark_down<S: Store>() {
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
    assert_eq!(idle_writes, 0, "store writes by an idle holder in 6 s");
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
async fn wait_mark_within<S: Store>(s: &S, cluster: u8, slot: u32, ahead: u64, limit: Duration) {
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
fn idcar_defaults<S: Store>(s: &S) -> [&'static str; 8] {
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
async fn held(i: &Idcar) -> u32 {
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
async fn an_idle_holder_takes_its_own_slot_back_after_a_store_outage<S: Store>() {
    let s = S::single();
    let mut idle = vec!["--pool-size", "2", "--cluster-id", "7"];
    idle.extend(idcar_defaults(&s));
    let back = own_slot_back(&s, &idle, 7, Duration::from_secs(10), 30_000).await;
    let other = back.1.iter().all(|id| generator(*id) == 1);
    assert!(
        back.0 || (other && s.target()[0] == "--zk"),
        "IDs again, but neither from its own slot claimed back nor from the other free slot"
    );
    let mut full = vec!["--pool-size", "1", "--cluster-id", "9"];
    full.extend(idcar_defaults(&s));
    full[5] = "2s";
    let back = own_slot_back(&s, &full, 9, Duration::from_secs(4), 5_000).await;
    assert!(back.0, "the only slot was not claimed back");
}

/// Instances of several slots (`--slots 2`) filling a pool of 4, nobody waiting (expiry 2 s;
/// every mark twice the 5 s horizon ahead), the store frozen 4 s: once it answers, each
/// instance takes both its slots back — whichever of its leases claims first — and issues
/// again within 2 s, where waiting out a mark would cost 6 s. IDs after are above every ID
/// before.
async fn instances_of_several_slots_take_their_own_back_after_a_store_outage<S: Store>() {
    let s = S::single();
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
        assert_eq!(
            logs.matches("slot claimed back").count(),
            2,
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
async fn own_slot_back<S: Store>(
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
        logs.contains("session lost") || logs.contains("lease lost"),
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

/// A crash in a full pool: every slot held (one instance of one slot, one of `--slots 3`
/// holding two, its third a spare), nobody waiting, default timings (expiry 6 s, horizon 5 s).
/// The pool gauges see it full, so every mark stays within twice the horizon; the holder of
/// one slot killed and a replacement started right after, the replacement serves within
/// expiry + horizon + 2 s of the kill; that one killed with no one after it, the spare takes
/// its slot within the same bound. No ID shared.
async fn a_crash_in_a_full_pool_is_taken_over_within_the_bound<S: Store>() {
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

async fn an_exhausted_pool_is_reported_and_the_waiter_takes_the_first_free_slot<S: Store>() {
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
    let [flag, value] = s.target();
    let text = run(&["pool", &flag, &value, "--cluster-id", "1"]);
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
async fn mismatched_pool_parameters_are_refused<S: Store>() {
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

/// A silent partition between the holder and its store (packets dropped, connections kept)
/// while a successor waits; both are hammered throughout. The holder stops within its
/// horizon, the successor serves after the holder's session or lease expired and only above
/// the holder's ticks, and after the partition heals the old holder never issues from the
/// slot again. No ID is shared.
async fn a_partitioned_holder_stops_and_its_successor_takes_over<S: Store>() {
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
async fn a_frozen_holder_never_duplicates_its_successor<S: Store>() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
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
    let mut a_after = Vec::new();
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
            a_after.extend(
                body.chunks(8)
                    .map(|c| u64::from_be_bytes(c.try_into().unwrap())),
            );
        }
    }
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

/// Every scenario, for one store: each runs against the newest supported release and the
/// older one at once (docs/compatibility.md).
macro_rules! store_faults {
    ($store:ident, $newest:ty, $older:ty) => {
        mod $store {
            use super::*;
            idcar_testkit::newest_and_older_tests!(
                $newest, $older;
                a_release_hands_over_at_once,
                a_start_beside_a_holder_does_not_queue,
                a_killed_holder_is_taken_over_after_expiry,
                killing_the_leader_of_three_loses_nothing,
                an_exhausted_pool_is_reported_and_the_waiter_takes_the_first_free_slot,
                a_partitioned_holder_stops_and_its_successor_takes_over,
                a_frozen_holder_never_duplicates_its_successor,
                an_idle_holder_writes_seldom_and_a_waiter_brings_its_mark_down,
                an_idle_holder_takes_its_own_slot_back_after_a_store_outage,
                instances_of_several_slots_take_their_own_back_after_a_store_outage,
                a_crash_in_a_full_pool_is_taken_over_within_the_bound,
                mismatched_pool_parameters_are_refused
            );
        }
    };
}

store_faults!(zookeeper, Zk, Zk<Older>);
store_faults!(etcd, Etcd, Etcd<Older>);
