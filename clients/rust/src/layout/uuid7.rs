//! uuid7: the client decodes RFC 9562 version-7 UUIDs as `idcar decode --json` does
//! (clients/SPEC.md), checked against the known answers every client shares.

use super::Description;
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
