//! Tests of the uuid7 layout: known answers (checked by the `uuid` crate as well), order,
//! properties of the bit layout, bad input.

use super::*;
use serde_json::Value;
use proptest::prelude::*;

fn layout(cluster: u8) -> Uuid7 {
    Uuid7::new(cluster, || 0x0123_4567_89ab_cdef).expect("cluster in range")
}

fn vectors() -> impl Iterator<Item = Value> {
    super::super::vector_lines(include_str!("../../../../../tests/vectors/uuid7.jsonl"))
}

fn run(tick: u64, seq: u32, len: u32, slot: u32) -> Run {
    Run {
        tick,
        seq,
        len,
        slot,
        timeline: 0,
    }
}

fn ids(l: &Uuid7, r: Run) -> Vec<u128> {
    let mut out = Vec::new();
    l.pack_run(&r, &RequestOptions::default(), r.len, &mut out);
    out.chunks(WIDTH)
        .map(|c| u128::from_be_bytes(c.try_into().expect("16 bytes")))
        .collect()
}

#[test]
fn known_answers_both_directions() {
    let l = layout(0);
    let (mut idcar, mut other, mut refused) = (0, 0, 0);
    for v in vectors() {
        let line = v.to_string();
        if let Some(kind) = v.get("error").and_then(Value::as_str) {
            let err = l.parse(v["text"].as_str().unwrap(), None).unwrap_err();
            assert_eq!(err.kind(), kind, "{line}: {err}");
            refused += 1;
            continue;
        }
        let text = v["uuid"].as_str().unwrap();
        let raw = l.parse(text, None).unwrap_or_else(|e| panic!("{line}: {e}"));
        let value = u128::from_be_bytes(raw.clone().try_into().unwrap());
        // The uuid crate, an independent RFC 9562 parser, reads the same version, variant
        // and time.
        let u = uuid::Uuid::parse_str(text).unwrap();
        assert_eq!(u.get_version(), Some(uuid::Version::SortRand), "{line}");
        assert_eq!(u.get_variant(), uuid::Variant::RFC4122, "{line}");
        let (secs, nanos) = u.get_timestamp().expect("a v7 has a time").to_unix();
        let ms = v["unix_ts_ms"].as_u64().unwrap();
        assert_eq!(secs * 1000 + u64::from(nanos) / 1_000_000, ms, "{line}");
        assert_eq!(u.as_u128(), value, "{line}");
        // Every text form, both ways.
        for (form, key) in [(TextForm::Uuid, "uuid"), (TextForm::Hex, "hex")] {
            let mut out = String::new();
            l.format(&raw, form, &mut out).unwrap();
            assert_eq!(out, v[key].as_str().unwrap(), "{line}");
            assert_eq!(l.parse(&out.to_uppercase(), Some(form)).unwrap(), raw);
        }
        let decoded = l.decode(&raw).map(|d| d.to_map());
        if v["issuer"] == "other" {
            let m = decoded.unwrap();
            assert_eq!(m["issuer"], "other", "{line}");
            assert_eq!(m["time"], v["time"], "{line}");
            assert_eq!(m["unix_ts_ms"], v["unix_ts_ms"], "{line}");
            assert!(m.get("slot").is_none(), "{line}: another generator's bits are not a slot");
            assert_eq!(Fields::unpack(value), None, "{line}");
            other += 1;
            continue;
        }
        let mut ulid = String::new();
        l.format(&raw, TextForm::Ulid, &mut ulid).unwrap();
        assert_eq!(ulid, v["ulid"].as_str().unwrap(), "{line}");
        assert_eq!(l.parse(&ulid.to_lowercase(), None).unwrap(), raw);
        let f = Fields {
            unix_ts_ms: ms,
            counter: v["counter"].as_u64().unwrap() as u32,
            cluster: v["cluster"].as_u64().unwrap() as u8,
            slot: v["slot"].as_u64().unwrap() as u16,
            random: v["random"].as_u64().unwrap() as u32,
        };
        assert_eq!(f.pack(), Some(value), "{line}");
        assert_eq!(Fields::unpack(value), Some(f), "{line}");
        assert_eq!(u64::from(value as u8), v["check"].as_u64().unwrap());
        match v["time"].as_str() {
            Some(time) => {
                let m = decoded.unwrap();
                assert_eq!(m["issuer"], "idcar", "{line}");
                assert_eq!(m["time"], time, "{line}");
                for key in ["unix_ts_ms", "counter", "cluster", "slot", "random", "uuid"] {
                    let want = if key == "uuid" { &v["uuid"] } else { &v[key] };
                    let got = if key == "uuid" { &m["id"] } else { &m[key] };
                    assert_eq!(got, want, "{line}: {key}");
                }
            }
            None => assert_eq!(decoded.unwrap_err().kind(), "out_of_range", "{line}"),
        }
        idcar += 1;
    }
    assert!(idcar >= 8 && other >= 1 && refused >= 5, "{idcar} {other} {refused}");
}

#[test]
fn a_run_packs_what_the_fields_say() {
    let l = layout(5);
    let seed = l.seed(1_795_321_511_038, 4242);
    assert!(seed < IDS_PER_MS);
    let got = ids(&l, run(1_795_321_511_038, 10, 3, 4242));
    for (i, v) in got.iter().enumerate() {
        let f = Fields::unpack(*v).expect("idcar's own");
        assert_eq!(f.unix_ts_ms, 1_795_321_511_038);
        assert_eq!(f.counter, seed + 10 + i as u32);
        assert_eq!((f.cluster, f.slot), (5, 4242));
        // Two IDs share one draw of random bits: its low 24, then the next 24.
        let want = 0x0123_4567_89ab_cdef_u64 >> (24 * (i % 2)) & 0xff_ffff;
        assert_eq!(u64::from(f.random), want);
        assert!(is_v7(*v));
    }
    // The seed is one per millisecond and slot: a second batch of the same millisecond
    // carries on from the first.
    let next = ids(&l, run(1_795_321_511_038, 13, 1, 4242));
    assert_eq!(Fields::unpack(next[0]).unwrap().counter, seed + 13);
}

#[test]
fn seeds_differ_by_millisecond_slot_and_key() {
    let l = layout(0);
    let seeds: std::collections::BTreeSet<u32> = (0..1000).map(|ms| l.seed(ms, 1)).collect();
    assert!(seeds.len() > 990, "seeds repeat too often: {}", seeds.len());
    assert_ne!(l.seed(7, 1), l.seed(7, 2));
    let other = Uuid7::new(0, || 42).unwrap();
    assert_ne!(l.seed(7, 1), other.seed(7, 1));
    assert!((0..10_000).all(|ms| l.seed(ms, 65_535) < IDS_PER_MS));
}

#[test]
fn other_versions_and_variants_are_refused_by_name() {
    let l = layout(0);
    let e = l.parse("919108f7-52d1-4320-9bac-f847db4148a8", None).unwrap_err();
    assert!(e.to_string().contains("version 4, not 7"), "{e}");
    let e = l.parse("017f22e2-79b0-7cc3-18c4-dc0c0c07398f", None).unwrap_err();
    assert!(e.to_string().contains("variant bits 00"), "{e}");
    assert_eq!(l.decode(&[0u8; 16]).unwrap_err().kind(), "unrecognised");
    assert_eq!(l.decode(&[0u8; 15]).unwrap_err().kind(), "wrong_length");
    for (text, form) in [
        ("017f22e279b07cc398c4dc0c0c07398f", TextForm::Uuid),
        ("017f22e2-79b0-7cc3-98c4-dc0c0c07398f", TextForm::Hex),
        ("017f22e2-79b0-7cc3-98c4-dc0c0c07398f", TextForm::Ulid),
    ] {
        assert!(l.parse(text, Some(form)).is_err(), "{text} as {form:?}");
    }
    assert_eq!(
        l.parse("017f22e2", Some(TextForm::Dec)).unwrap_err().kind(),
        "unsupported_form"
    );
    assert_eq!(l.parse("", None).unwrap_err().kind(), "unrecognised");
    assert_eq!(
        l.parse("é17f22e2-79b0-7cc3-98c4-dc0c0c07398", None)
            .unwrap_err()
            .kind(),
        "bad_char"
    );
    assert!(Uuid7::new(16, || 0).is_err());
}

#[test]
fn the_guess_picks_uuid7_for_version_7_text() {
    let p = super::super::LayoutParams::default();
    for text in [
        "01a20180-3c7e-74b5-a873-0009a1b2c3ac",
        "017F22E2-79B0-7CC3-98C4-DC0C0C07398F",
        "01M80R0F3YEJTTGWR016GV5GXC",
    ] {
        let (l, _) = super::super::guess(text, None, p).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(l.name(), "uuid7", "{text}");
    }
    // 32 hex digits of a version-7 UUID are also a muid: the guess says so.
    let e = super::super::guess("01a201803c7e74b5a8730009a1b2c3ac", None, p).unwrap_err();
    assert!(e.to_string().contains("muid128 or uuid7"), "{e}");
    // A version-4 UUID is no layout's.
    assert!(super::super::guess("919108f7-52d1-4320-9bac-f847db4148a8", None, p).is_err());
}

fn field_strategy() -> impl Strategy<Value = Fields> {
    (0..=MAX_UNIX_TS_MS, 0u32..1 << 22, 0u8..16, any::<u16>(), 0u32..1 << 24).prop_map(
        |(unix_ts_ms, counter, cluster, slot, random)| Fields {
            unix_ts_ms,
            counter,
            cluster,
            slot,
            random,
        },
    )
}

proptest! {
    #[test]
    fn fields_round_trip_through_every_form(f in field_strategy()) {
        let v = f.pack().unwrap();
        prop_assert!(is_v7(v));
        prop_assert_eq!(Fields::unpack(v), Some(f));
        let l = layout(0);
        let raw = v.to_be_bytes();
        for form in [TextForm::Uuid, TextForm::Hex, TextForm::Ulid] {
            let mut text = String::new();
            l.format(&raw, form, &mut text).unwrap();
            prop_assert_eq!(l.parse(&text, None).unwrap(), raw.to_vec());
        }
        // The uuid crate reads the same 128 bits and the same millisecond.
        let u = uuid::Uuid::parse_str(&to_text(v)).unwrap();
        prop_assert_eq!(u.get_version_num(), 7);
        prop_assert_eq!(u.as_u128(), v);
    }

    #[test]
    fn a_flipped_bit_outside_version_and_variant_fails_the_check_or_moves_a_field(
        f in field_strategy(), bit in 0u32..128,
    ) {
        let v = f.pack().unwrap();
        let flipped = v ^ 1 << bit;
        if is_v7(flipped) {
            // Either no longer idcar's, or idcar's with other fields: never the same ID.
            prop_assert_ne!(Fields::unpack(flipped), Some(f));
        }
    }

    /// Later (millisecond, sequence) pairs of one slot give greater IDs: as numbers, as bytes
    /// and as canonical text; and a batch is in order.
    #[test]
    fn ids_of_one_slot_increase_with_millisecond_and_sequence(
        ms in 0..LAST_ISSUED_MS - 1, step in 0u64..2, seq_a in 0u32..IDS_PER_MS - 8,
        seq_b in 0u32..IDS_PER_MS - 8, len in 1u32..8, slot in 0u32..SLOTS,
        cluster in 0u8..16, key in any::<u64>(),
    ) {
        let l = Uuid7 { cluster, key: [key, !key], entropy: crate::clock::os_random };
        let (ms_b, seq_b) = if step == 0 {
            (ms, seq_a.max(seq_b.saturating_sub(len)) + len)
        } else {
            (ms + 1, seq_b)
        };
        prop_assume!(seq_b + len <= IDS_PER_MS);
        let a = ids(&l, run(ms, seq_a, len, slot));
        let b = ids(&l, run(ms_b, seq_b, len, slot));
        let all: Vec<u128> = a.into_iter().chain(b).collect();
        for w in all.windows(2) {
            prop_assert!(w[0] < w[1], "{:x} !< {:x}", w[0], w[1]);
            prop_assert!(to_text(w[0]) < to_text(w[1]));
            prop_assert!(to_ulid(w[0]) < to_ulid(w[1]));
            prop_assert!(Fields::unpack(w[1]).is_some());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The generator with uuid7's scheme, driven by a clock that steps back and forth, batches
    /// of every size and restarts (a new generator whose floor is the mark the old one
    /// reached, as a successor's is): every ID above the one before.
    #[test]
    fn the_generator_issues_increasing_uuid7s_across_clock_steps_and_restarts(
        steps in proptest::collection::vec((-3_000i64..3_000, 1u32..3_000, 0u8..20), 1..30),
        key in any::<u64>(),
    ) {
        use crate::generator::{Generator, Take, Window};
        let l = Uuid7 { cluster: 1, key: [key, !key], entropy: crate::clock::os_random };
        let mut now: u64 = 1_795_000_000_000;
        let window = |floor: u64| Window { slot: 7, floor, mark: floor + 10_000, generation: floor };
        let mut g = Generator::new(l.scheme());
        g.set_window(Some(window(now - 1)));
        let mut last = 0u128;
        for (step, want, restart) in steps {
            if restart == 0 {
                // The successor's floor: the mark the predecessor last wrote.
                let mark = now.max(g.highest_issued().unwrap_or(0)) + 10;
                g = Generator::new(l.scheme());
                g.set_window(Some(window(mark)));
            }
            now = now.saturating_add_signed(step);
            if let Ok(Take::Run(r)) = g.take(now, want) {
                for v in ids(&l, r) {
                    prop_assert!(v > last, "{v:x} after {last:x}");
                    prop_assert_eq!(Fields::unpack(v).map(|f| f.slot), Some(7));
                    last = v;
                }
            }
        }
    }
}
