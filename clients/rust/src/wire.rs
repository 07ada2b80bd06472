//! The binary protocol's frames as a client writes and reads them (no I/O): see idcar's
//! `docs/protocol.md`.
//!
//! Request: `d1 <opcode> <len u16>` then `len` bytes; get IDs is opcode 1 with a 4-byte count
//! (or 8 bytes: count, flags, metabyte, two reserved zero bytes), describe is opcode 2 with no
//! payload. Response: `d1 <status> <width> 00 <len u32>` then `len` bytes. Integers are
//! big-endian.

use crate::Error;

/// The first byte of every frame.
pub const MAGIC: u8 = 0xD1;
/// Opcode: get IDs.
pub const OP_GET_IDS: u8 = 0x01;
/// Opcode: describe the server's layout.
pub const OP_DESCRIBE: u8 = 0x02;
/// Bytes in a response header.
pub const RESPONSE_HEADER: usize = 8;
/// The describe request.
pub const DESCRIBE: [u8; 4] = [MAGIC, OP_DESCRIBE, 0, 0];
/// Most bytes a response may announce before the client calls it a protocol error: far above
/// the largest batch a server sends (10,000 IDs of 16 bytes).
pub const MAX_RESPONSE: u32 = 64 << 20;

/// Options of a get-IDs request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestOptions {
    /// sno80's metabyte.
    pub meta: Option<u8>,
    /// The IDs of one transaction (muid128: one timestamp and medallion, offsets 1..N).
    pub transaction: bool,
}

/// Appends a get-IDs request for `count` IDs to `out`.
pub fn get_ids(count: u32, opts: &RequestOptions, out: &mut Vec<u8>) {
    let long = *opts != RequestOptions::default();
    out.extend_from_slice(&[MAGIC, OP_GET_IDS, 0, if long { 8 } else { 4 }]);
    out.extend_from_slice(&count.to_be_bytes());
    if long {
        let flags = u8::from(opts.meta.is_some()) | (u8::from(opts.transaction) << 1);
        out.extend_from_slice(&[flags, opts.meta.unwrap_or(0), 0, 0]);
    }
}

/// A response's status byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// The payload is what was asked for.
    Ok,
    /// The request was refused: never retried.
    BadRequest,
    /// The server cannot issue IDs now (no lease yet, mark reached): retry later.
    Unavailable,
}

/// A parsed response header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// What the server says.
    pub status: Status,
    /// Bytes per ID (0 on errors).
    pub width: u8,
    /// Payload bytes that follow.
    pub len: u32,
}

/// Parses a response header.
pub fn header(b: &[u8; RESPONSE_HEADER]) -> Result<Header, Error> {
    if b[0] != MAGIC {
        return Err(Error::Protocol(format!(
            "bad magic byte {:#04x} in a response, expected {MAGIC:#04x}",
            b[0]
        )));
    }
    let status = match b[1] {
        0 => Status::Ok,
        1 => Status::BadRequest,
        2 => Status::Unavailable,
        s => return Err(Error::Protocol(format!("unknown status {s:#04x}"))),
    };
    let len = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
    if len > MAX_RESPONSE {
        return Err(Error::Protocol(format!(
            "a response of {len} bytes (at most {MAX_RESPONSE})"
        )));
    }
    Ok(Header {
        status,
        width: b[2],
        len,
    })
}

/// What a get-IDs response says, given its header and payload: the IDs (`width` bytes each),
/// or the error the status names.
pub fn ids_payload(h: &Header, body: Vec<u8>) -> Result<crate::Ids, Error> {
    if let Some(e) = refusal(h, &body) {
        return Err(e);
    }
    match h.status {
        Status::Ok if h.width == 0 || body.len() % usize::from(h.width) != 0 => {
            Err(Error::Protocol(format!(
                "{} bytes is not a whole number of {}-byte IDs",
                body.len(),
                h.width
            )))
        }
        _ => Ok(crate::Ids {
            width: h.width.into(),
            bytes: body,
        }),
    }
}

/// The error an answer's status names, with the server's reason; `None` for ok.
pub fn refusal(h: &Header, body: &[u8]) -> Option<Error> {
    let reason = || String::from_utf8_lossy(body).trim_end().to_owned();
    match h.status {
        Status::Ok => None,
        Status::BadRequest => Some(Error::BadRequest(reason())),
        Status::Unavailable => Some(Error::Unavailable(reason())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_short_unless_options_are_given() {
        let mut b = Vec::new();
        get_ids(5, &RequestOptions::default(), &mut b);
        assert_eq!(b, [0xd1, 1, 0, 4, 0, 0, 0, 5]);
        b.clear();
        let o = RequestOptions {
            meta: Some(7),
            transaction: true,
        };
        get_ids(256, &o, &mut b);
        assert_eq!(b, [0xd1, 1, 0, 8, 0, 0, 1, 0, 3, 7, 0, 0]);
    }

    #[test]
    fn headers_are_checked() {
        let h = header(&[0xd1, 0, 8, 0, 0, 0, 0, 16]).unwrap();
        assert_eq!((h.status, h.width, h.len), (Status::Ok, 8, 16));
        assert!(matches!(
            header(&[0x48, 0, 8, 0, 0, 0, 0, 0]),
            Err(Error::Protocol(_))
        ));
        assert!(matches!(
            header(&[0xd1, 9, 8, 0, 0, 0, 0, 0]),
            Err(Error::Protocol(_))
        ));
        assert!(matches!(
            header(&[0xd1, 0, 8, 0, 0xff, 0, 0, 0]),
            Err(Error::Protocol(_))
        ));
        let h = header(&[0xd1, 0, 8, 0, 0, 0, 0, 7]).unwrap();
        assert!(matches!(
            ids_payload(&h, vec![0; 7]),
            Err(Error::Protocol(_))
        ));
        let h = header(&[0xd1, 2, 0, 0, 0, 0, 0, 4]).unwrap();
        match ids_payload(&h, b"busy".to_vec()) {
            Err(Error::Unavailable(r)) => assert_eq!(r, "busy"),
            other => panic!("{other:?}"),
        }
    }
}
