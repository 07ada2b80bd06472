//! The binary protocol's frames as a client writes and reads them (no I/O), in idcar's own
//! core (`idcar_core::frame`): see idcar's `docs/protocol.md`.
//!
//! Request: `d1 <opcode> <len u16>` then `len` bytes; get IDs is opcode 1 with a 4-byte count
//! (or 8 bytes: count, flags, metabyte, two reserved zero bytes), describe is opcode 2 with no
//! payload. Response: `d1 <status> <width> 00 <len u32>` then `len` bytes. Integers are
//! big-endian.

use crate::error::Error;
use idcar_core::frame;

pub use idcar_core::frame::{ResponseHeader as Header, Status, MAGIC, OP_DESCRIBE, OP_GET_IDS};
pub use idcar_core::layout::RequestOptions;

/// Bytes in a response header.
pub const RESPONSE_HEADER: usize = frame::RESPONSE_HEADER;
/// The describe request.
pub const DESCRIBE: [u8; 4] = [MAGIC, OP_DESCRIBE, 0, 0];
/// Most bytes a response may announce before the client calls it a protocol error: far above
/// the largest batch a server sends (10,000 IDs of 16 bytes).
pub const MAX_RESPONSE: u32 = 64 << 20;

/// Appends a get-IDs request for `count` IDs to `out`.
pub fn get_ids(count: u32, opts: &RequestOptions, out: &mut Vec<u8>) {
    frame::encode_get_ids(count, opts, out)
}

/// Parses a response header.
pub fn header(b: &[u8; RESPONSE_HEADER]) -> Result<Header, Error> {
    let h = match frame::parse_response_header(b) {
        Ok(Some(h)) => h,
        Ok(None) => return Err(Error::Protocol("a short response header".into())),
        Err(why) => return Err(Error::Protocol(why)),
    };
    if h.len > MAX_RESPONSE {
        return Err(Error::Protocol(format!(
            "a response of {} bytes (at most {MAX_RESPONSE})",
            h.len
        )));
    }
    Ok(h)
}

/// The IDs of one answer, as the server sent them: `width` bytes each, back to back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ids {
    /// Bytes per ID.
    pub width: usize,
    /// The IDs' binary forms.
    pub bytes: Vec<u8>,
}

impl Ids {
    /// Each ID's bytes.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.bytes.chunks_exact(self.width.max(1))
    }

    /// How many IDs.
    pub fn len(&self) -> usize {
        self.bytes.len() / self.width.max(1)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// What a get-IDs response says, given its header and payload: the IDs (`width` bytes each),
/// or the error the status names.
pub fn ids_payload(h: &Header, body: Vec<u8>) -> Result<Ids, Error> {
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
        _ => Ok(Ids {
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
