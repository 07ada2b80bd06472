//! What is specific to the etcd store, against real etcd (the newest supported release, one
//! member or a cluster of three started by the harness on loopback ports): the TTL etcd
//! grants, an outage and its return (the lease kept through it, a new one after a cut past
//! its TTL), large pools probed, what idle holders cost etcd across a compaction, and the
//! flags. What every store must survive is in `store_faults.rs`; TLS
//! and authentication in `etcd_security.rs`; the protocol's own checks against every store in
//! `lease_conformance.rs`, the negotiation's in `negotiation.rs`.

mod common;

use common::etcd::{start, Etcd};
use common::proxy::Proxy;
use common::*;
use idcar::layout::lable64::Fields;
use std::time::{Duration, Instant};

fn ts(id: u64) -> u64 {
    Fields::unpack(id).expect("valid lable64 ID").timestamp_ms
}

/// The slot key lives on an etcd lease of the TTL asked for (2 s in the tests: etcd's
/// minimum), one lease per instance, shown by `idcar pool` as the holder's session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_lives_on_a_lease_of_the_ttl_asked_for() {
    let e = Etcd::single();
    let mut a = start(&e.endpoints(), &["--pool-size", "1", "--cluster-id", "4"]).await;
    a.wait_ready(Duration::from_secs(15)).await;
    let (code, out, err) = run(&[
        "pool",
        "--etcd",
        &e.endpoints(),
        "--cluster-id",
        "4",
        "--pool-size",
        "1",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let p: serde_json::Value = serde_json::from_str(&out).unwrap();
    let lease = p[0]["held"][0]["session"]
        .as_str()
        .unwrap_or_else(|| panic!("a holder: {p}"))
        .trim_start_matches("0x")
        .to_string();
    let ttl = e.etcdctl(0, &["lease", "timetolive", &lease]).unwrap();
    assert!(ttl.contains("granted with TTL(2s)"), "{ttl}");
    assert_eq!(a.metric("idcar_etcd_leases_total").await, Some(1.0));
    a.stop_ok().await;
}

/// Asks `a` for IDs for `outage` after its store went down: IDs issued meanwhile (all within
/// a second of the mark) go to `all`; when the first request was refused.
async fn served_until_the_mark(a: &Idcar, outage: Duration, all: &mut Vec<u64>) -> Duration {
    let (down_at, down_ms) = (Instant::now(), now_ms());
    let mut refused_at = None;
    while down_at.elapsed() < outage {
        match a.take(5).await {
            Ok(ids) => {
                for id in &ids {
                    assert!(ts(*id) <= down_ms + 1_000, "issued past the mark");
                }
                all.extend(ids);
            }
            Err(_) => {
                refused_at.get_or_insert(down_at.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    refused_at.expect("refused while etcd was down")
}

/// etcd down: issuing stops at the mark (not ready within the horizon, counted as
/// `unreachable`), nothing issued past it; IDs flow again within a second of etcd answering,
/// after an outage shorter than the TTL and a longer one (etcd restarted with its data keeps
/// the lease and extends it). Then the holder cut off longer than the TTL while etcd runs:
/// its lease expires, and IDs flow within a second of the cut healing, under a new lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_stops_at_the_mark_and_ids_flow_within_a_second_of_etcds_return() {
    let mut e = Etcd::single();
    let proxy = Proxy::start(e.endpoints()).await;
    let via = format!("127.0.0.1:{}", proxy.port);
    // The mark no further ahead than the window (as while someone waits for a slot).
    let a = start(
        &via,
        &[
            "--lease-horizon",
            "1s",
            "--idle-horizon",
            "1s",
            "--renew-interval",
            "200ms",
        ],
    )
    .await;
    a.wait_ready(Duration::from_secs(15)).await;
    let mut all = a.take(500).await.unwrap();
    let mut recoveries = Vec::new();
    for outage in [Duration::from_millis(1_500), Duration::from_secs(5)] {
        e.kill(0);
        let refused_at = served_until_the_mark(&a, outage, &mut all).await;
        assert!(refused_at <= Duration::from_millis(1_600), "{refused_at:?}");
        assert_eq!(a.admin_get("/readyz").await.0, 503);
        e.restart(0);
        e.wait_up(0, Duration::from_secs(30));
        let back = Instant::now();
        while a.take(1).await.is_err() {
            assert!(back.elapsed() < Duration::from_secs(15), "{}", a.logs());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        recoveries.push(back.elapsed());
        all.extend(a.take(100).await.unwrap());
    }
    eprintln!("IDs again {recoveries:?} after etcd answered (outages 1.5 s, 5 s)");
    for r in &recoveries {
        assert!(
            *r < Duration::from_secs(1),
            "IDs only {r:?} after etcd answered"
        );
    }
    let lost = a
        .metric("idcar_lease_losses_total{reason=\"unreachable\"}")
        .await;
    assert!(lost >= Some(2.0), "unreachable losses: {lost:?}");
    // etcd restarted with its data keeps the lease (only etcd's word ends it): the same
    // slot, claimed once.
    assert_eq!(
        a.metric("idcar_lease_claims_total").await,
        Some(1.0),
        "{}",
        a.logs()
    );
    assert_eq!(a.metric("idcar_etcd_leases_total").await, Some(1.0));

    // Cut off for 4 s (the TTL is 2 s) while etcd runs: the lease expires.
    proxy.blackhole(true);
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        a.take(1).await.is_err(),
        "served past its mark while cut off"
    );
    proxy.blackhole(false);
    let healed = Instant::now();
    while a.take(1).await.is_err() {
        assert!(healed.elapsed() < Duration::from_secs(15), "{}", a.logs());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let again = healed.elapsed();
    eprintln!("IDs again {again:?} after the cut healed, under a new etcd lease");
    assert!(
        again < Duration::from_secs(1),
        "IDs only {again:?} after healing"
    );
    assert_eq!(
        a.metric("idcar_etcd_leases_total").await,
        Some(2.0),
        "{}",
        a.logs()
    );
    all.extend(a.take(100).await.unwrap());
    assert_unique(&all);
}

/// Bad etcd flags are usage errors (exit 2) that name the flag; nothing starts.
#[test]
fn etcd_flags_are_checked() {
    for (args, says) in [
        (
            &["--zk", "127.0.0.1:1", "--etcd", "127.0.0.1:2"][..],
            "cannot be used with",
        ),
        (&["--etcd", "127.0.0.1:2", "--etcd-ttl", "1s"], "--etcd-ttl"),
        (
            &["--etcd", "127.0.0.1:2", "--etcd-ttl", "2500ms"],
            "whole seconds",
        ),
        (
            &["--etcd", "127.0.0.1:2", "--etcd-prefix", "idcar"],
            "--etcd-prefix",
        ),
        (&["--etcd", "nohostport"], "--etcd"),
        (&["--etcd", "https://127.0.0.1:2"], "--etcd-tls-ca"),
        (
            &[
                "--etcd",
                "127.0.0.1:2",
                "--etcd-auth-file",
                "/nonexistent/pw",
            ],
            "--etcd-auth-file /nonexistent/pw",
        ),
        (
            &[
                "--etcd",
                "127.0.0.1:2",
                "--etcd-tls-ca",
                "/nonexistent/ca.pem",
            ],
            "--etcd-tls-ca /nonexistent/ca.pem",
        ),
    ] {
        let mut all = vec![
            "serve",
            "--admin-addr",
            "none",
            "--socket",
            "/nonexistent/s",
        ];
        all.extend_from_slice(args);
        let (code, _, err) = run(&all);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let (code, _, err) = run(&["pool", "--layout", "lable64"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--etcd"), "{err}");
}

/// sno80, muid128 and uuid7 through etcd: pools of 65,536 partitions, 2^32 − 1 medallions and
/// 65,536 slots are
/// claimed by random probes — a preferred slot that is taken sends the second instance
/// elsewhere, and only the slots actually used get a mark key (nothing scans the pool).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_pools_are_probed_not_scanned() {
    let e = Etcd::single();
    for (name, pool) in [
        ("sno80", 65_536.0),
        ("muid128", 4_294_967_295.0),
        ("uuid7", 65_536.0),
    ] {
        let args = ["--layout", name, "--generator-id", "5"];
        let a = start(&e.endpoints(), &args).await;
        a.wait_ready(Duration::from_secs(15)).await;
        let b = start(&e.endpoints(), &args).await;
        b.wait_ready(Duration::from_secs(15)).await;
        let mut slots = std::collections::HashSet::new();
        for i in [&a, &b] {
            assert_eq!(i.metric("idcar_pool_size").await, Some(pool));
            slots.insert(i.metric("idcar_lease_slot").await.unwrap() as u64);
            assert_eq!(i.binary().await.ids(20).await.unwrap().len(), 20);
        }
        assert!(
            slots.contains(&5),
            "{name}: the first got its preferred slot"
        );
        assert_eq!(slots.len(), 2, "{name}: the second probed another slot");
        let keys = |dir: &str| {
            let out = e
                .etcdctl(
                    0,
                    &[
                        "get",
                        "--prefix",
                        "--keys-only",
                        &format!("/idcar/{name}/0/{dir}/"),
                    ],
                )
                .unwrap();
            out.lines().filter(|l| !l.is_empty()).count()
        };
        assert_eq!(keys("marks"), 2, "{name}: only used slots have marks");
        assert_eq!(keys("slots"), 2, "{name}");
        assert_eq!(keys("queue"), 0, "{name}: probes never queue");
    }
}

/// Idle holders cost etcd the same after a compaction at the current revision (what the
/// manifests' auto-compaction does) as before it: a watch that etcd cancels for starting below
/// the compacted revision reads once and watches again from that read, instead of turning into
/// a poll. Counted by etcd itself: the Range and Txn requests it started, over equal windows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_holders_cost_etcd_the_same_after_a_compaction() {
    let e = Etcd::single();
    let mut holders = Vec::new();
    for _ in 0..3 {
        holders.push(start(&e.endpoints(), &[]).await);
    }
    for h in &holders {
        h.wait_ready(Duration::from_secs(15)).await;
    }
    // Settled: every holder has written its mark a few times (the harness's idle horizon is
    // the lease horizon: a write every --renew-interval), and its watches are set.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let window = Duration::from_secs(5);
    let before = requests_per_s(&e, window).await;
    let status = e.etcdctl(0, &["endpoint", "status", "-w", "json"]).unwrap();
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    let revision = status[0]["Status"]["header"]["revision"].as_i64().unwrap();
    e.etcdctl(0, &["compact", &revision.to_string()]).unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = requests_per_s(&e, window).await;
    eprintln!("3 idle holders: {before:.1} requests/s before a compaction, {after:.1} after");
    assert!(
        after <= 1.5 * before + 1.0,
        "{before:.1} requests/s before the compaction, {after:.1} after"
    );
    for h in &mut holders {
        h.stop_ok().await;
    }
}

/// The Range and Txn requests etcd member 0 started per second over `window`.
async fn requests_per_s(e: &Etcd, window: Duration) -> f64 {
    let first = etcd_requests(e).await;
    tokio::time::sleep(window).await;
    (etcd_requests(e).await - first) / window.as_secs_f64()
}

/// The Range and Txn requests etcd member 0 has started, from its own `/metrics`.
async fn etcd_requests(e: &Etcd) -> f64 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = format!("127.0.0.1:{}", e.members[0].client_port);
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    // HTTP/1.0: the body as it is, not in chunks.
    let req = "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n";
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_string(&mut out))
        .await
        .expect("etcd answers /metrics")
        .unwrap();
    out.lines()
        .filter(|l| {
            l.starts_with("grpc_server_started_total{")
                && (l.contains("grpc_method=\"Range\"") || l.contains("grpc_method=\"Txn\""))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
