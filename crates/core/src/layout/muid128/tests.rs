//! Tests of the muid128 layout: known-answer vectors, properties, bad input.

use super::*;
use serde_json::Value;
use proptest::prelude::*;

/// The reference's `-1` is the all-ones field.
fn unsigned(v: &Value, max: u64) -> u64 {
    match v.as_i64() {
        Some(-1) => max,
        _ => v.as_u64().expect("a field value"),
    }
}

/// Text as a naive writer would print the reference's inputs: signed hex per group.
fn naive_text(ts: i64, med: i64, off: i64) -> String {
    let group = |v: i64, w: usize| {
        let sign = if v < 0 { "-" } else { "" };
        format!("{sign}{:0w$X}", v.unsigned_abs())
    };
    format!("{}-{}-{}", group(ts, 13), group(med, 11), group(off, 8))
}

fn run(tick: u64, slot: u32) -> Run {
    Run {
        tick,
        seq: 0,
        len: 1,
        slot,
        timeline: 0,
    }
}

const TXN: RequestOptions = RequestOptions {
    meta: None,
    transaction: true,
};

#[test]
fn known_answers_both_directions() {
    let l = Muid128::default();
    let (mut built, mut parsed, mut refused, mut stricter) = (0, 0, 0, 0);
    for v in super::super::vector_lines(include_str!("../../../../../tests/vectors/muid128.jsonl")) {
        let line = v.to_string();
        if v.get("error").is_some() {
            // The reference refuses these inputs; so does idcar, built or written.
            let (ts, med, off) = (
                v["timestamp_in"].as_i64().unwrap(),
                v["medallion_in"].as_i64().unwrap(),
                v["offset_in"].as_i64().unwrap(),
            );
            let err = Fields::new(ts, med, off).unwrap_err();
            assert!(
                matches!(err.kind(), "invalid" | "out_of_range"),
                "{line}: {err}"
            );
            let text = naive_text(ts, med, off);
            assert!(l.parse(&text, None).is_err(), "{line}: {text}");
            refused += 1;
            continue;
        }
        let want_text = v["string"].as_str().unwrap();
        let want_hex = v["packed_hex"].as_str().unwrap();
        let f = if let Some(ts) = v.get("timestamp_u52") {
            let f = Fields {
                timestamp: ts.as_u64().unwrap(),
                medallion: v["medallion_u44"].as_u64().unwrap(),
                offset: v["offset_u32"].as_u64().unwrap() as u32 as i32,
            };
            let packed = f.pack().expect("vector fields in range");
            assert_eq!(to_text(packed), want_text, "{line}");
            assert!(format!("{packed:032x}").eq_ignore_ascii_case(want_hex));
            // What the reference reads back from the packed bytes.
            let back = v["from_bytes_fields"].as_array().unwrap();
            let from_bytes = Fields::unpack(packed);
            assert_eq!(from_bytes.timestamp, unsigned(&back[0], MAX_TIMESTAMP));
            assert_eq!(from_bytes.medallion, unsigned(&back[1], MAX_MEDALLION));
            assert_eq!(i64::from(from_bytes.offset), back[2].as_i64().unwrap());
            // The checked constructor agrees, or refuses where idcar is stricter.
            if let (Some(ts), Some(med), Some(off)) = (
                v["timestamp_in"].as_i64(),
                v["medallion_in"].as_i64(),
                v["offset_in"].as_i64(),
            ) {
                match Fields::new(ts, med, off) {
                    Ok(g) => assert_eq!(g, f, "{line}"),
                    Err(e) => {
                        assert!(ts < 0 || med < 0 || off < i64::from(i32::MIN), "{line}");
                        assert_eq!(e.kind(), "invalid", "{line}");
                        stricter += 1;
                    }
                }
            }
            // A transaction of `offset` IDs ends with this one.
            if (1..=65_536).contains(&f.offset) && f.medallion <= MAX_MEDALLION_BASE {
                let mut out = Vec::new();
                let count = f.offset as u32;
                Muid128::new(f.medallion).unwrap().pack_run(
                    &run(f.timestamp, 0),
                    &TXN,
                    count,
                    &mut out,
                );
                assert_eq!(out[out.len() - WIDTH..], packed.to_be_bytes(), "{line}");
            }
            built += 1;
            f
        } else {
            let input = v["parse_input"].as_str().unwrap();
            let f = Fields::unpack(super::super::be_u128(&l.parse(input, None).unwrap()).unwrap());
            assert_eq!(f.timestamp, unsigned(&v["timestamp"], MAX_TIMESTAMP));
            assert_eq!(f.medallion, unsigned(&v["medallion"], MAX_MEDALLION));
            assert_eq!(i64::from(f.offset), v["offset"].as_i64().unwrap());
            parsed += 1;
            f
        };
        // Text and packed hex parse back to the fields, and format to the vector's text.
        let bytes = l.parse(want_text, None).unwrap();
        assert_eq!(Fields::unpack(super::super::be_u128(&bytes).unwrap()), f, "{line}");
        assert_eq!(l.parse(want_hex, None).unwrap(), bytes, "{line}");
        let mut s = String::new();
        l.format(&bytes, TextForm::Muid, &mut s).unwrap();
        assert_eq!(s, want_text);
        let m = l.decode(&bytes).unwrap().to_map();
        assert_eq!(m["id"], want_text);
        assert!(m["packed_hex"]
            .as_str()
            .unwrap()
            .eq_ignore_ascii_case(want_hex));
    }
    assert_eq!((built, parsed, refused), (12, 2, 2));
    assert_eq!(stricter, 3, "timestamp -1, medallion -1, offset -2^31 - 1");
}

#[test]
fn seed_short_forms() {
    let l = Muid128::default();
    let bytes = |t: &str| l.parse(t, None).unwrap();
    let full = |ts, med, off| pack(ts, med, off).to_be_bytes().to_vec();
    let (ts, med) = (1_642_579_230_975_519, 1_923_190_821_165);
    assert_eq!(bytes("5D5EAC793E61F"), full(ts, 0, 0));
    assert_eq!(bytes("5D5EAC793E61F-1BFC71B112D"), full(ts, med, 0));
    assert_eq!(
        bytes("5D5EAC793E61F-1BFC71B112D-00000000"),
        full(ts, med, 0)
    );
    assert_eq!(
        bytes("5d5eac793e61f-1bfc71b112d-0000000b"),
        full(ts, med, 11)
    );
    // The seed's own examples have a 13-digit medallion group (and a 5-digit offset
    // group): refused, as by the reference.
    for text in [
        "5D5EAC793E61F-0000000000000-00000",
        "5D5EAC793E61F-0000000000000",
    ] {
        assert_eq!(
            l.parse(text, None).unwrap_err(),
            LayoutError::WrongLength {
                expected: "11 hex digits in the medallion group".into(),
                got: 13
            },
            "{text}"
        );
    }
    let mut s = String::new();
    l.format(&full(ts, 0, 0), TextForm::Muid, &mut s).unwrap();
    assert_eq!(
        s, "5D5EAC793E61F-00000000000-00000000",
        "output is always full"
    );
}

#[test]
fn bad_text_says_why() {
    let l = Muid128::default();
    for (text, form, kind) in [
        ("", None, "unrecognised"),
        ("", Some(TextForm::Muid), "wrong_length"),
        ("5D5EAC793E61", None, "unrecognised"),
        ("5D5EAC793E61-1BFC71B112D", None, "wrong_length"),
        ("5D5EAC793E61F-", None, "wrong_length"),
        ("5D5EAC793E61F-1BFC71B112DA", None, "wrong_length"),
        ("5D5EAC793E61F-1BFC71B112D-0000000B0", None, "wrong_length"),
        ("5D5EAC793E61F-1BFC71B112D-0000000B-0", None, "unrecognised"),
        ("5D5EAC793E61G", None, "bad_char"),
        ("5D5EAC793E61F-1BFC71B112D-+000000B", None, "bad_char"),
        ("5D5EAC793E61F 1BFC71B112D 0000000B", None, "unrecognised"),
        (
            "5D5EAC793E61F 1BFC71B112D 0000000B",
            Some(TextForm::Muid),
            "bad_char",
        ),
        ("0x5EAC793E61F", None, "bad_char"),
        ("5D5EAC793E61F1BFC71B112D0000000G", None, "bad_char"),
        (
            "5D5EAC793E61F1BFC71B112D0000000B",
            Some(TextForm::Muid),
            "wrong_length",
        ),
        ("5D5EAC793E61F", Some(TextForm::Hex), "wrong_length"),
        ("5D5EAC793E61F", Some(TextForm::Dec), "unsupported_form"),
        ("ééééééééééééé", None, "unrecognised"),
        ("ééééééééééééé", Some(TextForm::Muid), "bad_char"),
        ("é-", None, "bad_char"),
    ] {
        let err = l.parse(text, form).unwrap_err();
        assert_eq!(err.kind(), kind, "{text:?}: {err}");
    }
    let mut s = String::new();
    for form in [TextForm::Dec, TextForm::I64, TextForm::B64, TextForm::B32] {
        assert!(!l.supports(form));
        let err = l.format(&[0; 16], form, &mut s).unwrap_err();
        assert_eq!(err.kind(), "unsupported_form");
    }
    assert_eq!(
        l.format(&[0; 8], TextForm::Muid, &mut s)
            .unwrap_err()
            .kind(),
        "wrong_length"
    );
    assert_eq!(l.decode(&[0; 17]).unwrap_err().kind(), "wrong_length");
}

#[test]
fn checked_constructors() {
    assert_eq!(
        Fields::new(1, 1, -1).unwrap(),
        Fields {
            timestamp: 1,
            medallion: 1,
            offset: -1
        }
    );
    assert_eq!(Fields::new(1, 1, 0xFFFF_FFFF).unwrap().offset, -1);
    assert_eq!(
        Fields::new(1, 1, i64::from(i32::MIN)).unwrap().offset,
        i32::MIN
    );
    for (ts, med, off, kind) in [
        (-2, 1, 0, "invalid"),
        (-1, 1, 0, "invalid"),
        (1, -1, 0, "invalid"),
        (1 << 52, 1, 0, "out_of_range"),
        (1, 1 << 44, 0, "out_of_range"),
        (1, 1, 1 << 32, "out_of_range"),
        (1, 1, -(1 << 31) - 1, "invalid"),
    ] {
        assert_eq!(
            Fields::new(ts, med, off).unwrap_err().kind(),
            kind,
            "{ts} {med} {off}"
        );
    }
    assert_eq!(Muid128::new(0).unwrap_err().kind(), "invalid");
    assert_eq!(
        Muid128::new(MAX_MEDALLION_BASE + 1).unwrap_err().kind(),
        "out_of_range"
    );
    let top = Muid128::new(MAX_MEDALLION_BASE).unwrap();
    assert_eq!(top.medallion(u32::MAX), MAX_MEDALLION - 1);
    assert_eq!(Muid128::default().medallion_base(), 0x100_0000_0000);
    assert_eq!(Muid128::default().medallion(u32::MAX - 1), 0x100_FFFF_FFFE);
}

#[test]
fn scheme_options_and_forms() {
    let l = Muid128::default();
    let s = l.scheme();
    assert_eq!(
        (s.tick_ns, s.epoch_unix_ns, s.max_tick),
        (1_000, 0, MAX_TIMESTAMP)
    );
    assert_eq!((s.seq_min, s.seq_max, s.ids_per_tick()), (0, 0, 1));
    assert_eq!(
        (s.slots, s.tick_tock, s.lead_ticks),
        (u32::MAX, false, 1_000)
    );
    assert_eq!(l.width(), 16);
    assert_eq!(l.default_form(), TextForm::Muid);
    assert!(l.supports(TextForm::Hex) && !l.json_number(TextForm::Muid));
    assert!(l.check(&TXN).is_ok() && l.check(&RequestOptions::default()).is_ok());
    let meta = RequestOptions {
        meta: Some(1),
        transaction: false,
    };
    assert_eq!(
        l.check(&meta).unwrap_err(),
        LayoutError::UnsupportedOption {
            option: "meta",
            layout: "muid128"
        }
    );
}

#[test]
fn decode_json_keys() {
    let l = Muid128::default();
    let id = pack(1_642_579_230_975_519, 1_923_190_821_165, -3i32 as u32).to_be_bytes();
    let m = l.decode(&id).unwrap().to_map();
    assert_eq!(m["layout"], "muid128");
    assert_eq!(m["id"], "5D5EAC793E61F-1BFC71B112D-FFFFFFFD");
    assert_eq!(m["packed_hex"], "5d5eac793e61f1bfc71b112dfffffffd");
    assert_eq!(m["timestamp"], 1_642_579_230_975_519u64);
    assert_eq!(m["medallion"], 1_923_190_821_165u64);
    assert_eq!(m["offset"], -3);
    assert_eq!(m["time"], "2022-01-19T08:00:30.975519Z");
    let mut s = String::new();
    l.format(&id, TextForm::Hex, &mut s).unwrap();
    assert_eq!(s, m["packed_hex"]);
}

#[test]
fn plain_run_is_offset_zero() {
    let l = Muid128::default();
    let mut out = Vec::new();
    l.pack_run(
        &run(1_642_579_230_975_519, 7),
        &RequestOptions::default(),
        1,
        &mut out,
    );
    assert_eq!(out.len(), 16);
    assert_eq!(
        Fields::unpack(super::super::be_u128(&out).unwrap()),
        Fields {
            timestamp: 1_642_579_230_975_519,
            medallion: MEDALLION_BASE + 7,
            offset: 0
        }
    );
}

fn fields() -> impl Strategy<Value = Fields> {
    (0..=MAX_TIMESTAMP, 0..=MAX_MEDALLION, any::<i32>()).prop_map(|(t, m, o)| Fields {
        timestamp: t,
        medallion: m,
        offset: o,
    })
}

proptest! {
    #[test]
    fn text_round_trip(f in fields()) {
        let l = Muid128::default();
        let id = f.pack().unwrap().to_be_bytes();
        for form in [TextForm::Muid, TextForm::Hex] {
            let mut s = String::new();
            l.format(&id, form, &mut s).unwrap();
            prop_assert_eq!(l.parse(&s, Some(form)).unwrap(), id.to_vec());
            prop_assert_eq!(l.parse(&s, None).unwrap(), id.to_vec());
            let other_case = if form == TextForm::Hex { s.to_uppercase() } else { s.to_lowercase() };
            prop_assert_eq!(l.parse(&other_case, None).unwrap(), id.to_vec());
        }
    }

    #[test]
    fn packed_round_trip(f in fields()) {
        let v = f.pack().unwrap();
        prop_assert_eq!(Fields::unpack(v), f);
        prop_assert_eq!(Fields::unpack(super::super::be_u128(&v.to_be_bytes()).unwrap()), f);
        prop_assert_eq!(Fields::new(f.timestamp as i64, f.medallion as i64, f.offset.into()).unwrap(), f);
    }

    #[test]
    fn packed_bytes_sort_as_the_tuple(a in fields(), b in fields()) {
        let (pa, pb) = (a.pack().unwrap().to_be_bytes(), b.pack().unwrap().to_be_bytes());
        let key = |f: Fields| (f.timestamp, f.medallion, f.offset as u32);
        prop_assert_eq!(pa.cmp(&pb), key(a).cmp(&key(b)));
        prop_assert_eq!(to_text(u128::from_be_bytes(pa)).cmp(&to_text(u128::from_be_bytes(pb))), key(a).cmp(&key(b)));
    }

    #[test]
    fn arbitrary_text_never_panics(s in "\\PC{0,40}", h in "[0-9a-fA-F-]{0,40}") {
        let l = Muid128::default();
        for t in [&s, &h] {
            let _ = l.parse(t, None);
            let _ = l.parse(t, Some(TextForm::Muid));
            let _ = l.parse(t, Some(TextForm::Hex));
        }
    }

    #[test]
    fn transaction_offsets_count_up(tick in 0..=MAX_TIMESTAMP, slot in 0..u32::MAX, count in 1u32..300) {
        let l = Muid128::default();
        let mut out = Vec::new();
        l.pack_run(&run(tick, slot), &TXN, count, &mut out);
        prop_assert_eq!(out.len(), count as usize * WIDTH);
        for (i, chunk) in out.chunks(WIDTH).enumerate() {
            let f = Fields::unpack(super::super::be_u128(chunk).unwrap());
            prop_assert_eq!(f, Fields { timestamp: tick, medallion: MEDALLION_BASE + u64::from(slot), offset: i as i32 + 1 });
        }
    }
}
