//! The client: a pool of connections (see `shared`), retries across server restarts, optional
//! prefetch.

use crate::error::{Error, Result};
use crate::layout::{Description, Id};
use crate::prefetch::Prefetch;
use crate::shared::Shared;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The server's default socket, used when neither the builder nor `IDCAR_SOCKET` names one.
pub const DEFAULT_SOCKET: &str = "/tmp/idcar.sock";
pub use crate::shared::MAX_REQUEST;
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
        let shared = Arc::new(Shared::new(
            socket,
            self.timeout,
            self.retry_deadline,
            self.connections,
        ));
        shared.connect_first()?;
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
        self.shared.socket()
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
        self.shared.describe()
    }

    /// Stops the background refill, drops buffered IDs and closes the idle connections (one
    /// in use closes when its call returns). Later calls are [`Error::Closed`]. Never blocks;
    /// dropping the client does the same.
    pub fn close(&self) {
        self.shared.close();
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
