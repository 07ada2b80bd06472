//! What a client and its prefetch thread share: the socket, the pool of connections (each with
//! the server's description), the retries across server restarts, and fetching IDs on a
//! connection with requests pipelined.

use crate::connection::Connection;
use crate::error::{Error, Result};
use crate::layout::{Description, Id, Known};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Most IDs asked for in one request; larger asks are split (and pipelined).
pub const MAX_REQUEST: usize = 1_000;
/// Most requests of one call in flight on a connection: the rest are sent as answers arrive,
/// so a huge `ids(n)` never fills the socket's buffers both ways.
const WINDOW: usize = 16;
const FIRST_PAUSE: Duration = Duration::from_millis(10);
const MAX_PAUSE: Duration = Duration::from_millis(200);

/// What the client and its refill thread share.
#[derive(Debug)]
pub(crate) struct Shared {
    socket: PathBuf,
    timeout: Duration,
    retry_deadline: Duration,
    pool: Mutex<Pool>,
    /// Signalled when a connection goes back to the pool or closes.
    freed: Condvar,
    max_open: usize,
    closed: AtomicBool,
}

type Conn = (Connection, Arc<Known>);

#[derive(Debug)]
struct Pool {
    idle: Vec<Conn>,
    /// Connections open: idle ones and those in use.
    open: usize,
}

/// A connection taken from the pool: [`give_back`](Checkout::give_back) returns it; dropped
/// otherwise (after an error), it is closed and its place freed.
struct Checkout<'a> {
    shared: &'a Shared,
    /// Counted in the pool's `open` (from the moment the place was taken, before connecting).
    counted: bool,
    conn: Option<Conn>,
    /// It waited in the pool (and may have been closed by the server meanwhile).
    pooled: bool,
}

impl Checkout<'_> {
    fn conn(&self) -> &Conn {
        self.conn
            .as_ref()
            .expect("a checkout holds its connection until returned")
    }

    fn conn_mut(&mut self) -> &mut Conn {
        self.conn
            .as_mut()
            .expect("a checkout holds its connection until returned")
    }

    fn give_back(mut self) {
        let Some(c) = self.conn.take() else { return };
        self.counted = false;
        let mut pool = self.shared.pool();
        if self.shared.closed.load(Ordering::SeqCst) {
            pool.open -= 1;
        } else {
            pool.idle.push(c);
        }
        drop(pool);
        self.shared.freed.notify_one();
    }
}

impl Drop for Checkout<'_> {
    fn drop(&mut self) {
        if self.counted {
            self.shared.pool().open -= 1;
            self.shared.freed.notify_one();
        }
    }
}

impl Shared {
    pub(crate) fn new(
        socket: PathBuf,
        timeout: Duration,
        retry_deadline: Duration,
        max_open: usize,
    ) -> Shared {
        Shared {
            socket,
            timeout,
            retry_deadline,
            pool: Mutex::new(Pool {
                idle: Vec::new(),
                open: 0,
            }),
            freed: Condvar::new(),
            max_open,
            closed: AtomicBool::new(false),
        }
    }

    /// Connects once (retrying across a server restart), so that a client is built only
    /// against a server that answers; the connection goes back to the pool.
    pub(crate) fn connect_first(&self) -> Result<()> {
        self.retrying(|s| s.checkout().map(Checkout::give_back))
    }

    /// What the server says about its IDs, from a connection of the pool.
    pub(crate) fn describe(&self) -> Result<Description> {
        self.retrying(|s| {
            let c = s.checkout()?;
            let d = c.conn().1.description().clone();
            c.give_back();
            Ok(d)
        })
    }

    pub(crate) fn socket(&self) -> &Path {
        &self.socket
    }

    /// No more requests: connections go as they come back.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    /// How long a caller waits for a prefetch refill in flight: as long as the refill's own
    /// request may take, with its retries.
    pub(crate) fn wait_for_refill(&self) -> Duration {
        self.timeout + self.retry_deadline + Duration::from_secs(1)
    }

    fn pool(&self) -> MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An idle connection, or a new one (described) while fewer than the most are open, or
    /// the first one freed.
    fn checkout(&self) -> Result<Checkout<'_>> {
        let mut pool = self.pool();
        loop {
            if self.closed.load(Ordering::SeqCst) {
                return Err(Error::Closed);
            }
            if let Some(c) = pool.idle.pop() {
                return Ok(Checkout {
                    shared: self,
                    counted: true,
                    conn: Some(c),
                    pooled: true,
                });
            }
            if pool.open < self.max_open {
                break;
            }
            // Every call in use reads within its timeout or fails and frees its place, so the
            // wait ends; a long `ids(n)` may hold its connection for a while.
            pool = self
                .freed
                .wait_timeout(pool, self.timeout)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        pool.open += 1;
        drop(pool);
        // From here the place is ours: a failure frees it (the checkout's drop).
        let mut c = Checkout {
            shared: self,
            counted: true,
            conn: None,
            pooled: false,
        };
        let mut conn = Connection::connect(&self.socket, Some(self.timeout))?;
        let d = conn.describe()?;
        c.conn = Some((conn, Arc::new(Known::new(d))));
        Ok(c)
    }

    /// Closes the idle connections (the server closed them: an idle timeout, a restart).
    pub(crate) fn drop_idle(&self) {
        let mut pool = self.pool();
        let idle = std::mem::take(&mut pool.idle);
        pool.open -= idle.len();
        drop(pool);
        // Closed outside the lock.
        drop(idle);
        self.freed.notify_all();
    }

    /// Runs `attempt` until it succeeds, fails for good, or the retry deadline passes.
    pub(crate) fn retrying<T>(&self, mut attempt: impl FnMut(&Shared) -> Result<T>) -> Result<T> {
        // A deadline beyond what `Instant` holds: retry for as long as it takes.
        let deadline = Instant::now().checked_add(self.retry_deadline);
        let mut pause = FIRST_PAUSE;
        loop {
            match attempt(self) {
                Err(e) if e.is_retryable() && !self.closed.load(Ordering::SeqCst) => {
                    let left = match deadline {
                        Some(d) => d.saturating_duration_since(Instant::now()),
                        None => pause,
                    };
                    if left.is_zero() {
                        return Err(e);
                    }
                    std::thread::sleep(pause.min(left));
                    pause = (pause * 2).min(MAX_PAUSE);
                }
                other => return other,
            }
        }
    }

    /// `n` IDs, with retries; what a failed attempt received is kept.
    pub(crate) fn fetch(&self, n: usize) -> Result<Vec<Id>> {
        let mut out = Vec::with_capacity(n);
        self.retrying(|s| s.fetch_once(n - out.len(), &mut out))?;
        Ok(out)
    }

    /// One attempt; a pooled connection found broken is replaced at once (once).
    fn fetch_once(&self, n: usize, out: &mut Vec<Id>) -> Result<()> {
        let before = out.len();
        let c = self.checkout()?;
        let pooled = c.pooled;
        match fetch_on(c, n, out) {
            Err(Error::Io(_)) if pooled => {
                self.drop_idle();
                let got = out.len() - before;
                fetch_on(self.checkout()?, n - got, out)
            }
            other => other,
        }
    }
}

/// Requests of at most [`MAX_REQUEST`] on one connection, at most [`WINDOW`] in flight; IDs
/// received are appended to `out`, then the first error (if any) is returned. After a refusal
/// no more requests are sent (those in flight are read, so the connection stays in step). A
/// connection that failed is closed; one that only carried refusals goes back to the pool.
fn fetch_on(mut c: Checkout<'_>, n: usize, out: &mut Vec<Id>) -> Result<()> {
    let requests = n.div_ceil(MAX_REQUEST);
    let (conn, d) = c.conn_mut();
    let d = Arc::clone(d);
    let mut left = n;
    let mut in_flight = std::collections::VecDeque::with_capacity(WINDOW);
    let (mut sent, mut first) = (0, None);
    loop {
        while first.is_none() && sent < requests && in_flight.len() < WINDOW {
            let k = left.min(MAX_REQUEST);
            left -= k;
            // At most MAX_REQUEST: fits a u32.
            conn.send(k as u32)?;
            in_flight.push_back(k);
            sent += 1;
        }
        let Some(asked) = in_flight.pop_front() else {
            break;
        };
        match conn.recv() {
            Ok(ids) if ids.width != d.description().width => {
                return Err(Error::Protocol(format!(
                    "{}-byte IDs from a server that described {}-byte IDs",
                    ids.width,
                    d.description().width
                )));
            }
            Ok(ids) if ids.len() != asked => {
                return Err(Error::Protocol(format!(
                    "{} IDs in the answer to a request for {asked}",
                    ids.len()
                )));
            }
            Ok(ids) => {
                for raw in ids.iter() {
                    out.push(Id::new(Arc::clone(&d), raw)?);
                }
            }
            Err(e @ (Error::Unavailable(_) | Error::BadRequest(_))) => {
                first.get_or_insert(e);
            }
            Err(e) => return Err(e),
        }
    }
    c.give_back();
    first.map_or(Ok(()), Err)
}
