//! sno80 end to end, and the layouts' parameters checked at start.

use super::*;

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
}

/// A layout's parameters it cannot use stop `serve` at start (exit 2), naming the parameter.
#[test]
fn layout_parameters_are_checked_at_start() {
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
