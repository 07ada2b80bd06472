//! Layouts: what a server says about its IDs, the IDs themselves, their text forms and their
//! fields, computed by idcar's own core (`idcar-core`), as `idcar get` and `idcar decode --json`
//! compute them.

#[cfg(test)]
mod uuid7;

use crate::error::{Error, Result};
use crate::json::{self, Json};
use idcar_core::layout::{self as core, Layout, LayoutParams, Param, TextForm};
use std::fmt;
use std::sync::Arc;

pub use idcar_core::layout::{Decoded, Value};

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
        let unknown = || Error::Invalid(format!("unknown layout {layout:?}"));
        let entry = core::entry(layout).ok_or_else(unknown)?;
        let defaults = LayoutParams::default();
        let built = core::by_name(layout, defaults).map_err(|_| unknown())?;
        // In a describe answer's order: by name.
        let mut params: Vec<(String, String)> = entry
            .params
            .iter()
            .map(|p| (p.name().to_owned(), defaults.value(*p)))
            .collect();
        params.sort();
        Ok(Description {
            layout: layout.to_owned(),
            width: built.width(),
            form: built.default_form().name().to_owned(),
            params,
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

    /// An ID of this layout from its binary form (as the server sends it: big-endian, `width`
    /// bytes).
    pub fn id_from_bytes(&self, raw: &[u8]) -> Result<Id> {
        Id::new(Arc::new(Known::new(self.clone())), raw)
    }

    /// An ID of this layout from its default text form (as [`Id`]'s `Display` writes it and
    /// `idcar get` prints it).
    pub fn parse_id(&self, text: &str) -> Result<Id> {
        let known = Known::new(self.clone());
        let not_one = || {
            Error::Invalid(format!(
                "{text:?} is not a {} ID in the {} form",
                self.layout, self.form
            ))
        };
        let layout = known
            .layout
            .as_ref()
            .map_err(|why| Error::Invalid(why.clone()))?;
        let form = known.form.ok_or_else(not_one)?;
        let raw = layout.parse(text, Some(form)).map_err(|_| not_one())?;
        Id::new(Arc::new(known), &raw)
    }
}

/// A description and the layout it describes, built once: what every ID of a connection
/// shares.
#[derive(Debug)]
pub(crate) struct Known {
    description: Description,
    /// The layout with the described parameters, or why it cannot be built (unknown layout,
    /// parameters it cannot use): IDs are then shown in hex and cannot be decoded.
    layout: std::result::Result<Box<dyn Layout>, String>,
    /// The described default form, if idcar's core knows it.
    form: Option<TextForm>,
}

impl Known {
    /// What the server said.
    pub(crate) fn description(&self) -> &Description {
        &self.description
    }

    pub(crate) fn new(description: Description) -> Known {
        let d = &description;
        let layout = (|| {
            let mut params = LayoutParams::default();
            for (k, v) in &d.params {
                // A parameter this client does not know is a newer server's: not ours to read.
                if let Some(p) = Param::from_name(k) {
                    params
                        .set(p, v)
                        .map_err(|why| format!("{}: {why}", d.layout))?;
                }
            }
            core::by_name(&d.layout, params).map_err(|e| format!("{}: {e}", d.layout))
        })();
        let form = TextForm::parse(&d.form).ok();
        Known {
            description,
            layout,
            form,
        }
    }
}

/// One ID as the server issued it: its bytes and its layout. `Display` writes the layout's
/// default text form; [`decode`](Id::decode) gives its fields.
#[derive(Clone)]
pub struct Id {
    raw: [u8; 16],
    width: u8,
    known: Arc<Known>,
}

impl Id {
    pub(crate) fn new(known: Arc<Known>, raw: &[u8]) -> Result<Id> {
        let d = &known.description;
        if raw.len() != d.width || raw.len() > 16 || raw.is_empty() {
            return Err(Error::Invalid(format!(
                "{} IDs are {} bytes, got {}",
                d.layout,
                d.width,
                raw.len()
            )));
        }
        let mut b = [0; 16];
        b[..raw.len()].copy_from_slice(raw);
        Ok(Id {
            raw: b,
            width: raw.len() as u8,
            known,
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
        (self.known.description.layout == "uuid7" && self.width == 16).then_some(self.raw)
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
        &self.known.description
    }

    /// The ID's fields, with the keys and values of `idcar decode --json`.
    pub fn decode(&self) -> Result<Decoded> {
        let layout = self
            .known
            .layout
            .as_ref()
            .map_err(|why| Error::Invalid(why.clone()))?;
        layout
            .decode(self.as_bytes())
            .map_err(|e| Error::Invalid(format!("{}: {e}", self.known.description.layout)))
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = String::new();
        match (&self.known.layout, self.known.form) {
            (Ok(layout), Some(form)) if layout.format(self.as_bytes(), form, &mut text).is_ok() => {
                f.write_str(&text)
            }
            // A form the layout cannot write: hex, as the server falls back to.
            _ => self
                .as_bytes()
                .iter()
                .try_for_each(|b| write!(f, "{b:02x}")),
        }
    }
}

impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Id({} {})", self.known.description.layout, self)
    }
}

impl PartialEq for Id {
    fn eq(&self, other: &Id) -> bool {
        self.as_bytes() == other.as_bytes()
            && self.known.description.layout == other.known.description.layout
    }
}

impl Eq for Id {}

impl std::hash::Hash for Id {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.as_bytes().hash(h);
    }
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
}
