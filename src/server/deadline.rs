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
//! the same deadlines as socket timeouts (`super::binary`). Either way the protocol code says
//! where requests begin and end through the shared [`Phases`]. A connection past a deadline
//! gets a `TimedOut` error and is closed; [`Phases::expired`] says which deadline it was.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
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
#[derive(Debug)]
pub struct Phases {
    timeout: Duration,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// When the first byte of a request not yet complete arrived.
    request_since: Option<Instant>,
    /// Requests being answered right now.
    in_flight: u32,
    /// Whether a complete request ever arrived (a flooder's connections say nothing).
    served: bool,
    /// When the connection last became idle (accepted, or a response finished).
    idle_since: Instant,
    expired: Option<Expiry>,
}

impl Phases {
    pub fn new(timeout: Duration) -> Arc<Phases> {
        Arc::new(Phases {
            timeout,
            state: Mutex::new(State {
                request_since: None,
                in_flight: 0,
                served: false,
                idle_since: Instant::now(),
                expired: None,
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Every update is a plain assignment: a panic elsewhere cannot leave it half-done.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A complete request was read and is being answered: no read deadline until it ends.
    /// The returned guard ends it when dropped (also when the handler is cancelled).
    pub fn begin(self: &Arc<Self>) -> InFlight {
        let mut s = self.lock();
        s.request_since = None;
        s.in_flight += 1;
        s.served = true;
        InFlight(Some(self.clone()))
    }

    /// The binary loop answered every complete frame it had; `partial` says whether the start
    /// of another frame is already buffered (its request phase starts now) or not (idle).
    pub fn answered(&self, partial: bool) {
        let mut s = self.lock();
        let now = Instant::now();
        s.request_since = partial.then_some(now);
        s.idle_since = now;
        s.served = true;
    }

    /// Whether a request is being answered right now.
    pub fn answering(&self) -> bool {
        self.lock().in_flight > 0
    }

    /// How quiet the connection is, for eviction (smaller is quieter): whether it ever sent a
    /// complete request (those that never did come first), then since when it has made no
    /// progress (the start of its idle wait, or the first byte of the request it has not
    /// finished sending). `None` while answering.
    pub fn quiet_since(&self) -> Option<(bool, Instant)> {
        let s = self.lock();
        if s.in_flight > 0 {
            return None;
        }
        Some((s.served, s.request_since.unwrap_or(s.idle_since)))
    }

    /// The deadline that closed the connection, if one did.
    pub fn expired(&self) -> Option<Expiry> {
        self.lock().expired
    }

    /// The read deadline now, and which phase it belongs to; `None` while answering.
    pub(crate) fn read_deadline(&self) -> Option<(Instant, Expiry)> {
        let s = self.lock();
        if s.in_flight > 0 {
            return None;
        }
        Some(match s.request_since {
            Some(t) => (t + self.timeout, Expiry::SlowRequest),
            None => (s.idle_since + self.timeout, Expiry::Idle),
        })
    }

    /// The timeout that bounds each phase.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Bytes of a request arrived: its request phase starts now if it had not.
    pub(crate) fn bytes_read(&self) {
        let mut s = self.lock();
        if s.request_since.is_none() && s.in_flight == 0 {
            s.request_since = Some(Instant::now());
        }
    }

    fn written(&self) {
        let mut s = self.lock();
        if s.in_flight == 0 && s.request_since.is_none() {
            s.idle_since = Instant::now();
        }
    }

    /// Records that `why`'s deadline passed; the error to close the connection with.
    pub(crate) fn expire(&self, why: Expiry) -> io::Error {
        self.lock().expired.get_or_insert(why);
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
    /// Every request read is answered: as [`Phases::answered`], in one step with the end of
    /// this answer.
    pub fn finish(mut self, partial: bool) {
        let Some(phases) = self.0.take() else { return };
        let mut s = phases.lock();
        let now = Instant::now();
        s.in_flight = s.in_flight.saturating_sub(1);
        s.request_since = partial.then_some(now);
        s.idle_since = now;
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(phases) = self.0.take() {
            let mut s = phases.lock();
            s.in_flight = s.in_flight.saturating_sub(1);
            s.idle_since = Instant::now();
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
