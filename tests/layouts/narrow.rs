//! si53 and ugd60, static and negotiated.

use super::*;

/// si53 in static mode: JSON numbers within 2^53 - 1, MID = the generator ID, unique,
/// timestamps in the test's window, binary width 8, CLI decode with the seed's field names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn si53_static_end_to_end() {
    let base = "1700000000000";
    let mut a = Idcar::start(&[
        "--layout",
        "si53",
        "--base-clock",
        base,
        "--mid-bits",
        "4",
        "--generator-id",
        "9",
    ])
    .await;
    a.wait_ready(Duration::from_secs(10)).await;
    let layout = Si53::new(1_700_000_000_000, 4).unwrap();
    let start = now_ms();
    let mut h = a.http().await;
    let r = h.get("/ids?count=2000", true).await.unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    let mut seen = HashSet::new();
    for id in v["ids"].as_array().unwrap() {
        let n = id.as_u64().expect("si53 IDs are JSON numbers");
        assert!(n <= idcar::layout::si53::MAX_SAFE);
        let (mab, mid, _) = layout.unpack(n).unwrap();
        assert_eq!(mid, 9);
        let ms = 1_700_000_000_000 + mab;
        assert!(ms >= start && ms <= now_ms(), "{ms}");
        assert!(seen.insert(n));
    }
    let got = a.binary().await.ids(500).await.unwrap();
    assert_eq!(got.width, 8);
    for id in got.iter() {
        assert!(seen.insert(u64::from_be_bytes(id.try_into().unwrap())));
    }
    let one = v["ids"][0].as_u64().unwrap().to_string();
    let (code, out, err) = run(&[
        "decode",
        "--layout",
        "si53",
        "--base-clock",
        base,
        "--mid-bits",
        "4",
        "--json",
        &one,
    ]);
    assert_eq!(code, 0, "{err}");
    let d: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(d["MID"], 9);
    for k in ["MAB", "UIN", "time", "timestamp_ms"] {
        assert!(d.get(k).is_some(), "{k}: {out}");
    }
    let r = h.get("/id?format=hex", false).await.unwrap();
    assert_eq!(r.status, 400, "{}", r.body);
    let r = h.get("/decode/9007199254740992", false).await.unwrap();
    assert_eq!(r.status, 400, "above 2^53 - 1: {}", r.body);
    a.stop_ok().await;
    assert!(layout.scheme().slots == 16);
}

/// si53 negotiated through ZooKeeper: the pool follows --mid-bits (2 slots with 1 bit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn si53_negotiated_pool_follows_mid_bits() {
    let zk = Zk::standalone();
    let args = [
        "--layout",
        "si53",
        "--mid-bits",
        "1",
        "--zk",
        &zk.connect(),
        "--zk-session-timeout",
        "2s",
        "--threads",
        "1",
    ];
    let a = Idcar::start(&args).await;
    let b = Idcar::start(&args).await;
    a.wait_ready(Duration::from_secs(15)).await;
    b.wait_ready(Duration::from_secs(15)).await;
    let c = Idcar::start(&args).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while c.metric("idcar_pool_exhausted").await != Some(1.0) {
        assert!(
            std::time::Instant::now() < deadline,
            "third instance not exhausted"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(c.metric("idcar_pool_size").await, Some(2.0));
    let layout = Si53::new(idcar::layout::si53::DEFAULT_BASE_CLOCK_MS, 1).unwrap();
    let mut mids = HashSet::new();
    for i in [&a, &b] {
        let ids = i.take(100).await.unwrap();
        let mid = layout.unpack(ids[0]).unwrap().1;
        assert!(ids.iter().all(|id| layout.unpack(*id).unwrap().1 == mid));
        mids.insert(mid);
    }
    assert_eq!(mids, HashSet::from([0, 1]));
    let (code, out, err) = run(&[
        "pool",
        "--zk",
        &zk.connect(),
        "--layout",
        "si53",
        "--mid-bits",
        "1",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v[0]["layout"], "si53");
    assert_eq!(v[0]["pool_size"], 2);
    assert_eq!(v[0]["held"].as_array().unwrap().len(), 2);
    assert_eq!(v[0]["waiting"].as_array().unwrap().len(), 1);
}

/// ugd60 in static mode: a batch larger than one second's 1,024 sequence numbers waits for
/// the next second; all unique, worker = the generator ID, the 10-character form decodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ugd60_static_end_to_end() {
    use idcar::layout::ugd60::{from_display, Fields, EPOCH_S};
    let mut a = Idcar::start(&["--layout", "ugd60", "--generator-id", "300"]).await;
    a.wait_ready(Duration::from_secs(10)).await;
    let start_s = now_ms() / 1000;
    let ids = a.take(2_000).await.unwrap();
    let end_s = now_ms() / 1000;
    assert_eq!(ids.len(), 2_000);
    let mut seen = HashSet::new();
    let mut seconds = HashSet::new();
    for id in &ids {
        let f = Fields::unpack(*id);
        assert_eq!(f.worker, 300);
        let s = EPOCH_S + u64::from(f.timestamp_s);
        assert!(
            s >= start_s && s <= end_s,
            "{s} outside [{start_s}, {end_s}]"
        );
        seconds.insert(f.timestamp_s);
        assert!(
            seen.insert((f.timestamp_s, f.seq)),
            "sequence repeated within a second"
        );
    }
    assert!(seconds.len() >= 2, "2,000 IDs need at least two seconds");
    let mut h = a.http().await;
    let r = h.get("/ids?count=5", false).await.unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    for line in r.body.lines() {
        assert_eq!(line.len(), 10);
        assert_eq!(Fields::unpack(from_display(line).unwrap()).worker, 300);
    }
    let one = r.body.lines().next().unwrap();
    let (code, out, err) = run(&["decode", "--layout", "ugd60", "--json", one]);
    assert_eq!(code, 0, "{err}");
    let d: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(d["worker"], 300);
    for k in ["timestamp_s", "seq", "random", "time", "storage_hex"] {
        assert!(d.get(k).is_some(), "{k}: {out}");
    }
    let r = h.get("/ids?count=3000", false).await.unwrap();
    assert_eq!(
        r.status, 400,
        "above the layout's default batch: {}",
        r.body
    );
    a.stop_ok().await;
}

/// ugd60 negotiated through ZooKeeper: the worker ID in every ID is the slot held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ugd60_negotiated_worker_is_the_slot() {
    let zk = Zk::standalone();
    let args = [
        "--layout",
        "ugd60",
        "--zk",
        &zk.connect(),
        "--zk-session-timeout",
        "2s",
        "--threads",
        "1",
    ];
    let a = Idcar::start(&args).await;
    a.wait_ready(Duration::from_secs(15)).await;
    assert_eq!(a.metric("idcar_pool_size").await, Some(512.0));
    let slot = a.metric("idcar_lease_slot").await.unwrap();
    let ids = a.take(100).await.unwrap();
    assert!(ids
        .iter()
        .all(|id| f64::from(idcar::layout::ugd60::Fields::unpack(*id).worker) == slot));
    let (code, out, err) = run(&["pool", "--zk", &zk.connect(), "--layout", "ugd60", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (v[0]["layout"].as_str(), v[0]["pool_size"].as_u64()),
        (Some("ugd60"), Some(512))
    );
}
