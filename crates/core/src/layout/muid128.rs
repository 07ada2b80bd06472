//! `muid128`, Gink's muid (seed 004): a 128-bit ID, `timestamp << 76 | medallion << 32 |
//! offset`, sixteen bytes big-endian.
//!
//! - `timestamp`: microseconds since the Unix epoch (52 bits, good until 2112). One muid per
//!   microsecond and slot, so timestamps strictly increase; the generator may run up to a
//!   millisecond ahead of the wall clock (within the lease) so a batch is not a thousand waits.
//! - `medallion`: the node (44 bits). idcar's medallion is `medallion_base + slot`: the lease
//!   hands out a slot and the pool of `2^32 - 1` medallions starts at [`MEDALLION_BASE`]
//!   (`0x100_0000_0000`), inside the seed's range `0x10000000000..=0x1FFFFFFFFFF`. The seed
//!   picks medallions at random in that range; idcar leases them instead, which makes them
//!   unique among idcar instances (a node choosing at random may still land in the pool).
//! - `offset`: 32 bits, two's complement, decoded signed. A plain muid has offset 0 (the
//!   sequence number, which is always 0); the IDs of one transaction (`RequestOptions::transaction`)
//!   share a timestamp and medallion and take offsets `1..=count`. Offset 0 names the
//!   transaction itself, as in the seed. Negative offsets are allowed (the seed uses them for
//!   references within a transaction) and, as in the packed form, sort after positive ones.
//!
//! Packed bytes sort as the tuple `(timestamp, medallion, offset as u32)`.
//!
//! Text forms: `muid` (the default) is upper-case hex in 13-11-8 groups joined by `-`, e.g.
//! `5D5EAC793E61F-1BFC71B112D-0000000B`; `hex` is the 32 **lower-case** hex digits of the
//! packed form (the reference's vectors print them upper-case). Parsing accepts either case
//! in both forms. With no form named, text with a `-` or of 13 characters is the muid form,
//! 32 characters are hex.
//!
//! What the muid form accepts, and where idcar differs from the reference (PyPI `gink`,
//! `Muid.from_str`):
//! - The seed's short forms `TS` (medallion and offset 0) and `TS-MED` (offset 0) are
//!   accepted; the reference's `from_str` refuses them (it wants three groups, 32 digits).
//! - Each group must have exactly its width (13, 11, 8) and only hex digits. The reference
//!   checks only the 32-digit total, and Python's `int(_, 16)` also takes `_`, `+`, spaces
//!   and `0x`.
//! - The seed's example `5D5EAC793E61F-0000000000000-00000` has a 13-digit medallion and a
//!   5-digit offset group (31 digits): group widths of an earlier 14-13-5 packing. It fits
//!   neither that packing nor the current one and the reference refuses it too; idcar says
//!   `wrong_length` for the medallion group.
//! - The reference reads an all-ones timestamp or medallion as `-1`; idcar's fields are
//!   unsigned and report `2^52 - 1` and `2^44 - 1`. [`Fields::new`], which takes the
//!   reference's constructor arguments, refuses negative timestamps and medallions.
//! - The reference accepts offsets in `-(2^32 - 1)..2^32` but normalises only those above
//!   `2^31 - 1`, so `-2^31 - 1` is kept yet written as `7FFFFFFF`. [`Fields::new`] takes
//!   `-2^31..2^32` (a value from `2^31` up is read as its two's complement, as the reference
//!   does) and refuses the rest.

use super::{BuildError, Layout, LayoutError, Param, RequestOptions, Run, Scheme, TextForm};
use super::Decoded;
use std::fmt::Write;

const WIDTH: usize = 16;
const TIMESTAMP_BITS: u32 = 52;
const MEDALLION_BITS: u32 = 44;
const TIMESTAMP_SHIFT: u32 = 76;
const MEDALLION_SHIFT: u32 = 32;
/// The muid form's groups: hex digits and name.
const GROUPS: [(usize, &str); 3] = [(13, "timestamp"), (11, "medallion"), (8, "offset")];

/// The largest timestamp, in microseconds since the Unix epoch (year 2112).
pub const MAX_TIMESTAMP: u64 = (1 << TIMESTAMP_BITS) - 1;
/// The largest medallion (the reference's `-1`).
pub const MAX_MEDALLION: u64 = (1 << MEDALLION_BITS) - 1;
/// idcar's default first medallion: the start of the seed's range.
pub const MEDALLION_BASE: u64 = 0x100_0000_0000;
/// The largest medallion base: every slot's medallion stays below [`MAX_MEDALLION`].
pub const MAX_MEDALLION_BASE: u64 = MAX_MEDALLION - 1 - u32::MAX as u64;

/// The fields of one muid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fields {
    pub timestamp: u64,
    pub medallion: u64,
    pub offset: i32,
}

impl Fields {
    /// Checked construction from the reference constructor's arguments (`Muid(timestamp,
    /// medallion, offset)`); see the module notes for the ranges.
    pub fn new(timestamp: i64, medallion: i64, offset: i64) -> Result<Fields, LayoutError> {
        let timestamp = field_u64("timestamp", timestamp, MAX_TIMESTAMP)?;
        let medallion = field_u64("medallion", medallion, MAX_MEDALLION)?;
        if offset < i64::from(i32::MIN) {
            return Err(LayoutError::Invalid(format!(
                "offset {offset} is below -2^31 and does not fit 32 bits"
            )));
        }
        let offset = u32::try_from(offset)
            .map(|u| u as i32)
            .or_else(|_| i32::try_from(offset))
            .map_err(|_| LayoutError::OutOfRange {
                field: "offset",
                value: offset as u128,
                max: u32::MAX.into(),
            })?;
        Ok(Fields {
            timestamp,
            medallion,
            offset,
        })
    }

    /// The packed integer; `None` if the timestamp or medallion is too wide.
    pub fn pack(&self) -> Option<u128> {
        if self.timestamp > MAX_TIMESTAMP || self.medallion > MAX_MEDALLION {
            return None;
        }
        Some(pack(self.timestamp, self.medallion, self.offset as u32))
    }

    /// Every 128-bit value is a muid.
    pub fn unpack(v: u128) -> Fields {
        Fields {
            timestamp: (v >> TIMESTAMP_SHIFT) as u64,
            medallion: (v >> MEDALLION_SHIFT) as u64 & MAX_MEDALLION,
            offset: v as u32 as i32,
        }
    }
}

fn field_u64(field: &'static str, v: i64, max: u64) -> Result<u64, LayoutError> {
    let u =
        u64::try_from(v).map_err(|_| LayoutError::Invalid(format!("{field} {v} is negative")))?;
    if u > max {
        return Err(LayoutError::OutOfRange {
            field,
            value: u.into(),
            max: max.into(),
        });
    }
    Ok(u)
}

#[inline(always)]
fn pack(timestamp: u64, medallion: u64, offset: u32) -> u128 {
    u128::from(timestamp) << TIMESTAMP_SHIFT
        | u128::from(medallion) << MEDALLION_SHIFT
        | u128::from(offset)
}

/// Appends the muid form of a packed value.
fn write_text(v: u128, out: &mut String) {
    let f = Fields::unpack(v);
    write!(
        out,
        "{:013X}-{:011X}-{:08X}",
        f.timestamp, f.medallion, f.offset as u32
    )
    .expect("writing to a String cannot fail");
}

/// The muid form of a packed value, e.g. `5D5EAC793E61F-1BFC71B112D-0000000B`.
pub fn to_text(v: u128) -> String {
    let mut s = String::with_capacity(34);
    write_text(v, &mut s);
    s
}

/// The packed value of a muid form: `TS`, `TS-MED` or `TS-MED-OFF`, hex digits of either case.
pub fn from_text(text: &str) -> Result<u128, LayoutError> {
    if let Some((pos, ch)) = text
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_hexdigit() || c == '-'))
    {
        return Err(LayoutError::BadChar {
            ch,
            pos,
            expected: "a hex digit or '-'",
        });
    }
    let mut values = [0u64; 3];
    let mut parts = text.split('-');
    for (value, (digits, name)) in values.iter_mut().zip(GROUPS) {
        let Some(part) = parts.next() else { break };
        if part.len() != digits {
            return Err(LayoutError::WrongLength {
                expected: format!("{digits} hex digits in the {name} group"),
                got: part.len(),
            });
        }
        *value = u64::from_str_radix(part, 16).expect("checked hex digits");
    }
    if parts.next().is_some() {
        return Err(LayoutError::Unrecognised {
            layout: "muid128",
            why: "more than three groups (TIMESTAMP-MEDALLION-OFFSET)".into(),
        });
    }
    let [timestamp, medallion, offset] = values;
    Ok(pack(timestamp, medallion, offset as u32))
}

fn parse_hex(text: &str) -> Result<u128, LayoutError> {
    super::fixed_hex(text, 2 * WIDTH)
}


/// The muid128 layout: a pool of medallions `medallion_base + slot`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Muid128 {
    medallion_base: u64,
}

impl Default for Muid128 {
    fn default() -> Muid128 {
        Muid128 {
            medallion_base: MEDALLION_BASE,
        }
    }
}

/// muid128's line in the registry. Bases are multiples of 2^32 (a pool's size), so pools
/// with different bases are equal or disjoint, never overlapping.
pub const ENTRY: super::Entry = super::Entry {
    name: "muid128",
    params: &[Param::MedallionBase],
    build: |p| {
        if p.medallion_base % (1 << 32) != 0 {
            return Err(BuildError::param(
                Param::MedallionBase,
                format!(
                    "medallion base {:#x} must be a multiple of 0x100000000 (2^32, the pool's \
                     size), so pools with different bases never overlap",
                    p.medallion_base
                ),
            ));
        }
        let l = Muid128::new(p.medallion_base)
            .map_err(|e| BuildError::param(Param::MedallionBase, e))?;
        Ok(Box::new(l))
    },
};

impl Muid128 {
    /// A pool starting at `medallion_base` (1 to [`MAX_MEDALLION_BASE`]): medallion 0 is what
    /// the short text forms stand for, and `2^44 - 1` is the reference's `-1`.
    pub fn new(medallion_base: u64) -> Result<Muid128, LayoutError> {
        if medallion_base == 0 {
            return Err(LayoutError::Invalid(
                "medallion base 0: medallion 0 means \"no medallion\"".into(),
            ));
        }
        if medallion_base > MAX_MEDALLION_BASE {
            return Err(LayoutError::OutOfRange {
                field: "medallion base",
                value: medallion_base.into(),
                max: MAX_MEDALLION_BASE.into(),
            });
        }
        Ok(Muid128 { medallion_base })
    }

    pub fn medallion_base(&self) -> u64 {
        self.medallion_base
    }

    /// The medallion of a slot.
    pub fn medallion(&self, slot: u32) -> u64 {
        self.medallion_base + u64::from(slot)
    }
}

impl Layout for Muid128 {
    fn name(&self) -> &'static str {
        "muid128"
    }

    fn width(&self) -> usize {
        WIDTH
    }

    fn scheme(&self) -> Scheme {
        Scheme {
            tick_ns: 1_000,
            epoch_unix_ns: 0,
            max_tick: MAX_TIMESTAMP,
            seq_min: 0,
            seq_max: 0,
            slots: u32::MAX,
            tick_tock: false,
            lead_ticks: 1_000,
        }
    }

    fn default_form(&self) -> TextForm {
        TextForm::Muid
    }

    fn supports(&self, form: TextForm) -> bool {
        matches!(form, TextForm::Muid | TextForm::Hex)
    }

    fn check(&self, opts: &RequestOptions) -> Result<(), LayoutError> {
        if opts.meta.is_some() {
            return Err(LayoutError::UnsupportedOption {
                option: "meta",
                layout: "muid128",
            });
        }
        Ok(())
    }

    fn pack_run(&self, run: &Run, opts: &RequestOptions, count: u32, out: &mut Vec<u8>) {
        debug_assert!(run.tick <= MAX_TIMESTAMP, "the generator keeps to max_tick");
        let base = pack(run.tick, self.medallion(run.slot), 0);
        if opts.transaction {
            // One timestamp and medallion for the whole request; offset 0 is the transaction.
            debug_assert_eq!(run.len, 1, "a transaction takes one tick");
            debug_assert!(count <= i32::MAX as u32, "offsets stay positive");
            out.reserve(count as usize * WIDTH);
            for offset in 1..=count {
                out.extend_from_slice(&(base | u128::from(offset)).to_be_bytes());
            }
        } else {
            // The sequence number is the offset: always 0, as the scheme has one per tick.
            out.reserve(run.len as usize * WIDTH);
            for seq in run.seq..run.seq + run.len {
                out.extend_from_slice(&(base | u128::from(seq)).to_be_bytes());
            }
        }
    }

    fn format(&self, id: &[u8], form: TextForm, out: &mut String) -> Result<(), LayoutError> {
        let v = super::be_u128(id)?;
        match form {
            TextForm::Muid => write_text(v, out),
            TextForm::Hex => write!(out, "{v:032x}").expect("writing to a String cannot fail"),
            other => return Err(LayoutError::unsupported(other, "muid128")),
        }
        Ok(())
    }

    fn parse(&self, text: &str, form: Option<TextForm>) -> Result<Vec<u8>, LayoutError> {
        let v = match form {
            Some(TextForm::Muid) => from_text(text)?,
            Some(TextForm::Hex) => parse_hex(text)?,
            Some(other) => return Err(LayoutError::unsupported(other, "muid128")),
            None if text.contains('-') || text.len() == GROUPS[0].0 => from_text(text)?,
            None if text.len() == 2 * WIDTH => parse_hex(text)?,
            None => {
                return Err(LayoutError::Unrecognised {
                    layout: "muid128",
                    why: "expected TIMESTAMP[-MEDALLION[-OFFSET]] in 13-11-8 hex digits \
                          or 32 hex digits"
                        .into(),
                })
            }
        };
        Ok(v.to_be_bytes().to_vec())
    }

    fn decode(&self, id: &[u8]) -> Result<Decoded, LayoutError> {
        let v = super::be_u128(id)?;
        let f = Fields::unpack(v);
        let time = std::time::UNIX_EPOCH + std::time::Duration::from_micros(f.timestamp);
        let mut m = Decoded::new();
        m.push("layout", "muid128");
        m.push("id", to_text(v));
        m.push("packed_hex", format!("{v:032x}"));
        m.push("timestamp", f.timestamp);
        m.push("medallion", f.medallion);
        m.push("offset", f.offset);
        m.push("time", humantime::format_rfc3339_micros(time).to_string());
        Ok(m)
    }
}

#[cfg(test)]
mod tests;
