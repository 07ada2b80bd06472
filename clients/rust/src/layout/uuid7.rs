//! uuid7: RFC 9562 version-7 UUIDs, decoded as `idcar decode --json` does (clients/SPEC.md).

use super::{format_text, hex, rfc3339, Value};

/// The check byte's multiplier.
const K: u64 = 0x9E37_79B9_7F4A_7C15;
/// The last millisecond whose time RFC 3339 writes (9999-12-31T23:59:59.999Z).
const LAST_MS: u64 = 253_402_300_799_999;

/// The fields of a uuid7 ID (high word `hi`, 16 bytes `raw`), or why it is not one.
pub(super) fn fields(
    hi: u64,
    raw: &[u8],
) -> std::result::Result<Vec<(&'static str, Value)>, String> {
    use Value::{Int, Text};
    let lo = u64::from_be_bytes(raw[8..16].try_into().unwrap_or_default());
    if (hi >> 12) & 15 != 7 {
        return Err(format!("version {}, not 7", (hi >> 12) & 15));
    }
    if lo >> 62 != 2 {
        return Err(format!("variant bits {:02b}, not 10", lo >> 62));
    }
    let ms = hi >> 16;
    if ms > LAST_MS {
        return Err(format!("unix_ts_ms {ms} is after 9999-12-31T23:59:59.999Z"));
    }
    let mut f = vec![
        ("layout", Text("uuid7".into())),
        ("id", Text(format_text("uuid", raw))),
        ("hex", Text(hex(raw))),
        ("unix_ts_ms", Int(ms as i64)),
        ("time", Text(rfc3339(ms as i64, 1_000))),
    ];
    let check = (hi.wrapping_mul(K) ^ lo >> 8).wrapping_mul(K) >> 56;
    if check != lo & 255 {
        f.push(("issuer", Text("other".into())));
        return Ok(f);
    }
    f.extend([
        ("issuer", Text("idcar".into())),
        (
            "counter",
            Int(((hi & 4095) << 10 | (lo >> 52) & 1023) as i64),
        ),
        ("cluster", Int(((lo >> 48) & 15) as i64)),
        ("slot", Int(((lo >> 32) & 65535) as i64)),
        ("random", Int(((lo >> 8) & 16_777_215) as i64)),
    ]);
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::super::Description;
    use crate::json::{self, Json};

    /// uuid7's known answers, shared with the server's tests and the other clients.
    #[test]
    fn uuid7_known_answers() {
        let text = include_str!("../../../../tests/vectors/uuid7.jsonl");
        let d = Description::for_layout("uuid7").unwrap();
        let (mut ok, mut refused) = (0, 0);
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let v = json::parse(line).unwrap();
            let s = |k: &str| match v.get(k) {
                Some(Json::Str(s)) => Some(s.clone()),
                _ => None,
            };
            let n = |k: &str| match v.get(k) {
                Some(Json::Num(n)) => n.parse::<i64>().ok(),
                _ => None,
            };
            if let Some(bad) = s("text") {
                let decoded = d.parse_id(&bad).and_then(|id| id.decode());
                assert!(decoded.is_err(), "{line}");
                refused += 1;
                continue;
            }
            let id = d.parse_id(&s("uuid").unwrap()).unwrap();
            assert_eq!(id.to_string(), s("uuid").unwrap());
            let hex = d.clone();
            let mut hex = hex;
            hex.form = "hex".into();
            assert_eq!(
                hex.parse_id(&s("hex").unwrap()).unwrap().as_bytes(),
                id.as_bytes()
            );
            if let Some(ulid) = s("ulid") {
                let mut u = d.clone();
                u.form = "ulid".into();
                let back = u.parse_id(&ulid.to_lowercase()).unwrap();
                assert_eq!(back.as_bytes(), id.as_bytes(), "{line}");
                assert_eq!(back.to_string(), ulid);
            }
            let Some(time) = s("time") else {
                assert!(id.decode().is_err(), "{line}: after 9999");
                continue;
            };
            let f = id.decode().unwrap();
            assert_eq!(f.text("time"), Some(time.as_str()), "{line}");
            assert_eq!(f.text("issuer"), s("issuer").as_deref(), "{line}");
            for k in ["unix_ts_ms", "counter", "cluster", "slot", "random"] {
                assert_eq!(f.int(k), n(k), "{line}: {k}");
            }
            assert_eq!(
                id.uuid_bytes().map(u128::from_be_bytes),
                u128::from_str_radix(&s("hex").unwrap(), 16).ok()
            );
            ok += 1;
        }
        assert!(ok >= 9 && refused >= 5, "{ok} {refused}");
    }
}
