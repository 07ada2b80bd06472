//! `uuid7`: an RFC 9562 version-7 UUID whose node bits are a leased slot, so IDs are unique
//! across hosts by construction and strictly increase per slot. Sixteen bytes, big-endian.
//!
//! The RFC's field on the left, what idcar puts in it on the right (bit 127 is the first bit
//! of the first byte):
//!
//! ```text
//! bits 127..80  unix_ts_ms (48)  Unix milliseconds, as the RFC requires (good until 10889)
//! bits  79..76  ver (4)          0111: version 7
//! bits  75..64  rand_a (12)      counter bits 21..10  } a 22-bit per-millisecond counter:
//! bits  63..62  var (2)          10: the RFC's variant } §6.2 Method 1, "fixed bit-length
//! bits  61..52  rand_b (62) ..   counter bits 9..0    }  dedicated counter"
//! bits  51..48  .. rand_b        cluster (4): --cluster-id, as lable64's
//! bits  47..32  .. rand_b        slot (16): the leased slot, a pool of 65,536 (probed)
//! bits  31..8   .. rand_b        random (24): fresh random bits per ID, against guessing
//! bits   7..0   .. rand_b        check (8): a keyless hash of the other 120 bits
//! ```
//!
//! **The counter** starts each millisecond at a seed below 2^21 and counts up by one per ID: the
//! RFC's "randomly initialize a portion of the counter", with the top bit kept zero "for the
//! purpose of guaranteeing the counter's ability to increment a certain number of times". The
//! seed keeps a millisecond's first counter from telling where the last one ended (§6.9,
//! guessing); the zero bit leaves room for 2^21 IDs per millisecond and slot (2.1 billion a
//! second, above what one socket carries), so while the clock moves a millisecond ends because
//! the clock does, not because the counter ran out. The seed is a keyed mix (splitmix64, not a
//! cryptographic function) of (millisecond, slot) with a key drawn at start: one seed per
//! millisecond, the same for every batch in it, no state. The random bits, not the counter,
//! are what resists guessing.
//!
//! **Order.** The most significant 74 bits are `(unix_ts_ms, ver, counter)`, and the generator
//! hands out `(millisecond, sequence)` pairs that strictly increase per slot: within one holder
//! in the order it issues them, across a wall clock that steps back (the generator runs ahead
//! of it within the mark); and from each claim of the slot to the next, across restarts and
//! successors (every holder starts above the slot's mark). So a slot's IDs increase as 128-bit
//! numbers, as bytes and as canonical lower-case text. IDs of *different* slots in the same
//! millisecond interleave by counter, as two hosts' IDs do in any UUIDv7 scheme.
//!
//! **Uniqueness** does not rest on the random bits: `(unix_ts_ms, counter)` never repeats within
//! a slot and the lease gives each slot one holder at a time, so `(ms, counter, cluster, slot)`
//! is unique across every instance of every cluster. The random bits are only against guessing.
//!
//! **The check byte** tells idcar's UUIDs from other generators' version-7 UUIDs (which decode
//! as far as the RFC allows: the time). It is the top eight bits of
//! `((hi × K) ⊕ (lo >> 8)) × K mod 2^64`, with `hi`/`lo` the UUID's high and low 64 bits and
//! `K = 0x9E3779B97F4A7C15`. A random UUIDv7 passes by chance once in 256; it is a label, not
//! an authenticator.
//!
//! Text forms: `uuid` (the default), the RFC's `xxxxxxxx-xxxx-7xxx-yxxx-xxxxxxxxxxxx` in lower
//! case; `hex`, the 32 digits without dashes; `ulid`, 26 characters of Crockford base32
//! (`0123456789ABCDEFGHJKMNPQRSTVWXYZ`), which ULID libraries read with the same millisecond
//! time, and which sorts as the bytes do. Parsing takes either case. Text that is not version 7
//! with the RFC's variant is refused. With no form named, text with a `-` is `uuid`, 32
//! characters are `hex` and 26 `ulid`.

mod text;

use super::{BuildError, Layout, LayoutError, Param, RequestOptions, Run, Scheme, TextForm};
use super::Decoded;
use text::{parse_canonical, parse_ulid, write_canonical};
pub use text::{to_text, to_ulid};

/// Bytes per ID.
pub const WIDTH: usize = 16;
/// The largest millisecond the RFC's 48-bit time field holds (in the year 10889).
pub const MAX_UNIX_TS_MS: u64 = (1 << 48) - 1;
/// The last millisecond idcar issues in: its clocks count nanoseconds in 64 bits, which run
/// out on 2554-07-21 (the layout's end date).
pub const LAST_ISSUED_MS: u64 = u64::MAX / 1_000_000 - 1;
/// The last millisecond whose time RFC 3339 can write (9999-12-31T23:59:59.999Z): decoding
/// refuses later UUIDs rather than print a time no parser reads.
pub const LAST_DECODED_MS: u64 = 253_402_300_799_999;
/// Bits of the per-millisecond counter.
pub const COUNTER_BITS: u32 = 22;
/// IDs one slot can issue per millisecond: the counter's room above its largest seed.
pub const IDS_PER_MS: u32 = 1 << 21;
/// Slots in a cluster's pool.
pub const SLOTS: u32 = 1 << 16;
/// Random bits per ID.
pub const RANDOM_BITS: u32 = 24;
/// The check hash's multiplier (2^64 divided by the golden ratio, odd).
pub const CHECK_K: u64 = 0x9E37_79B9_7F4A_7C15;

const VERSION: u64 = 0x7;
const VARIANT: u64 = 0b10;

/// The fields idcar puts in a UUIDv7.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fields {
    pub unix_ts_ms: u64,
    /// The per-millisecond counter (22 bits).
    pub counter: u32,
    pub cluster: u8,
    pub slot: u16,
    /// The random bits (24).
    pub random: u32,
}

impl Fields {
    /// The UUID as a 128-bit number, version, variant and check byte set; `None` if a field
    /// is too wide.
    pub fn pack(&self) -> Option<u128> {
        if self.unix_ts_ms > MAX_UNIX_TS_MS
            || self.counter >> COUNTER_BITS != 0
            || self.cluster > 15
            || self.random >> RANDOM_BITS != 0
        {
            return None;
        }
        let (hi, lo) = halves(self.unix_ts_ms, self.counter, self.cluster, self.slot);
        Some(u128::from(hi) << 64 | u128::from(with_check(hi, lo | u64::from(self.random) << 8)))
    }

    /// The fields of an idcar UUIDv7; `None` if `v` is not version 7 with the RFC's variant,
    /// or its check byte is not idcar's.
    pub fn unpack(v: u128) -> Option<Fields> {
        if !is_v7(v) || !checks(v) {
            return None;
        }
        let (hi, lo) = ((v >> 64) as u64, v as u64);
        Some(Fields {
            unix_ts_ms: hi >> 16,
            counter: ((hi & 0xfff) << 10 | (lo >> 52) & 0x3ff) as u32,
            cluster: (lo >> 48 & 0xf) as u8,
            slot: (lo >> 32) as u16,
            random: (lo >> 8) as u32 & 0xff_ffff,
        })
    }
}

/// The high and low words of a UUID, without random bits and check byte.
#[inline(always)]
fn halves(ms: u64, counter: u32, cluster: u8, slot: u16) -> (u64, u64) {
    let counter = u64::from(counter);
    let hi = ms << 16 | VERSION << 12 | counter >> 10;
    let lo = VARIANT << 62 | (counter & 0x3ff) << 52 | u64::from(cluster) << 48 | u64::from(slot) << 32;
    (hi, lo)
}

/// The check byte of a UUID's high word and its low word's top 56 bits.
#[inline(always)]
pub fn check_byte(hi: u64, lo: u64) -> u8 {
    ((hi.wrapping_mul(CHECK_K) ^ lo >> 8).wrapping_mul(CHECK_K) >> 56) as u8
}

/// `lo` with its last byte replaced by the check byte.
#[inline(always)]
fn with_check(hi: u64, lo: u64) -> u64 {
    lo & !0xff | u64::from(check_byte(hi, lo))
}

/// Whether `v` has version 7 and the RFC's variant (`10`).
pub fn is_v7(v: u128) -> bool {
    (v >> 76) & 0xf == 7 && (v >> 62) & 0b11 == 2
}

/// Whether `v`'s check byte is the one idcar writes.
pub fn checks(v: u128) -> bool {
    let (hi, lo) = ((v >> 64) as u64, v as u64);
    lo & 0xff == u64::from(check_byte(hi, lo))
}


/// Refuses a value that is not a version-7 UUID with the RFC's variant, saying which it is.
fn require_v7(v: u128) -> Result<u128, LayoutError> {
    if is_v7(v) {
        return Ok(v);
    }
    let version = (v >> 76) & 0xf;
    let why = if version != 7 {
        format!("version {version}, not 7 (the 13th hex digit of a UUIDv7 is 7)")
    } else {
        format!(
            "variant bits {:02b}, not 10 (the 17th hex digit of a UUIDv7 is 8, 9, a or b)",
            (v >> 62) & 0b11
        )
    };
    Err(LayoutError::Unrecognised {
        layout: "uuid7",
        why,
    })
}

/// The splitmix64 finaliser: a bijection of 64 bits that spreads every input bit.
#[inline(always)]
fn mix(mut z: u64) -> u64 {
    z = (z ^ z >> 30).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ z >> 27).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ z >> 31
}

/// The uuid7 layout for one cluster.
#[derive(Clone, Copy, Debug)]
pub struct Uuid7 {
    cluster: u8,
    /// Keys of the counter's seed, drawn when the layout is built.
    key: [u64; 2],
    entropy: fn() -> u64,
}

/// uuid7's line in the registry.
pub const ENTRY: super::Entry = super::Entry {
    name: "uuid7",
    params: &[Param::Cluster],
    build: |p| {
        let l = Uuid7::new(p.cluster, p.entropy).map_err(|e| BuildError::param(Param::Cluster, e))?;
        Ok(Box::new(l))
    },
};

impl Uuid7 {
    /// The layout for `cluster` (0 to 15); `entropy` gives the random bits and the seed's key.
    pub fn new(cluster: u8, entropy: fn() -> u64) -> Result<Uuid7, LayoutError> {
        if cluster > 15 {
            return Err(LayoutError::OutOfRange {
                field: "cluster",
                value: cluster.into(),
                max: 15,
            });
        }
        Ok(Uuid7 {
            cluster,
            key: [entropy(), entropy()],
            entropy,
        })
    }

    /// The counter's first value in millisecond `ms` for `slot`: below 2^21, the same for
    /// every call with the same arguments.
    pub fn seed(&self, ms: u64, slot: u32) -> u32 {
        let x = ms << 16 ^ u64::from(slot);
        (mix(mix(x ^ self.key[0]) ^ self.key[1]) & u64::from(IDS_PER_MS - 1)) as u32
    }
}

impl Layout for Uuid7 {
    fn name(&self) -> &'static str {
        "uuid7"
    }

    fn width(&self) -> usize {
        WIDTH
    }

    fn has_cluster(&self) -> bool {
        true
    }

    fn increasing(&self) -> bool {
        true
    }

    fn random_low_bits(&self) -> u32 {
        32
    }

    fn scheme(&self) -> Scheme {
        Scheme {
            tick_ns: 1_000_000,
            epoch_unix_ns: 0,
            max_tick: LAST_ISSUED_MS,
            seq_min: 0,
            seq_max: IDS_PER_MS - 1,
            slots: SLOTS,
            tick_tock: false,
            lead_ticks: 0,
        }
    }

    fn default_form(&self) -> TextForm {
        TextForm::Uuid
    }

    fn supports(&self, form: TextForm) -> bool {
        matches!(form, TextForm::Uuid | TextForm::Hex | TextForm::Ulid)
    }

    fn pack_run(&self, run: &Run, _opts: &RequestOptions, _count: u32, out: &mut Vec<u8>) {
        debug_assert!(run.tick <= LAST_ISSUED_MS, "the generator keeps to max_tick");
        debug_assert!(run.slot < SLOTS, "the lease keeps to the pool");
        debug_assert!(run.seq + run.len <= IDS_PER_MS, "the generator keeps to seq_max");
        let seed = self.seed(run.tick, run.slot);
        let (hi0, lo0) = halves(run.tick, 0, self.cluster, run.slot as u16);
        out.reserve(run.len as usize * WIDTH);
        // One draw of 64 random bits gives two IDs their 24 each.
        let mut bits = 0;
        for (i, seq) in (run.seq..run.seq + run.len).enumerate() {
            if i % 2 == 0 {
                bits = (self.entropy)();
            }
            let random = bits >> (24 * (i % 2)) & 0xff_ffff;
            let counter = u64::from(seed + seq);
            let hi = hi0 | counter >> 10;
            let lo = with_check(hi, lo0 | (counter & 0x3ff) << 52 | random << 8);
            out.extend_from_slice(&hi.to_be_bytes());
            out.extend_from_slice(&lo.to_be_bytes());
        }
    }

    fn format(&self, id: &[u8], form: TextForm, out: &mut String) -> Result<(), LayoutError> {
        use std::fmt::Write;
        let v = super::be_u128(id)?;
        match form {
            TextForm::Uuid => write_canonical(v, out),
            TextForm::Hex => write!(out, "{v:032x}").expect("writing to a String cannot fail"),
            TextForm::Ulid => out.push_str(&to_ulid(v)),
            other => return Err(LayoutError::unsupported(other, "uuid7")),
        }
        Ok(())
    }

    fn parse(&self, text: &str, form: Option<TextForm>) -> Result<Vec<u8>, LayoutError> {
        let v = match form {
            Some(TextForm::Uuid) => parse_canonical(text)?,
            Some(TextForm::Hex) => super::fixed_hex(text, 32)?,
            Some(TextForm::Ulid) => parse_ulid(text)?,
            Some(other) => return Err(LayoutError::unsupported(other, "uuid7")),
            None => match text.len() {
                _ if text.contains('-') => parse_canonical(text)?,
                32 => super::fixed_hex(text, 32)?,
                26 => parse_ulid(text)?,
                _ => {
                    return Err(LayoutError::Unrecognised {
                        layout: "uuid7",
                        why: "expected 36 characters (8-4-4-4-12 hex digits), 32 hex digits \
                              or 26 Crockford base32 characters"
                            .into(),
                    })
                }
            },
        };
        Ok(require_v7(v)?.to_be_bytes().to_vec())
    }

    fn decode(&self, id: &[u8]) -> Result<Decoded, LayoutError> {
        let v = require_v7(super::be_u128(id)?)?;
        let ms = (v >> 80) as u64;
        if ms > LAST_DECODED_MS {
            return Err(LayoutError::OutOfRange {
                field: "unix_ts_ms (after 9999-12-31T23:59:59.999Z, the last time RFC 3339 writes)",
                value: ms.into(),
                max: LAST_DECODED_MS.into(),
            });
        }
        let time = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
        let mut m = Decoded::new();
        m.push("layout", "uuid7");
        m.push("id", to_text(v));
        m.push("hex", format!("{v:032x}"));
        m.push("unix_ts_ms", ms);
        m.push("time", humantime::format_rfc3339_millis(time).to_string());
        match Fields::unpack(v) {
            Some(f) => {
                m.push("issuer", "idcar");
                m.push("counter", f.counter);
                m.push("cluster", f.cluster);
                m.push("slot", f.slot);
                m.push("random", f.random);
            }
            None => {
                m.push("issuer", "other");
            }
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests;
