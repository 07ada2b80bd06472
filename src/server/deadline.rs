//! Per-connection deadlines: a client may hold a connection only while it keeps up.
//!
//! One timeout `T` (`--idle-timeout` on the socket, `--admin-timeout` on the admin listener)
//! bounds three phases of every connection, whatever the protocol:
//!
//! - **idle**: waiting for the first byte of a request, from accept or from the last response
//!   written, at most `T`;
//! - **request**: from a request's first byte to its last, at most `T` — *not* restarted by each
//!   read, so a client trickling one byte at a time (slowloris) is cut off;
//! - **response**: a response that cannot be written because the client does not read it
//!   waits at most `T` in all, from the moment the write first blocked until it is accepted
//!   whole — partial progress does not restart it.
//!
//! While a request is being answered (the handler runs) no read deadline applies: the request
//! timeout bounds that. [`Deadlined`] wraps the stream and enforces the deadlines inside
//! `poll_read`/`poll_write` for hyper; binary connections, served on blocking threads, enforce
//! the request and response deadlines as socket timeouts and the idle deadline with a watchdog
//! on the connection's task (`super::binary`). Either way the protocol code says
//! where requests begin and end through the shared [`Phases`]. A connection past a deadline
//! gets a `TimedOut` error and is closed; [`Phases::expired`] says which deadline it was.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// Which deadline closed a connection (the `reason` of `idcar_connections_closed_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    /// No request began within the timeout.
    Idle,
    /// A request's bytes did not all arrive within the timeout of its first byte.
    SlowRequest,
    /// A response waited longer than the timeout for the client to read it.
    SlowReader,
}

impl Expiry {
    pub const ALL: [Expiry; 3] = [Expiry::Idle, Expiry::SlowRequest, Expiry::SlowReader];

    pub fn label(self) -> &'static str {
        match self {
            Expiry::Idle => "idle",
            Expiry::SlowRequest => "slow_request",
            Expiry::SlowReader => "slow_reader",
        }
    }
}

/// Where a connection is in its request cycle; shared by the stream wrapper and the protocol.
///
/// Lock-free: a binary connection's thread marks the start and end of every request, so each
/// mark is one atomic add or store, never a lock. Times are kept as nanoseconds after `epoch`
/// plus one (0: none). The fields are read together without a lock by the roster and the idle
/// watchdog (in_flight, then request_since, then idle_since), so they are written in the
/// opposite order and a request's start changes nothing but `in_flight`: whatever mix of old
/// and new values a reader sees is a state the connection was really in.
#[derive(Debug)]
pub struct Phases {
    timeout: Duration,
    epoch: Instant,
    /// When the first byte of a request not yet complete arrived.
    request_since: AtomicU64,
    /// Requests being answered right now.
    in_flight: AtomicU32,
    /// Whether a complete request ever arrived (a flooder's connections say nothing).
    served: AtomicBool,
    /// When the connection last became idle (accepted, or a response finished).
    idle_since: AtomicU64,
    /// The deadline that closed the connection (`Expiry` index + 1; 0: none).
    expired: AtomicU8,
    /// Reads returned on the connection's own thread (written by that thread only), so the
    /// idle watchdog sees bytes read but not yet marked as a request.
    reads: AtomicU64,
}

const NONE: u64 = 0;

impl Phases {
    pub fn new(timeout: Duration) -> Arc<Phases> {
        Arc::new(Phases {
            timeout,
            epoch: Instant::now(),
            request_since: AtomicU64::new(NONE),
            in_flight: AtomicU32::new(0),
            served: AtomicBool::new(false),
            idle_since: AtomicU64::new(1),
            expired: AtomicU8::new(0),
            reads: AtomicU64::new(0),
        })
    }

    /// `at` as a mark (never 0).
    fn stamp(&self, at: Instant) -> u64 {
        let ns = at.saturating_duration_since(self.epoch).as_nanos();
        u64::try_from(ns).unwrap_or(u64::MAX - 1) + 1
    }

    fn instant(&self, mark: u64) -> Option<Instant> {
        (mark != NONE).then(|| self.epoch + Duration::from_nanos(mark - 1))
    }

    fn now(&self) -> u64 {
        self.stamp(Instant::now())
    }

    /// A complete request was read and is being answered: no read deadline until it ends.
    /// The returned guard ends it when dropped (also when the handler is cancelled).
    pub fn begin(self: &Arc<Self>) -> InFlight {
        self.enter();
        InFlight(Some(self.clone()))
    }

    /// As [`Phases::begin`], for the thread that owns the connection: no reference count.
    pub(crate) fn begin_here(&self) -> Answering<'_> {
        self.enter();
        Answering(Some(self))
    }

    /// Only `in_flight` changes (`request_since` is ignored while it is above 0, and cleared or
    /// restarted when the answer ends).
    fn enter(&self) {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        if !self.served.load(Ordering::Relaxed) {
            self.served.store(true, Ordering::Release);
        }
    }

    /// A request's answer ended; `partial`: whether the start of another frame is already
    /// buffered (its request phase starts now) or not (idle from now).
    fn leave(&self, partial: bool) {
        let now = self.now();
        self.idle_since.store(now, Ordering::Release);
        self.request_since
            .store(if partial { now } else { NONE }, Ordering::Release);
        let _ = self
            .in_flight
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    }

    /// Whether a request is being answered right now.
    pub fn answering(&self) -> bool {
        self.in_flight.load(Ordering::SeqCst) > 0
    }

    /// How quiet the connection is, for eviction (smaller is quieter): whether it ever sent a
    /// complete request (those that never did come first), then since when it has made no
    /// progress (the start of its idle wait, or the first byte of the request it has not
    /// finished sending). `None` while answering.
    pub fn quiet_since(&self) -> Option<(bool, Instant)> {
        if self.answering() {
            return None;
        }
        let served = self.served.load(Ordering::Acquire);
        let since = self.instant(self.request_since.load(Ordering::Acquire));
        Some((
            served,
            since.or(self.instant(self.idle_since.load(Ordering::Acquire)))?,
        ))
    }

    /// The deadline that closed the connection, if one did.
    pub fn expired(&self) -> Option<Expiry> {
        match self.expired.load(Ordering::Acquire) {
            0 => None,
            n => Expiry::ALL.get(usize::from(n) - 1).copied(),
        }
    }

    /// The read deadline now, and which phase it belongs to; `None` while answering.
    pub(crate) fn read_deadline(&self) -> Option<(Instant, Expiry)> {
        if self.answering() {
            return None;
        }
        Some(
            match self.instant(self.request_since.load(Ordering::Acquire)) {
                Some(t) => (t + self.timeout, Expiry::SlowRequest),
                None => (
                    self.instant(self.idle_since.load(Ordering::Acquire))? + self.timeout,
                    Expiry::Idle,
                ),
            },
        )
    }

    /// The timeout that bounds each phase.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// A read returned on the connection's own thread (the only writer: no atomic
    /// read-modify-write needed).
    pub(crate) fn read_returned(&self) {
        let n = self.reads.load(Ordering::Relaxed);
        self.reads.store(n.wrapping_add(1), Ordering::Release);
    }

    /// Reads returned so far (see [`Phases::read_returned`]).
    pub(crate) fn reads(&self) -> u64 {
        self.reads.load(Ordering::Acquire)
    }

    /// Bytes of a request arrived: its request phase starts now if it had not.
    pub(crate) fn bytes_read(&self) {
        if self.request_since.load(Ordering::Acquire) == NONE && !self.answering() {
            let _ = self.request_since.compare_exchange(
                NONE,
                self.now(),
                Ordering::AcqRel,
                Ordering::Acquire,
            );
        }
    }

    fn written(&self) {
        if !self.answering() && self.request_since.load(Ordering::Acquire) == NONE {
            self.idle_since.store(self.now(), Ordering::Release);
        }
    }

    /// Records that `why`'s deadline passed (the first one recorded stays); the error to
    /// close the connection with.
    pub(crate) fn expire(&self, why: Expiry) -> io::Error {
        let code = Expiry::ALL.iter().position(|e| *e == why).unwrap_or(0) as u8 + 1;
        let _ = self
            .expired
            .compare_exchange(0, code, Ordering::AcqRel, Ordering::Acquire);
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!("connection closed: {} deadline passed", why.label()),
        )
    }
}

/// A request being answered; see [`Phases::begin`].
#[derive(Debug)]
pub struct InFlight(Option<Arc<Phases>>);

impl InFlight {
    /// Every request read is answered; `partial` says whether the start of another frame is
    /// already buffered (its request phase starts now) or not (idle from now).
    pub fn finish(mut self, partial: bool) {
        if let Some(phases) = self.0.take() {
            phases.leave(partial);
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(phases) = self.0.take() {
            phases.leave(false);
        }
    }
}

/// [`InFlight`] for the thread that owns the connection; see [`Phases::begin_here`].
#[derive(Debug)]
pub(crate) struct Answering<'a>(Option<&'a Phases>);

impl Answering<'_> {
    /// As [`InFlight::finish`].
    pub(crate) fn finish(mut self, partial: bool) {
        if let Some(phases) = self.0.take() {
            phases.leave(partial);
        }
    }
}

impl Drop for Answering<'_> {
    fn drop(&mut self) {
        if let Some(phases) = self.0.take() {
            phases.leave(false);
        }
    }
}

/// A stream whose reads and writes fail with `TimedOut` once the current phase's deadline
/// passes (see the module docs).
#[derive(Debug)]
pub struct Deadlined<S> {
    inner: S,
    phases: Arc<Phases>,
    read_timer: Option<Pin<Box<Sleep>>>,
    write_timer: Option<Pin<Box<Sleep>>>,
    /// When the response being written first could not be written at once.
    write_blocked_since: Option<Instant>,
}

impl<S> Deadlined<S> {
    pub fn new(inner: S, phases: Arc<Phases>) -> Deadlined<S> {
        Deadlined {
            inner,
            phases,
            read_timer: None,
            write_timer: None,
            write_blocked_since: None,
        }
    }

    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The stream, without the deadlines' timers (the caller enforces them from now on).
    pub fn into_inner(self) -> S {
        self.inner
    }
}

/// Polls a timer set to `deadline` (re-armed when the deadline moved); ready when it passed.
fn passed(timer: &mut Option<Pin<Box<Sleep>>>, deadline: Instant, cx: &mut Context<'_>) -> bool {
    if deadline <= Instant::now() {
        return true;
    }
    match timer {
        Some(t) if t.deadline() == deadline => {}
        Some(t) => t.as_mut().reset(deadline),
        None => *timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
    }
    timer
        .as_mut()
        .is_some_and(|t| t.as_mut().poll(cx).is_ready())
}

impl<S: AsyncRead + Unpin> AsyncRead for Deadlined<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    this.phases.bytes_read();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => match this.phases.read_deadline() {
                Some((at, why)) if passed(&mut this.read_timer, at, cx) => {
                    Poll::Ready(Err(this.phases.expire(why)))
                }
                _ => Poll::Pending,
            },
        }
    }
}

impl<S: AsyncWrite + Unpin> Deadlined<S> {
    /// Maps the inner write's outcome, arming the response deadline while writes are stuck.
    fn track<T>(
        &mut self,
        cx: &mut Context<'_>,
        r: Poll<io::Result<T>>,
        whole: impl FnOnce(&T) -> bool,
    ) -> Poll<io::Result<T>> {
        match r {
            Poll::Ready(Ok(v)) => {
                if whole(&v) {
                    self.write_blocked_since = None;
                    self.phases.written();
                } else {
                    self.write_blocked_since.get_or_insert_with(Instant::now);
                }
                Poll::Ready(Ok(v))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                let since = *self.write_blocked_since.get_or_insert_with(Instant::now);
                if passed(&mut self.write_timer, since + self.phases.timeout, cx) {
                    Poll::Ready(Err(self.phases.expire(Expiry::SlowReader)))
                } else {
                    Poll::Pending
                }
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Deadlined<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.track(cx, r, |n| *n == buf.len())
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.track(cx, r, |n| *n == total)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        self.track(cx, r, |_| true)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const T: Duration = Duration::from_secs(5);

    #[tokio::test(start_paused = true)]
    async fn idle_connection_expires_after_the_timeout() {
        let (a, _b) = tokio::io::duplex(64);
        let phases = Phases::new(T);
        let mut s = Deadlined::new(a, phases.clone());
        let started = Instant::now();
        let e = s.read(&mut [0u8; 8]).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), T);
        assert_eq!(phases.expired(), Some(Expiry::Idle));
    }

    #[tokio::test(start_paused = true)]
    async fn trickled_request_is_bounded_from_its_first_byte() {
        let (a, mut b) = tokio::io::duplex(64);
        let phases = Phases::new(T);
        let mut s = Deadlined::new(a, phases.clone());
        let started = Instant::now();
        let trickle = tokio::spawn(async move {
            for _ in 0..100 {
                if b.write_all(b"x").await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
        let mut buf = [0u8; 1];
        let e = loop {
            match s.read(&mut buf).await {
                Ok(_) => continue,
                Err(e) => break e,
            }
        };
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert_eq!(phases.expired(), Some(Expiry::SlowRequest));
        assert!(started.elapsed() <= T + Duration::from_millis(1));
        trickle.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn answering_suspends_the_read_deadline_and_restarts_idle() {
        let (a, _b) = tokio::io::duplex(64);
        let phases = Phases::new(T);
        let mut s = Deadlined::new(a, phases.clone());
        let guard = phases.begin();
        let r = tokio::time::timeout(T * 3, s.read(&mut [0u8; 8])).await;
        assert!(r.is_err(), "no deadline while a request is answered");
        drop(guard);
        let before = Instant::now();
        assert!(s.read(&mut [0u8; 8]).await.is_err());
        assert_eq!(before.elapsed(), T, "idle restarts when the answer ends");
    }

    #[tokio::test(start_paused = true)]
    async fn a_reader_that_stops_reading_expires_the_write() {
        let (a, _b) = tokio::io::duplex(16);
        let phases = Phases::new(T);
        let mut s = Deadlined::new(a, phases.clone());
        let started = Instant::now();
        let e = s.write_all(&[7u8; 1024]).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), T);
        assert_eq!(phases.expired(), Some(Expiry::SlowReader));
    }
}
