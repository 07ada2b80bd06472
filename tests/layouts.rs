//! Layouts other than lable64, end to end: served over both interfaces, decoded by the CLI,
//! negotiated through ZooKeeper.

mod common;

use common::zk::Zk;
use common::*;
use idcar::layout::{si53::Si53, Layout};
use std::collections::HashSet;
use std::time::Duration;

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

/// Fields of one binary ID through the layout's own decoder (the names the seed uses).
fn fields(layout: &dyn Layout, id: &[u8]) -> serde_json::Map<String, serde_json::Value> {
    layout.decode(id).unwrap()
}

fn u(m: &serde_json::Map<String, serde_json::Value>, k: &str) -> u64 {
    m[k].as_u64().unwrap_or_else(|| panic!("{k} in {m:?}"))
}

/// sno80 in static mode: partition = the generator ID, the metabyte per request, sequence
/// sharding bounds kept (a batch above one unit's share waits for the next 4 ms unit and the
/// overflow is counted), width 10, b32 text, options the layout lacks refused, decode guesses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sno80_static_end_to_end() {
    let args = [
        "--layout",
        "sno80",
        "--generator-id",
        "4660",
        "--sequence-min",
        "100",
        "--sequence-max",
        "199",
    ];
    let mut a = Idcar::start(&args).await;
    a.wait_ready(Duration::from_secs(10)).await;
    let layout = idcar::layout::by_name("sno80", Default::default()).unwrap();
    let start = now_ms();
    let mut b = a.binary().await;
    let opts = idcar_client::RequestOptions {
        meta: Some(7),
        transaction: false,
    };
    b.send_with(1_000, &opts).await.unwrap();
    let got = b.recv().await.unwrap();
    assert_eq!((got.width, got.len()), (10, 1_000));
    let mut seen = HashSet::new();
    let mut units = HashSet::new();
    for id in got.iter() {
        let f = fields(&*layout, id);
        assert_eq!((u(&f, "partition"), u(&f, "meta")), (4660, 7), "{f:?}");
        let seq = u(&f, "sequence");
        assert!(
            (100..=199).contains(&seq),
            "sequence {seq} outside the shard"
        );
        let ms = 1_262_304_000_000 + u(&f, "units") * 4;
        assert!(ms + 4 >= start && ms <= now_ms(), "{ms}");
        units.insert(u(&f, "units"));
        assert!(seen.insert(id.to_vec()));
    }
    assert!(units.len() >= 10, "100 per unit: 1,000 IDs span 10 units");
    assert!(a.metric("idcar_sequence_overflow_ticks_total").await >= Some(9.0));
    let mut h = a.http().await;
    let r = h.get("/ids?count=50&meta=255", false).await.unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let one = r.body.lines().next().unwrap().to_string();
    for line in r.body.lines() {
        assert_eq!(line.len(), 16);
        assert!(line
            .bytes()
            .all(|c| b"23456789abcdefghijklmnopqrstuvwx".contains(&c)));
        let raw = layout.parse(line, None).unwrap();
        assert_eq!(u(&fields(&*layout, &raw), "meta"), 255);
        assert!(seen.insert(raw));
    }
    let r = h.get("/ids?count=5&format=hex", false).await.unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.lines().all(|l| l.len() == 20), "{}", r.body);
    for bad in ["meta=256", "meta=x", "transaction=true", "format=dec"] {
        let r = h.get(&format!("/ids?count=2&{bad}"), false).await.unwrap();
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
    }
    // No --layout: the text's shape says sno80.
    let (code, out, err) = run(&["decode", "--json", &one]);
    assert_eq!(code, 0, "{err}");
    let d: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (d["layout"].as_str(), d["partition"].as_u64()),
        (Some("sno80"), Some(4660))
    );
    a.stop_ok().await;
    for (bad, says) in [
        (
            &[
                "--layout",
                "sno80",
                "--sequence-min",
                "10",
                "--sequence-max",
                "12",
            ][..],
            "sequence",
        ),
        (
            &[
                "--layout",
                "sno80",
                "--sequence-min",
                "12",
                "--sequence-max",
                "10",
            ][..],
            "sequence",
        ),
        (
            &["--layout", "muid128", "--medallion-base", "0"][..],
            "medallion",
        ),
        (
            &["--layout", "muid128", "--medallion-base", "0xfffffffffff"][..],
            "medallion",
        ),
        (
            &["--layout", "muid128", "--medallion-base", "0xZZ"][..],
            "medallion",
        ),
        (
            &["--layout", "sno80", "--generator-id", "65536"][..],
            "generator-id",
        ),
        (
            &["--layout", "muid128", "--medallion-base", "0x10000000001"][..],
            "multiple of 0x100000000",
        ),
        (
            &["--layout", "muid128", "--medallion-base", "0xfff00000000"][..],
            "medallion",
        ),
        (
            &["--layout", "sno80", "--cluster-id", "2"][..],
            "no cluster field",
        ),
        (
            &["--layout", "ugd60", "--cluster-id", "1"][..],
            "no cluster field",
        ),
    ] {
        let (code, _, err) = run(&[&["serve"][..], bad].concat());
        assert_eq!(code, 2, "{bad:?}: {err}");
        assert!(err.contains(says), "{bad:?}: {err}");
    }
}

/// muid128 in static mode: plain muids have offset 0 and strictly increasing timestamps,
/// a transaction shares one timestamp and medallion with offsets 1..N, the medallion is the
/// seed's range start plus the generator ID, width 16, the 13-11-8 text decodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn muid128_static_end_to_end() {
    let mut a = Idcar::start(&[
        "--layout",
        "muid128",
        "--generator-id",
        "77",
        "--medallion-base",
        "0x10100000000",
    ])
    .await;
    a.wait_ready(Duration::from_secs(10)).await;
    let layout = idcar::layout::by_name("muid128", Default::default()).unwrap();
    let medallion = 0x101_0000_0000u64 + 77;
    let start_us = now_ms() * 1_000;
    let got = a.binary().await.ids(5_000).await.unwrap();
    assert_eq!((got.width, got.len()), (16, 5_000));
    let mut last = 0;
    for id in got.iter() {
        let f = fields(&*layout, id);
        assert_eq!(
            (u(&f, "medallion"), f["offset"].as_i64()),
            (medallion, Some(0))
        );
        let ts = u(&f, "timestamp");
        assert!(ts > last, "timestamps strictly increase: {ts} after {last}");
        last = ts;
    }
    let first = u(&fields(&*layout, got.iter().next().unwrap()), "timestamp");
    assert!(first >= start_us, "{first} < {start_us}");
    // Within the lead of 1 ms ahead of the wall clock.
    assert!(last <= (now_ms() + 2) * 1_000, "{last}");
    let mut b = a.binary().await;
    let tx = idcar_client::RequestOptions {
        meta: None,
        transaction: true,
    };
    b.send_with(300, &tx).await.unwrap();
    let t = b.recv().await.unwrap();
    assert_eq!(t.len(), 300);
    let ts: HashSet<u64> = t
        .iter()
        .map(|id| u(&fields(&*layout, id), "timestamp"))
        .collect();
    assert_eq!(ts.len(), 1, "one timestamp per transaction");
    assert!(*ts.iter().next().unwrap() > last);
    let offsets: Vec<i64> = t
        .iter()
        .map(|id| fields(&*layout, id)["offset"].as_i64().unwrap())
        .collect();
    assert_eq!(offsets, (1..=300).collect::<Vec<i64>>());
    let mut h = a.http().await;
    let r = h.get("/ids?count=3&transaction=true", false).await.unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let lines: Vec<&str> = r.body.lines().collect();
    assert_eq!(lines.len(), 3);
    for (i, l) in lines.iter().enumerate() {
        let parts: Vec<&str> = l.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [13, 11, 8],
            "{l}"
        );
        assert_eq!(parts[1], format!("{medallion:011X}"));
        assert_eq!(parts[2], format!("{:08X}", i + 1));
    }
    for bad in ["meta=1", "transaction=maybe", "format=b32"] {
        let r = h.get(&format!("/ids?count=2&{bad}"), false).await.unwrap();
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
    }
    let r = h.get("/id", false).await.unwrap();
    let (code, out, err) = run(&["decode", "--json", r.body.trim()]);
    assert_eq!(code, 0, "{err}");
    let d: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (d["layout"].as_str(), d["medallion"].as_u64()),
        (Some("muid128"), Some(medallion))
    );
    a.stop_ok().await;
}

/// uuid7 in static mode: RFC 9562 version-7 UUIDs (checked by Python's `uuid` module, an
/// independent parser) carrying the cluster and the slot, in increasing order within a batch,
/// across batches and across a restart on a clock that stepped back; the canonical text by
/// default, hex and ULID text on request, options the layout lacks refused; decoded by the CLI
/// and the admin listener, another generator's UUIDv7 said not to be idcar's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uuid7_static_end_to_end() {
    let args = [
        "--layout",
        "uuid7",
        "--cluster-id",
        "11",
        "--generator-id",
        "4242",
    ];
    let mut a = Idcar::start(&args).await;
    a.wait_ready(Duration::from_secs(10)).await;
    let layout = idcar::layout::by_name("uuid7", Default::default()).unwrap();
    let start_ms = now_ms();
    let mut issued: Vec<u128> = Vec::new();
    let mut c = a.binary().await;
    for n in [1, 5_000, 1, 300] {
        let got = c.ids(n).await.unwrap();
        assert_eq!((got.width, got.len()), (16, n as usize));
        issued.extend(
            got.iter()
                .map(|id| u128::from_be_bytes(id.try_into().unwrap())),
        );
    }
    for (i, v) in issued.iter().enumerate() {
        let f = fields(&*layout, &v.to_be_bytes());
        assert_eq!((u(&f, "cluster"), u(&f, "slot")), (11, 4242), "{f:?}");
        assert_eq!(f["issuer"], "idcar");
        let ms = u(&f, "unix_ts_ms");
        assert!(
            ms >= start_ms && ms <= now_ms() + 1,
            "{ms} outside [{start_ms}, now]"
        );
        if i > 0 {
            assert!(issued[i - 1] < *v, "{:x} then {v:x}", issued[i - 1]);
        }
    }
    let mut h = a.http().await;
    let r = h.get("/ids?count=50", false).await.unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let text: Vec<String> = r.body.lines().map(str::to_string).collect();
    assert_eq!(text.len(), 50);
    // Python's uuid module reads version 7, the RFC's variant and the millisecond; the
    // canonical lower-case text sorts in issue order.
    let script = "import sys, uuid\n\
        ts = sys.argv[1:]\n\
        us = [uuid.UUID(t) for t in ts]\n\
        assert all(u.version == 7 and u.variant == uuid.RFC_4122 for u in us), us\n\
        assert [str(u) for u in us] == ts, 'canonical lower case'\n\
        assert sorted(ts) == ts and len(set(ts)) == len(ts), 'in order'\n\
        print(min(u.int >> 80 for u in us))";
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(&text)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let py_ms: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert!(py_ms >= start_ms && py_ms <= now_ms() + 1);
    assert!(text[0].as_str() > to_text(*issued.last().unwrap()).as_str());
    for (form, len) in [("hex", 32), ("ulid", 26), ("uuid", 36)] {
        let r = h
            .get(&format!("/ids?count=2&format={form}"), false)
            .await
            .unwrap();
        assert_eq!(r.status, 200, "{form}: {}", r.body);
        for l in r.body.lines() {
            assert_eq!(l.len(), len, "{form}: {l}");
            let (code, out, err) =
                run(&["decode", "--json", "--format", form, "--layout", "uuid7", l]);
            assert_eq!(code, 0, "{form} {l}: {err}");
            assert!(out.contains("\"slot\":4242"), "{out}");
        }
    }
    for bad in ["meta=1", "transaction=true", "format=b32", "format=dec"] {
        let r = h.get(&format!("/ids?count=2&{bad}"), false).await.unwrap();
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
    }
    // Decoding: the CLI guesses uuid7 from the text; another generator's UUIDv7 (RFC 9562's
    // example) decodes to its time and is said not to be idcar's; a version-4 UUID is refused.
    let (code, out, err) = run(&["decode", "--json", &text[0]]);
    assert_eq!(code, 0, "{err}");
    let d: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (d["layout"].as_str(), d["slot"].as_u64()),
        (Some("uuid7"), Some(4242))
    );
    let foreign = "017f22e2-79b0-7cc3-98c4-dc0c0c07398f";
    let (code, out, err) = run(&["decode", foreign]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("issuer: other") && out.contains("not idcar's"),
        "{out}"
    );
    assert!(out.contains("time: 2022-02-22T19:22:22.000Z"), "{out}");
    assert!(!out.contains("slot:"), "{out}");
    let r = h.get(&format!("/decode/{foreign}"), false).await.unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("\"issuer\":\"other\""), "{}", r.body);
    let r = h.get(&format!("/decode/{}", text[1]), false).await.unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("\"slot\":4242"), "{}", r.body);
    let (code, _, err) = run(&[
        "decode",
        "--layout",
        "uuid7",
        "919108f7-52d1-4320-9bac-f847db4148a8",
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("version 4, not 7"), "{err}");
    // A restart on the same state file, its clock a second behind: every ID still above the last.
    // The last ID before the restart: above every earlier one.
    let r = h.get("/id", false).await.unwrap();
    let last = r.body.trim().to_string();
    assert!(last.as_str() > text.last().unwrap().as_str(), "{last}");
    a.stop_ok().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(&a.state, dir.path().join("state.json")).unwrap();
    let mut b = Idcar::start_in(dir, &[&args[..], &["--clock-skew", "-1s"]].concat()).await;
    b.wait_ready(Duration::from_secs(10)).await;
    let after = b.binary().await.ids(100).await.unwrap();
    for id in after.iter() {
        let t = to_text(u128::from_be_bytes(id.try_into().unwrap()));
        assert!(t > last, "{t} after a restart is not above {last}");
    }
    b.stop_ok().await;
}

fn to_text(v: u128) -> String {
    idcar::layout::uuid7::to_text(v)
}

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
