//! Serves the binary protocol ([`super::frame`]) on one connection.
//!
//! Every complete request in the read buffer is answered before the responses are written in
//! one go, so pipelined requests cost one write. IDs are packed straight into the output
//! buffer behind a header whose length is filled in afterwards.
//!
//! Each binary connection is served on a blocking thread of its own ([`serve_on_thread`]): a
//! single-ID request then costs what a Unix-socket round trip costs — the client's write wakes
//! the thread blocked in `read` directly, with no event loop, no timer armed per read and no
//! other worker woken (measured in docs/benchmarks.md). A request's and a response's deadlines
//! are socket timeouts (`SO_RCVTIMEO`, `SO_SNDTIMEO`), set only while a request or a response
//! is incomplete; the idle deadline is kept by a watchdog on the connection's task instead
//! (a read timeout would arm and cancel a kernel timer on every idle read). The request's
//! start and end are lock-free marks on the connection's [`Phases`]. `--max-connections`
//! bounds the threads.

use super::deadline::{Answering, Expiry, Phases};
use super::frame::{self, FrameError, Request, Status};
use crate::metrics::{Interface, Outcome};
use crate::service::Service;
use std::sync::Arc;
use std::time::Instant;
use tokio::net::UnixStream;
use tokio_util::sync::CancellationToken;

/// Responses are written out once this many bytes are pending, even mid-pipeline.
const FLUSH_AT: usize = 64 * 1024;
/// Pipelined answers are held back for one write at most this long in all.
const HOLD_AT_MOST: std::time::Duration = std::time::Duration::from_millis(1);
/// Buffers that grew past this during a burst are shrunk back afterwards.
const KEEP_CAPACITY: usize = 1024 * 1024;

/// Serves a binary connection on a thread of its own until the peer closes, a deadline
/// passes, or shutdown (then the frames already read are answered and the thread ends). When
/// this future is dropped (the connection was evicted, or the drain's grace is over) the
/// socket is shut down, which ends the thread's blocking read or write at once.
pub async fn serve_on_thread(
    stream: UnixStream,
    first: Vec<u8>,
    svc: Arc<Service>,
    phases: Arc<Phases>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let stream = stream.into_std()?;
    stream.set_nonblocking(false)?;
    let stream = Arc::new(stream);
    let rt = tokio::runtime::Handle::current();
    let (tx, mut done) = tokio::sync::oneshot::channel();
    let (conn, watched) = (stream.clone(), phases.clone());
    std::thread::Builder::new()
        .name("idcar-binary".into())
        .stack_size(THREAD_STACK)
        .spawn(move || {
            let _ = tx.send(run_blocking(&conn, first, &svc, &phases, &rt));
        })?;
    let _close = CloseOnDrop(stream.clone());
    tokio::select! {
        r = &mut done => return r.unwrap_or(Ok(())),
        _ = shutdown.cancelled() => {}
        _ = idle_watchdog(&watched) => {}
    }
    // Draining, or idle past the deadline: no more reads; what was read is answered and
    // written, then the thread ends (its next read sees the end of the stream).
    let _ = stream.shutdown(std::net::Shutdown::Read);
    done.await.unwrap_or(Ok(()))
}

/// Returns once the connection has been idle (no request begun, none being answered) for the
/// timeout, recording that expiry. Wakes about once per timeout while the connection is busy.
/// A read the thread returned from since the last look (bytes it has not yet marked as a
/// request) puts the expiry off for a moment: the thread marks them in microseconds.
async fn idle_watchdog(phases: &Phases) {
    const RECHECK: std::time::Duration = std::time::Duration::from_millis(10);
    let mut seen = phases.reads();
    loop {
        let now = tokio::time::Instant::now();
        let reads = phases.reads();
        match phases.read_deadline() {
            Some((at, Expiry::Idle)) if at <= now && reads == seen => {
                let _ = phases.expire(Expiry::Idle);
                return;
            }
            Some((at, Expiry::Idle)) if at <= now => tokio::time::sleep(RECHECK).await,
            Some((at, Expiry::Idle)) => tokio::time::sleep_until(at).await,
            // Answering, or a request begun (its own deadline is the thread's read timeout).
            _ => tokio::time::sleep(phases.timeout()).await,
        }
        seen = reads;
    }
}

/// Stack of a connection thread: the binary loop is shallow; the kernel commits only the pages
/// touched.
const THREAD_STACK: usize = 256 * 1024;

struct CloseOnDrop(Arc<std::os::unix::net::UnixStream>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        let _ = self.0.shutdown(std::net::Shutdown::Both);
    }
}

/// The binary loop on a blocking socket, with the deadlines of [`super::deadline`] as socket
/// timeouts.
fn run_blocking(
    s: &std::os::unix::net::UnixStream,
    first: Vec<u8>,
    svc: &Service,
    phases: &Phases,
    rt: &tokio::runtime::Handle,
) -> std::io::Result<()> {
    let timeout = phases.timeout().max(std::time::Duration::from_micros(1));
    let mut timeouts = Timeouts {
        read: None,
        write: timeout,
    };
    s.set_read_timeout(None)?;
    s.set_write_timeout(Some(timeout))?;
    let mut rbuf = first;
    rbuf.reserve(4096);
    let mut wbuf: Vec<u8> = Vec::with_capacity(4096);
    let mut chunk = [0u8; 8192];
    // Whether the buffer was empty before the last read: if that read brought only part of a
    // frame, its request phase starts now (checked only then, not on every request).
    let mut fresh = false;
    loop {
        let pass = answer_buffered(s, &rbuf, &mut wbuf, svc, phases, rt, &mut timeouts)?;
        if fresh && pass.used == 0 && !pass.close {
            phases.bytes_read();
        }
        rbuf.drain(..pass.used);
        if !wbuf.is_empty() {
            write_all(s, &wbuf, phases, &mut timeouts)?;
            wbuf.clear();
        }
        if let Some(f) = pass.flight {
            f.finish(!rbuf.is_empty());
        }
        if pass.close {
            return Ok(());
        }
        if wbuf.capacity() > KEEP_CAPACITY {
            wbuf.shrink_to(4096);
        }
        if rbuf.capacity() > KEEP_CAPACITY {
            rbuf.shrink_to(4096);
        }
        fresh = rbuf.is_empty();
        let n = read_more(s, &rbuf, &mut chunk, phases, &mut timeouts, timeout)?;
        if n == 0 {
            return Ok(());
        }
        rbuf.extend_from_slice(&chunk[..n]);
    }
}

/// What one pass over the buffered requests did.
struct Pass<'a> {
    /// Bytes of the buffer consumed.
    used: usize,
    /// A frame that cannot be skipped: answer, then close.
    close: bool,
    /// The request phase of the answers given, if any.
    flight: Option<Answering<'a>>,
}

/// Answers every whole request in `rbuf` into `wbuf`, writing out when it grows large or an
/// answer took a while.
fn answer_buffered<'a>(
    s: &std::os::unix::net::UnixStream,
    rbuf: &[u8],
    wbuf: &mut Vec<u8>,
    svc: &Service,
    phases: &'a Phases,
    rt: &tokio::runtime::Handle,
    timeouts: &mut Timeouts,
) -> std::io::Result<Pass<'a>> {
    let mut pass = Pass {
        used: 0,
        close: false,
        flight: None,
    };
    // How long the answers in `wbuf` have been held back.
    let mut delayed = std::time::Duration::ZERO;
    loop {
        match frame::parse_request(&rbuf[pass.used..]) {
            Ok(Some((req, n))) => {
                pass.used += n;
                pass.flight.get_or_insert_with(|| phases.begin_here());
                delayed += answer_blocking(svc, req, wbuf, rt);
                // Answers that took a while (a slow layout's waits for the next tick) go
                // out at once rather than behind the rest of a pipeline.
                if delayed >= HOLD_AT_MOST && !wbuf.is_empty() {
                    write_all(s, wbuf, phases, timeouts)?;
                    wbuf.clear();
                    delayed = std::time::Duration::ZERO;
                }
            }
            Ok(None) => return Ok(pass),
            Err(FrameError { skip, reason }) => {
                pass.flight.get_or_insert_with(|| phases.begin_here());
                svc.metrics()
                    .request(Interface::Binary, Outcome::BadRequest, 0.0);
                frame::encode_error(Status::BadRequest, &reason, wbuf);
                match skip {
                    Some(n) => pass.used += n,
                    None => {
                        pass.close = true;
                        return Ok(pass);
                    }
                }
            }
        }
        if wbuf.len() >= FLUSH_AT {
            write_all(s, wbuf, phases, timeouts)?;
            wbuf.clear();
        }
    }
}

/// Reads what comes next into `chunk` (0: the peer closed, or the idle watchdog ended the
/// connection), within the deadline in force: idle, none here (the watchdog keeps it);
/// within a request (`rbuf` holds part of one), what is left of it.
fn read_more(
    s: &std::os::unix::net::UnixStream,
    rbuf: &[u8],
    chunk: &mut [u8],
    phases: &Phases,
    timeouts: &mut Timeouts,
    timeout: std::time::Duration,
) -> std::io::Result<usize> {
    use std::io::Read;
    let (limit, why) = if rbuf.is_empty() {
        (None, Expiry::Idle)
    } else {
        match phases.read_deadline() {
            Some((at, why)) => {
                let left = at.saturating_duration_since(tokio::time::Instant::now());
                if left.is_zero() {
                    return Err(phases.expire(why));
                }
                (Some(left), why)
            }
            None => (Some(timeout), Expiry::SlowRequest),
        }
    };
    if limit != timeouts.read {
        s.set_read_timeout(limit)?;
        timeouts.read = limit;
    }
    loop {
        let r = (&*s).read(chunk);
        phases.read_returned();
        match r {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if timed_out(&e) => return Err(phases.expire(why)),
            Err(e) => return Err(e),
        }
    }
}

/// The socket timeouts in force, so they are set only when they change.
struct Timeouts {
    read: Option<std::time::Duration>,
    write: std::time::Duration,
}

fn timed_out(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

/// Writes `buf` whole within the response deadline: the timeout from the moment a write first
/// could not take everything, not restarted by partial progress.
fn write_all(
    s: &std::os::unix::net::UnixStream,
    mut buf: &[u8],
    phases: &Phases,
    t: &mut Timeouts,
) -> std::io::Result<()> {
    use std::io::Write;
    let timeout = phases.timeout().max(std::time::Duration::from_micros(1));
    let mut blocked_since: Option<Instant> = None;
    while !buf.is_empty() {
        let limit = match blocked_since {
            Some(at) => {
                let left = timeout.saturating_sub(at.elapsed());
                if left.is_zero() {
                    return Err(phases.expire(Expiry::SlowReader));
                }
                left
            }
            None => timeout,
        };
        if limit != t.write {
            s.set_write_timeout(Some(limit))?;
            t.write = limit;
        }
        match (&*s).write(buf) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                buf = &buf[n..];
                if !buf.is_empty() {
                    blocked_since.get_or_insert_with(Instant::now);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if timed_out(&e) => return Err(phases.expire(Expiry::SlowReader)),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Answers one request into `out`; how long that took.
fn answer_blocking(
    svc: &Service,
    req: Request,
    out: &mut Vec<u8>,
    rt: &tokio::runtime::Handle,
) -> std::time::Duration {
    let started = Instant::now();
    let (count, opts) = match req {
        Request::GetIds { count, opts } => (count, opts),
        Request::Describe => {
            let d = frame::describe(svc.layout(), svc.params());
            let width = svc.layout().width() as u8;
            frame::encode_response_header(Status::Ok, width, d.len() as u32, out);
            out.extend_from_slice(&d);
            return started.elapsed();
        }
    };
    let width = svc.layout().width();
    let at = out.len();
    frame::encode_response_header(Status::Ok, width as u8, 0, out);
    let result = svc.issue_blocking(u64::from(count), &opts, out, rt);
    let outcome = finish_answer(result, at, out);
    let took = started.elapsed();
    svc.metrics()
        .request(Interface::Binary, outcome, took.as_secs_f64());
    took
}

/// Fills in the response's length, or replaces it with the error.
fn finish_answer(
    result: Result<(), crate::service::IssueError>,
    at: usize,
    out: &mut Vec<u8>,
) -> Outcome {
    match result {
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
    }
}
