//! `sno80` (seed 003, sno): ten bytes, big-endian, so the bytes sort by time first.
//!
//! ```text
//! bytes 0..5   units << 1 | tick   units: 4 ms since 2010-01-01T00:00:00Z (39 bits, floored,
//!                                  good until 2079-09-07T15:47:35.548Z); tick: the tick-tock bit
//! byte  5      metabyte            any byte the caller asks for (`meta`, default 0)
//! bytes 6..8   partition           the negotiated slot: a pool of 65,536
//! bytes 8..10  sequence            restarts at `--sequence-min` each 4 ms unit, up to
//!                                  `--sequence-max` (inclusive): sequence sharding
//! ```
//!
//! The tick-tock bit is the generator's timeline: on a clock step back the generator moves to
//! the other timeline when that one is unused at the current unit, so the reference's "toggle
//! instead of wait" keeps its uniqueness guarantee (see [`crate::generator`]).
//!
//! Text forms: `b32` (the default and the reference's canonical form): sixteen 5-bit groups
//! of the 80 bits, most significant first, over `23456789abcdefghijklmnopqrstuvwx` — two
//! ascending ASCII ranges, so the text sorts like the bytes. `hex`: 20 lower-case digits of
//! the bytes (idcar's own form; the reference has only binary and b32). With no form named,
//! 16 characters are b32 and 20 are hex.
//!
//! Where idcar is stricter than the reference (`github.com/muyo/sno` v1.2.1):
//! - b32 text must match `[2-9a-x]{16}`. The reference decodes without validating (a stray
//!   character silently becomes garbage bits); idcar refuses it, and refuses **upper case**
//!   too: the seed's alphabet is strictly lower case. Hex digits may be either case, as in
//!   the other layouts.
//! - Sequence bounds must be given in order, `--sequence-min <= --sequence-max`. The
//!   reference swaps reversed bounds and reads a zero maximum as 65535.
//! - The pool must hold at least [`MIN_SEQUENCE_POOL`] (6) sequences per unit. The
//!   reference's message and README say "at least 4", but its check is
//!   `max - min - 1 < 4` (so `max - min >= 5`); idcar applies the check, not the message,
//!   and the known-answer vectors all use the smallest pool it accepts (`min .. min + 5`).
//! - IDs always carry the generator's time: the reference's `NewWithTime` (a caller's time,
//!   its own wrapping sequence, no tick-tock) has no counterpart.

use super::{Ask, Layout, LayoutError, Run, Scheme, TextForm};
use serde_json::{Map, Value};

/// 2010-01-01T00:00:00Z in Unix seconds: the reference's epoch.
pub const EPOCH_UNIX_S: u64 = 1_262_304_000;
/// The epoch in Unix nanoseconds.
pub const EPOCH_UNIX_NS: u64 = EPOCH_UNIX_S * 1_000_000_000;
/// One time unit: 4 ms.
pub const UNIT_NS: u64 = 4_000_000;
/// The largest unit the 39-bit time field holds (2079-09-07T15:47:35.548Z).
pub const MAX_UNITS: u64 = (1 << 39) - 1;
/// The smallest sequence pool (`max - min + 1`) the reference's bounds check lets through.
pub const MIN_SEQUENCE_POOL: u32 = 6;
/// Bytes per ID.
pub const WIDTH: usize = 10;

const ALPHABET: &[u8; 32] = b"23456789abcdefghijklmnopqrstuvwx";
const HEX: &[u8; 16] = b"0123456789abcdef";
/// Marks a byte that is not in [`ALPHABET`].
const NOT_B32: u8 = 0xff;
/// The value of each ASCII byte in [`ALPHABET`], [`NOT_B32`] for every other byte.
const B32_VALUE: [u8; 256] = {
    let mut t = [NOT_B32; 256];
    let mut i = 0;
    while i < 32 {
        t[ALPHABET[i] as usize] = i as u8;
        i += 1;
    }
    t
};

/// The fields of one sno80 ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fields {
    /// 4 ms units since 2010-01-01T00:00:00Z.
    pub units: u64,
    /// The tick-tock bit (0 or 1).
    pub tick: u8,
    pub meta: u8,
    pub partition: u16,
    pub sequence: u16,
}

impl Fields {
    /// The binary ID; `None` if `units` or `tick` is out of range.
    pub fn pack(&self) -> Option<[u8; WIDTH]> {
        if self.units > MAX_UNITS || self.tick > 1 {
            return None;
        }
        Some(pack(
            self.units,
            self.tick,
            self.meta,
            self.partition,
            self.sequence,
        ))
    }

    /// Every 80-bit value is a valid ID, so unpacking cannot fail.
    pub fn unpack(id: &[u8; WIDTH]) -> Fields {
        let head = u64::from_be_bytes(id[..8].try_into().expect("eight bytes"));
        Fields {
            units: head >> 25,
            tick: ((head >> 24) & 1) as u8,
            meta: (head >> 16) as u8,
            partition: head as u16,
            sequence: u16::from_be_bytes([id[8], id[9]]),
        }
    }

    /// Start of the ID's 4 ms unit, in Unix nanoseconds.
    pub fn unix_ns(&self) -> u64 {
        EPOCH_UNIX_NS + self.units * UNIT_NS
    }
}

#[inline(always)]
fn pack(units: u64, tick: u8, meta: u8, partition: u16, sequence: u16) -> [u8; WIDTH] {
    let head = (units << 1 | u64::from(tick)) << 24 | u64::from(meta) << 16 | u64::from(partition);
    let mut id = [0; WIDTH];
    id[..8].copy_from_slice(&head.to_be_bytes());
    id[8..].copy_from_slice(&sequence.to_be_bytes());
    id
}

fn id_of(bytes: &[u8]) -> Result<[u8; WIDTH], LayoutError> {
    bytes.try_into().map_err(|_| LayoutError::WrongLength {
        expected: "10 bytes".into(),
        got: bytes.len(),
    })
}

fn encode_b32(id: &[u8; WIDTH]) -> [u8; 16] {
    let mut v = [0u8; 16];
    v[6..].copy_from_slice(id);
    let v = u128::from_be_bytes(v);
    std::array::from_fn(|i| ALPHABET[((v >> (75 - 5 * i)) & 0x1f) as usize])
}

/// The b32 text of a binary ID.
pub fn to_b32(id: &[u8; WIDTH]) -> String {
    encode_b32(id).iter().map(|&b| b as char).collect()
}

/// The binary ID of b32 text (strictly `[2-9a-x]{16}`).
pub fn from_b32(text: &str) -> Result<[u8; WIDTH], LayoutError> {
    if text.len() != 16 {
        return Err(LayoutError::WrongLength {
            expected: "16 b32 characters".into(),
            got: text.chars().count(),
        });
    }
    let mut v = 0u128;
    for (pos, ch) in text.char_indices() {
        let d = if ch.is_ascii() {
            B32_VALUE[ch as usize]
        } else {
            NOT_B32
        };
        if d == NOT_B32 {
            return Err(LayoutError::BadChar {
                ch,
                pos,
                expected: "one of 2-9 a-x (lower case)",
            });
        }
        v = v << 5 | u128::from(d);
    }
    Ok(v.to_be_bytes()[6..].try_into().expect("ten bytes"))
}

fn to_hex(id: &[u8; WIDTH], out: &mut String) {
    for &b in id {
        out.push(HEX[usize::from(b >> 4)] as char);
        out.push(HEX[usize::from(b & 0xf)] as char);
    }
}

fn from_hex(text: &str) -> Result<[u8; WIDTH], LayoutError> {
    let v = super::fixed_hex(text, 2 * WIDTH)?;
    Ok(v.to_be_bytes()[16 - WIDTH..]
        .try_into()
        .expect("the low ten bytes"))
}

/// The sno80 layout with its sequence shard `seq_min ..= seq_max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sno80 {
    seq_min: u16,
    seq_max: u16,
}

impl Sno80 {
    /// Checks the bounds as the reference does (see the module doc for where idcar is
    /// stricter): in order, and a pool of at least [`MIN_SEQUENCE_POOL`].
    pub fn new(seq_min: u16, seq_max: u16) -> Result<Sno80, LayoutError> {
        if seq_min > seq_max {
            return Err(LayoutError::Invalid(format!(
                "--sequence-min {seq_min} is above --sequence-max {seq_max} \
                 (the bounds are inclusive and must be given in order)"
            )));
        }
        let pool = u32::from(seq_max - seq_min) + 1;
        if pool < MIN_SEQUENCE_POOL {
            return Err(LayoutError::Invalid(format!(
                "--sequence-min {seq_min} and --sequence-max {seq_max} leave {pool} \
                 sequences per 4 ms; sno needs at least {MIN_SEQUENCE_POOL} \
                 (--sequence-max - --sequence-min >= {})",
                MIN_SEQUENCE_POOL - 1
            )));
        }
        Ok(Sno80 { seq_min, seq_max })
    }

    pub fn seq_min(&self) -> u16 {
        self.seq_min
    }

    pub fn seq_max(&self) -> u16 {
        self.seq_max
    }
}

impl Default for Sno80 {
    /// The whole sequence pool, `0 ..= 65535`.
    fn default() -> Sno80 {
        Sno80 {
            seq_min: 0,
            seq_max: u16::MAX,
        }
    }
}

impl Layout for Sno80 {
    fn name(&self) -> &'static str {
        "sno80"
    }

    fn width(&self) -> usize {
        WIDTH
    }

    fn scheme(&self) -> Scheme {
        Scheme {
            tick_ns: UNIT_NS,
            epoch_unix_ns: EPOCH_UNIX_NS,
            max_tick: MAX_UNITS,
            seq_min: self.seq_min.into(),
            seq_max: self.seq_max.into(),
            slots: 1 << 16,
            tick_tock: true,
            lead_ticks: 0,
        }
    }

    fn default_form(&self) -> TextForm {
        TextForm::B32
    }

    fn supports(&self, form: TextForm) -> bool {
        matches!(form, TextForm::B32 | TextForm::Hex)
    }

    fn check(&self, ask: &Ask) -> Result<(), LayoutError> {
        if ask.transaction {
            return Err(LayoutError::UnsupportedOption {
                option: "transaction",
                layout: "sno80",
            });
        }
        Ok(())
    }

    fn pack_run(&self, run: &Run, ask: &Ask, count: u32, out: &mut Vec<u8>) {
        debug_assert_eq!(count, run.len, "sno80 has no transactions");
        debug_assert!(run.tick <= MAX_UNITS && run.timeline <= 1 && run.slot <= 0xffff);
        debug_assert!(run.seq + run.len <= 1 << 16);
        // Everything but the sequence is the same for the whole run: pack it once.
        let mut id = pack(
            run.tick,
            run.timeline & 1,
            ask.meta.unwrap_or(0),
            run.slot as u16,
            0,
        );
        out.reserve(run.len as usize * WIDTH);
        for seq in run.seq..run.seq + run.len {
            id[8..].copy_from_slice(&(seq as u16).to_be_bytes());
            out.extend_from_slice(&id);
        }
    }

    fn format(&self, id: &[u8], form: TextForm, out: &mut String) -> Result<(), LayoutError> {
        let id = id_of(id)?;
        match form {
            TextForm::B32 => out.extend(encode_b32(&id).iter().map(|&b| b as char)),
            TextForm::Hex => to_hex(&id, out),
            other => {
                return Err(LayoutError::UnsupportedForm {
                    form: other.name(),
                    layout: "sno80",
                })
            }
        }
        Ok(())
    }

    fn parse(&self, text: &str, form: Option<TextForm>) -> Result<Vec<u8>, LayoutError> {
        let id = match form {
            Some(TextForm::B32) => from_b32(text)?,
            Some(TextForm::Hex) => from_hex(text)?,
            Some(other) => {
                return Err(LayoutError::UnsupportedForm {
                    form: other.name(),
                    layout: "sno80",
                })
            }
            None if text.len() == 16 => from_b32(text)?,
            None if text.len() == 2 * WIDTH => from_hex(text)?,
            None => {
                return Err(LayoutError::WrongLength {
                    expected: "16 b32 characters or 20 hex digits".into(),
                    got: text.chars().count(),
                })
            }
        };
        Ok(id.to_vec())
    }

    fn decode(&self, id: &[u8]) -> Result<Map<String, Value>, LayoutError> {
        let id = id_of(id)?;
        let f = Fields::unpack(&id);
        let mut bytes_hex = String::with_capacity(2 * WIDTH);
        to_hex(&id, &mut bytes_hex);
        let mut m = Map::new();
        m.insert("layout".into(), "sno80".into());
        m.insert("id".into(), to_b32(&id).into());
        m.insert("bytes_hex".into(), bytes_hex.into());
        m.insert("units".into(), f.units.into());
        m.insert("tick".into(), f.tick.into());
        m.insert("meta".into(), f.meta.into());
        m.insert("partition".into(), f.partition.into());
        m.insert(
            "partition_bytes_hex".into(),
            format!("{:04x}", f.partition).into(),
        );
        m.insert("sequence".into(), f.sequence.into());
        m.insert("unix_ms".into(), (f.unix_ns() / 1_000_000).into());
        m.insert("time".into(), super::rfc3339_millis(f.unix_ns()).into());
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hex_of(id: &[u8; WIDTH]) -> String {
        let mut s = String::new();
        to_hex(id, &mut s);
        s
    }

    fn u(v: &Value, key: &str) -> u64 {
        v[key].as_u64().unwrap_or_else(|| panic!("{key} in {v}"))
    }

    #[test]
    fn known_answers_both_directions() {
        let mut checked = 0;
        for v in super::super::vector_lines(include_str!("../../tests/vectors/sno80.jsonl")) {
            let line = v.to_string();
            if v.get("error").is_some() {
                // An input the reference rejects: idcar must reject it too.
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
            let ask = Ask {
                meta: Some(f.meta),
                ..Ask::default()
            };
            l.check(&ask).unwrap();
            let mut out = Vec::new();
            l.pack_run(&run, &ask, 1, &mut out);
            assert_eq!(out, id, "{line}");
            // Text -> bytes -> fields, with and without the form named.
            for (text, form) in [(b32, TextForm::B32), (hex, TextForm::Hex)] {
                assert_eq!(l.parse(text, Some(form)).unwrap(), id, "{line}");
                assert_eq!(l.parse(text, None).unwrap(), id, "{line}");
            }
            assert_eq!(Fields::unpack(&from_b32(b32).unwrap()), f, "{line}");
            // Decoded fields carry the vector's names and values.
            let m = l.decode(&id).unwrap();
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
            let unix_ns = u(&v, "decoded_unix_ns");
            assert_eq!(f.unix_ns(), unix_ns, "{line}");
            assert_eq!(m["unix_ms"], unix_ns / 1_000_000);
            let parse_time = |t: &str| humantime::parse_rfc3339(t).unwrap();
            assert_eq!(
                parse_time(m["time"].as_str().unwrap()),
                parse_time(v["decoded_time"].as_str().unwrap()),
                "{line}"
            );
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
        l.pack_run(&run, &Ask::default(), 3, &mut out);
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
        l.pack_run(&Run { timeline: 0, ..run }, &Ask::default(), 3, &mut zero);
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
            assert!(
                msg.contains("--sequence-min") && msg.contains("--sequence-max"),
                "{msg}"
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
        l.check(&Ask {
            meta: Some(255),
            ..Ask::default()
        })
        .unwrap();
        let err = l
            .check(&Ask {
                transaction: true,
                ..Ask::default()
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
        let m = l.decode(&id).unwrap();
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
            let ask = Ask { meta: Some(f.meta), ..Ask::default() };
            let mut out = vec![0xaa];
            Sno80::default().pack_run(&run, &ask, len, &mut out);
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
}
