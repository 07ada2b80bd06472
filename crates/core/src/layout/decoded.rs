//! An ID's fields as decoding gives them: named, in the layout's order, each a number or
//! text. `idcar decode` prints them and every client library gives the same keys and values
//! (clients/SPEC.md).

/// A decoded field's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// A number.
    Int(i64),
    /// Text: the layout, the ID's text form, hex digits, the time (RFC 3339, UTC).
    Text(String),
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Int(v) => write!(f, "{v}"),
            Value::Text(s) => f.write_str(s),
        }
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Text(s)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::Text(s.to_owned())
    }
}

/// Every field of every layout is narrower than 63 bits; a wider number would be a bug, shown
/// as the largest number rather than a wrong one.
impl From<u64> for Value {
    fn from(v: u64) -> Value {
        Value::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

macro_rules! value_from_narrow {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(v: $t) -> Value {
                Value::Int(i64::from(v))
            }
        }
    )*};
}
value_from_narrow!(u8, u16, u32, i32, i64);

/// An ID's fields in the layout's order (keys differ per layout: see clients/SPEC.md).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decoded(pub Vec<(&'static str, Value)>);

impl Decoded {
    /// No fields yet.
    pub fn new() -> Decoded {
        Decoded(Vec::new())
    }

    /// Adds field `key` after the others.
    pub fn push(&mut self, key: &'static str, value: impl Into<Value>) {
        self.0.push((key, value.into()));
    }

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

    /// The fields as one JSON object, in the layout's order.
    pub fn to_json(&self) -> String {
        let mut out = String::from("{");
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push('"');
            out.push_str(k);
            out.push_str("\":");
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

    /// The fields as a JSON map (feature `json`).
    #[cfg(feature = "json")]
    pub fn to_map(&self) -> serde_json::Map<String, serde_json::Value> {
        self.0
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    Value::Int(n) => serde_json::Value::from(*n),
                    Value::Text(s) => serde_json::Value::from(s.as_str()),
                };
                (k.to_string(), v)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_keep_their_order_and_json_escapes_text() {
        let mut d = Decoded::new();
        d.push("layout", "x");
        d.push("id", 7u64);
        d.push("note", "a\"b\\c\u{1}");
        assert_eq!(d.int("id"), Some(7));
        assert_eq!(d.text("layout"), Some("x"));
        assert_eq!(d.int("layout"), None);
        assert_eq!(
            d.to_json(),
            r#"{"layout":"x","id":7,"note":"a\"b\\c\u0001"}"#
        );
        let parsed: serde_json::Value = serde_json::from_str(&d.to_json()).unwrap();
        assert_eq!(serde_json::Value::Object(d.to_map()), parsed);
        assert_eq!(Value::from(u64::MAX), Value::Int(i64::MAX));
    }
}
