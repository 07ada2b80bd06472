//! One blocking connection: requests may be sent ahead of their answers (pipelining).

use crate::error::{Error, Result};
use crate::layout::Description;
use crate::wire::Ids;
use crate::wire::{self, RequestOptions, RESPONSE_HEADER};
use std::io::{BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// One connection to idcar's socket, without retries: the building block of
/// `Client`, for pipelining and for tests of the protocol itself.
///
/// Every read and write is bounded by the timeout given to [`connect`](Self::connect).
#[derive(Debug)]
pub struct Connection {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    buf: Vec<u8>,
}

impl Connection {
    /// Connects to the socket; `timeout` bounds every later read and write (`None`: no bound).
    /// Connecting itself is not bounded: a Unix socket connects at once, or fails, unless the
    /// server's listen backlog is full.
    pub fn connect(socket: &Path, timeout: Option<Duration>) -> Result<Connection> {
        let stream =
            UnixStream::connect(socket).map_err(|source| Error::connecting(socket, source))?;
        stream.set_read_timeout(timeout)?;
        stream.set_write_timeout(timeout)?;
        Ok(Connection {
            writer: stream.try_clone()?,
            reader: BufReader::with_capacity(64 << 10, stream),
            buf: Vec::with_capacity(64),
        })
    }

    /// Asks the server to describe its layout and waits for the answer.
    pub fn describe(&mut self) -> Result<Description> {
        self.send_raw(&wire::DESCRIBE)?;
        let (h, body) = self.read_frame()?;
        match wire::refusal(&h, &body) {
            Some(e) => Err(e),
            None => Description::from_json(&String::from_utf8_lossy(&body)),
        }
    }

    /// Sends a request for `count` IDs without waiting for the answer.
    pub fn send(&mut self, count: u32) -> Result<()> {
        self.send_with(count, &RequestOptions::default())
    }

    /// Sends a request for `count` IDs with options (sno80's metabyte, a muid128
    /// transaction) without waiting for the answer.
    pub fn send_with(&mut self, count: u32, opts: &RequestOptions) -> Result<()> {
        self.buf.clear();
        wire::get_ids(count, opts, &mut self.buf);
        self.writer.write_all(&self.buf)?;
        Ok(())
    }

    /// Sends raw bytes (to test a server's handling of bad frames).
    pub fn send_raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.writer.write_all(bytes)?;
        Ok(())
    }

    /// Reads the answer to the oldest request not yet answered.
    pub fn recv(&mut self) -> Result<Ids> {
        let (h, body) = self.read_frame()?;
        wire::ids_payload(&h, body)
    }

    /// Asks for `count` IDs and waits for them.
    pub fn ids(&mut self, count: u32) -> Result<Ids> {
        self.send(count)?;
        self.recv()
    }

    fn read_frame(&mut self) -> Result<(wire::Header, Vec<u8>)> {
        let mut head = [0u8; RESPONSE_HEADER];
        self.reader.read_exact(&mut head)?;
        let h = wire::header(&head)?;
        let mut body = vec![0u8; h.len as usize];
        self.reader.read_exact(&mut body)?;
        Ok((h, body))
    }
}
