//! ZooKeeper as a coordinating store: how it does each step of the one negotiation
//! ([`crate::pool`]) and keeps marks for the one lease protocol
//! ([`crate::protocol`]). docs/zookeeper.md describes it for operators.
//!
//! - `session`: connect (files read again), follow the session's state, create the
//!   namespace's directory nodes, close;
//! - `access`: TLS and credentials — certificate and credential files read for every new
//!   connection, errors that name the flag, creator-only ACLs when an identity is given;
//!   `diagnose`: a handshake of its own to say which flag is wrong when a connection fails;
//! - `params`: how the pool's parameters and identity are recorded in znodes;
//! - `handle`: one session's client, paths and what it agreed; `demand`: who waits;
//! - `slots`: the session as the negotiation's [`Session`](crate::pool::Session) —
//!   the queue of ephemeral sequential nodes, `slots/N` created in a fenced `multi`;
//! - `marks`: ZooKeeper as the protocol's [`MarkStore`](crate::protocol::MarkStore)
//!   (compare-and-set `multi`s on `marks/N`, `witness/N` and `slots/N`);
//! - [`pool`]: pool gauges from watches, and `idcar pool`'s report.

pub(crate) mod access;
mod demand;
mod diagnose;
mod handle;
mod marks;
mod params;
pub mod pool;
mod session;
mod slots;
mod watch;

use crate::pool::tree;
pub use access::Access;
pub use marks::{PoolFence, Unreadable, ZkMarks};
pub use session::{connect, Retry};
pub use tree::{Owner, Paths};

use handle::ZkSession;

use crate::handle::LeaseHandle;
use crate::metrics::LeaseMetrics;
use crate::pool::{self as negotiation, Fault, Negotiation, PoolConfig, Store};
use idcar_core::clock::Clock;
use idcar_core::layout::Scheme;
use std::sync::Arc;
use std::time::Duration;
use zookeeper_client as zk;

/// How to reach ZooKeeper.
#[derive(Clone, Debug)]
pub struct ZkConfig {
    /// Connect string: `host:port[,host:port...][/chroot]`.
    pub connect: String,
    pub session_timeout: Duration,
    /// TLS and credentials; with a digest credential or a client certificate, znodes are
    /// created creator-only.
    pub access: Access,
}

/// ZooKeeper as the store of a negotiated lease: its configuration, and the session opened
/// last (ended when the next one opens, see [`session::end_old`]).
pub struct ZooKeeper(pub ZkConfig, std::sync::Mutex<Option<zk::SessionInfo>>);

/// Starts one lease negotiated in ZooKeeper (see [`negotiation::start`]).
pub fn start(
    zk: ZkConfig,
    pool: PoolConfig,
    scheme: Scheme,
    clock: Arc<dyn Clock>,
    metrics: Arc<LeaseMetrics>,
) -> LeaseHandle {
    negotiation::start(
        ZooKeeper(zk, Default::default()),
        pool,
        scheme,
        clock,
        metrics,
    )
}

impl Store for ZooKeeper {
    type Session = ZkSession;
    const NAME: &'static str = "ZooKeeper";
    const KIND: &'static str = "zookeeper";
    const UNREACHABLE: &'static str = "cannot connect to ZooKeeper";
    const LOST: &'static str = "ZooKeeper session lost; opening a new one";
    // The client's own schedule backs off for seconds: after a long outage IDs would flow
    // again only seconds after ZooKeeper.
    const RETRY_AT_MOST: Duration = Duration::from_secs(1);

    async fn open(&self, neg: &Negotiation) -> Result<ZkSession, Fault> {
        let c = &self.0;
        match connect(&c.connect, c.session_timeout, &c.access, Retry::FailFast).await {
            Ok(client) => {
                let mut last = self.1.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(old) = last.replace(client.session().clone()) {
                    tokio::spawn(session::end_old(c.clone(), old));
                }
                tracing::info!(session = %client.session_id(), "ZooKeeper session established");
                Ok(ZkSession::new(
                    client,
                    neg.paths.clone(),
                    c.access.restricted(),
                ))
            }
            // Every failure to connect is retried (a refused credential too: it may be
            // rotated), saying why in terms of the flags.
            Err(e) => Err(Fault::Unavailable(e.to_string())),
        }
    }

    fn refused(&self, what: &str) -> String {
        format!(
            "ZooKeeper refused access ({what}): check {} and the ACLs under --zk-root",
            self.0.access.identity_flags()
        )
    }

    fn beside(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        // Rotated certificate files are loaded within a second, for the client's next
        // connection (it reconnects by itself within a session).
        let access = self.0.access.clone();
        async move {
            if !access.tls() {
                return std::future::pending().await;
            }
            let mut every = tokio::time::interval(Duration::from_secs(1));
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                access.refresh();
            }
        }
    }

    fn state(&self, metrics: &LeaseMetrics, part: u32, state: &'static str) {
        metrics.session_state(part, state);
    }

    fn opened(&self, metrics: &LeaseMetrics, n: u64) {
        if n > 1 {
            metrics.zk_reconnects.inc();
        }
    }
}

/// How long a failed watch waits before it is set again.
const AGAIN: std::time::Duration = std::time::Duration::from_millis(500);

/// Whether `e` means the session is gone for good (a new one is needed).
pub(crate) fn session_gone(e: &zk::Error) -> bool {
    matches!(
        e,
        zk::Error::SessionExpired
            | zk::Error::ClientClosed
            | zk::Error::AuthFailed
            | zk::Error::NoHosts
    )
}

/// How a ZooKeeper error outside the mark's writes (which the protocol treats itself) bears
/// on the negotiation: an ACL refusal is `Refused` (not ready, tried again after a pause); a
/// fatal fault only for what no retry can mend (a request ZooKeeper cannot serve); a session
/// gone needs a new one; anything else — a connection lost or timed out, a quota — passes.
pub(crate) fn fault(e: zk::Error) -> Fault {
    match e {
        zk::Error::NoAuth | zk::Error::InvalidAcl => Fault::Refused(e.to_string()),
        // A request ZooKeeper can never serve as sent (a bug, a server too old). A quota
        // exceeded is not among them: it may be raised, and the claim is tried again.
        zk::Error::BadArguments(_)
        | zk::Error::Unimplemented
        | zk::Error::MarshallingError
        | zk::Error::NoChildrenForEphemerals => Fault::Fatal(e.to_string()),
        e if session_gone(&e) => Fault::SessionGone(e.to_string()),
        e => Fault::Unavailable(e.to_string()),
    }
}

impl From<zk::Error> for Fault {
    fn from(e: zk::Error) -> Fault {
        fault(e)
    }
}

/// ACLs for nodes idcar creates: creator-only under digest auth, else open.
pub(crate) fn acls(auth: bool) -> zk::Acls<'static> {
    if auth {
        zk::Acls::creator_all()
    } else {
        zk::Acls::anyone_all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lost or slow connection passes, an expired session needs a new one, an ACL refusal
    /// waits and tries again; only what no retry can mend ends idcar.
    #[test]
    fn only_unmendable_errors_are_fatal() {
        for e in [
            zk::Error::ConnectionLoss,
            zk::Error::Timeout,
            zk::Error::NoNode,
            zk::Error::Throttled,
        ] {
            let shown = e.to_string();
            assert!(matches!(fault(e), Fault::Unavailable(_)), "{shown}");
        }
        assert!(matches!(
            fault(zk::Error::SessionExpired),
            Fault::SessionGone(_)
        ));
        for e in [zk::Error::NoAuth, zk::Error::InvalidAcl] {
            let shown = e.to_string();
            assert!(matches!(fault(e), Fault::Refused(_)), "{shown}");
        }
        assert!(matches!(fault(zk::Error::Unimplemented), Fault::Fatal(_)));
        assert!(matches!(
            fault(zk::Error::QuotaExceeded),
            Fault::Unavailable(_)
        ));
    }
}
