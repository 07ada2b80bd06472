//! Tests of the sno80 layout: known-answer vectors, properties, bad input.

use super::*;
use serde_json::Value;
use proptest::prelude::*;

fn hex_of(id: &[u8; WIDTH]) -> String {
    let mut s = String::new();
    to_hex(id, &mut s);
    s
}

fn u(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("{key} in {v}"))
}

/// A vector the reference rejects: idcar rejects its text and its parameters too.
fn rejected_too(v: &Value) {
    let line = v.to_string();
    let mut rejected = false;
    for key in ["encoded", "input", "text"] {
        if let Some(t) = v[key].as_str() {
            assert!(Sno80::default().parse(t, None).is_err(), "{line}");
            rejected = true;
        }
    }
    if let Some(s) = v.get("snapshot") {
        let (lo, hi) = (u(s, "sequenceMin"), u(s, "sequenceMax"));
        assert!(Sno80::new(lo as u16, hi as u16).is_err(), "{line}");
        rejected = true;
    }
    assert!(rejected, "nothing to reject in {line}");
}

/// The decoded fields of `id` carry the vector's names and values.
fn decoded_as_the_reference(l: &Sno80, id: &[u8], f: &Fields, v: &Value) {
    let line = v.to_string();
        let m = l.decode(id).unwrap().to_map();
    for key in [
        "bytes_hex",
        "units",
        "tick",
        "meta",
        "partition",
        "partition_bytes_hex",
        "sequence",
    ] {
        assert_eq!(m[key], v[key], "{key} in {line}");
    }
    assert_eq!(m["id"], v["encoded"]);
    let unix_ns = u(v, "decoded_unix_ns");
    assert_eq!(f.unix_ns(), unix_ns, "{line}");
    assert_eq!(m["unix_ms"], unix_ns / 1_000_000);
    let parse_time = |t: &str| humantime::parse_rfc3339(t).unwrap();
    assert_eq!(
        parse_time(m["time"].as_str().unwrap()),
        parse_time(v["decoded_time"].as_str().unwrap()),
        "{line}"
    );
}

#[test]
fn known_answers_both_directions() {
    let mut checked = 0;
    for v in super::super::vector_lines(include_str!("../../../../../tests/vectors/sno80.jsonl")) {
        let line = v.to_string();
        if v.get("error").is_some() {
            rejected_too(&v);
            checked += 1;
            continue;
        }
        let f = Fields {
            units: u(&v, "units"),
            tick: u(&v, "tick") as u8,
            meta: u(&v, "meta") as u8,
            partition: u(&v, "partition") as u16,
            sequence: u(&v, "sequence") as u16,
        };
        let (hex, b32) = (
            v["bytes_hex"].as_str().unwrap(),
            v["encoded"].as_str().unwrap(),
        );
        // Fields -> bytes and text.
        let id = f.pack().expect("vector fields in range");
        assert_eq!(hex_of(&id), hex, "{line}");
        assert_eq!(to_b32(&id), b32, "{line}");
        assert_eq!(
            format!("{:04x}", f.partition),
            v["partition_bytes_hex"].as_str().unwrap()
        );
        // The generator's path: a run of one with the vector's slot, timeline and meta.
        let l = match v.get("snapshot") {
            Some(s) => {
                let (lo, hi) = (u(s, "sequenceMin"), u(s, "sequenceMax"));
                assert!((lo..=hi).contains(&u64::from(f.sequence)), "{line}");
                Sno80::new(lo as u16, hi as u16).expect("the reference accepted these")
            }
            None => Sno80::default(),
        };
        let run = Run {
            tick: f.units,
            seq: f.sequence.into(),
            len: 1,
            slot: f.partition.into(),
            timeline: f.tick,
        };
        let opts = RequestOptions {
            meta: Some(f.meta),
            ..RequestOptions::default()
        };
        l.check(&opts).unwrap();
        let mut out = Vec::new();
        l.pack_run(&run, &opts, 1, &mut out);
        assert_eq!(out, id, "{line}");
        // Text -> bytes -> fields, with and without the form named.
        for (text, form) in [(b32, TextForm::B32), (hex, TextForm::Hex)] {
            assert_eq!(l.parse(text, Some(form)).unwrap(), id, "{line}");
            assert_eq!(l.parse(text, None).unwrap(), id, "{line}");
        }
        assert_eq!(Fields::unpack(&from_b32(b32).unwrap()), f, "{line}");
        decoded_as_the_reference(&l, &id, &f, &v);
        // The time the reference was given lies within that unit (floored).
        if let Some(ns) = v["unix_ns_input"].as_u64() {
            assert_eq!(l.scheme().tick_at(ns), Some(f.units), "{line}");
            assert_eq!(ns / 1_000_000, u(&v, "unix_ms_input"));
        }
        checked += 1;
    }
    assert!(checked >= 21, "checked {checked}");
}

#[test]
fn timeline_one_sets_the_low_bit_of_byte_four() {
    let l = Sno80::default();
    let run = Run {
        tick: 78_883_200_000,
        seq: 7,
        len: 3,
        slot: 0xbeef,
        timeline: 1,
    };
    let mut out = Vec::new();
    l.pack_run(&run, &RequestOptions::default(), 3, &mut out);
    assert_eq!(out.len(), 3 * WIDTH);
    for (i, id) in out.chunks(WIDTH).enumerate() {
        assert_eq!(id[4] & 1, 1);
        let f = Fields::unpack(id.try_into().unwrap());
        let want = Fields {
            units: 78_883_200_000,
            tick: 1,
            meta: 0,
            partition: 0xbeef,
            sequence: 7 + i as u16,
        };
        assert_eq!(f, want);
    }
    let mut zero = Vec::new();
    l.pack_run(
        &Run { timeline: 0, ..run },
        &RequestOptions::default(),
        3,
        &mut zero,
    );
    assert_eq!(zero[4] & 1, 0);
    assert_eq!(zero[4] | 1, out[4]);
}

#[test]
fn sequence_bounds_as_the_reference_checks_them() {
    assert_eq!(Sno80::default(), Sno80::new(0, 65535).unwrap());
    for (lo, hi) in [(0, 5), (10, 15), (65530, 65535), (100, 200), (0, 65535)] {
        let l = Sno80::new(lo, hi).unwrap();
        let s = l.scheme();
        assert_eq!((s.seq_min, s.seq_max), (lo.into(), hi.into()));
        assert_eq!(s.ids_per_tick(), u64::from(hi - lo) + 1);
    }
    for (lo, hi) in [(0, 4), (0, 3), (7, 7), (65535, 65535), (15, 10), (65535, 0)] {
        let err = Sno80::new(lo, hi).unwrap_err();
        assert_eq!(err.kind(), "invalid", "{lo}..{hi}");
        let msg = err.to_string();
        assert!(msg.contains("sequence") && !msg.contains("--"), "{msg}");
        // The registry says which parameter to change; configuration names its flag.
        let params = crate::layout::LayoutParams {
            sequence_min: lo,
            sequence_max: hi,
            ..Default::default()
        };
        let e = crate::layout::by_name("sno80", params).unwrap_err();
        let want = if lo > hi {
            crate::layout::Param::SequenceMin
        } else {
            crate::layout::Param::SequenceMax
        };
        assert!(
            matches!(e, crate::layout::BuildError::Param { param, .. } if param == want),
            "{e:?}"
        );
    }
}

#[test]
fn scheme_and_options() {
    let l = Sno80::default();
    let s = l.scheme();
    assert_eq!(s.tick_ns, 4_000_000);
    assert_eq!(
        s.tick_start_ns(0),
        humantime::parse_rfc3339("2010-01-01T00:00:00Z")
            .unwrap()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    );
    assert_eq!(s.max_tick, (1 << 39) - 1);
    assert_eq!((s.slots, s.tick_tock, s.lead_ticks), (65_536, true, 0));
    assert_eq!(
        super::super::rfc3339_millis(s.tick_start_ns(s.max_tick)),
        "2079-09-07T15:47:35.548Z"
    );
    assert_eq!(l.width(), 10);
    assert_eq!(l.default_form(), TextForm::B32);
    assert!(!l.json_number(TextForm::B32) && !l.json_number(TextForm::Hex));
    l.check(&RequestOptions {
        meta: Some(255),
        ..RequestOptions::default()
    })
    .unwrap();
    let err = l
        .check(&RequestOptions {
            transaction: true,
            ..RequestOptions::default()
        })
        .unwrap_err();
    assert_eq!(
        err,
        LayoutError::UnsupportedOption {
            option: "transaction",
            layout: "sno80"
        }
    );
}

#[test]
fn bad_text_says_why() {
    let l = Sno80::default();
    for (text, form, kind) in [
        ("6KVRQG22XU222222", None, "bad_char"),
        ("6kvrqg22xu22222y", None, "bad_char"),
        ("6kvrqg22xu222220", Some(TextForm::B32), "bad_char"),
        ("6kvrqg22xu22222-", None, "bad_char"),
        ("6kvrqg22xu2222é", None, "bad_char"),
        ("6kvrqg22xu22222", None, "wrong_length"),
        ("6kvrqg22xu22222", Some(TextForm::B32), "wrong_length"),
        ("24bb9c3800ff00000000", Some(TextForm::B32), "wrong_length"),
        ("24bb9c3800ff0000000g", None, "bad_char"),
        ("6kvrqg22xu222222", Some(TextForm::Hex), "wrong_length"),
        ("", None, "wrong_length"),
        ("6kvrqg22xu222222", Some(TextForm::Dec), "unsupported_form"),
    ] {
        let err = l.parse(text, form).unwrap_err();
        assert_eq!(err.kind(), kind, "{text:?}: {err}");
    }
    let mut out = String::new();
    assert_eq!(
        l.format(&[0; WIDTH], TextForm::I64, &mut out)
            .unwrap_err()
            .kind(),
        "unsupported_form"
    );
    assert_eq!(
        l.format(&[0; 8], TextForm::B32, &mut out)
            .unwrap_err()
            .kind(),
        "wrong_length"
    );
    assert_eq!(l.decode(&[0; 11]).unwrap_err().kind(), "wrong_length");
    // Upper-case hex is accepted, like the other layouts' hex.
    assert_eq!(
        l.parse("24BB9C3800FF00000000", None).unwrap(),
        l.parse("24bb9c3800ff00000000", None).unwrap()
    );
}

#[test]
fn decode_json_keys() {
    let l = Sno80::default();
    let id = Fields {
        units: 109_424_000_031,
        tick: 0,
        meta: 90,
        partition: 65244,
        sequence: 47768,
    }
    .pack()
    .unwrap();
    let m = l.decode(&id).unwrap().to_map();
    assert_eq!(m["layout"], "sno80");
    assert_eq!(m["id"], "8ds7ow3wddxfrgmq");
    assert_eq!(m["bytes_hex"], "32f45b783e5afedcba98");
    assert_eq!(m["time"], "2023-11-14T22:13:20.124Z");
    assert_eq!(m["unix_ms"], 1_700_000_000_124u64);
    assert_eq!(m["partition_bytes_hex"], "fedc");
    assert_eq!(m["tick"], 0);
}

fn fields() -> impl Strategy<Value = Fields> {
    (
        0..=MAX_UNITS,
        0u8..2,
        any::<u8>(),
        any::<u16>(),
        any::<u16>(),
    )
        .prop_map(|(units, tick, meta, partition, sequence)| Fields {
            units,
            tick,
            meta,
            partition,
            sequence,
        })
}

fn key(f: &Fields) -> (u64, u8, u8, u16, u16) {
    (f.units, f.tick, f.meta, f.partition, f.sequence)
}

proptest! {
    #[test]
    fn round_trip_every_form(f in fields()) {
        let l = Sno80::default();
        let id = f.pack().unwrap();
        prop_assert_eq!(Fields::unpack(&id), f);
        for form in [TextForm::B32, TextForm::Hex] {
            let mut s = String::new();
            l.format(&id, form, &mut s).unwrap();
            prop_assert_eq!(l.parse(&s, Some(form)).unwrap(), id.to_vec());
            prop_assert_eq!(l.parse(&s, None).unwrap(), id.to_vec());
        }
        prop_assert_eq!(from_b32(&to_b32(&id)).unwrap(), id);
    }

    #[test]
    fn bytes_sort_like_the_fields(a in fields(), b in fields()) {
        prop_assert_eq!(a.pack().unwrap().cmp(&b.pack().unwrap()), key(&a).cmp(&key(&b)));
    }

    #[test]
    fn text_sorts_like_the_bytes(a in any::<[u8; WIDTH]>(), b in any::<[u8; WIDTH]>()) {
        prop_assert_eq!(to_b32(&a).cmp(&to_b32(&b)), a.cmp(&b));
        prop_assert_eq!(hex_of(&a).cmp(&hex_of(&b)), a.cmp(&b));
        prop_assert_eq!(from_b32(&to_b32(&a)).unwrap(), a);
    }

    #[test]
    fn pack_run_matches_fields(f in fields(), len in 1u32..64) {
        let seq = u32::from(f.sequence).min((1 << 16) - len);
        let run = Run { tick: f.units, seq, len, slot: f.partition.into(), timeline: f.tick };
        let opts = RequestOptions { meta: Some(f.meta), ..RequestOptions::default() };
        let mut out = vec![0xaa];
        Sno80::default().pack_run(&run, &opts, len, &mut out);
        prop_assert_eq!(out.len(), 1 + len as usize * WIDTH);
        for (i, chunk) in out[1..].chunks(WIDTH).enumerate() {
            let got = Fields::unpack(chunk.try_into().unwrap());
            prop_assert_eq!(got, Fields { sequence: (seq + i as u32) as u16, ..f });
        }
    }

    #[test]
    fn arbitrary_text_never_panics(s in "\\PC{0,24}", t in "[0-9a-zA-Z]{16,20}") {
        let l = Sno80::default();
        for text in [&s, &t] {
            let _ = l.parse(text, None);
            let _ = l.parse(text, Some(TextForm::B32));
            let _ = l.parse(text, Some(TextForm::Hex));
        }
    }
}
