//! More than one slot per instance (`--slots K`) and the StatefulSet ordinal preference, against
//! a real ZooKeeper (and etcd): each slot is claimed, fenced, renewed and released as one slot is;
//! requests spread over the slots held; a pool that cannot give all K is served from what it
//! gives while the rest is tried for, after instances that hold none; losing one slot stops
//! only its share.

mod common;

use common::zk::Zk;
use common::*;
use idcar::layout::lable64::Fields;
use nix::sys::signal::Signal;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(20);

async fn start(zk: &Zk, extra: &[&str]) -> Idcar {
    common::zk::start(&zk.connect(), extra).await
}

/// The highest timestamp issued per generator ID.
fn highest_per_generator(ids: &[u64]) -> BTreeMap<u8, u64> {
    let mut m = BTreeMap::new();
    for id in ids {
        let f = Fields::unpack(*id).expect("a lable64 ID");
        let e = m.entry(f.generator).or_insert(0);
        *e = f.timestamp_ms.max(*e);
    }
    m
}

fn generators(ids: &[u64]) -> BTreeSet<u8> {
    highest_per_generator(ids).into_keys().collect()
}

/// Takes `rounds` batches of 256 (more than one slot's tick holds).
async fn take_many(i: &Idcar, rounds: usize) -> Vec<u64> {
    let mut all = Vec::new();
    for _ in 0..rounds {
        all.extend(i.take(256).await.unwrap());
    }
    all
}

/// `idcar pool --json` for cluster `c`.
fn pool(zk: &Zk, c: u8, text: bool) -> (serde_json::Value, String) {
    let args = [
        "pool",
        "--zk",
        &zk.connect(),
        "--cluster-id",
        &c.to_string(),
    ];
    let (code, out, err) = run(&[&args[..], &["--json"]].concat());
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let (_, t, _) = run(&args);
    (v[0].clone(), if text { t } else { String::new() })
}

/// The slots the report shows `pid` holding.
fn held_by(report: &serde_json::Value, pid: u32) -> BTreeSet<u64> {
    report["held"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["owner"]["pid"] == pid)
        .map(|h| h["slot"].as_u64().unwrap())
        .collect()
}

/// K slots: all claimed, requests spread over them, per-slot metrics, the pool report, and a
/// release that writes every slot's mark down to the highest time issued from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k_slots_are_claimed_used_and_each_written_down_on_release() {
    let zk = Zk::standalone();
    let args = ["--slots", "4", "--pool-size", "8", "--cluster-id", "2"];
    let mut a = start(&zk, &[&args[..], &["--pod-name", "hot-0"]].concat()).await;
    a.wait_ready(LIMIT).await;
    a.wait_metric("idcar_lease_slots_held", LIMIT, |v| v == 4.0)
        .await;
    assert_eq!(a.metric("idcar_lease_slots_wanted").await, Some(4.0));
    let ids = take_many(&a, 40).await;
    assert_unique(&ids);
    let used = generators(&ids);
    let (report, text) = pool(&zk, 2, true);
    let held = held_by(&report, a.child.id());
    assert_eq!(held.len(), 4, "{report}");
    assert_eq!(
        used.iter().map(|g| u64::from(*g)).collect::<BTreeSet<_>>(),
        held,
        "batches of 256 spread over the four slots held"
    );
    assert_eq!(report["multi"][0]["wants"], 4, "{report}");
    assert!(text.contains("hot-0"), "{text}");
    assert!(text.contains("holds 4 of its 4 slots"), "{text}");
    let (_, metrics) = a.admin_get("/metrics").await;
    let per_slot = metrics
        .lines()
        .filter(|l| l.starts_with("idcar_lease_slot_remaining_seconds{"))
        .count();
    assert_eq!(per_slot, 4, "{metrics}");

    let highest = highest_per_generator(&ids);
    a.stop_ok().await;
    let (report, _) = pool(&zk, 2, false);
    assert!(report["held"].as_array().unwrap().is_empty(), "{report}");
    for (g, ts) in highest {
        assert_eq!(
            common::zk::lable64_mark(&zk, 2, u32::from(g)),
            ts,
            "slot {g}'s mark written down to the highest time issued from it"
        );
    }
}

/// A pool that cannot give all K: the instance serves from the slots it has, counts and shows
/// the shortfall (not as an exhausted pool: it is ready), keeps trying for the rest, and takes
/// a slot soon after one frees (above the mark its last holder left).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_pool_serves_with_what_it_gives_and_queues_for_the_rest() {
    let zk = Zk::standalone();
    let pool_args = ["--pool-size", "3", "--cluster-id", "3"];
    let mut a = start(&zk, &[&pool_args[..], &["--generator-id", "0"]].concat()).await;
    a.wait_ready(LIMIT).await;
    let from_a = a.take(300).await.unwrap();
    let b = start(
        &zk,
        &[&pool_args[..], &["--slots", "3", "--pod-name", "b-0"]].concat(),
    )
    .await;
    b.wait_ready(LIMIT).await;
    b.wait_metric("idcar_lease_slots_held", LIMIT, |v| v == 2.0)
        .await;
    assert_eq!(b.metric("idcar_pool_exhausted").await, Some(0.0));
    assert_eq!(b.metric("idcar_lease_slots_wanted").await, Some(3.0));
    let partial = take_many(&b, 10).await;
    assert_eq!(
        generators(&partial),
        BTreeSet::from([1, 2]),
        "only its own slots"
    );
    let (report, text) = pool(&zk, 3, true);
    let multi = &report["multi"][0];
    assert_eq!(multi["wants"], 3, "{report}");
    assert_eq!(multi["slots"].as_array().unwrap().len(), 2, "{report}");
    assert!(text.contains("holds 2 of its 3 slots"), "{text}");
    assert!(text.contains("short of 1"), "{text}");

    let a_highest = from_a
        .iter()
        .map(|id| Fields::unpack(*id).unwrap().timestamp_ms)
        .max();
    a.stop_ok().await;
    b.wait_metric("idcar_lease_slots_held", LIMIT, |v| v == 3.0)
        .await;
    let full = take_many(&b, 10).await;
    assert_eq!(generators(&full), BTreeSet::from([0, 1, 2]));
    let lowest_on_zero = full
        .iter()
        .map(|id| Fields::unpack(*id).unwrap())
        .filter(|f| f.generator == 0)
        .map(|f| f.timestamp_ms)
        .min()
        .unwrap();
    assert!(
        Some(lowest_on_zero) > a_highest,
        "above the mark slot 0's last holder left"
    );
    assert_unique(&[from_a, partial, full].concat());
}

/// kill -9 of an instance holding two slots: each slot is taken over only after the session
/// expired and above the mark that fenced it, and the successor holds both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_k_slot_holder_is_fenced_on_every_slot() {
    let zk = Zk::standalone();
    let args = ["--slots", "2", "--pool-size", "2", "--cluster-id", "5"];
    let a = start(&zk, &args).await;
    a.wait_ready(LIMIT).await;
    a.wait_metric("idcar_lease_slots_held", LIMIT, |v| v == 2.0)
        .await;
    let before = take_many(&a, 10).await;
    assert_eq!(generators(&before).len(), 2);
    let mut b = start(&zk, &args).await;
    b.wait_metric("idcar_pool_exhausted", LIMIT, |v| v == 1.0)
        .await;
    let (status, why) = b.admin_get("/readyz").await;
    assert_eq!(status, 503, "{why}");
    assert!(why.contains("no slot is held (of 2)"), "{why}");
    let killed = Instant::now();
    a.signal(Signal::SIGKILL);
    b.wait_ready(LIMIT).await;
    b.wait_metric("idcar_lease_slots_held", LIMIT, |v| v == 2.0)
        .await;
    // Not before the 1 s session expired.
    assert!(
        killed.elapsed() >= Duration::from_millis(800),
        "{:?}",
        killed.elapsed()
    );
    let after = take_many(&b, 10).await;
    let old = highest_per_generator(&before);
    for id in &after {
        let f = Fields::unpack(*id).unwrap();
        assert!(
            f.timestamp_ms > old[&f.generator],
            "slot {}: {} not above {}",
            f.generator,
            f.timestamp_ms,
            old[&f.generator]
        );
    }
    assert_unique(&[before, after].concat());
    b.stop_ok().await;
}

/// Losing one slot stops only that slot's share: the instance keeps answering from the other
/// slot, counts the loss, and claims the lost slot again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_one_slot_stops_only_its_share() {
    let zk = Zk::standalone();
    let mut a = start(
        &zk,
        &["--slots", "2", "--pool-size", "4", "--cluster-id", "6"],
    )
    .await;
    a.wait_ready(LIMIT).await;
    a.wait_metric("idcar_lease_slots_held", LIMIT, |v| v == 2.0)
        .await;
    let (report, _) = pool(&zk, 6, false);
    let victim = *held_by(&report, a.child.id()).first().unwrap();
    let client = zk.client().await;
    let hammering = hammer(&a, Instant::now() + Duration::from_secs(4));
    let cut = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        // Another party removes one slot node: that lease must stop and claim again.
        client
            .delete(&format!("/idcar/lable64/6/slots/{victim}"), None)
            .await
            .unwrap();
    };
    let ((ids, refused), ()) = tokio::join!(hammering, cut);
    assert_eq!(refused, 0, "the other slot kept answering: {}", a.logs());
    assert!(ids.len() > 500, "{}", ids.len());
    assert_unique(&ids);
    assert!(
        a.metric_sum("idcar_lease_losses_total").await >= 1.0,
        "{}",
        a.logs()
    );
    a.wait_metric("idcar_lease_slots_held", LIMIT, |v| v == 2.0)
        .await;
    a.stop_ok().await;
}

/// `--prefer-ordinal`: a pod prefers the slots of its ordinal, still claimed and fenced in
/// ZooKeeper — a slot another instance holds is never shared, and two StatefulSets with the
/// same ordinals never collide.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ordinal_is_a_preference_never_a_static_assignment() {
    let zk = Zk::standalone();
    let pool_args = ["--pool-size", "8", "--cluster-id", "7"];
    let mut holder = start(&zk, &[&pool_args[..], &["--generator-id", "6"]].concat()).await;
    holder.wait_ready(LIMIT).await;
    let ord = |pod: &'static str| {
        [
            &pool_args[..],
            &["--prefer-ordinal", "--slots", "2", "--pod-name", pod],
        ]
        .concat()
    };
    // ids-3 prefers slots 6 and 7; 6 is held by someone else.
    let mut p = start(&zk, &ord("ids-3")).await;
    p.wait_metric("idcar_lease_slots_held", LIMIT, |v| v == 2.0)
        .await;
    // The ordinal from the downward API's pod-index label wins over the name.
    let pod_index = [
        &pool_args[..],
        &["--prefer-ordinal", "--pod-index", "2", "--pod-name", "x-5"],
    ];
    let mut r = start(&zk, &pod_index.concat()).await;
    r.wait_ready(LIMIT).await;
    // A second StatefulSet whose pod has the same ordinal.
    let mut q = start(&zk, &ord("other-3")).await;
    q.wait_metric("idcar_lease_slots_held", LIMIT, |v| v == 2.0)
        .await;

    let (report, _) = pool(&zk, 7, false);
    let (hs, ps, qs, rs) = (
        held_by(&report, holder.child.id()),
        held_by(&report, p.child.id()),
        held_by(&report, q.child.id()),
        held_by(&report, r.child.id()),
    );
    assert_eq!(hs, BTreeSet::from([6]), "{report}");
    assert!(ps.contains(&7) && !ps.contains(&6), "{report}");
    assert_eq!(rs, BTreeSet::from([2]), "{report}");
    let all: Vec<u64> = [&hs, &ps, &qs, &rs]
        .iter()
        .flat_map(|s| s.iter().copied())
        .collect();
    assert_eq!(all.len(), 6, "no slot twice: {report}");
    assert_eq!(all.iter().collect::<BTreeSet<_>>().len(), 6, "{report}");
    let mut ids = Vec::new();
    for i in [&holder, &p, &q, &r] {
        ids.extend(take_many(i, 4).await);
    }
    assert_unique(&ids);
    for i in [&mut holder, &mut p, &mut q, &mut r] {
        i.stop_ok().await;
    }
}

/// An instance that holds no slot goes before a spare lease of an instance that holds one:
/// in a full pool, the slot a restarted pod gives back goes to the pod that needs its first
/// slot, not to a hot instance that wants more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_holding_none_goes_before_a_spare() {
    let zk = Zk::standalone();
    let pool_args = ["--pool-size", "2", "--cluster-id", "8"];
    let mut a = start(&zk, &[&pool_args[..], &["--generator-id", "0"]].concat()).await;
    a.wait_ready(LIMIT).await;
    let mut hot = start(&zk, &[&pool_args[..], &["--slots", "2"]].concat()).await;
    hot.wait_metric("idcar_lease_slots_held", LIMIT, |v| v == 1.0)
        .await;
    // The hot instance's spare has been trying for slot 0 for a while before c arrives.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut c = start(&zk, &pool_args).await;
    c.wait_metric("idcar_pool_exhausted", LIMIT, |v| v == 1.0)
        .await;
    a.stop_ok().await;
    c.wait_ready(LIMIT).await;
    let (report, _) = pool(&zk, 8, false);
    assert_eq!(
        held_by(&report, c.child.id()),
        BTreeSet::from([0]),
        "{report}"
    );
    assert_eq!(
        held_by(&report, hot.child.id()),
        BTreeSet::from([1]),
        "{report}"
    );
    assert_eq!(hot.metric("idcar_lease_slots_held").await, Some(1.0));
    let (status, _) = hot.admin_get("/readyz").await;
    assert_eq!(status, 200, "the hot instance stays ready while short");
    // Once c leaves, the spare takes the slot.
    c.stop_ok().await;
    hot.wait_metric("idcar_lease_slots_held", LIMIT, |v| v == 2.0)
        .await;
    hot.stop_ok().await;
}

/// A hot instance that fills the pool gives a slot back when an instance holding none waits,
/// while it is being asked for IDs all along: the waiter issues from that slot only above
/// everything the hot instance issued from it; the hot instance keeps a slot and stays ready,
/// and takes the slot again once it frees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_instance_gives_a_slot_back_to_one_holding_none() {
    let zk = Zk::standalone();
    let pool_args = ["--pool-size", "2", "--cluster-id", "9"];
    let mut hot = start(&zk, &[&pool_args[..], &["--slots", "2"]].concat()).await;
    hot.wait_metric("idcar_lease_slots_held", LIMIT, |v| v == 2.0)
        .await;
    let handover = async {
        let c = start(&zk, &pool_args).await;
        c.wait_ready(LIMIT).await;
        (c, Instant::now())
    };
    let ((hot_ids, refused), (mut c, c_ready)) = tokio::join!(
        hammer(&hot, Instant::now() + Duration::from_secs(14)),
        handover
    );
    assert!(
        c_ready.elapsed() > Duration::from_secs(1),
        "hammered past the handover"
    );
    assert_eq!(
        refused,
        0,
        "the hot instance answered throughout: {}",
        hot.logs()
    );
    assert_eq!(generators(&hot_ids).len(), 2, "it issued from both slots");
    hot.wait_metric("idcar_lease_slots_held", LIMIT, |v| v == 1.0)
        .await;
    assert!(hot.logs().contains("gave a slot back"), "{}", hot.logs());
    assert_eq!(
        hot.metric_sum("idcar_lease_losses_total").await,
        0.0,
        "not a loss"
    );
    let from_c = c.take(300).await.unwrap();
    let hot_highest = highest_per_generator(&hot_ids);
    for id in &from_c {
        let f = Fields::unpack(*id).unwrap();
        assert!(
            f.timestamp_ms > hot_highest[&f.generator],
            "slot {}: {} not above the hot instance's {}",
            f.generator,
            f.timestamp_ms,
            hot_highest[&f.generator]
        );
    }
    let after = take_many(&hot, 4).await;
    assert_unique(&[hot_ids, from_c, after].concat());
    c.stop_ok().await;
    hot.wait_metric("idcar_lease_slots_held", LIMIT, |v| v == 2.0)
        .await;
    hot.stop_ok().await;
}

/// `--prefer-ordinal` without an ordinal to read is a clear start-up error (exit 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_ordinal_is_a_usage_error() {
    let (code, _, err) = run(&[
        "serve",
        "--zk",
        "127.0.0.1:1",
        "--prefer-ordinal",
        "--pod-name",
        "no-ordinal-here",
        "--admin-addr",
        "none",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--prefer-ordinal: no ordinal"), "{err}");
    assert!(err.contains("--pod-index"), "{err}");
}

/// The same with etcd as the store: K etcd leases, each slot claimed and fenced, requests
/// spread, `pool --etcd` showing the instance's slots, every slot written down on release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k_slots_with_etcd() {
    let etcd = common::etcd::Etcd::single();
    let args = ["--slots", "2", "--pool-size", "3", "--cluster-id", "4"];
    let mut a = common::etcd::start(&etcd.endpoints(), &args).await;
    a.wait_ready(LIMIT).await;
    a.wait_metric("idcar_lease_slots_held", LIMIT, |v| v == 2.0)
        .await;
    let ids = take_many(&a, 10).await;
    assert_eq!(generators(&ids).len(), 2, "spread over both slots");
    assert_unique(&ids);
    let pool = ["pool", "--etcd", &etcd.endpoints(), "--cluster-id", "4"];
    let (code, out, err) = run(&pool);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("holds 2 of its 2 slots"), "{out}");
    let (_, json, _) = run(&[&pool[..], &["--json"]].concat());
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let leases: BTreeSet<&str> = v[0]["held"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["session"].as_str().unwrap())
        .collect();
    assert_eq!(leases.len(), 2, "each slot on its own etcd lease: {v}");
    let highest = highest_per_generator(&ids);
    a.stop_ok().await;
    for (g, ts) in highest {
        let key = format!("/idcar/lable64/4/marks/{g}");
        let v = etcd
            .etcdctl(0, &["get", "--print-value-only", &key])
            .unwrap();
        let mark = idcar::lease::pool::tree::parse_mark(v.trim().as_bytes()).expect(&v);
        assert_eq!(
            mark, ts,
            "slot {g} written down to the highest time issued from it"
        );
    }
}
