//! Pools too large to scan, claimed by random probes through ZooKeeper.

use super::*;

/// sno80, muid128 and uuid7 through ZooKeeper: pools of 65,536 partitions, 2^32 − 1 medallions
/// and 65,536 slots are
/// claimed by random probes — a preferred slot that is taken sends the second instance
/// elsewhere, and only the slots actually used get a mark node (nothing scans the pool).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_pools_are_probed_not_scanned() {
    let zk = Zk::standalone();
    for (name, pool, field, base) in [
        ("sno80", 65_536.0, "partition", 0u64),
        ("muid128", 4_294_967_295.0, "medallion", 0x100_0000_0000),
        ("uuid7", 65_536.0, "slot", 0),
    ] {
        let args = [
            "--layout",
            name,
            "--generator-id",
            "5",
            "--zk",
            &zk.connect(),
            "--zk-session-timeout",
            "2s",
            // The crashed holder's mark no further ahead than the window (3 s by default).
            "--idle-horizon",
            "3s",
            "--threads",
            "1",
        ];
        let a = Idcar::start(&args).await;
        a.wait_ready(Duration::from_secs(15)).await;
        let b = Idcar::start(&args).await;
        b.wait_ready(Duration::from_secs(15)).await;
        let layout = idcar::layout::by_name(name, Default::default()).unwrap();
        let mut slots = HashSet::new();
        for i in [&a, &b] {
            assert_eq!(i.metric("idcar_pool_size").await, Some(pool));
            let slot = i.metric("idcar_lease_slot").await.unwrap() as u64;
            let ids = i.binary().await.ids(20).await.unwrap();
            for id in ids.iter() {
                assert_eq!(u(&fields(&*layout, id), field), base + slot, "{name}");
            }
            slots.insert(slot);
        }
        assert!(
            slots.contains(&5),
            "{name}: the first instance got its preferred slot"
        );
        assert_eq!(
            slots.len(),
            2,
            "{name}: the second instance probed another slot"
        );
        let (code, out, err) = run(&["pool", "--zk", &zk.connect(), "--layout", name, "--json"]);
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v[0]["held"].as_array().unwrap().len(), 2, "{out}");
        let c = zk.client().await;
        let marks = c
            .list_children(&format!("/idcar/{name}/0/marks"))
            .await
            .unwrap();
        assert_eq!(
            marks.len(),
            2,
            "{name}: only used slots have marks: {marks:?}"
        );
    }
}

/// A crashed holder in a probed pool, for sno80 (4 ms units) and muid128 (microseconds, issued
/// up to a lead of 1,000 ahead of the clock): once ZooKeeper expires its session, an instance
/// that prefers the same slot takes it, waits past the mark the crashed one last wrote, and
/// issues only above everything the crashed one issued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probed_slot_taken_over_after_a_crash_waits_past_the_mark() {
    let zk = Zk::standalone();
    for (name, time_field) in [("sno80", "units"), ("muid128", "timestamp")] {
        let args = [
            "--layout",
            name,
            "--generator-id",
            "5",
            "--zk",
            &zk.connect(),
            "--zk-session-timeout",
            "2s",
            // The crashed holder's mark no further ahead than the window (3 s by default).
            "--idle-horizon",
            "3s",
            "--threads",
            "1",
        ];
        let layout = idcar::layout::by_name(name, Default::default()).unwrap();
        let times = |ids: &idcar_client::Ids| -> Vec<u64> {
            ids.iter()
                .map(|id| u(&fields(&*layout, id), time_field))
                .collect()
        };
        // The crashed holder's clock runs 3 s ahead: its IDs carry times the successor's
        // clock reaches only later, so only the wait past the mark keeps the successor above.
        let a = Idcar::start(&[&args[..], &["--clock-skew", "3s"]].concat()).await;
        a.wait_ready(Duration::from_secs(15)).await;
        let from_a = a.binary().await.ids(5_000).await.unwrap();
        a.signal(nix::sys::signal::Signal::SIGKILL);
        let c = zk.client().await;
        let slot_node = format!("/idcar/{name}/0/slots/5");
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while c.check_stat(&slot_node).await.unwrap().is_some() {
            assert!(
                std::time::Instant::now() < deadline,
                "{name}: session never expired"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut b = Idcar::start(&args).await;
        b.wait_ready(Duration::from_secs(15)).await;
        assert_eq!(b.metric("idcar_lease_slot").await, Some(5.0), "{name}");
        assert!(b.metric("idcar_lease_mark_wait_seconds_sum").await > Some(0.0));
        let from_b = b.binary().await.ids(5_000).await.unwrap();
        let last_a = times(&from_a).into_iter().max().unwrap();
        assert!(
            times(&from_b).iter().all(|t| *t > last_a),
            "{name}: B issued at or below A's {time_field}"
        );
        let mut seen = HashSet::new();
        assert!(from_a
            .iter()
            .chain(from_b.iter())
            .all(|id| seen.insert(id.to_vec())));
        b.stop_ok().await;
    }
}

/// A probed slot whose mark is beyond --max-clock-wait (its last holder's clock ran far ahead)
/// is given back untouched and another slot is probed, where a small pool would have picked
/// the lowest mark anyway; the far mark is left as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probed_slot_with_a_far_mark_is_left_for_another() {
    let zk = Zk::standalone();
    let c = zk.client().await;
    let opts =
        zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    let args = |slot: &'static str| {
        [
            "--layout",
            "sno80",
            "--generator-id",
            slot,
            "--zk",
            &zk.connect(),
            "--zk-session-timeout",
            "2s",
            "--max-clock-wait",
            "10s",
        ]
        .map(str::to_string)
    };
    // The pool is recorded (its identity starts above the marks then in it), then slot 5's
    // last holder turns out to have run 60 s ahead (in 4 ms units since 2010-01-01Z).
    let mut first = Idcar::start(&args("7").each_ref().map(String::as_str)).await;
    first.wait_ready(Duration::from_secs(15)).await;
    first.stop_ok().await;
    let far = (now_ms() + 60_000 - 1_262_304_000_000) / 4;
    c.create("/idcar/sno80/0/marks/5", far.to_string().as_bytes(), &opts)
        .await
        .unwrap();
    let a = Idcar::start(&args("5").each_ref().map(String::as_str)).await;
    a.wait_ready(Duration::from_secs(15)).await;
    let slot = a.metric("idcar_lease_slot").await.unwrap();
    assert!(slot >= 0.0 && slot != 5.0, "took slot {slot}");
    assert!(a.logs().contains("trying another slot"), "{}", a.logs());
    let (data, _) = c.get_data("/idcar/sno80/0/marks/5").await.unwrap();
    assert_eq!(String::from_utf8(data).unwrap(), far.to_string());
    assert!(c
        .check_stat("/idcar/sno80/0/slots/5")
        .await
        .unwrap()
        .is_none());
}
