//! The ZooKeeper lease: a slot claimed from a pool, fenced by a compare-and-set time mark.
//!
//! Where things are, in the order of the protocol (see DESIGN.md):
//!
//! - [`tree`]: the paths of a namespace and the owner record of slot nodes;
//! - `session`: the session loop — connect (retrying), follow the session, open a new one
//!   when it expires;
//! - `claim`: queue up and take a free slot (or probe large pools at random);
//! - `fence`: **the uniqueness invariant** — the mark read at the claim, the clock wait, the
//!   compare-and-set writes, own-write recovery, the write-down on release. Read it alone to
//!   check that no two holders of a slot can issue the same tick;
//! - `hold`: claim → wait → publish → renew → lose or release, within one session;
//! - `stop`: the one helper for "wait for X, or stop" (release asked, session ended);
//! - [`pool`]: pool gauges from watches, and `idcar pool`'s report.
//!
//! [`Negotiator`] is the context all of them share; [`start`] runs it on a task and returns
//! the [`LeaseHandle`]. A version mismatch or a vanished slot node stops issuing at once and
//! claims again; an unreachable ZooKeeper leaves the last mark in force (the generator stops
//! there); an expired session opens a new one and claims again, preferring the same slot.

mod claim;
mod fence;
mod hold;
mod params;
pub mod pool;
mod session;
mod stop;
pub mod tree;

pub use session::{connect, Retry};
pub use tree::{Owner, Paths};

use super::{LeaseError, LeaseHandle, LeaseState};
use crate::clock::Clock;
use crate::layout::Scheme;
use crate::metrics::Metrics;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{oneshot, watch};
use tracing::Instrument;
use zookeeper_client as zk;

/// What the negotiator needs to know.
#[derive(Clone, Debug)]
pub struct ZkConfig {
    /// Connect string: `host:port[,host:port...][/chroot]`.
    pub connect: String,
    /// Root of idcar's tree (default `/idcar`).
    pub root: String,
    pub layout: &'static str,
    pub cluster: u8,
    /// Slots `0..pool_size` are negotiated.
    pub pool_size: u32,
    /// A slot to take when it is free.
    pub prefer: Option<u32>,
    pub session_timeout: Duration,
    pub horizon: Duration,
    pub renew_every: Duration,
    /// How long to wait for the clock to pass a claimed slot's mark before giving up.
    pub max_clock_wait: Duration,
    /// `user:password` for ZooKeeper digest auth; znodes are then created creator-only.
    pub auth: Option<String>,
    /// The Kubernetes pod this instance runs in, shown in the slot's owner record.
    pub pod: Option<String>,
    /// What shapes the pool's ID space (name, value): recorded when the pool is created;
    /// an instance whose parameters differ refuses to join.
    pub pool_params: Vec<(String, String)>,
    /// Testing aid (cargo feature `fault-injection`): a deliberate bug for the campaign.
    pub planted: crate::lease::planted::PlantedBug,
}

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

/// The context every part of the negotiator shares: configuration, the namespace's paths,
/// the clock, metrics, and the channel the lease is published on.
pub(crate) struct Negotiator {
    pub cfg: ZkConfig,
    pub scheme: Scheme,
    pub clock: Arc<dyn Clock>,
    pub metrics: Arc<Metrics>,
    pub paths: Paths,
    /// Random per process: tells this process's own expired sessions from other instances.
    pub instance: String,
    pub tx: watch::Sender<LeaseState>,
}

impl Negotiator {
    fn now_tick(&self) -> u64 {
        self.scheme.tick_at(self.clock.now_unix_ns()).unwrap_or(0)
    }

    fn now_ms(&self) -> u64 {
        self.clock.now_unix_ns() / 1_000_000
    }

    /// The owner record for a node created by `client`'s session.
    pub(crate) fn owner(&self, client: &zk::Client) -> Vec<u8> {
        let o = Owner::for_this_process(
            client.session_id(),
            &self.instance,
            self.cfg.pod.as_deref(),
            self.now_ms(),
        );
        serde_json::to_vec(&o).expect("owner serialises")
    }

    /// Publishes "no lease yet", with why.
    pub(crate) fn pending(&self, reason: impl Into<String>) {
        self.tx.send_replace(LeaseState::Pending {
            reason: reason.into(),
        });
    }

    /// Publishes a failure for good, and returns it.
    fn fail(&self, e: LeaseError) -> LeaseError {
        self.tx.send_replace(LeaseState::Failed {
            reason: e.to_string(),
        });
        e
    }

    /// How long until the clock is past `mark`.
    fn wait_past(&self, mark: u64) -> Duration {
        self.scheme.wait_past(mark, self.clock.now_unix_ns())
    }
}

/// Starts the negotiator: it connects, claims a slot, keeps the lease and publishes it.
pub fn start(
    cfg: ZkConfig,
    scheme: Scheme,
    clock: Arc<dyn Clock>,
    metrics: Arc<Metrics>,
) -> LeaseHandle {
    metrics.pool_size.set(i64::from(cfg.pool_size));
    let (tx, rx) = watch::channel(LeaseState::Pending {
        reason: "connecting to ZooKeeper".into(),
    });
    let span = tracing::info_span!(
        "lease",
        kind = "zookeeper",
        layout = cfg.layout,
        cluster = cfg.cluster
    );
    let neg = Negotiator {
        paths: Paths::new(&cfg.root, cfg.layout, cfg.cluster),
        cfg,
        scheme,
        clock,
        metrics,
        instance: tree::instance_id(),
        tx,
    };
    let (release_tx, release_rx) = oneshot::channel();
    let task = tokio::spawn(session::run(neg, release_rx).instrument(span));
    LeaseHandle::new(rx, release_tx, task)
}
