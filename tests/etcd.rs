//! The etcd lease against real etcd (Debian's `etcd-server` 3.4, one member or a cluster of
//! three started by the harness on loopback ports): claim and release, the TTL etcd allows,
//! kill -9 of a holder, a holder frozen past its TTL, an outage and its return, a silent
//! partition, the leader of three killed, pool exhaustion, mismatched pool parameters, and
//! the flags. TLS and authentication are in `etcd_security.rs`; the protocol's own checks
//! against every store in `lease_conformance.rs`.

mod common;

use common::etcd::{start, start_refused, Etcd};
use common::proxy::Proxy;
use common::*;
use idcar::layout::lable64::Fields;
use nix::sys::signal::Signal;
use std::time::{Duration, Instant};

fn ts(id: u64) -> u64 {
    Fields::unpack(id).expect("valid lable64 ID").timestamp_ms
}

fn generator(id: u64) -> u8 {
    Fields::unpack(id).expect("valid lable64 ID").generator
}

/// `idcar pool --etcd ... --json` for cluster `c` of a pool of `size` slots.
fn pool(e: &Etcd, c: u8, size: u32) -> serde_json::Value {
    let (code, out, err) = run(&[
        "pool",
        "--etcd",
        &e.endpoints(),
        "--cluster-id",
        &c.to_string(),
        "--pool-size",
        &size.to_string(),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v[0].clone()
}

/// A key's value as etcd holds it (`None` when absent).
fn value(e: &Etcd, key: &str) -> Option<String> {
    let out = e.etcdctl(0, &["get", key, "--print-value-only"]).unwrap();
    let v = out.trim_end().to_string();
    (!v.is_empty()).then_some(v)
}

fn mark(e: &Etcd, cluster: u8, slot: u32) -> u64 {
    let v = value(e, &format!("/idcar/lable64/{cluster}/marks/{slot}")).expect("a mark");
    v.split(' ').next().unwrap().parse().unwrap()
}

/// Claim, serve, release: the slot key goes with the lease's keys, the mark is written down to
/// the highest issued timestamp, the successor waits (almost) nothing. The 2 s TTL (etcd's
/// minimum) is what etcd granted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_serve_release_and_the_successor_waits_almost_nothing() {
    let e = Etcd::single();
    let mut a = start(&e.endpoints(), &["--pool-size", "1", "--cluster-id", "4"]).await;
    a.wait_ready(Duration::from_secs(15)).await;
    let first = a.take(500).await.unwrap();
    assert!(first.iter().all(|id| generator(*id) == 0));
    let highest = first.iter().map(|id| ts(*id)).max().unwrap();

    let p = pool(&e, 4, 1);
    assert_eq!(p["held"].as_array().unwrap().len(), 1, "{p}");
    assert_eq!(p["held"][0]["owner"]["pid"], a.child.id());
    let shown = p["held"][0]["mark"].as_u64().expect("a mark");
    assert!(shown > highest && shown <= mark(&e, 4, 0), "{p}");
    // The slot key is attached to a lease of the TTL asked for (2 s: etcd's minimum).
    let lease = p["held"][0]["session"]
        .as_str()
        .unwrap()
        .trim_start_matches("0x");
    let ttl = e.etcdctl(0, &["lease", "timetolive", lease]).unwrap();
    assert!(ttl.contains("granted with TTL(2s)"), "{ttl}");
    let (_, text, _) = run(&[
        "pool",
        "--etcd",
        &e.endpoints(),
        "--cluster-id",
        "4",
        "--pool-size",
        "1",
    ]);
    assert!(text.contains("lable64 cluster 4: 1/1 slots held"), "{text}");
    assert_eq!(a.metric("idcar_etcd_leases_total").await, Some(1.0));
    a.stop_ok().await;

    let p = pool(&e, 4, 1);
    assert!(p["held"].as_array().unwrap().is_empty(), "released: {p}");
    assert_eq!(
        mark(&e, 4, 0),
        highest,
        "written down to the highest issued"
    );
    let leases = e.etcdctl(0, &["lease", "list"]).unwrap();
    assert!(leases.contains("found 0 leases"), "lease revoked: {leases}");

    let mut b = start(&e.endpoints(), &["--pool-size", "1", "--cluster-id", "4"]).await;
    b.wait_ready(Duration::from_secs(15)).await;
    let wait = b.metric("idcar_lease_mark_wait_seconds_sum").await.unwrap();
    assert!(wait < 0.1, "the successor waited {wait}s after a release");
    let second = b.take(500).await.unwrap();
    assert!(second.iter().all(|id| ts(*id) > highest));
    assert_unique(&[first, second].concat());
    b.stop_ok().await;
}

/// kill -9 of a holder: its slot frees when etcd expires its lease (not before: with a 6 s TTL
/// kept alive every 2 s, the slot key outlives the process and its mark, which reaches only
/// 1 s ahead, by 4 s or more), and the successor waits past the mark: no ID shared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_holder_is_taken_over_after_its_ttl() {
    let e = Etcd::single();
    let args = [
        "--pool-size",
        "1",
        "--etcd-ttl",
        "6s",
        "--lease-horizon",
        "1s",
    ];
    let a = start(&e.endpoints(), &args).await;
    a.wait_ready(Duration::from_secs(15)).await;
    let before = a.take(300).await.unwrap();
    let mut b = start(&e.endpoints(), &args).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(b.admin_get("/readyz").await.0, 503, "still held");
    let killed = Instant::now();
    a.signal(Signal::SIGKILL);
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert!(
        value(&e, "/idcar/lable64/0/slots/0").is_some(),
        "the slot key went before the lease's TTL"
    );
    assert_eq!(b.admin_get("/readyz").await.0, 503, "taken before the TTL");
    b.wait_ready(Duration::from_secs(20)).await;
    let took = killed.elapsed();
    assert!(
        took >= Duration::from_millis(3_500),
        "taken over after {took:?}"
    );
    assert!(
        took < Duration::from_secs(12),
        "taken over only after {took:?}"
    );
    let after = b.take(300).await.unwrap();
    let last_before = before.iter().map(|id| ts(*id)).max().unwrap();
    assert!(after.iter().all(|id| ts(*id) > last_before));
    assert_unique(&[before, after].concat());
    b.stop_ok().await;
}

/// A holder frozen (SIGSTOP) past its TTL, with a mark reaching further than the TTL and a
/// clock 1 s fast, resumed with requests already waiting on its socket: whatever it issues
/// lies within its mark, its successor waits past that mark, and no ID is shared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_frozen_past_its_ttl_never_duplicates_its_successor() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let e = Etcd::single();
    let timings = [
        "--pool-size",
        "1",
        "--cluster-id",
        "2",
        "--lease-horizon",
        "5s",
        "--max-clock-wait",
        "10s",
    ];
    // The holder reaches etcd through a proxy that goes silent while it is frozen, so on
    // resume it cannot learn at once that its lease expired: it serves within its mark.
    let proxy = Proxy::start(e.endpoints()).await;
    let via = format!("127.0.0.1:{}", proxy.port);
    let a = start(&via, &[&timings[..], &["--clock-skew", "1s"]].concat()).await;
    a.wait_ready(Duration::from_secs(15)).await;
    let mut all = a.take(1_000).await.unwrap();
    let mut b = start(&e.endpoints(), &timings).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.blackhole(true);
    a.signal(Signal::SIGSTOP);
    let deadline = Instant::now() + Duration::from_secs(20);
    while b.metric("idcar_lease_claims_total").await != Some(1.0) {
        assert!(Instant::now() < deadline, "no claim: {}", b.logs());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(b.admin_get("/readyz").await.0, 503, "waiting past the mark");
    let mut pending = Vec::new();
    for _ in 0..4 {
        let mut s = tokio::net::UnixStream::connect(&a.socket).await.unwrap();
        let mut req = Vec::new();
        idcar::server::frame::encode_get_ids(100, &Default::default(), &mut req);
        s.write_all(&req).await.unwrap();
        pending.push(s);
    }
    a.signal(Signal::SIGCONT);
    let mut from_a = Vec::new();
    for mut s in pending {
        let mut head = [0u8; 8];
        tokio::time::timeout(Duration::from_secs(10), s.read_exact(&mut head))
            .await
            .expect("the resumed holder answers")
            .unwrap();
        let head = idcar::server::frame::parse_response_header(&head)
            .unwrap()
            .unwrap();
        let mut body = vec![0u8; head.len as usize];
        s.read_exact(&mut body).await.unwrap();
        if head.status == idcar::server::frame::Status::Ok {
            from_a.extend(
                body.chunks(8)
                    .map(|c| u64::from_be_bytes(c.try_into().unwrap())),
            );
        }
    }
    assert!(
        !from_a.is_empty(),
        "the resumed holder issued nothing: the test missed its window"
    );
    b.wait_ready(Duration::from_secs(20)).await;
    let from_b = b.take(1_000).await.unwrap();
    let a_max = all.iter().chain(&from_a).map(|id| ts(*id)).max().unwrap();
    let b_min = from_b.iter().map(|id| ts(*id)).min().unwrap();
    eprintln!(
        "resumed holder issued {} IDs; successor's first tick {} ms above the holder's last",
        from_a.len(),
        b_min.saturating_sub(a_max)
    );
    assert!(
        b_min > a_max,
        "the successor issued at or below the holder's ticks"
    );
    all.extend(from_a);
    all.extend(from_b);
    assert_unique(&all);
    // Healed, the resumed holder learns from etcd that its lease expired: a new one.
    proxy.blackhole(false);
    a.wait_metric("idcar_etcd_leases_total", Duration::from_secs(15), |v| {
        v >= 2.0
    })
    .await;
    b.stop_ok().await;
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
    let a = start(
        &via,
        &["--lease-horizon", "1s", "--renew-interval", "200ms"],
    )
    .await;
    a.wait_ready(Duration::from_secs(15)).await;
    let mut all = a.take(500).await.unwrap();
    let mut recoveries = Vec::new();
    for outage in [Duration::from_millis(1_500), Duration::from_secs(5)] {
        e.kill(0);
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
        let refused_at = refused_at.expect("refused while etcd was down");
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

/// A silent partition between the holder and etcd (packets dropped, connections kept): the
/// holder stops within its horizon, its successor takes the slot once the lease expires and
/// issues only above the holder's ticks; after healing the old holder issues nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_holder_stops_and_its_successor_takes_over() {
    let e = Etcd::single();
    let proxy = Proxy::start(e.endpoints()).await;
    let via = format!("127.0.0.1:{}", proxy.port);
    let common = ["--pool-size", "1", "--cluster-id", "6"];
    let a = start(&via, &common).await;
    a.wait_ready(Duration::from_secs(15)).await;
    let b = start(&e.endpoints(), &common).await;
    let (mut ids, _) = hammer(&a, Instant::now() + Duration::from_millis(300)).await;
    let cut = Instant::now();
    let cut_ms = now_ms();
    proxy.blackhole(true);
    let until = cut + Duration::from_secs(8);
    let ((from_a, _), (from_b, _)) = tokio::join!(hammer(&a, until), hammer(&b, until));
    let last_a = from_a.iter().map(|id| ts(*id)).max().unwrap_or(0);
    let first_b = from_b
        .iter()
        .map(|id| ts(*id))
        .min()
        .expect("the successor issued");
    eprintln!(
        "partition: holder's last ID {} ms after the cut (horizon 2 s), successor's first {} ms",
        last_a.saturating_sub(cut_ms),
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
}

/// A 3-member cluster whose leader is killed under load: no request refused, no loss, the
/// same slot throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_leader_of_three_loses_nothing() {
    let mut e = Etcd::cluster(3);
    let mut a = start(
        &e.endpoints(),
        &[
            "--etcd-ttl",
            "6s",
            "--lease-horizon",
            "5s",
            "--renew-interval",
            "300ms",
        ],
    )
    .await;
    a.wait_ready(Duration::from_secs(20)).await;
    let slot = a.metric("idcar_lease_slot").await;
    // The member idcar talks to, made the leader: killing it costs idcar an endpoint and
    // etcd an election at once.
    let member = connected_member(&e, a.child.id()).expect("idcar is connected to a member");
    e.make_leader(member);
    let leader = e.leader().expect("a leader");
    assert_eq!(leader, member);
    let until = Instant::now() + Duration::from_secs(7);
    let load = hammer(&a, until);
    let kill = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        e.kill(leader);
    };
    let ((ids, refused), ()) = tokio::join!(load, kill);
    assert_eq!(
        refused,
        0,
        "requests refused during the failover: {}",
        a.logs()
    );
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
    // Renewals go on through the two members left.
    let renewed = a.metric("idcar_lease_renewals_total{result=\"ok\"}").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(a.metric("idcar_lease_renewals_total{result=\"ok\"}").await > renewed);
    a.stop_ok().await;
}

/// Three instances for a pool of two: two hold distinct slots, the third is not ready, says
/// the pool is exhausted (metric and /readyz), and takes the first slot that frees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exhausted_pool_is_reported_and_the_waiter_takes_the_first_free_slot() {
    let e = Etcd::single();
    let args = ["--pool-size", "2", "--cluster-id", "1"];
    let mut all = Vec::new();
    for _ in 0..3 {
        all.push(start(&e.endpoints(), &args).await);
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
    all[ready[0]]
        .wait_metric("idcar_pool_slots_held", Duration::from_secs(15), |v| {
            v == 2.0
        })
        .await;
    all[ready[0]]
        .wait_metric(
            "idcar_pool_contenders_waiting",
            Duration::from_secs(15),
            |v| v >= 1.0,
        )
        .await;
    let p = pool(&e, 1, 2);
    assert_eq!(p["free"], 0, "{p}");
    assert_eq!(p["waiting"].as_array().unwrap().len(), 1, "{p}");
    all[ready[1]].stop_ok().await;
    all[waiting].wait_ready(Duration::from_secs(15)).await;
    assert_eq!(all[waiting].metric("idcar_lease_slot").await, Some(s1));
    assert_eq!(all[waiting].metric("idcar_pool_exhausted").await, Some(0.0));
    let ids = all[waiting].take(10).await.unwrap();
    assert!(ids.iter().all(|id| f64::from(generator(*id)) == s1));
}

/// Instances whose parameters differ from the pool's are refused, naming the parameter.
#[tokio::test]
async fn mismatched_pool_parameters_are_refused() {
    let e = Etcd::single();
    let c = e.endpoints();
    let mut first = start(&c, &["--layout", "si53", "--mid-bits", "5"]).await;
    first.wait_ready(Duration::from_secs(15)).await;
    let mut odd = start_refused(&c, &["--layout", "si53", "--mid-bits", "7"]).await;
    let (st, log) = odd.exit_and_logs(Duration::from_secs(15)).await;
    assert!(!st.success(), "{log}");
    assert!(
        log.contains("--mid-bits: the pool has 5, this instance 7"),
        "{log}"
    );
    let mut same = start(&c, &["--layout", "si53", "--mid-bits", "5"]).await;
    same.wait_ready(Duration::from_secs(15)).await;
    first.stop_ok().await;
    same.stop_ok().await;
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

/// The member of `e` that process `pid` has an established connection to (from `ss`).
fn connected_member(e: &Etcd, pid: u32) -> Option<usize> {
    let out = std::process::Command::new("ss")
        .args(["-tnpH", "state", "established"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter(|l| l.contains(&format!("pid={pid},")))
        .filter_map(|l| {
            l.split_whitespace()
                .nth(3)?
                .rsplit(':')
                .next()?
                .parse::<u16>()
                .ok()
        })
        .find_map(|port| e.members.iter().position(|m| m.client_port == port))
}

/// sno80 and muid128 through etcd: pools of 65,536 partitions and 2^32 − 1 medallions are
/// claimed by random probes — a preferred slot that is taken sends the second instance
/// elsewhere, and only the slots actually used get a mark key (nothing scans the pool).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_pools_are_probed_not_scanned() {
    let e = Etcd::single();
    for (name, pool) in [("sno80", 65_536.0), ("muid128", 4_294_967_295.0)] {
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
