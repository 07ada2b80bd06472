//! An async connection on tokio's Unix socket (feature `tokio`): the same requests and
//! answers as the blocking [`Connection`](crate::connection::Connection), for servers and load generators
//! that already run tokio. No retries and no prefetch: for those, use `Client`
//! (from `spawn_blocking` or a thread of its own).

use crate::error::{Error, Result};
use crate::layout::Description;
use crate::wire::Ids;
use crate::wire::{self, RequestOptions, RESPONSE_HEADER};
use std::path::Path;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;

/// One async connection to idcar's socket; requests may be sent ahead of their answers.
///
/// Bound waits with `tokio::time::timeout`, and drop the connection after a time-out: an
/// answer cut off half-way leaves the stream out of step.
#[derive(Debug)]
pub struct Connection {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
    buf: Vec<u8>,
}

impl Connection {
    /// Connects to the socket.
    pub async fn connect(socket: &Path) -> Result<Connection> {
        let stream = UnixStream::connect(socket)
            .await
            .map_err(|source| Error::connecting(socket, source))?;
        let (r, w) = stream.into_split();
        Ok(Connection {
            reader: BufReader::with_capacity(64 << 10, r),
            writer: w,
            buf: Vec::with_capacity(64),
        })
    }

    /// Asks the server to describe its layout and waits for the answer.
    pub async fn describe(&mut self) -> Result<Description> {
        self.send_raw(&wire::DESCRIBE).await?;
        let (h, body) = self.read_frame().await?;
        match wire::refusal(&h, &body) {
            Some(e) => Err(e),
            None => Description::from_json(&String::from_utf8_lossy(&body)),
        }
    }

    /// Sends a request for `count` IDs without waiting for the answer.
    pub async fn send(&mut self, count: u32) -> Result<()> {
        self.send_with(count, &RequestOptions::default()).await
    }

    /// Sends a request for `count` IDs with options, without waiting for the answer.
    pub async fn send_with(&mut self, count: u32, opts: &RequestOptions) -> Result<()> {
        self.buf.clear();
        wire::get_ids(count, opts, &mut self.buf);
        self.writer.write_all(&self.buf).await?;
        Ok(())
    }

    /// Sends raw bytes (to test a server's handling of bad frames).
    pub async fn send_raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.writer.write_all(bytes).await?;
        Ok(())
    }

    /// Reads the answer to the oldest request not yet answered.
    pub async fn recv(&mut self) -> Result<Ids> {
        let (h, body) = self.read_frame().await?;
        wire::ids_payload(&h, body)
    }

    /// Asks for `count` IDs and waits for them.
    pub async fn ids(&mut self, count: u32) -> Result<Ids> {
        self.send(count).await?;
        self.recv().await
    }

    async fn read_frame(&mut self) -> Result<(wire::Header, Vec<u8>)> {
        let mut head = [0u8; RESPONSE_HEADER];
        self.reader.read_exact(&mut head).await?;
        let h = wire::header(&head)?;
        let mut body = vec![0u8; h.len as usize];
        self.reader.read_exact(&mut body).await?;
        Ok((h, body))
    }
}
