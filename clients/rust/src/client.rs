//! The client: a pool of connections, retries across server restarts, optional prefetch.

use crate::connection::Connection;
use crate::layout::{Description, Id};
use crate::prefetch::Prefetch;
use crate::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The server's default socket, used when neither the builder nor `IDCAR_SOCKET` names one.
pub const DEFAULT_SOCKET: &str = "/tmp/idcar.sock";
/// Most IDs asked for in one request; larger asks are split (and pipelined).
pub const MAX_REQUEST: usize = 1_000;
/// Most requests of one call in flight on a connection: the rest are sent as answers arrive,
/// so a huge `ids(n)` never fills the socket's buffers both ways.
const WINDOW: usize = 16;
const FIRST_PAUSE: Duration = Duration::from_millis(10);
const MAX_PAUSE: Duration = Duration::from_millis(200);

/// Options of a [`Client`]; start with [`Client::builder`].
#[derive(Clone, Debug)]
pub struct Builder {
    socket: Option<PathBuf>,
    timeout: Duration,
    retry_deadline: Duration,
    prefetch: usize,
    low_water: Option<usize>,
    max_age: Duration,
    connections: usize,
}

impl Default for Builder {
    fn default() -> Builder {
        Builder {
            socket: None,
            timeout: Duration::from_secs(5),
            retry_deadline: Duration::from_secs(5),
            prefetch: 0,
            low_water: None,
            max_age: Duration::from_secs(1),
            connections: 4,
        }
    }
}

impl Builder {
    /// The server's Unix socket (default: `IDCAR_SOCKET`, else `/tmp/idcar.sock`).
    pub fn socket(mut self, path: impl Into<PathBuf>) -> Builder {
        self.socket = Some(path.into());
        self
    }

    /// Bounds every read and write of a request (default 5 s): a server that stops answering
    /// is [`Error::Timeout`], never a hang.
    pub fn timeout(mut self, t: Duration) -> Builder {
        self.timeout = t;
        self
    }

    /// How long "unavailable" answers and connection failures are retried (default 5 s;
    /// zero: not at all). Pauses start at 10 ms and double up to 200 ms.
    pub fn retry_deadline(mut self, d: Duration) -> Builder {
        self.retry_deadline = d;
        self
    }

    /// Keeps a local buffer of up to `k` IDs, refilled in the background (default 0: off).
    /// See the crate docs for the trade-off.
    pub fn prefetch(mut self, k: usize) -> Builder {
        self.prefetch = k;
        self
    }

    /// A refill starts when the buffer holds this many IDs or fewer (default `k / 4`).
    pub fn low_water(mut self, n: usize) -> Builder {
        self.low_water = Some(n);
        self
    }

    /// Buffered IDs older than this are dropped, never handed out (default 1 s).
    pub fn max_age(mut self, age: Duration) -> Builder {
        self.max_age = age;
        self
    }

    /// Most connections open at once (default 4; the prefetch thread's included): concurrent
    /// calls share them, and a call that finds them all busy waits for one.
    pub fn connections(mut self, n: usize) -> Builder {
        self.connections = n.max(1);
        self
    }

    /// Connects (retrying like any call, so a wrong path fails here) and asks the server to
    /// describe its layout.
    pub fn build(self) -> Result<Client> {
        if self.timeout.is_zero() {
            return Err(Error::Invalid("the timeout must be above zero".into()));
        }
        let socket = self
            .socket
            .or_else(|| {
                std::env::var_os("IDCAR_SOCKET")
                    .filter(|s| !s.is_empty())
                    .map(PathBuf::from)
            })
            .unwrap_or_else(|| PathBuf::from(DEFAULT_SOCKET));
        let shared = Arc::new(Shared {
            socket,
            timeout: self.timeout,
            retry_deadline: self.retry_deadline,
            pool: Mutex::new(Pool {
                idle: Vec::new(),
                open: 0,
            }),
            freed: Condvar::new(),
            max_open: self.connections,
            closed: AtomicBool::new(false),
        });
        shared.retrying(|s| s.checkout().map(Checkout::give_back))?;
        let prefetch = (self.prefetch > 0).then(|| {
            let low = self
                .low_water
                .unwrap_or(self.prefetch / 4)
                .min(self.prefetch - 1);
            Prefetch::start(Arc::clone(&shared), self.prefetch, low, self.max_age)
        });
        Ok(Client { shared, prefetch })
    }
}

/// A client of idcar's socket, safe to share between threads (`&self` methods; wrap it in an
/// `Arc` or borrow it in scoped threads).
///
/// A connection found closed when taken from the pool (the server's idle timeout, a restart)
/// is replaced at once, without a pause and whatever the retry deadline.
///
/// Calls that meet a restarting server (connection refused, reset, closed) or an
/// "unavailable" answer are retried on a new connection until the retry deadline; a refused
/// request ([`Error::BadRequest`]) is not. Dropping the client closes it.
#[derive(Debug)]
pub struct Client {
    shared: Arc<Shared>,
    prefetch: Option<Prefetch>,
}

impl Client {
    /// A client with default options: the socket from `IDCAR_SOCKET`, else
    /// `/tmp/idcar.sock`. Connects at once.
    pub fn new() -> Result<Client> {
        Client::builder().build()
    }

    /// A client of the socket at `path`, with default options. Connects at once.
    pub fn connect(path: impl AsRef<Path>) -> Result<Client> {
        Client::builder().socket(path.as_ref()).build()
    }

    /// Options, then [`Builder::build`].
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// The socket this client talks to.
    pub fn socket(&self) -> &Path {
        &self.shared.socket
    }

    /// One ID.
    pub fn next_id(&self) -> Result<Id> {
        let mut v = match &self.prefetch {
            Some(p) => p.take(1, &self.shared, self.shared.wait_for_refill())?,
            None => self.shared.fetch(1)?,
        };
        v.pop()
            .ok_or_else(|| Error::Protocol("an empty answer".into()))
    }

    /// One ID as a `u64`, for the 8-byte layouts (lable64, ugd60, si53); sno80, muid128 and
    /// uuid7 IDs are [`Error::Invalid`] (use [`next_id`](Self::next_id)).
    pub fn next_u64(&self) -> Result<u64> {
        let id = self.next_id()?;
        id.as_u64().ok_or_else(|| {
            Error::Invalid(format!(
                "{} IDs are {} bytes, not a u64",
                id.layout().layout,
                id.layout().width
            ))
        })
    }

    /// One uuid7 ID as a [`uuid::Uuid`]; IDs of the other layouts are [`Error::Invalid`]
    /// (use [`next_id`](Self::next_id)).
    #[cfg(feature = "uuid")]
    #[cfg_attr(docsrs, doc(cfg(feature = "uuid")))]
    pub fn next_uuid(&self) -> Result<uuid::Uuid> {
        let id = self.next_id()?;
        id.to_uuid().ok_or_else(|| {
            Error::Invalid(format!(
                "{} IDs are not UUIDs (a server of layout uuid7 issues them)",
                id.layout().layout
            ))
        })
    }

    /// `n` IDs, asked for in requests of at most 1,000 sent back to back on one connection.
    pub fn ids(&self, n: usize) -> Result<Vec<Id>> {
        match &self.prefetch {
            Some(p) => p.take(n, &self.shared, self.shared.wait_for_refill()),
            None => self.shared.fetch(n),
        }
    }

    /// What the server says about its IDs (asked on every new connection).
    pub fn describe(&self) -> Result<Description> {
        self.shared.retrying(|s| {
            let c = s.checkout()?;
            let d = (*c.conn().1).clone();
            c.give_back();
            Ok(d)
        })
    }

    /// Stops the background refill, drops buffered IDs and closes the idle connections (one
    /// in use closes when its call returns). Later calls are [`Error::Closed`]. Never blocks;
    /// dropping the client does the same.
    pub fn close(&self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        if let Some(p) = &self.prefetch {
            p.stop();
        }
        self.shared.drop_idle();
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.close();
    }
}

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

type Conn = (Connection, Arc<Description>);

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
        c.conn = Some((conn, Arc::new(d)));
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
            Ok(ids) if ids.width != d.width => {
                return Err(Error::Protocol(format!(
                    "{}-byte IDs from a server that described {}-byte IDs",
                    ids.width, d.width
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
