//! Layouts: what a server says about its IDs, the IDs themselves, their text forms and their
//! fields, computed exactly as `idcar` does (`idcar get`, `idcar decode --json`).

mod uuid7;

use crate::json::{self, Json};
use crate::{Error, Result};
use std::fmt;
use std::sync::Arc;

const UGD60_ALPHABET: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const SNO80_ALPHABET: &[u8; 32] = b"23456789abcdefghijklmnopqrstuvwx";
const UGD60_EPOCH_S: i64 = 1_519_862_400;
const SNO80_EPOCH_MS: i64 = 1_262_304_000_000;
const SI53_BASE_CLOCK: i64 = 1_577_836_800_000;
const SI53_MID_BITS: i64 = 5;
const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// What a server says about its IDs in answer to a describe request (sent on every new
/// connection): the layout, the width of its binary IDs, its default text form and every
/// parameter that shapes them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Description {
    /// `lable64`, `ugd60`, `si53`, `sno80`, `muid128` or `uuid7`.
    pub layout: String,
    /// Bytes per binary ID: 8, 10 or 16.
    pub width: usize,
    /// The default text form: `hex`, `b64`, `dec`, `b32`, `muid` or `uuid`.
    pub form: String,
    /// Flag names without dashes → values, as text (e.g. si53's `mid-bits`).
    pub params: Vec<(String, String)>,
}

impl Description {
    /// The description a server of `layout` gives with default parameters, for formatting and
    /// decoding IDs without a server. Change [`params`](Self::params) where the server's
    /// flags differ (si53's `mid-bits` and `base-clock`).
    pub fn for_layout(layout: &str) -> Result<Description> {
        let (width, form, params): (usize, &str, &[(&str, &str)]) = match layout {
            "lable64" => (8, "hex", &[("cluster-id", "0")]),
            "ugd60" => (8, "b64", &[]),
            "si53" => (
                8,
                "dec",
                &[("base-clock", "1577836800000"), ("mid-bits", "5")],
            ),
            "sno80" => (
                10,
                "b32",
                &[("sequence-max", "65535"), ("sequence-min", "0")],
            ),
            "muid128" => (16, "muid", &[("medallion-base", "0x10000000000")]),
            "uuid7" => (16, "uuid", &[("cluster-id", "0")]),
            other => return Err(Error::Invalid(format!("unknown layout {other:?}"))),
        };
        Ok(Description {
            layout: layout.to_owned(),
            width,
            form: form.to_owned(),
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        })
    }

    /// Reads a describe answer's JSON.
    pub fn from_json(text: &str) -> Result<Description> {
        let bad = |why: String| Error::Protocol(format!("describe answer: {why}"));
        let j = json::parse(text).map_err(bad)?;
        let string = |k: &str| match j.get(k) {
            Some(Json::Str(s)) => Ok(s.clone()),
            _ => Err(bad(format!("no {k:?} string"))),
        };
        let width = match j.get("width") {
            Some(Json::Num(n)) => n.parse::<usize>().ok().filter(|w| (1..=16).contains(w)),
            _ => None,
        }
        .ok_or_else(|| bad("no width of 1 to 16 bytes".into()))?;
        let mut params = Vec::new();
        if let Some(Json::Obj(m)) = j.get("params") {
            for (k, v) in m {
                let v = match v {
                    Json::Str(s) | Json::Num(s) => s.clone(),
                    Json::Bool(b) => b.to_string(),
                    _ => return Err(bad(format!("parameter {k:?} is not a value"))),
                };
                params.push((k.clone(), v));
            }
        }
        Ok(Description {
            layout: string("layout")?,
            width,
            form: string("form")?,
            params,
        })
    }

    /// A parameter's value, as text.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn int_param(&self, name: &str, default: i64) -> Result<i64> {
        match self.param(name) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| {
                Error::Invalid(format!(
                    "{} parameter {name}={v:?} is not an integer",
                    self.layout
                ))
            }),
        }
    }

    /// An ID of this layout from its binary form (as the server sends it: big-endian, `width`
    /// bytes).
    pub fn id_from_bytes(&self, raw: &[u8]) -> Result<Id> {
        Id::new(Arc::new(self.clone()), raw)
    }

    /// An ID of this layout from its default text form (as [`Id`]'s `Display` writes it and
    /// `idcar get` prints it).
    pub fn parse_id(&self, text: &str) -> Result<Id> {
        let raw = parse_text(&self.form, self.width, text).ok_or_else(|| {
            Error::Invalid(format!(
                "{text:?} is not a {} ID in the {} form",
                self.layout, self.form
            ))
        })?;
        self.id_from_bytes(&raw)
    }
}

/// One ID as the server issued it: its bytes and its layout. `Display` writes the layout's
/// default text form; [`decode`](Id::decode) gives its fields.
#[derive(Clone)]
pub struct Id {
    raw: [u8; 16],
    width: u8,
    layout: Arc<Description>,
}

impl Id {
    pub(crate) fn new(layout: Arc<Description>, raw: &[u8]) -> Result<Id> {
        if raw.len() != layout.width || raw.len() > 16 || raw.is_empty() {
            return Err(Error::Invalid(format!(
                "{} IDs are {} bytes, got {}",
                layout.layout,
                layout.width,
                raw.len()
            )));
        }
        let mut b = [0; 16];
        b[..raw.len()].copy_from_slice(raw);
        Ok(Id {
            raw: b,
            width: raw.len() as u8,
            layout,
        })
    }

    /// The binary form: big-endian, the layout's width (8, 10 or 16 bytes).
    pub fn as_bytes(&self) -> &[u8] {
        &self.raw[..usize::from(self.width)]
    }

    /// The ID as a `u64`, for the 8-byte layouts (lable64, ugd60, si53); `None` for sno80,
    /// muid128 and uuid7.
    pub fn as_u64(&self) -> Option<u64> {
        let b: [u8; 8] = self.as_bytes().try_into().ok()?;
        Some(u64::from_be_bytes(b))
    }

    /// The 16 bytes of a uuid7 ID (an RFC 9562 version-7 UUID, big-endian); `None` for the
    /// other layouts.
    pub fn uuid_bytes(&self) -> Option<[u8; 16]> {
        (self.layout.layout == "uuid7" && self.width == 16).then_some(self.raw)
    }

    /// A uuid7 ID as a [`uuid::Uuid`]; `None` for the other layouts.
    ///
    /// ```
    /// # fn main() -> Result<(), idcar_client::Error> {
    /// let d = idcar_client::Description::for_layout("uuid7")?;
    /// let id = d.parse_id("01a20180-3c7e-74b5-a873-0009a1b2c3ac")?;
    /// let u = id.to_uuid().expect("a uuid7 ID");
    /// assert_eq!(u.get_version_num(), 7);
    /// assert_eq!(u.to_string(), id.to_string());
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "uuid")]
    #[cfg_attr(docsrs, doc(cfg(feature = "uuid")))]
    pub fn to_uuid(&self) -> Option<uuid::Uuid> {
        self.uuid_bytes().map(uuid::Uuid::from_bytes)
    }

    /// What the server said about this ID's layout.
    pub fn layout(&self) -> &Description {
        &self.layout
    }

    /// The ID's fields, with the keys and values of `idcar decode --json`.
    pub fn decode(&self) -> Result<Decoded> {
        decode(&self.layout, self.as_bytes())
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_text(&self.layout.form, self.as_bytes()))
    }
}

impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Id({} {})", self.layout.layout, self)
    }
}

impl PartialEq for Id {
    fn eq(&self, other: &Id) -> bool {
        self.as_bytes() == other.as_bytes() && self.layout.layout == other.layout.layout
    }
}

impl Eq for Id {}

impl std::hash::Hash for Id {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.as_bytes().hash(h);
    }
}

/// A decoded field's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// A number.
    Int(i64),
    /// Text: the layout, the ID's text form, hex digits, the time (RFC 3339, UTC).
    Text(String),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(v) => write!(f, "{v}"),
            Value::Text(s) => f.write_str(s),
        }
    }
}

/// An ID's fields in `idcar decode --json`'s order (keys differ per layout: see the crate
/// docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded(pub Vec<(&'static str, Value)>);

impl Decoded {
    /// A field's value.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// A numeric field.
    pub fn int(&self, key: &str) -> Option<i64> {
        match self.get(key)? {
            Value::Int(v) => Some(*v),
            Value::Text(_) => None,
        }
    }

    /// A text field.
    pub fn text(&self, key: &str) -> Option<&str> {
        match self.get(key)? {
            Value::Text(s) => Some(s),
            Value::Int(_) => None,
        }
    }

    /// The fields as a JSON object, as `idcar decode --json` prints them.
    pub fn to_json(&self) -> String {
        let mut out = String::from("{");
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&format!("\"{k}\":"));
            match v {
                Value::Int(n) => out.push_str(&n.to_string()),
                Value::Text(s) => {
                    out.push('"');
                    for c in s.chars() {
                        match c {
                            '"' => out.push_str("\\\""),
                            '\\' => out.push_str("\\\\"),
                            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                            c => out.push(c),
                        }
                    }
                    out.push('"');
                }
            }
        }
        out.push('}');
        out
    }
}

fn hex(raw: &[u8]) -> String {
    raw.iter().map(|b| format!("{b:02x}")).collect()
}

/// An ID's text form (`hex`, `dec`, `i64`, `b64`, `b32`, `muid`); a form that does not fit the
/// width falls back to hex, as the server does.
fn format_text(form: &str, raw: &[u8]) -> String {
    let u = <[u8; 8]>::try_from(raw).ok().map(u64::from_be_bytes);
    match (form, u) {
        ("dec", Some(u)) => u.to_string(),
        ("i64", Some(u)) => (u as i64).to_string(),
        ("b64", Some(s)) => {
            let v = u64::from(((s >> 28) as u32).reverse_bits()) << 28 | s & ((1 << 28) - 1);
            (0..10)
                .map(|i| UGD60_ALPHABET[((v >> (54 - 6 * i)) & 63) as usize] as char)
                .collect()
        }
        ("b32", None) if raw.len() == 10 => {
            let mut out = String::with_capacity(16);
            for half in raw.chunks(5) {
                let v = half.iter().fold(0u64, |v, b| v << 8 | u64::from(*b));
                out.extend(
                    (0..8).map(|i| SNO80_ALPHABET[((v >> (35 - 5 * i)) & 31) as usize] as char),
                );
            }
            out
        }
        ("muid", None) if raw.len() == 16 => {
            let h = hex(raw).to_uppercase();
            format!("{}-{}-{}", &h[..13], &h[13..24], &h[24..])
        }
        ("uuid", None) if raw.len() == 16 => {
            let h = hex(raw);
            format!(
                "{}-{}-{}-{}-{}",
                &h[..8],
                &h[8..12],
                &h[12..16],
                &h[16..20],
                &h[20..]
            )
        }
        ("ulid", None) if raw.len() == 16 => {
            let v = u128::from_be_bytes(raw.try_into().unwrap_or_default());
            (0..26)
                .map(|i| CROCKFORD[(v >> (125 - 5 * i) & 31) as usize] as char)
                .collect()
        }
        _ => hex(raw),
    }
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

fn parse_text(form: &str, width: usize, text: &str) -> Option<Vec<u8>> {
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let raw = match (form, width) {
        ("hex", _) => unhex(text)?,
        ("dec", 8) if digits(text) => text.parse::<u64>().ok()?.to_be_bytes().to_vec(),
        ("i64", 8) => {
            let t = text.strip_prefix('-').unwrap_or(text);
            if !digits(t) {
                return None;
            }
            text.parse::<i64>().ok()?.to_be_bytes().to_vec()
        }
        ("b64", 8) if text.len() == 10 => {
            let v = text.bytes().try_fold(0u64, |v, c| {
                let k = UGD60_ALPHABET.iter().position(|&a| a == c)?;
                Some(v << 6 | k as u64)
            })?;
            let s = u64::from(((v >> 28) as u32).reverse_bits()) << 28 | v & ((1 << 28) - 1);
            s.to_be_bytes().to_vec()
        }
        ("b32", 10) if text.len() == 16 => {
            let mut raw = Vec::with_capacity(10);
            for half in text.as_bytes().chunks(8) {
                let v = half.iter().try_fold(0u64, |v, c| {
                    let k = SNO80_ALPHABET.iter().position(|a| a == c)?;
                    Some(v << 5 | k as u64)
                })?;
                raw.extend_from_slice(&v.to_be_bytes()[3..]);
            }
            raw
        }
        ("uuid", 16) => {
            let p: Vec<&str> = text.split('-').collect();
            let widths: Vec<usize> = p.iter().map(|g| g.len()).collect();
            if widths != [8, 4, 4, 4, 12] {
                return None;
            }
            unhex(&p.concat())?
        }
        ("ulid", 16) if text.len() == 26 => {
            let v = text.bytes().try_fold(0u128, |v, c| {
                let k = CROCKFORD
                    .iter()
                    .position(|&a| a == c.to_ascii_uppercase())?;
                Some(v.checked_mul(32)? | k as u128)
            })?;
            if text.as_bytes()[0].to_ascii_uppercase() > b'7' {
                return None;
            }
            v.to_be_bytes().to_vec()
        }
        ("muid", 16) => {
            let p: Vec<&str> = text.split('-').collect();
            if p.len() != 3 || p[0].len() != 13 || p[1].len() != 11 || p[2].len() != 8 {
                return None;
            }
            unhex(&p.concat())?
        }
        _ => return None,
    };
    (raw.len() == width).then_some(raw)
}

fn decode(d: &Description, raw: &[u8]) -> Result<Decoded> {
    use Value::{Int, Text};
    let invalid = |why: String| Error::Invalid(format!("{}: {why}", d.layout));
    let expected = Description::for_layout(&d.layout)
        .map_err(|_| invalid("cannot decode IDs of an unknown layout".into()))?;
    if raw.len() != expected.width || raw.len() != d.width {
        return Err(invalid(format!(
            "IDs are {} bytes, got {}",
            expected.width,
            raw.len()
        )));
    }
    let u = <[u8; 8]>::try_from(&raw[..8])
        .map(u64::from_be_bytes)
        .unwrap_or(0);
    let fields = match d.layout.as_str() {
        "lable64" => {
            let reserved = (u >> 10) & 63;
            if reserved != 0 {
                return Err(invalid(format!("reserved bits are {reserved}, not zero")));
            }
            let ms = (u & !((1 << 22) - 1)).reverse_bits() as i64;
            vec![
                ("layout", Text("lable64".into())),
                ("id", Text(format_text("hex", raw))),
                ("timestamp_ms", Int(ms)),
                ("sequence", Int(((u >> 16) & 63) as i64)),
                ("generator", Int(((u >> 4) & 63) as i64)),
                ("cluster", Int((u & 15) as i64)),
                ("time", Text(rfc3339(ms, 1_000))),
            ]
        }
        "ugd60" => {
            if u >> 60 != 0 {
                return Err(invalid("IDs have 60 bits".into()));
            }
            let ts = (u >> 28) as i64;
            vec![
                ("layout", Text("ugd60".into())),
                ("id", Text(format_text("b64", raw))),
                ("storage_hex", Text(format!("{u:015x}"))),
                ("timestamp_s", Int(ts)),
                ("worker", Int(((u >> 19) & 511) as i64)),
                ("seq", Int(((u >> 9) & 1023) as i64)),
                ("random", Int((u & 511) as i64)),
                ("time", Text(rfc3339((UGD60_EPOCH_S + ts) * 1_000, 1_000))),
            ]
        }
        "si53" => {
            if u >> 53 != 0 {
                return Err(invalid("IDs are below 2^53".into()));
            }
            let base = d.int_param("base-clock", SI53_BASE_CLOCK)?;
            let mid_bits = d.int_param("mid-bits", SI53_MID_BITS)?;
            if !(0..=13).contains(&mid_bits) {
                return Err(invalid(format!("mid-bits {mid_bits} is not 0..13")));
            }
            let uin_bits = 13 - mid_bits as u32;
            let mab = (u >> 13) as i64;
            let ms = base
                .checked_add(mab)
                .ok_or_else(|| invalid("base-clock out of range".into()))?;
            vec![
                ("layout", Text("si53".into())),
                ("id", Int(u as i64)),
                ("MAB", Int(mab)),
                ("MID", Int(((u >> uin_bits) & ((1 << mid_bits) - 1)) as i64)),
                ("UIN", Int((u & ((1 << uin_bits) - 1)) as i64)),
                ("base_clock", Int(base)),
                ("timestamp_ms", Int(ms)),
                ("time", Text(rfc3339(ms, 1_000))),
            ]
        }
        "sno80" => {
            let units = (u >> 25) as i64;
            let unix_ms = SNO80_EPOCH_MS + units * 4;
            vec![
                ("layout", Text("sno80".into())),
                ("id", Text(format_text("b32", raw))),
                ("bytes_hex", Text(hex(raw))),
                ("units", Int(units)),
                ("tick", Int(((u >> 24) & 1) as i64)),
                ("meta", Int(((u >> 16) & 255) as i64)),
                ("partition", Int((u & 65535) as i64)),
                ("partition_bytes_hex", Text(format!("{:04x}", u & 65535))),
                (
                    "sequence",
                    Int(i64::from(u16::from_be_bytes([raw[8], raw[9]]))),
                ),
                ("unix_ms", Int(unix_ms)),
                ("time", Text(rfc3339(unix_ms, 1_000))),
            ]
        }
        "uuid7" => uuid7::fields(u, raw).map_err(invalid)?,
        _ => {
            let lo = u64::from_be_bytes(raw[8..16].try_into().unwrap_or_default());
            let ts = (u >> 12) as i64;
            vec![
                ("layout", Text("muid128".into())),
                ("id", Text(format_text("muid", raw))),
                ("packed_hex", Text(hex(raw))),
                ("timestamp", Int(ts)),
                ("medallion", Int(((u & 0xfff) << 32 | lo >> 32) as i64)),
                ("offset", Int(i64::from(lo as u32 as i32))),
                ("time", Text(rfc3339(ts, 1_000_000))),
            ]
        }
    };
    Ok(Decoded(fields))
}

/// `t` in units of 1/`per_s` of a second since the Unix epoch, as RFC 3339 in UTC with
/// milliseconds (`per_s` 1,000) or microseconds (1,000,000).
fn rfc3339(t: i64, per_s: i64) -> String {
    let secs = t.div_euclid(per_s);
    let frac = t.rem_euclid(per_s);
    let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let digits = if per_s == 1_000 { 3 } else { 6 };
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{frac:0digits$}Z",
        sod / 3_600,
        sod % 3_600 / 60,
        sod % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_answers() {
        let d = Description::for_layout("lable64").unwrap();
        let id = d.parse_id("7e3c018045810093").unwrap();
        let f = id.decode().unwrap();
        assert_eq!(f.int("timestamp_ms"), Some(1_795_321_511_038));
        assert_eq!(f.int("sequence"), Some(1));
        assert_eq!(f.int("generator"), Some(9));
        assert_eq!(f.int("cluster"), Some(3));
        assert_eq!(f.text("time"), Some("2026-11-22T04:25:11.038Z"));
        assert_eq!(id.to_string(), "7e3c018045810093");

        let d = Description::for_layout("muid128").unwrap();
        let id = d.parse_id("5D5EAC793E61F-1BFC71B112D-0000000B").unwrap();
        let f = id.decode().unwrap();
        assert_eq!(f.int("timestamp"), Some(1_642_579_230_975_519));
        assert_eq!(f.int("medallion"), Some(1_923_190_821_165));
        assert_eq!(f.int("offset"), Some(11));
        assert_eq!(f.text("time"), Some("2022-01-19T08:00:30.975519Z"));
        assert_eq!(id.to_string(), "5D5EAC793E61F-1BFC71B112D-0000000B");
    }

    #[test]
    fn text_forms_round_trip() {
        for (layout, raw) in [
            ("lable64", vec![0x7e, 0x3c, 1, 0x80, 0x45, 0x81, 0, 0x93]),
            (
                "ugd60",
                vec![0x0a, 0xbc, 0xde, 0xf0, 0x12, 0x34, 0x56, 0x78],
            ),
            ("si53", vec![0, 0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
            ("sno80", (1..=10).collect()),
            ("muid128", (1..=16).collect()),
            (
                "uuid7",
                vec![1, 2, 3, 4, 5, 6, 0x77, 8, 0x89, 10, 11, 12, 13, 14, 15, 16],
            ),
        ] {
            let d = Description::for_layout(layout).unwrap();
            let id = d.id_from_bytes(&raw).unwrap();
            let back = d.parse_id(&id.to_string()).unwrap();
            assert_eq!(back.as_bytes(), &raw[..], "{layout} {id}");
            assert!(id.decode().is_ok(), "{layout}");
        }
        assert_eq!(format_text("i64", &[0xff; 8]), "-1");
        assert_eq!(parse_text("i64", 8, "-1"), Some(vec![0xff; 8]));
    }

    #[test]
    fn bad_ids_are_errors() {
        let d = Description::for_layout("lable64").unwrap();
        for bad in [
            "",
            "7e3c",
            "zz3c018045810093",
            "7e3c018045810093ff",
            "é",
            "+e3c018045810093",
        ] {
            assert!(d.parse_id(bad).is_err(), "{bad}");
        }
        // Reserved bits set.
        let id = d.id_from_bytes(&[0, 0, 0, 0, 0, 0, 0x04, 0]).unwrap();
        assert!(id.decode().is_err());
        assert!(d.id_from_bytes(&[0; 10]).is_err());
        assert!(Description::for_layout("lable65").is_err());
        let mut si = Description::for_layout("si53").unwrap();
        si.params = vec![("mid-bits".into(), "14".into())];
        assert!(si.id_from_bytes(&[0; 8]).unwrap().decode().is_err());
        si.params = vec![("base-clock".into(), "x".into())];
        assert!(si.id_from_bytes(&[0; 8]).unwrap().decode().is_err());
        let u = Description::for_layout("ugd60").unwrap();
        assert!(u.parse_id("AAAAAAAAA").is_err());
        let s = Description::for_layout("sno80").unwrap();
        assert!(s.parse_id("zzzzzzzzzzzzzzzz").is_err());
        let m = Description::for_layout("muid128").unwrap();
        assert!(m.parse_id("5D5EAC793E61F-1BFC71B112D0000000B").is_err());
        assert!(m.parse_id("+D5EAC793E61F-1BFC71B112D-0000000B").is_err());
    }

    #[test]
    fn times_are_rfc3339() {
        assert_eq!(rfc3339(0, 1_000), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_000, 1_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(
            rfc3339(4_107_542_399_999, 1_000),
            "2100-02-28T23:59:59.999Z"
        );
        assert_eq!(rfc3339(-1, 1_000_000), "1969-12-31T23:59:59.999999Z");
    }
}
