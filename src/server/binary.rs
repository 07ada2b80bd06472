//! Serves the binary protocol ([`super::frame`]) on one connection.
//!
//! Every complete request in the read buffer is answered before the responses are written in
//! one go, so pipelined requests cost one write. IDs are packed straight into the output
//! buffer behind a header whose length is filled in afterwards.

use super::frame::{self, FrameError, Request, Status};
use crate::metrics::{Interface, Outcome};
use crate::service::Service;
use std::sync::Arc;
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio_util::sync::CancellationToken;

/// Runs the protocol until the peer closes, a frame cannot be resynchronised, or shutdown.
pub async fn serve(
    mut stream: UnixStream,
    first: Vec<u8>,
    svc: Arc<Service>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let mut rbuf = first;
    rbuf.reserve(4096);
    let mut wbuf: Vec<u8> = Vec::with_capacity(4096);
    loop {
        let mut used = 0;
        let mut close = false;
        loop {
            match frame::parse_request(&rbuf[used..]) {
                Ok(Some((req, n))) => {
                    used += n;
                    answer(&svc, req, &mut wbuf).await;
                }
                Ok(None) => break,
                Err(FrameError { skip, reason }) => {
                    svc.metrics()
                        .request(Interface::Binary, Outcome::BadRequest, 0.0);
                    frame::encode_error(Status::BadRequest, &reason, &mut wbuf);
                    match skip {
                        Some(n) => used += n,
                        None => {
                            close = true;
                            break;
                        }
                    }
                }
            }
        }
        rbuf.drain(..used);
        if !wbuf.is_empty() {
            stream.write_all(&wbuf).await?;
            wbuf.clear();
        }
        if close {
            return Ok(());
        }
        let n = tokio::select! {
            r = stream.read_buf(&mut rbuf) => r?,
            _ = shutdown.cancelled() => return Ok(()),
        };
        if n == 0 {
            return Ok(());
        }
    }
}

async fn answer(svc: &Service, req: Request, out: &mut Vec<u8>) {
    let started = Instant::now();
    let Request::GetIds { count } = req;
    let width = svc.layout().width();
    let at = out.len();
    frame::encode_response_header(Status::Ok, width as u8, 0, out);
    let outcome = match svc.issue(u64::from(count), out).await {
        Ok(()) => {
            let len = (out.len() - at - frame::RESPONSE_HEADER) as u32;
            out[at + 4..at + 8].copy_from_slice(&len.to_be_bytes());
            Outcome::Ok
        }
        Err(e) => {
            out.truncate(at);
            let (status, outcome) = if e.is_unavailable() {
                (Status::Unavailable, Outcome::Unavailable)
            } else {
                (Status::BadRequest, Outcome::BadRequest)
            };
            frame::encode_error(status, &e.to_string(), out);
            outcome
        }
    };
    svc.metrics()
        .request(Interface::Binary, outcome, started.elapsed().as_secs_f64());
}
