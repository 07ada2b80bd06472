//! `ugd60` (seed 000): a 60-bit ID shown as a 10-character base64-like string.
//!
//! Storage: `timestamp << 28 | worker << 19 | sequence << 9 | random` — seconds since
//! 2018-03-01T00:00:00Z (32 bits), the worker ID (9 bits: a pool of 512, the negotiated slot),
//! a sequence per second (10 bits: 1,024 IDs per second per worker; when spent, wait for the
//! next second) and 9 random bits drawn from a CSPRNG (the thread-local generator of `rand`,
//! ChaCha-based and seeded from the operating system).
//!
//! Display: the 32-bit timestamp is **bit**-reversed (the vectors settle "reverse"), then the
//! 60 bits `bitrev32(ts) << 28 | low 28 bits` are cut into ten 6-bit groups, most significant
//! first, over `A-Z a-z 0-9 - _`. So the frequently changing parts stand at both ends.
//!
//! Text forms: `b64` (the display form, default), `hex` (15 lower-case digits of the storage
//! form, as the reference stores it), `dec` (the storage integer). The seed's worker-ID TTL
//! (3600 s) is what the lease provides: the worker ID is held only while the lease is valid,
//! renewed in the background, and fenced by its time mark (see the README).

use super::{be_u64, Layout, LayoutError, RequestOptions, Run, Scheme, TextForm};
use super::Decoded;

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
/// 2018-03-01T00:00:00Z in Unix seconds.
pub const EPOCH_S: u64 = 1_519_862_400;
const LOW28: u64 = (1 << 28) - 1;
const MAX60: u64 = (1 << 60) - 1;

/// The fields of one ugd60 ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fields {
    pub timestamp_s: u32,
    pub worker: u16,
    pub seq: u16,
    pub random: u16,
}

impl Fields {
    /// The storage integer; `None` if a field is out of range.
    pub fn pack(&self) -> Option<u64> {
        if self.worker > 511 || self.seq > 1023 || self.random > 511 {
            return None;
        }
        Some(
            u64::from(self.timestamp_s) << 28
                | u64::from(self.worker) << 19
                | u64::from(self.seq) << 9
                | u64::from(self.random),
        )
    }

    pub fn unpack(v: u64) -> Fields {
        Fields {
            timestamp_s: (v >> 28) as u32,
            worker: ((v >> 19) & 0x1ff) as u16,
            seq: ((v >> 9) & 0x3ff) as u16,
            random: (v & 0x1ff) as u16,
        }
    }
}

/// The display form of a storage integer.
pub fn to_display(storage: u64) -> String {
    let ts = (storage >> 28) as u32;
    let v = u64::from(ts.reverse_bits()) << 28 | (storage & LOW28);
    (0..10)
        .map(|i| ALPHABET[((v >> (54 - 6 * i)) & 0x3f) as usize] as char)
        .collect()
}

/// The storage integer of a display form.
pub fn from_display(text: &str) -> Result<u64, LayoutError> {
    if text.len() != 10 {
        return Err(LayoutError::WrongLength {
            expected: "10 characters".into(),
            got: text.chars().count(),
        });
    }
    let mut v = 0u64;
    for (pos, ch) in text.char_indices() {
        let d = ALPHABET
            .iter()
            .position(|&a| a as char == ch)
            .ok_or(LayoutError::BadChar {
                ch,
                pos,
                expected: "one of A-Z a-z 0-9 - _",
            })?;
        v = v << 6 | d as u64;
    }
    let ts = ((v >> 28) as u32).reverse_bits();
    Ok(u64::from(ts) << 28 | (v & LOW28))
}

/// ugd60's line in the registry.
pub const ENTRY: super::Entry = super::Entry {
    name: "ugd60",
    params: &[],
    build: |p| Ok(Box::new(Ugd60 { entropy: p.entropy })),
};

/// The ugd60 layout; its 9 random bits per ID come from the injected `entropy`.
pub struct Ugd60 {
    entropy: fn() -> u64,
}

impl Default for Ugd60 {
    fn default() -> Ugd60 {
        Ugd60 {
            entropy: crate::clock::os_random,
        }
    }
}

impl std::fmt::Debug for Ugd60 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ugd60")
    }
}

fn value_of(bytes: &[u8]) -> Result<u64, LayoutError> {
    let v = be_u64(bytes)?;
    if v > MAX60 {
        return Err(LayoutError::OutOfRange {
            field: "ugd60 ID",
            value: v.into(),
            max: MAX60.into(),
        });
    }
    Ok(v)
}

impl Layout for Ugd60 {
    fn name(&self) -> &'static str {
        "ugd60"
    }

    fn width(&self) -> usize {
        8
    }

    fn scheme(&self) -> Scheme {
        Scheme {
            tick_ns: 1_000_000_000,
            epoch_unix_ns: EPOCH_S * 1_000_000_000,
            max_tick: u64::from(u32::MAX),
            seq_min: 0,
            seq_max: 1023,
            slots: 512,
            tick_tock: false,
            lead_ticks: 0,
        }
    }

    fn random_low_bits(&self) -> u32 {
        9
    }

    fn default_form(&self) -> TextForm {
        TextForm::B64
    }

    fn supports(&self, form: TextForm) -> bool {
        matches!(form, TextForm::B64 | TextForm::Hex | TextForm::Dec)
    }

    fn pack_run(&self, run: &Run, _ask: &RequestOptions, _count: u32, out: &mut Vec<u8>) {
        let base = run.tick << 28 | u64::from(run.slot) << 19;
        out.reserve(run.len as usize * 8);
        for seq in run.seq..run.seq + run.len {
            let random = (self.entropy)() & 0x1ff;
            out.extend_from_slice(&(base | u64::from(seq) << 9 | random).to_be_bytes());
        }
    }

    fn format(&self, id: &[u8], form: TextForm, out: &mut String) -> Result<(), LayoutError> {
        use std::fmt::Write;
        let v = value_of(id)?;
        match form {
            TextForm::B64 => out.push_str(&to_display(v)),
            TextForm::Hex => write!(out, "{v:015x}").expect("writing to a String cannot fail"),
            TextForm::Dec => write!(out, "{v}").expect("writing to a String cannot fail"),
            other => return Err(LayoutError::unsupported(other, "ugd60")),
        }
        Ok(())
    }

    fn parse(&self, text: &str, form: Option<TextForm>) -> Result<Vec<u8>, LayoutError> {
        let is_hex = |t: &str| t.len() == 15 && t.bytes().all(|b| b.is_ascii_hexdigit());
        let v = match form {
            Some(TextForm::B64) => from_display(text)?,
            Some(TextForm::Hex) if is_hex(text) => u64::from_str_radix(text, 16).expect("checked"),
            Some(TextForm::Hex) => {
                return Err(LayoutError::WrongLength {
                    expected: "15 hex digits".into(),
                    got: text.chars().count(),
                })
            }
            Some(TextForm::Dec) => {
                if let Some((pos, ch)) = text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
                    return Err(LayoutError::BadChar {
                        ch,
                        pos,
                        expected: "a decimal digit",
                    });
                }
                text.parse::<u64>().unwrap_or(u64::MAX)
            }
            Some(other) => return Err(LayoutError::unsupported(other, "ugd60")),
            None if text.len() == 10 => from_display(text)?,
            None if is_hex(text) => u64::from_str_radix(text, 16).expect("checked"),
            None => {
                return Err(LayoutError::Unrecognised {
                    layout: "ugd60",
                    why: "expected the 10-character form or 15 hex digits (or name the decimal form)"
                        .into(),
                })
            }
        };
        value_of(&v.to_be_bytes())?;
        Ok(v.to_be_bytes().to_vec())
    }

    fn decode(&self, id: &[u8]) -> Result<Decoded, LayoutError> {
        let v = value_of(id)?;
        let f = Fields::unpack(v);
        let unix_s = EPOCH_S + u64::from(f.timestamp_s);
        let mut m = Decoded::new();
        m.push("layout", "ugd60");
        m.push("id", to_display(v));
        m.push("storage_hex", format!("{v:015x}"));
        m.push("timestamp_s", f.timestamp_s);
        m.push("worker", f.worker);
        m.push("seq", f.seq);
        m.push("random", f.random);
        m.push("time", super::rfc3339_millis(unix_s.saturating_mul(1_000_000_000)));
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_answers_both_directions() {
        let mut checked = 0;
        for v in super::super::vector_lines(include_str!("../../../../tests/vectors/ugd60.jsonl")) {
            let line = v.to_string();
            let l = Ugd60::default();
            if let Some(ts) = v["timestamp_s"].as_u64() {
                let f = Fields {
                    timestamp_s: ts as u32,
                    worker: v["worker"].as_u64().unwrap() as u16,
                    seq: v["seq"].as_u64().unwrap() as u16,
                    random: v["random"].as_u64().unwrap() as u16,
                };
                let s = f.pack().unwrap();
                assert_eq!(
                    format!("{s:015x}"),
                    v["storage_hex"].as_str().unwrap(),
                    "{line}"
                );
                assert_eq!(s.to_string(), v["int60"].as_str().unwrap());
                assert_eq!(to_display(s), v["display"].as_str().unwrap(), "{line}");
                assert_eq!(from_display(v["display"].as_str().unwrap()).unwrap(), s);
                assert_eq!(Fields::unpack(s), f);
                // The time the reference was given lies within that second (floored).
                let ms = v["unix_ms_input"].as_u64().unwrap();
                assert_eq!(l.scheme().tick_at(ms * 1_000_000), Some(ts), "{line}");
                checked += 1;
            } else if let Some(hex) = v["storage_hex_input"].as_str() {
                let bytes = l.parse(hex, Some(TextForm::Hex)).unwrap();
                let mut out = String::new();
                l.format(&bytes, TextForm::B64, &mut out).unwrap();
                assert_eq!(out, v["display"].as_str().unwrap(), "{line}");
                checked += 1;
            } else if let Some(d) = v["display_input"].as_str() {
                let bytes = l.parse(d, None).unwrap();
                let mut out = String::new();
                l.format(&bytes, TextForm::Hex, &mut out).unwrap();
                assert_eq!(out, v["storage_hex"].as_str().unwrap(), "{line}");
                checked += 1;
            } else if let Some(hex3) = v["hex3"].as_str() {
                // The reference's 12-bit helper: two characters, most significant first.
                let n = u64::from_str_radix(hex3, 16).unwrap();
                let chars: String = [n >> 6, n & 0x3f]
                    .iter()
                    .map(|d| ALPHABET[*d as usize] as char)
                    .collect();
                assert_eq!(chars, v["chars"].as_str().unwrap());
                checked += 1;
            }
        }
        assert!(checked >= 16, "checked {checked}");
    }

    #[test]
    fn random_bits_come_from_the_injected_entropy() {
        let layout = Ugd60 {
            entropy: || 0xffff_ffff_ffff_fe5a,
        };
        let run = Run {
            tick: 7,
            seq: 3,
            len: 2,
            slot: 9,
            timeline: 0,
        };
        let mut out = Vec::new();
        layout.pack_run(&run, &RequestOptions::default(), 2, &mut out);
        for (i, id) in out.chunks_exact(8).enumerate() {
            let v = u64::from_be_bytes(id.try_into().unwrap());
            assert_eq!(v, 7 << 28 | 9 << 19 | (3 + i as u64) << 9 | 0x05a);
        }
    }

    #[test]
    fn pack_run_has_fields_and_nine_random_bits() {
        let mut out = Vec::new();
        Ugd60::default().pack_run(
            &Run {
                tick: 1234,
                seq: 10,
                len: 200,
                slot: 77,
                timeline: 0,
            },
            &RequestOptions::default(),
            200,
            &mut out,
        );
        let mut randoms = std::collections::HashSet::new();
        for (i, id) in out.chunks(8).enumerate() {
            let f = Fields::unpack(value_of(id).unwrap());
            assert_eq!((f.timestamp_s, f.worker, f.seq), (1234, 77, 10 + i as u16));
            randoms.insert(f.random);
        }
        assert!(randoms.len() > 50, "random bits vary: {}", randoms.len());
    }

    #[test]
    fn bad_text_says_why() {
        for (text, form, kind) in [
            ("AAAAAAAAA", None, "unrecognised"),
            ("AAAAAAAAA!", None, "bad_char"),
            ("AAAAAAAAAA", Some(TextForm::Hex), "wrong_length"),
            ("fffff", Some(TextForm::Dec), "bad_char"),
            ("99999999999999999999", Some(TextForm::Dec), "out_of_range"),
            ("1152921504606846976", Some(TextForm::Dec), "out_of_range"),
            ("x", Some(TextForm::I64), "unsupported_form"),
        ] {
            assert_eq!(
                Ugd60::default().parse(text, form).unwrap_err().kind(),
                kind,
                "{text}"
            );
        }
    }

    proptest! {
        #[test]
        fn round_trip(ts in any::<u32>(), worker in 0u16..512, seq in 0u16..1024, random in 0u16..512) {
            let f = Fields { timestamp_s: ts, worker, seq, random };
            let s = f.pack().unwrap();
            for form in [TextForm::B64, TextForm::Hex, TextForm::Dec] {
                let mut t = String::new();
                Ugd60::default().format(&s.to_be_bytes(), form, &mut t).unwrap();
                prop_assert_eq!(Ugd60::default().parse(&t, Some(form)).unwrap(), s.to_be_bytes().to_vec());
            }
            prop_assert_eq!(from_display(&to_display(s)).unwrap(), s);
        }

        #[test]
        fn arbitrary_text_never_panics(t in "\\PC{0,16}") {
            let _ = Ugd60::default().parse(&t, None);
        }
    }
}
