//! uuid7's text forms: the RFC's canonical `8-4-4-4-12` hex and ULID-style Crockford base32.

use super::super::NOT_B32;
use super::LayoutError;

const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
/// The value of each ASCII byte in [`CROCKFORD`] (either case), `NOT_B32` for the rest.
const B32_VALUE: [u8; 256] = super::super::b32_values(CROCKFORD, true);
const HEX: &[u8; 16] = b"0123456789abcdef";

/// The RFC's text of a UUID, lower case.
pub(super) fn write_canonical(v: u128, out: &mut String) {
    let bytes = v.to_be_bytes();
    for (i, b) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        out.push(HEX[usize::from(b >> 4)] as char);
        out.push(HEX[usize::from(b & 0xf)] as char);
    }
}

/// The canonical text of a UUID, e.g. `019ac1a6-2e5c-7a31-8c4f-3b2a00070000`.
pub fn to_text(v: u128) -> String {
    let mut s = String::with_capacity(36);
    write_canonical(v, &mut s);
    s
}

pub(super) fn parse_canonical(text: &str) -> Result<u128, LayoutError> {
    if text.len() != 36 {
        return Err(LayoutError::WrongLength {
            expected: "36 characters (8-4-4-4-12 hex digits)".into(),
            got: text.chars().count(),
        });
    }
    let mut v = 0u128;
    for (pos, c) in text.char_indices() {
        if matches!(pos, 8 | 13 | 18 | 23) {
            if c != '-' {
                return Err(LayoutError::BadChar {
                    ch: c,
                    pos,
                    expected: "'-' (8-4-4-4-12 hex digits)",
                });
            }
            continue;
        }
        let d = c.to_digit(16).ok_or(LayoutError::BadChar {
            ch: c,
            pos,
            expected: "a hex digit",
        })?;
        v = v << 4 | u128::from(d);
    }
    Ok(v)
}

/// The Crockford base32 text of a UUID (26 characters, upper case).
pub fn to_ulid(v: u128) -> String {
    (0..26)
        .map(|i| CROCKFORD[(v >> (125 - 5 * i) & 0x1f) as usize] as char)
        .collect()
}

pub(super) fn parse_ulid(text: &str) -> Result<u128, LayoutError> {
    if text.len() != 26 {
        return Err(LayoutError::WrongLength {
            expected: "26 Crockford base32 characters".into(),
            got: text.chars().count(),
        });
    }
    let mut v = 0u128;
    for (pos, b) in text.bytes().enumerate() {
        let d = B32_VALUE[usize::from(b)];
        if d == NOT_B32 || (pos == 0 && d > 7) {
            return Err(LayoutError::BadChar {
                ch: text[pos..].chars().next().unwrap_or('?'),
                pos,
                expected: if pos == 0 {
                    "0-7 (26 characters hold 130 bits; a UUID has 128)"
                } else {
                    "a Crockford base32 digit (0-9, A-Z without I, L, O, U)"
                },
            });
        }
        v = v << 5 | u128::from(d);
    }
    Ok(v)
}
