//! HTTP over idcar's Unix socket ([`HttpClient`]): `idcar get`, the load generator and the
//! tests. The binary protocol's client is the `idcar-client` crate (clients/rust/).

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use std::path::Path;
use tokio::net::UnixStream;

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
