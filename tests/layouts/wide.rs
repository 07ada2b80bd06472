//! muid128 and uuid7 end to end: 16-byte IDs.

use super::*;

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
    let py_ms = python_reads_uuid7(&text);
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
    decoding_tells_ours_from_another_generators(&mut h, &text).await;
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

pub(crate) fn to_text(v: u128) -> String {
    idcar::layout::uuid7::to_text(v)
}

/// Python's uuid module reads version 7, the RFC's variant and the millisecond of `text`, and
/// the canonical lower-case text sorts in issue order: the earliest millisecond.
fn python_reads_uuid7(text: &[String]) -> u64 {
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
        .args(text)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// Decoding: the CLI guesses uuid7 from the text; another generator's UUIDv7 (RFC 9562's
/// example) decodes to its time and is said not to be idcar's; a version-4 UUID is refused.
async fn decoding_tells_ours_from_another_generators(
    h: &mut idcar::client::HttpClient,
    text: &[String],
) {
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
}
