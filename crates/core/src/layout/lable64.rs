//! `lable64`, the default layout (seed 001): eight bytes,
//! `TTTTTTTT TTTTTTTT TTTTTTTT TTTTTTTT TTTTTTTT TTSSSSSS ......GG GGGGCCCC`.
//!
//! Decisions the seed leaves open, pinned by the known-answer tests below:
//! - The 42-bit millisecond timestamp is **bit**-reversed across the whole 64-bit word
//!   (`reverse_bits(ts)`), not byte-reversed as the seed's prose says; the reference
//!   implementation's vectors settle it. Consequence: IDs spread evenly over the key space and
//!   do **not** sort by creation time. Use the decoded `timestamp_ms` to order them.
//! - The six reserved bits are written as zero; a decoder rejects an ID where they are not.
//! - Text forms: `hex` (16 lower-case digits, the default), `dec` (the u64), `i64` (the same
//!   64 bits read as two's complement, for databases whose keys are signed). Parsing accepts
//!   upper-case hex too, and with no form given guesses: a leading `-` is `i64`, sixteen hex
//!   digits are `hex` (so a 16-digit decimal must be parsed with `dec` named), other digit
//!   strings are `dec`.

use super::{
    be_u64, BuildError, Layout, LayoutError, Param, RequestOptions, Run, Scheme, TextForm,
};
use super::Decoded;

const TIME_BITS: u32 = 42;
const SEQ_SHIFT: u32 = 16;
const RESERVED_SHIFT: u32 = 10;
const GEN_SHIFT: u32 = 4;
const SIX_BITS: u64 = 0x3f;
/// The bits the reversed timestamp occupies (the top 42).
const TIME_MASK: u64 = !((1u64 << (64 - TIME_BITS)) - 1);

/// The largest timestamp the 42-bit field holds (year 2109).
pub const MAX_TIMESTAMP_MS: u64 = (1 << TIME_BITS) - 1;

/// The fields of one lable64 ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fields {
    pub timestamp_ms: u64,
    pub sequence: u8,
    pub generator: u8,
    pub cluster: u8,
}

impl Fields {
    /// Packs the fields; `None` if any is out of range.
    pub fn pack(&self) -> Option<u64> {
        if self.timestamp_ms > MAX_TIMESTAMP_MS
            || self.sequence > 63
            || self.generator > 63
            || self.cluster > 15
        {
            return None;
        }
        Some(pack(
            self.timestamp_ms,
            u64::from(self.sequence),
            u64::from(self.generator),
            u64::from(self.cluster),
        ))
    }

    /// Unpacks an ID, rejecting non-zero reserved bits.
    pub fn unpack(id: u64) -> Result<Fields, LayoutError> {
        let reserved = (id >> RESERVED_SHIFT) & SIX_BITS;
        if reserved != 0 {
            return Err(LayoutError::ReservedBits(reserved));
        }
        Ok(Fields {
            timestamp_ms: (id & TIME_MASK).reverse_bits(),
            sequence: ((id >> SEQ_SHIFT) & SIX_BITS) as u8,
            generator: ((id >> GEN_SHIFT) & SIX_BITS) as u8,
            cluster: (id & 0xf) as u8,
        })
    }
}

#[inline(always)]
fn pack(ts: u64, seq: u64, generator: u64, cluster: u64) -> u64 {
    ts.reverse_bits() | seq << SEQ_SHIFT | generator << GEN_SHIFT | cluster
}

/// The lable64 layout for one cluster.
#[derive(Clone, Copy, Debug)]
pub struct Lable64 {
    cluster: u8,
}

/// lable64's line in the registry.
pub const ENTRY: super::Entry = super::Entry {
    name: "lable64",
    params: &[Param::Cluster],
    build: |p| {
        let l = Lable64::new(p.cluster).map_err(|e| BuildError::param(Param::Cluster, e))?;
        Ok(Box::new(l))
    },
};

impl Lable64 {
    pub fn new(cluster: u8) -> Result<Lable64, LayoutError> {
        if cluster > 15 {
            return Err(LayoutError::OutOfRange {
                field: "cluster",
                value: cluster.into(),
                max: 15,
            });
        }
        Ok(Lable64 { cluster })
    }
}

fn parse_hex(text: &str) -> Result<u64, LayoutError> {
    Ok(super::fixed_hex(text, 16)? as u64)
}

fn check_digits(text: &str, start: usize) -> Result<(), LayoutError> {
    if text.len() <= start {
        return Err(LayoutError::WrongLength {
            expected: "at least one digit".into(),
            got: 0,
        });
    }
    match text
        .char_indices()
        .skip(start)
        .find(|(_, c)| !c.is_ascii_digit())
    {
        Some((pos, ch)) => Err(LayoutError::BadChar {
            ch,
            pos,
            expected: "a decimal digit",
        }),
        None => Ok(()),
    }
}

fn parse_dec(text: &str) -> Result<u64, LayoutError> {
    check_digits(text, 0)?;
    text.parse::<u64>().map_err(|_| LayoutError::OutOfRange {
        field: "decimal ID",
        value: text.parse::<u128>().unwrap_or(u128::MAX),
        max: u64::MAX.into(),
    })
}

fn parse_i64(text: &str) -> Result<u64, LayoutError> {
    check_digits(text, usize::from(text.starts_with('-')))?;
    text.parse::<i64>()
        .map(|v| v as u64)
        .map_err(|_| LayoutError::OutOfRange {
            field: "signed ID magnitude",
            value: text
                .trim_start_matches('-')
                .parse::<u128>()
                .unwrap_or(u128::MAX),
            max: i64::MAX as u128 + u128::from(text.starts_with('-')),
        })
}

impl Layout for Lable64 {
    fn name(&self) -> &'static str {
        "lable64"
    }

    fn has_cluster(&self) -> bool {
        true
    }

    fn width(&self) -> usize {
        8
    }

    fn scheme(&self) -> Scheme {
        Scheme {
            tick_ns: 1_000_000,
            epoch_unix_ns: 0,
            max_tick: MAX_TIMESTAMP_MS,
            seq_min: 0,
            seq_max: 63,
            slots: 64,
            tick_tock: false,
            lead_ticks: 0,
        }
    }

    fn default_form(&self) -> TextForm {
        TextForm::Hex
    }

    fn supports(&self, form: TextForm) -> bool {
        matches!(form, TextForm::Hex | TextForm::Dec | TextForm::I64)
    }

    fn pack_run(&self, run: &Run, _ask: &RequestOptions, _count: u32, out: &mut Vec<u8>) {
        // Everything but the sequence is the same for the whole run: pack it once.
        let base = pack(run.tick, 0, u64::from(run.slot), u64::from(self.cluster));
        if run.len == 1 {
            out.extend_from_slice(&(base | u64::from(run.seq) << SEQ_SHIFT).to_be_bytes());
            return;
        }
        out.reserve(run.len as usize * 8);
        for seq in run.seq..run.seq + run.len {
            out.extend_from_slice(&(base | u64::from(seq) << SEQ_SHIFT).to_be_bytes());
        }
    }

    fn format(&self, id: &[u8], form: TextForm, out: &mut String) -> Result<(), LayoutError> {
        use std::fmt::Write;
        let id = be_u64(id)?;
        match form {
            TextForm::Hex => write!(out, "{id:016x}"),
            TextForm::Dec => write!(out, "{id}"),
            TextForm::I64 => write!(out, "{}", id as i64),
            other => return Err(LayoutError::unsupported(other, "lable64")),
        }
        .expect("writing to a String cannot fail");
        Ok(())
    }

    fn parse(&self, text: &str, form: Option<TextForm>) -> Result<Vec<u8>, LayoutError> {
        let id = match form {
            Some(TextForm::Hex) => parse_hex(text)?,
            Some(TextForm::Dec) => parse_dec(text)?,
            Some(TextForm::I64) => parse_i64(text)?,
            Some(other) => return Err(LayoutError::unsupported(other, "lable64")),
            None if text.starts_with('-') => parse_i64(text)?,
            None if text.len() == 16 && text.bytes().all(|b| b.is_ascii_hexdigit()) => {
                parse_hex(text)?
            }
            None if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) => {
                parse_dec(text)?
            }
            None => {
                return Err(LayoutError::Unrecognised {
                    layout: "lable64",
                    why: "expected 16 hex digits, a decimal u64 or a signed i64".into(),
                })
            }
        };
        Fields::unpack(id)?;
        Ok(id.to_be_bytes().to_vec())
    }

    fn decode(&self, id: &[u8]) -> Result<Decoded, LayoutError> {
        let raw = be_u64(id)?;
        let f = Fields::unpack(raw)?;
        let mut m = Decoded::new();
        m.push("layout", "lable64");
        m.push("id", format!("{raw:016x}"));
        m.push("timestamp_ms", f.timestamp_ms);
        m.push("sequence", f.sequence);
        m.push("generator", f.generator);
        m.push("cluster", f.cluster);
        m.push("time", super::rfc3339_millis(f.timestamp_ms.saturating_mul(1_000_000)));
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(serde::Deserialize)]
    struct Vector {
        timestamp_ms: u64,
        sequence: u8,
        generator: u8,
        cluster: u8,
        hex: String,
    }

    fn vectors() -> Vec<Vector> {
        include_str!("../../../../tests/vectors/lable64.jsonl")
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).expect("vector line parses"))
            .collect()
    }

    #[test]
    fn known_answers_both_directions() {
        let vs = vectors();
        assert!(
            vs.len() >= 7,
            "expected the reference vectors, got {}",
            vs.len()
        );
        for v in vs {
            let f = Fields {
                timestamp_ms: v.timestamp_ms,
                sequence: v.sequence,
                generator: v.generator,
                cluster: v.cluster,
            };
            let id = f.pack().expect("vector fields in range");
            assert_eq!(format!("{id:016x}"), v.hex, "pack {f:?}");
            let l = Lable64::new(v.cluster).unwrap();
            let bytes = l.parse(&v.hex, Some(TextForm::Hex)).unwrap();
            assert_eq!(Fields::unpack(be_u64(&bytes).unwrap()).unwrap(), f);
            let run = Run {
                tick: v.timestamp_ms,
                seq: v.sequence.into(),
                len: 1,
                slot: v.generator.into(),
                timeline: 0,
            };
            let mut out = Vec::new();
            l.pack_run(&run, &RequestOptions::default(), 1, &mut out);
            assert_eq!(out, id.to_be_bytes());
        }
    }

    #[test]
    fn reserved_bits_rejected() {
        let l = Lable64::new(0).unwrap();
        let err = l.parse("0000000000000400", None).unwrap_err();
        assert_eq!(err, LayoutError::ReservedBits(1));
        assert!(l.decode(&0x0000_0000_0000_fc00u64.to_be_bytes()).is_err());
    }

    #[test]
    fn bad_text_says_why() {
        let l = Lable64::new(0).unwrap();
        let cases = [
            ("", Some(TextForm::Hex), "wrong_length"),
            ("abc", Some(TextForm::Hex), "wrong_length"),
            ("000000000000000g", Some(TextForm::Hex), "bad_char"),
            ("12a", Some(TextForm::Dec), "bad_char"),
            ("18446744073709551616", Some(TextForm::Dec), "out_of_range"),
            ("-9223372036854775809", Some(TextForm::I64), "out_of_range"),
            ("-", Some(TextForm::I64), "wrong_length"),
            ("+5", None, "unrecognised"),
            ("zz", None, "unrecognised"),
            ("ééééééééé", None, "unrecognised"),
        ];
        for (text, form, kind) in cases {
            let err = l.parse(text, form).unwrap_err();
            assert_eq!(err.kind(), kind, "{text:?}: {err}");
        }
        assert_eq!(Lable64::new(16).unwrap_err().kind(), "out_of_range");
    }

    #[test]
    fn guesses_form_from_shape() {
        let l = Lable64::new(0).unwrap();
        let id = 0xcb54_ecf2_8400_0000u64;
        assert_eq!(l.parse("cb54ecf284000000", None).unwrap(), id.to_be_bytes());
        assert_eq!(l.parse("CB54ECF284000000", None).unwrap(), id.to_be_bytes());
        assert_eq!(l.parse(&id.to_string(), None).unwrap(), id.to_be_bytes());
        assert_eq!(
            l.parse(&(id as i64).to_string(), None).unwrap(),
            id.to_be_bytes()
        );
    }

    #[test]
    fn sixteen_decimal_digits_are_guessed_as_hex() {
        let l = Lable64::new(0).unwrap();
        // Read as hex this has reserved bits set; read as dec it is a valid ID.
        let text = "1000000000032768";
        assert_eq!(
            l.parse(text, None).unwrap_err(),
            LayoutError::ReservedBits(0x9)
        );
        let dec = l.parse(text, Some(TextForm::Dec)).unwrap();
        assert_eq!(
            u64::from_be_bytes(dec.try_into().unwrap()),
            1_000_000_000_032_768
        );
    }

    #[test]
    fn decode_json_keys() {
        let l = Lable64::new(5).unwrap();
        let id = Fields {
            timestamp_ms: 1_700_000_000_123,
            sequence: 3,
            generator: 9,
            cluster: 5,
        }
        .pack()
        .unwrap();
        let m = l.decode(&id.to_be_bytes()).unwrap().to_map();
        assert_eq!(m["timestamp_ms"], 1_700_000_000_123u64);
        assert_eq!(m["sequence"], 3);
        assert_eq!(m["generator"], 9);
        assert_eq!(m["cluster"], 5);
        assert_eq!(m["time"], "2023-11-14T22:13:20.123Z");
    }

    fn fields() -> impl Strategy<Value = Fields> {
        (0..=MAX_TIMESTAMP_MS, 0u8..64, 0u8..64, 0u8..16).prop_map(|(t, s, g, c)| Fields {
            timestamp_ms: t,
            sequence: s,
            generator: g,
            cluster: c,
        })
    }

    proptest! {
        #[test]
        fn round_trip_every_form(f in fields()) {
            let l = Lable64::new(f.cluster).unwrap();
            let id = f.pack().unwrap();
            prop_assert_eq!(Fields::unpack(id).unwrap(), f);
            for form in [TextForm::Hex, TextForm::Dec, TextForm::I64] {
                let mut s = String::new();
                l.format(&id.to_be_bytes(), form, &mut s).unwrap();
                prop_assert_eq!(l.parse(&s, Some(form)).unwrap(), id.to_be_bytes().to_vec());
                // Sixteen decimal digits read as hex when no form is named (documented).
                let ambiguous = s.len() == 16 && s.bytes().all(|b| b.is_ascii_digit());
                if form == TextForm::Hex || !ambiguous {
                    prop_assert_eq!(l.parse(&s, None).unwrap(), id.to_be_bytes().to_vec());
                }
            }
        }

        #[test]
        fn pack_run_matches_fields(f in fields(), len in 1u32..8) {
            let l = Lable64::new(f.cluster).unwrap();
            let seq = u32::from(f.sequence).min(64 - len);
            let mut out = Vec::new();
            l.pack_run(&Run { tick: f.timestamp_ms, seq, len, slot: f.generator.into(), timeline: 0 }, &RequestOptions::default(), len, &mut out);
            prop_assert_eq!(out.len(), len as usize * 8);
            for (i, chunk) in out.chunks(8).enumerate() {
                let got = Fields::unpack(be_u64(chunk).unwrap()).unwrap();
                prop_assert_eq!(got, Fields { sequence: (seq + i as u32) as u8, ..f });
            }
        }

        #[test]
        fn arbitrary_text_never_panics(s in "\\PC{0,24}") {
            let l = Lable64::new(0).unwrap();
            let _ = l.parse(&s, None);
            let _ = l.parse(&s, Some(TextForm::I64));
        }
    }
}
