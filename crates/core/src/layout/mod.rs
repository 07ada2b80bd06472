//! ID layouts: pure bit packing and text forms, no I/O and no clock.
//!
//! A layout turns a [`Run`] — one tick, a range of sequence numbers and a slot, as the
//! [generator](crate::generator) hands them out — into ID bytes, and turns ID text back into
//! fields. The generator only knows ticks and sequences; everything layout-specific (bit
//! positions, cluster field, text alphabets) lives behind the [`Layout`] trait.
//!
//! **Adding a layout** is one new file (`layout/<name>.rs`, with the [`Layout`] impl and a
//! `pub const ENTRY: Entry`) and its name in the `registry!` line below: that declares the
//! module and puts its entry in [`LAYOUTS`], from which [`by_name`], [`guess`] and [`names`]
//! work — for a layout whose parameters all exist already. A new *parameter* touches more: a
//! [`Param`] variant, its field in [`LayoutParams`], its flag (`cli.rs`) and config check
//! (`config.rs`), and the decoders of the four other-language clients (`clients/*/`), which
//! re-implement each layout's unpacking (`tests/clients.rs` checks them against the vectors).

/// Declares each layout's module and lists its `ENTRY` in [`LAYOUTS`], in this order.
macro_rules! registry {
    ($($name:ident),* $(,)?) => {
        $(pub mod $name;)*
        /// Every layout idcar knows, in the order `decode` tries them.
        pub const LAYOUTS: &[Entry] = &[$($name::ENTRY),*];
    };
}

registry!(lable64, ugd60, si53, sno80, muid128, uuid7);

mod decoded;
mod scheme;

pub use decoded::{Decoded, Value};
pub use lable64::Lable64;
pub use muid128::Muid128;
pub use scheme::Scheme;
pub use si53::Si53;
pub use sno80::Sno80;
pub use ugd60::Ugd60;
pub use uuid7::Uuid7;

/// A contiguous run of IDs from one tick: sequences `seq .. seq + len` of slot `slot`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Run {
    pub tick: u64,
    pub seq: u32,
    pub len: u32,
    pub slot: u32,
    /// The tick-tock timeline (0 or 1); always 0 unless the scheme has `tick_tock`.
    pub timeline: u8,
}

/// Per-request options. Each layout says which it honours ([`Layout::check`]); the rest are
/// refused with a clear error rather than ignored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestOptions {
    /// sno80's metabyte (0 when not given).
    pub meta: Option<u8>,
    /// The IDs of one transaction (muid128): the whole request shares one tick and sequence
    /// number — one timestamp and medallion — and the layout tells the IDs apart (offsets
    /// 1..N). The generator then hands out a run of length 1 for the whole request.
    pub transaction: bool,
}

/// A text form of an ID. Each layout supports some of them and names a default.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TextForm {
    /// Lower-case hexadecimal of the ID's bytes, fixed width.
    Hex,
    /// Unsigned decimal integer.
    Dec,
    /// Signed 64-bit two's-complement decimal, for databases with signed keys.
    I64,
    /// ugd60's 10-character display form over `A-Za-z0-9-_`.
    B64,
    /// sno80's 16-character base32 over `23456789abcdefghijklmnopqrstuvwx`.
    B32,
    /// muid128's upper-case hex in 13-11-8 groups joined by `-`.
    Muid,
    /// RFC 9562's `8-4-4-4-12` lower-case hex digits (uuid7).
    Uuid,
    /// 26 characters of Crockford base32, as ULIDs are written (uuid7).
    Ulid,
}

impl TextForm {
    pub fn name(self) -> &'static str {
        match self {
            TextForm::Hex => "hex",
            TextForm::Dec => "dec",
            TextForm::I64 => "i64",
            TextForm::B64 => "b64",
            TextForm::B32 => "b32",
            TextForm::Muid => "muid",
            TextForm::Uuid => "uuid",
            TextForm::Ulid => "ulid",
        }
    }

    /// Parses a form name as given in `format=` or `--format`.
    pub fn parse(name: &str) -> Result<TextForm, LayoutError> {
        match name {
            "hex" => Ok(TextForm::Hex),
            "dec" => Ok(TextForm::Dec),
            "i64" => Ok(TextForm::I64),
            "b64" => Ok(TextForm::B64),
            "b32" => Ok(TextForm::B32),
            "muid" => Ok(TextForm::Muid),
            "uuid" => Ok(TextForm::Uuid),
            "ulid" => Ok(TextForm::Ulid),
            other => Err(LayoutError::UnknownForm(other.to_string())),
        }
    }
}

/// Why a layout refused an input. `kind()` is a stable label for metrics and tests.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("wrong length: expected {expected}, got {got}")]
    WrongLength { expected: String, got: usize },
    #[error("bad character {ch:?} at position {pos}: {expected}")]
    BadChar {
        ch: char,
        pos: usize,
        expected: &'static str,
    },
    #[error("{field} {value} is out of range (max {max})")]
    OutOfRange {
        field: &'static str,
        value: u128,
        max: u128,
    },
    #[error("reserved bits must be zero, found {0:#x}")]
    ReservedBits(u64),
    #[error("unknown text form {0:?}")]
    UnknownForm(String),
    #[error("text form {form} is not supported by layout {layout}")]
    UnsupportedForm {
        form: &'static str,
        layout: &'static str,
    },
    #[error("not a {layout} ID: {why}")]
    Unrecognised { layout: &'static str, why: String },
    #[error("{option} is not an option of layout {layout}")]
    UnsupportedOption {
        option: &'static str,
        layout: &'static str,
    },
    #[error("{0}")]
    Invalid(String),
}

impl LayoutError {
    /// `form` is not one of `layout`'s text forms.
    pub fn unsupported(form: TextForm, layout: &'static str) -> LayoutError {
        LayoutError::UnsupportedForm {
            form: form.name(),
            layout,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            LayoutError::WrongLength { .. } => "wrong_length",
            LayoutError::BadChar { .. } => "bad_char",
            LayoutError::OutOfRange { .. } => "out_of_range",
            LayoutError::ReservedBits(_) => "reserved_bits",
            LayoutError::UnknownForm(_) => "unknown_form",
            LayoutError::UnsupportedForm { .. } => "unsupported_form",
            LayoutError::Unrecognised { .. } => "unrecognised",
            LayoutError::UnsupportedOption { .. } => "unsupported_option",
            LayoutError::Invalid(_) => "invalid",
        }
    }
}

/// One ID scheme. Implementations are pure: same input, same output.
pub trait Layout: Send + Sync + std::fmt::Debug {
    /// The name used on the command line, in ZooKeeper paths and in metrics.
    fn name(&self) -> &'static str;
    /// Bytes per ID in the binary form.
    fn width(&self) -> usize;
    /// Time unit, epoch, sequence range and pool size.
    fn scheme(&self) -> Scheme;
    /// Whether IDs carry the cluster ID (lable64). Without it the cluster only names a
    /// ZooKeeper namespace, and two clusters would issue the same IDs.
    fn has_cluster(&self) -> bool {
        false
    }
    /// Whether a slot's IDs increase, as bytes, in the order they are issued: within one
    /// holder in real time, and from each claim of the slot to the next (uuid7). Layouts that
    /// reverse time bits or switch timelines on a clock step back do not promise it.
    fn increasing(&self) -> bool {
        false
    }
    /// How many low-order bits of an ID are random, or derived from random bits (ugd60's 9,
    /// uuid7's random bits and check byte): no part of what makes an ID unique, so a check
    /// for duplicates compares IDs without them.
    fn random_low_bits(&self) -> u32 {
        0
    }
    /// The text form used when a request names none.
    fn default_form(&self) -> TextForm;
    /// Whether `form` is one of this layout's text forms.
    fn supports(&self, form: TextForm) -> bool;
    /// Whether `form` is written as a JSON number (else a JSON string).
    fn json_number(&self, _form: TextForm) -> bool {
        false
    }
    /// Refuses request options this layout does not honour. The default honours none.
    fn check(&self, opts: &RequestOptions) -> Result<(), LayoutError> {
        if opts.meta.is_some() {
            return Err(LayoutError::UnsupportedOption {
                option: "meta",
                layout: self.name(),
            });
        }
        if opts.transaction {
            return Err(LayoutError::UnsupportedOption {
                option: "transaction",
                layout: self.name(),
            });
        }
        Ok(())
    }
    /// Appends the binary form of every ID in `run` to `out` (`run.len * width` bytes). For a
    /// transaction `run.len` is 1 and `count` IDs are appended; otherwise `count == run.len`.
    fn pack_run(&self, run: &Run, opts: &RequestOptions, count: u32, out: &mut Vec<u8>);
    /// Appends the text form of one binary ID to `out`. `id` is `width` bytes.
    fn format(&self, id: &[u8], form: TextForm, out: &mut String) -> Result<(), LayoutError>;
    /// Parses ID text into its binary form; `form` `None` guesses from the text's shape.
    fn parse(&self, text: &str, form: Option<TextForm>) -> Result<Vec<u8>, LayoutError>;
    /// The fields of one binary ID, named as the seed names them.
    fn decode(&self, id: &[u8]) -> Result<Decoded, LayoutError>;
}

/// Every layout name idcar knows, in the order the CLI lists them.
/// A parameter that shapes a layout's ID space (besides the slot), named so configuration
/// can point the user at the flag that sets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Param {
    Cluster,
    BaseClock,
    MidBits,
    SequenceMin,
    SequenceMax,
    MedallionBase,
}

/// Why a layout could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    #[error("unknown layout {name:?} (known: {known})")]
    UnknownLayout { name: String, known: String },
    /// `param`'s value is not one this layout can use.
    #[error("{why}")]
    Param { param: Param, why: String },
}

impl BuildError {
    pub fn param(param: Param, why: impl std::fmt::Display) -> BuildError {
        BuildError::Param {
            param,
            why: why.to_string(),
        }
    }
}

/// A layout's line in the registry: its name, the parameters it reads, and how to build it.
/// Decoding and text-form guessing are methods of the built [`Layout`].
pub struct Entry {
    pub name: &'static str,
    pub params: &'static [Param],
    pub build: fn(&LayoutParams) -> Result<Box<dyn Layout>, BuildError>,
}

/// The registry entry of the layout called `name`.
pub fn entry(name: &str) -> Option<&'static Entry> {
    LAYOUTS.iter().find(|e| e.name == name)
}

impl Param {
    pub const ALL: [Param; 6] = [
        Param::Cluster,
        Param::BaseClock,
        Param::MidBits,
        Param::SequenceMin,
        Param::SequenceMax,
        Param::MedallionBase,
    ];

    /// The parameter's name in a describe answer and a pool's record: the flag that sets it,
    /// without its dashes.
    pub fn name(self) -> &'static str {
        match self {
            Param::Cluster => "cluster-id",
            Param::BaseClock => "base-clock",
            Param::MidBits => "mid-bits",
            Param::SequenceMin => "sequence-min",
            Param::SequenceMax => "sequence-max",
            Param::MedallionBase => "medallion-base",
        }
    }

    /// The parameter called `name` (see [`Param::name`]).
    pub fn from_name(name: &str) -> Option<Param> {
        Param::ALL.into_iter().find(|p| p.name() == name)
    }
}

impl LayoutParams {
    /// Sets `p` from its text, as [`LayoutParams::value`] writes it (a number; medallion-base
    /// in hex with `0x` too). Whether the layout can use the value is the layout's to say when
    /// it is built.
    pub fn set(&mut self, p: Param, text: &str) -> Result<(), String> {
        let bad = || format!("{} {text:?} is not a number in range", p.name());
        match p {
            Param::Cluster => self.cluster = text.parse().map_err(|_| bad())?,
            Param::BaseClock => self.base_clock_ms = text.parse().map_err(|_| bad())?,
            Param::MidBits => self.mid_bits = text.parse().map_err(|_| bad())?,
            Param::SequenceMin => self.sequence_min = text.parse().map_err(|_| bad())?,
            Param::SequenceMax => self.sequence_max = text.parse().map_err(|_| bad())?,
            Param::MedallionBase => {
                self.medallion_base = match text.strip_prefix("0x") {
                    Some(hex) => u64::from_str_radix(hex, 16),
                    None => text.parse(),
                }
                .map_err(|_| bad())?
            }
        }
        Ok(())
    }

    /// The value of `p`, as text (for records and messages).
    pub fn value(&self, p: Param) -> String {
        match p {
            Param::Cluster => self.cluster.to_string(),
            Param::BaseClock => self.base_clock_ms.to_string(),
            Param::MidBits => self.mid_bits.to_string(),
            Param::SequenceMin => self.sequence_min.to_string(),
            Param::SequenceMax => self.sequence_max.to_string(),
            Param::MedallionBase => format!("{:#x}", self.medallion_base),
        }
    }
}

/// The names of every layout, in registry order.
pub fn names() -> impl Iterator<Item = &'static str> {
    LAYOUTS.iter().map(|e| e.name)
}

/// Static configuration a layout may need.
#[derive(Clone, Copy, Debug)]
pub struct LayoutParams {
    /// lable64's cluster field (every layout's ZooKeeper namespace).
    pub cluster: u8,
    /// si53's base clock, Unix milliseconds.
    pub base_clock_ms: u64,
    /// si53's MID bits (the rest of the low 13 bits are the UIN).
    pub mid_bits: u8,
    /// sno80's sequence sharding bounds (inclusive).
    pub sequence_min: u16,
    pub sequence_max: u16,
    /// muid128's first medallion (slot N is `medallion_base + N`).
    pub medallion_base: u64,
    /// Random bits for layouts that put randomness in IDs (ugd60), injected so layouts stay
    /// pure: [`crate::clock::os_random`] by default, anything repeatable in tests.
    pub entropy: fn() -> u64,
}

impl Default for LayoutParams {
    fn default() -> LayoutParams {
        LayoutParams {
            cluster: 0,
            base_clock_ms: si53::DEFAULT_BASE_CLOCK_MS,
            mid_bits: 5,
            sequence_min: 0,
            sequence_max: u16::MAX,
            medallion_base: muid128::MEDALLION_BASE,
            entropy: crate::clock::os_random,
        }
    }
}

/// Builds the layout called `name` from the registry.
pub fn by_name(name: &str, params: LayoutParams) -> Result<Box<dyn Layout>, BuildError> {
    match LAYOUTS.iter().find(|e| e.name == name) {
        Some(e) => (e.build)(&params),
        None => Err(BuildError::UnknownLayout {
            name: name.to_string(),
            known: names().collect::<Vec<_>>().join(", "),
        }),
    }
}

/// Why [`guess`] found no single layout for a text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuessError {
    #[error("{text:?} is not an ID of any layout ({known})")]
    NoFit { text: String, known: String },
    #[error("{text:?} could be an ID of {}", candidates.join(" or "))]
    Ambiguous {
        text: String,
        candidates: Vec<&'static str>,
    },
}

/// Finds the layout `text` belongs to, from its shape: every layout tries to parse it (with
/// `form`, or guessing the form) and exactly one must succeed. Decimal integers, for one, fit
/// several layouts; the error then names the candidates.
pub fn guess(
    text: &str,
    form: Option<TextForm>,
    params: LayoutParams,
) -> Result<(Box<dyn Layout>, Vec<u8>), GuessError> {
    let mut fits = Vec::new();
    for entry in LAYOUTS {
        let Ok(layout) = (entry.build)(&params) else {
            continue;
        };
        if let Ok(raw) = layout.parse(text, form) {
            fits.push((layout, raw));
        }
    }
    match fits.len() {
        1 => Ok(fits.pop().expect("one fit")),
        0 => Err(GuessError::NoFit {
            text: text.to_string(),
            known: names().collect::<Vec<_>>().join(", "),
        }),
        _ => Err(GuessError::Ambiguous {
            text: text.to_string(),
            candidates: fits.iter().map(|(l, _)| l.name()).collect(),
        }),
    }
}

/// The JSON lines of a known-answer vectors file (for the layouts' tests).
#[cfg(test)]
pub(crate) fn vector_lines(text: &'static str) -> impl Iterator<Item = serde_json::Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("vector line is JSON"))
}

/// Exactly `digits` hex digits (either case, at most 32) as the integer they spell.
pub(crate) fn fixed_hex(text: &str, digits: usize) -> Result<u128, LayoutError> {
    debug_assert!(digits <= 32);
    if text.len() != digits {
        return Err(LayoutError::WrongLength {
            expected: format!("{digits} hex digits"),
            got: text.chars().count(),
        });
    }
    if let Some((pos, ch)) = text.char_indices().find(|(_, c)| !c.is_ascii_hexdigit()) {
        return Err(LayoutError::BadChar {
            ch,
            pos,
            expected: "a hex digit",
        });
    }
    Ok(u128::from_str_radix(text, 16).expect("checked hex digits fit u128"))
}

/// An 8-byte binary ID as the big-endian integer it holds.
pub(crate) fn be_u64(bytes: &[u8]) -> Result<u64, LayoutError> {
    let arr: [u8; 8] = bytes.try_into().map_err(|_| LayoutError::WrongLength {
        expected: "8 bytes".into(),
        got: bytes.len(),
    })?;
    Ok(u64::from_be_bytes(arr))
}

/// A 16-byte binary ID as the big-endian integer it holds.
pub(crate) fn be_u128(bytes: &[u8]) -> Result<u128, LayoutError> {
    let arr: [u8; 16] = bytes.try_into().map_err(|_| LayoutError::WrongLength {
        expected: "16 bytes".into(),
        got: bytes.len(),
    })?;
    Ok(u128::from_be_bytes(arr))
}

/// Marks a byte that is not a digit of a base-32 alphabet (see [`b32_values`]).
pub(crate) const NOT_B32: u8 = 0xff;

/// The value of each byte in a base-32 `alphabet` (and, with `fold_case`, of its other-case
/// letters), [`NOT_B32`] for every other byte: a lookup table for parsing.
pub(crate) const fn b32_values(alphabet: &[u8; 32], fold_case: bool) -> [u8; 256] {
    let mut t = [NOT_B32; 256];
    let mut i = 0;
    while i < 32 {
        t[alphabet[i] as usize] = i as u8;
        if fold_case {
            t[alphabet[i].to_ascii_lowercase() as usize] = i as u8;
            t[alphabet[i].to_ascii_uppercase() as usize] = i as u8;
        }
        i += 1;
    }
    t
}

/// RFC 3339 text with milliseconds for a Unix time in nanoseconds.
pub fn rfc3339_millis(unix_ns: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(unix_ns);
    humantime::format_rfc3339_millis(t).to_string()
}

/// Seconds from `now_unix_ns` until `scheme`'s time field runs out (negative once it has).
pub fn seconds_left(scheme: &Scheme, now_unix_ns: u64) -> f64 {
    (i128::from(scheme.end_unix_ns()) - i128::from(now_unix_ns)) as f64 / 1e9
}

/// When `scheme`'s time field runs out, as RFC 3339 text (to the millisecond).
pub fn end_date(scheme: &Scheme) -> String {
    rfc3339_millis(scheme.end_unix_ns())
}

#[cfg(test)]
mod param_tests {
    use super::*;

    #[test]
    fn parameters_read_back_what_they_write() {
        let mut p = LayoutParams {
            cluster: 7,
            base_clock_ms: 1_600_000_000_000,
            mid_bits: 9,
            sequence_min: 10,
            sequence_max: 20,
            medallion_base: 0xabc_0000_0000,
            ..LayoutParams::default()
        };
        let written: Vec<(Param, String)> = Param::ALL.iter().map(|x| (*x, p.value(*x))).collect();
        let mut back = LayoutParams::default();
        for (x, text) in &written {
            assert_eq!(Param::from_name(x.name()), Some(*x));
            back.set(*x, text).unwrap();
        }
        for (x, text) in &written {
            assert_eq!(&back.value(*x), text, "{}", x.name());
        }
        assert!(p.set(Param::MidBits, "x").is_err());
        assert!(p.set(Param::Cluster, "256").is_err());
        assert_eq!(Param::from_name("nope"), None);
    }
}
