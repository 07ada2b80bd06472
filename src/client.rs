//! A small client for idcar's socket: the binary protocol ([`BinaryClient`], with pipelining)
//! and HTTP over the Unix socket ([`HttpClient`]). Used by `idcar get`, the examples and tests.

use crate::layout::RequestOptions;
use crate::server::frame::{self, Status};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use std::path::Path;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufStream};
use tokio::net::UnixStream;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("protocol: {0}")]
    Protocol(String),
    #[error("server refused ({status:?}): {reason}")]
    Refused { status: Status, reason: String },
}

/// IDs from one binary response: `width` bytes each, back to back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ids {
    pub width: usize,
    pub bytes: Vec<u8>,
}

impl Ids {
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.bytes.chunks_exact(self.width.max(1))
    }

    pub fn len(&self) -> usize {
        self.bytes.len() / self.width.max(1)
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// A binary-protocol connection. Requests may be sent ahead of their responses.
#[derive(Debug)]
pub struct BinaryClient {
    stream: BufStream<UnixStream>,
}

impl BinaryClient {
    pub async fn connect(socket: &Path) -> std::io::Result<BinaryClient> {
        Ok(BinaryClient {
            stream: BufStream::new(UnixStream::connect(socket).await?),
        })
    }

    /// Sends a request for `count` IDs without waiting for the answer.
    pub async fn send(&mut self, count: u32) -> std::io::Result<()> {
        self.send_with_options(count, &RequestOptions::default())
            .await
    }

    /// Sends a request for `count` IDs with options (metabyte, transaction).
    pub async fn send_with_options(
        &mut self,
        count: u32,
        opts: &RequestOptions,
    ) -> std::io::Result<()> {
        let mut req = Vec::with_capacity(12);
        frame::encode_get_ids(count, opts, &mut req);
        self.stream.write_all(&req).await?;
        self.stream.flush().await
    }

    /// Sends raw bytes (for testing the server's handling of bad frames).
    pub async fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes).await?;
        self.stream.flush().await
    }

    /// Reads the next response.
    pub async fn recv(&mut self) -> Result<Ids, ClientError> {
        let mut head = [0u8; frame::RESPONSE_HEADER];
        self.stream.read_exact(&mut head).await?;
        let h = frame::parse_response_header(&head)
            .map_err(ClientError::Protocol)?
            .expect("a full header was read");
        let mut body = vec![0u8; h.len as usize];
        self.stream.read_exact(&mut body).await?;
        match h.status {
            Status::Ok if h.width == 0 || !body.len().is_multiple_of(usize::from(h.width)) => {
                Err(ClientError::Protocol(format!(
                    "{} bytes is not a whole number of {}-byte IDs",
                    body.len(),
                    h.width
                )))
            }
            Status::Ok => Ok(Ids {
                width: h.width.into(),
                bytes: body,
            }),
            status => Err(ClientError::Refused {
                status,
                reason: String::from_utf8_lossy(&body).into_owned(),
            }),
        }
    }

    /// Asks for `count` IDs and waits for them.
    pub async fn ids(&mut self, count: u32) -> Result<Ids, ClientError> {
        self.send(count).await?;
        self.recv().await
    }
}

/// An HTTP/1.1 keep-alive connection over the Unix socket.
#[derive(Debug)]
pub struct HttpClient {
    sender: SendRequest<Empty<Bytes>>,
}

/// A response: status code, and the body as text.
#[derive(Debug, Clone)]
pub struct HttpReply {
    pub status: u16,
    pub retry_after: Option<String>,
    pub body: String,
}

impl HttpClient {
    pub async fn connect(socket: &Path) -> anyhow::Result<HttpClient> {
        let stream = UnixStream::connect(socket).await?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(HttpClient { sender })
    }

    /// `GET path_and_query`, asking for JSON when `json`.
    pub async fn get(&mut self, path_and_query: &str, json: bool) -> anyhow::Result<HttpReply> {
        let req = hyper::Request::get(path_and_query)
            .header(hyper::header::HOST, "idcar")
            .header(
                hyper::header::ACCEPT,
                if json {
                    "application/json"
                } else {
                    "text/plain"
                },
            )
            .body(Empty::new())?;
        self.sender.ready().await?;
        let resp = self.sender.send_request(req).await?;
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get(hyper::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = resp.into_body().collect().await?.to_bytes();
        Ok(HttpReply {
            status,
            retry_after,
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    }
}
