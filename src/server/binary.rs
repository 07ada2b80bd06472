//! Serves the binary protocol ([`super::frame`]) on one connection.
//!
//! Every complete request in the read buffer is answered before the responses are written in
//! one go, so pipelined requests cost one write. IDs are packed straight into the output
//! buffer behind a header whose length is filled in afterwards.

use super::deadline::{Deadlined, Phases};
use super::frame::{self, FrameError, Request, Status};
use crate::metrics::{Interface, Outcome};
use crate::service::Service;
use std::sync::Arc;
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio_util::sync::CancellationToken;

/// Responses are written out once this many bytes are pending, even mid-pipeline.
const FLUSH_AT: usize = 64 * 1024;
/// Buffers that grew past this during a burst are shrunk back afterwards.
const KEEP_CAPACITY: usize = 1024 * 1024;

/// Runs the protocol until the peer closes, a frame cannot be resynchronised, one of the
/// connection's deadlines passes (`stream` enforces them; `phases` learns where frames end),
/// or shutdown.
pub async fn serve(
    mut stream: Deadlined<UnixStream>,
    first: Vec<u8>,
    svc: Arc<Service>,
    phases: Arc<Phases>,
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
            if wbuf.len() >= FLUSH_AT {
                stream.write_all(&wbuf).await?;
                wbuf.clear();
            }
        }
        rbuf.drain(..used);
        if !wbuf.is_empty() {
            stream.write_all(&wbuf).await?;
            wbuf.clear();
        }
        if used > 0 {
            // The frames read are answered: what is left (if anything) is the start of the
            // next request, whose deadline runs from now, not from the first frame's bytes.
            phases.answered(!rbuf.is_empty());
        }
        if close {
            return Ok(());
        }
        if wbuf.capacity() > KEEP_CAPACITY {
            wbuf.shrink_to(4096);
        }
        if rbuf.capacity() > KEEP_CAPACITY {
            rbuf.shrink_to(4096);
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
    let Request::GetIds { count, ask } = req;
    let width = svc.layout().width();
    let at = out.len();
    frame::encode_response_header(Status::Ok, width as u8, 0, out);
    let outcome = match svc.issue(u64::from(count), &ask, out).await {
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
