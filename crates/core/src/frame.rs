//! The binary protocol's frames: pure parse and encode, no I/O.
//!
//! Request (4-byte header, then a payload of `len` bytes):
//!
//! | byte | field | value |
//! |---|---|---|
//! | 0 | magic | `0xD1` (never an ASCII byte, so the server tells it from HTTP) |
//! | 1 | opcode | `0x01` = get IDs, `0x02` = describe (no payload) |
//! | 2..4 | len | payload length, u16 big-endian (at most [`MAX_REQUEST_PAYLOAD`]) |
//! | 4..8 | count | get IDs: how many, u32 big-endian |
//! | 8 | flags | optional (payload of 8 bytes): bit 0 = `meta` is given, bit 1 = transaction |
//! | 9 | meta | sno80's metabyte when flag bit 0 is set, else 0 |
//! | 10..12 | reserved | 0 |
//!
//! A get-IDs payload is 4 bytes (count only: plain IDs, as every client before request options
//! sends) or 8 bytes (count and options). Unknown flag bits or non-zero reserved bytes are a
//! bad request, so options added later cannot be silently ignored by an older server.
//!
//! Response (8-byte header, then a payload of `len` bytes):
//!
//! | byte | field | value |
//! |---|---|---|
//! | 0 | magic | `0xD1` |
//! | 1 | status | 0 ok, 1 bad request, 2 unavailable (retry later) |
//! | 2 | width | bytes per ID: 8 (lable64, si53, ugd60), 10 (sno80), 16 (muid128, uuid7); 0 on error |
//! | 3 | reserved | 0 |
//! | 4..8 | len | payload length, u32 big-endian |
//!
//! A describe request (`d1 02 00 00`) is answered with the layout's width and a JSON payload:
//! `{"layout":…,"width":…,"form":…,"params":{…}}` — the layout's name, its default text form and
//! every parameter that shapes its IDs (flag name without dashes → value, as text), so a client
//! can format and decode IDs without being configured.
//!
//! A get-IDs ok payload is `count * width` bytes: the IDs' binary forms back to back. A client learns
//! the width from every ok response's header (`len / width` IDs follow), so it needs no
//! configuration to split a response; a layout's width never changes while a server runs. An error
//! payload is a one-line UTF-8 reason. Requests may be pipelined; responses come in order. A
//! request with a bad magic byte or an oversized payload cannot be resynchronised: the server
//! answers with status 1 and closes the connection. Any other bad request (unknown opcode,
//! wrong payload size, bad count) is answered with status 1 and the connection stays open.

pub const MAGIC: u8 = 0xD1;
pub const OP_GET_IDS: u8 = 0x01;
pub const OP_DESCRIBE: u8 = 0x02;
/// Flag bit: the request carries a metabyte.
pub const FLAG_META: u8 = 0x01;
/// Flag bit: the IDs of one transaction.
pub const FLAG_TRANSACTION: u8 = 0x02;

use crate::layout::RequestOptions;
pub const REQUEST_HEADER: usize = 4;
pub const RESPONSE_HEADER: usize = 8;
/// Larger request payloads are refused and the connection closed.
pub const MAX_REQUEST_PAYLOAD: usize = 1024;

/// A response's status byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Status {
    Ok = 0,
    BadRequest = 1,
    Unavailable = 2,
}

impl Status {
    pub fn from_byte(b: u8) -> Option<Status> {
        match b {
            0 => Some(Status::Ok),
            1 => Some(Status::BadRequest),
            2 => Some(Status::Unavailable),
            _ => None,
        }
    }
}

/// A parsed request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    GetIds {
        count: u32,
        opts: RequestOptions,
    },
    /// The layout, its default text form and its parameters.
    Describe,
}

/// A request that could not be understood.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameError {
    /// Bytes to skip to reach the next frame; `None` when the stream cannot be resynchronised.
    pub skip: Option<usize>,
    pub reason: String,
}

/// Parses one request from the front of `buf`: `Ok(None)` if more bytes are needed, else
/// the request and the bytes it used.
pub fn parse_request(buf: &[u8]) -> Result<Option<(Request, usize)>, FrameError> {
    let Some(&magic) = buf.first() else {
        return Ok(None);
    };
    if magic != MAGIC {
        return Err(FrameError {
            skip: None,
            reason: format!("bad magic byte {magic:#04x}, expected {MAGIC:#04x}"),
        });
    }
    if buf.len() < REQUEST_HEADER {
        return Ok(None);
    }
    let len = usize::from(u16::from_be_bytes([buf[2], buf[3]]));
    if len > MAX_REQUEST_PAYLOAD {
        return Err(FrameError {
            skip: None,
            reason: format!("request payload of {len} bytes exceeds {MAX_REQUEST_PAYLOAD}"),
        });
    }
    let total = REQUEST_HEADER + len;
    if buf.len() < total {
        return Ok(None);
    }
    let payload = &buf[REQUEST_HEADER..total];
    let bad = |reason: String| FrameError {
        skip: Some(total),
        reason,
    };
    match buf[1] {
        OP_GET_IDS => {
            if len != 4 && len != 8 {
                return Err(bad(format!(
                    "get-IDs payload must be 4 or 8 bytes, got {len}"
                )));
            }
            let count = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
            let mut opts = RequestOptions::default();
            if len == 8 {
                let (flags, meta) = (payload[4], payload[5]);
                if flags & !(FLAG_META | FLAG_TRANSACTION) != 0 {
                    return Err(bad(format!("unknown get-IDs flags {flags:#04x}")));
                }
                if payload[6..8] != [0, 0] || (flags & FLAG_META == 0 && meta != 0) {
                    return Err(bad("reserved get-IDs bytes must be zero".into()));
                }
                opts.meta = (flags & FLAG_META != 0).then_some(meta);
                opts.transaction = flags & FLAG_TRANSACTION != 0;
            }
            Ok(Some((Request::GetIds { count, opts }, total)))
        }
        OP_DESCRIBE if len == 0 => Ok(Some((Request::Describe, total))),
        OP_DESCRIBE => Err(bad(format!("describe takes no payload, got {len} bytes"))),
        op => Err(bad(format!("unknown opcode {op:#04x}"))),
    }
}

/// Appends a get-IDs request (the short 4-byte form when no option is set).
pub fn encode_get_ids(count: u32, opts: &RequestOptions, out: &mut Vec<u8>) {
    let long = *opts != RequestOptions::default();
    out.extend_from_slice(&[MAGIC, OP_GET_IDS, 0, if long { 8 } else { 4 }]);
    out.extend_from_slice(&count.to_be_bytes());
    if long {
        let mut flags = 0;
        if opts.meta.is_some() {
            flags |= FLAG_META;
        }
        if opts.transaction {
            flags |= FLAG_TRANSACTION;
        }
        out.extend_from_slice(&[flags, opts.meta.unwrap_or(0), 0, 0]);
    }
}

/// Appends a response header.
pub fn encode_response_header(status: Status, width: u8, len: u32, out: &mut Vec<u8>) {
    out.extend_from_slice(&[MAGIC, status as u8, width, 0]);
    out.extend_from_slice(&len.to_be_bytes());
}

/// Appends a whole error response.
pub fn encode_error(status: Status, reason: &str, out: &mut Vec<u8>) {
    let reason = reason.as_bytes();
    encode_response_header(status, 0, reason.len() as u32, out);
    out.extend_from_slice(reason);
}

/// A parsed response header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseHeader {
    pub status: Status,
    pub width: u8,
    pub len: u32,
}

/// Parses a response header from the front of `buf` (`Ok(None)` if fewer than 8 bytes).
pub fn parse_response_header(buf: &[u8]) -> Result<Option<ResponseHeader>, String> {
    if buf.len() < RESPONSE_HEADER {
        return Ok(None);
    }
    if buf[0] != MAGIC {
        return Err(format!("bad magic byte {:#04x} in response", buf[0]));
    }
    let status =
        Status::from_byte(buf[1]).ok_or_else(|| format!("unknown status {:#04x}", buf[1]))?;
    Ok(Some(ResponseHeader {
        status,
        width: buf[2],
        len: u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]),
    }))
}

/// The body of a describe answer: the layout, its width, its default text form and the
/// parameters that shape its IDs (JSON; feature `json`).
#[cfg(feature = "json")]
pub fn describe(layout: &dyn crate::layout::Layout, params: &[(String, String)]) -> Vec<u8> {
    let params: serde_json::Map<String, serde_json::Value> = params
        .iter()
        .filter(|(k, _)| k != "layout")
        .map(|(k, v)| (k.clone(), v.clone().into()))
        .collect();
    serde_json::json!({
        "layout": layout.name(),
        "width": layout.width(),
        "form": layout.default_form().name(),
        "params": params,
    })
    .to_string()
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip_and_partial_frames() {
        let mut buf = Vec::new();
        encode_get_ids(300, &RequestOptions::default(), &mut buf);
        assert_eq!(buf, [0xD1, 0x01, 0, 4, 0, 0, 1, 44]);
        for cut in 0..buf.len() {
            assert_eq!(parse_request(&buf[..cut]), Ok(None), "cut at {cut}");
        }
        assert_eq!(
            parse_request(&buf),
            Ok(Some((
                Request::GetIds {
                    count: 300,
                    opts: RequestOptions::default()
                },
                8
            )))
        );
        for opts in [
            RequestOptions {
                meta: Some(0),
                transaction: false,
            },
            RequestOptions {
                meta: Some(255),
                transaction: true,
            },
            RequestOptions {
                meta: None,
                transaction: true,
            },
        ] {
            buf.clear();
            encode_get_ids(7, &opts, &mut buf);
            assert_eq!(buf.len(), 12);
            assert_eq!(
                parse_request(&buf),
                Ok(Some((Request::GetIds { count: 7, opts }, 12)))
            );
        }
        // Unknown flags, reserved bytes, a metabyte without its flag: refused, stream kept.
        for payload in [
            [0, 0, 0, 1, 4, 0, 0, 0],
            [0, 0, 0, 1, 1, 9, 0, 1],
            [0, 0, 0, 1, 0, 9, 0, 0],
        ] {
            let mut buf = vec![0xD1, 0x01, 0, 8];
            buf.extend_from_slice(&payload);
            assert_eq!(parse_request(&buf).unwrap_err().skip, Some(12));
        }
    }

    #[test]
    fn bad_frames_say_whether_the_stream_survives() {
        let e = parse_request(b"GET / HTTP/1.1").unwrap_err();
        assert_eq!(e.skip, None);
        let e = parse_request(&[0xD1, 0x01, 0xff, 0xff]).unwrap_err();
        assert_eq!(e.skip, None, "oversized payload closes");
        let e = parse_request(&[0xD1, 0x07, 0, 1, 9]).unwrap_err();
        assert_eq!(e.skip, Some(5));
        assert!(e.reason.contains("unknown opcode"));
        let e = parse_request(&[0xD1, 0x01, 0, 2, 0, 1]).unwrap_err();
        assert_eq!(e.skip, Some(6));
    }

    #[test]
    fn describe_has_no_payload() {
        assert_eq!(
            parse_request(&[0xD1, 0x02, 0, 0, 0xD1]).unwrap(),
            Some((Request::Describe, 4))
        );
        let e = parse_request(&[0xD1, 0x02, 0, 1, 7]).unwrap_err();
        assert_eq!(
            e.skip,
            Some(5),
            "a describe with a payload is refused, the stream survives"
        );
    }

    #[test]
    fn response_header_round_trip() {
        let mut out = Vec::new();
        encode_response_header(Status::Ok, 8, 16, &mut out);
        assert_eq!(
            parse_response_header(&out),
            Ok(Some(ResponseHeader {
                status: Status::Ok,
                width: 8,
                len: 16
            }))
        );
        out.clear();
        encode_error(Status::Unavailable, "no lease", &mut out);
        let h = parse_response_header(&out).unwrap().unwrap();
        assert_eq!((h.status, h.len), (Status::Unavailable, 8));
        assert_eq!(&out[8..], b"no lease");
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            match parse_request(&bytes) {
                Ok(Some((_, used))) => prop_assert!(used <= bytes.len()),
                Ok(None) => {}
                Err(e) => if let Some(skip) = e.skip { prop_assert!(skip <= bytes.len()) },
            }
        }
    }
}
