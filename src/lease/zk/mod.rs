//! The ZooKeeper lease: a slot claimed from a pool, fenced by a compare-and-set time mark.
//! The protocol that keeps IDs unique is the same for every store and lives in
//! [`crate::lease::protocol`]; this module is how ZooKeeper plays its part. In the order of
//! the protocol (docs/zookeeper.md describes it for operators):
//!
//! - [`tree`]: the paths of a namespace and what its nodes hold;
//! - `session`: the session loop — connect (retrying), follow the session, open a new one
//!   when it expires;
//! - `access`: TLS and credentials — certificate and credential files read for every new
//!   connection, errors that name the flag, creator-only ACLs when an identity is given;
//! - `params`: the pool's recorded parameters, agreed at each session;
//! - `claim`: queue up and take a free slot (or probe large pools at random);
//! - `marks`: ZooKeeper as the protocol's [`MarkStore`](crate::lease::protocol::MarkStore)
//!   (compare-and-set `multi`s on `marks/N` and `slots/N`);
//! - `hold`: ZooKeeper's `Slots` for the shared loop (`crate::lease::holding`: claim →
//!   [`protocol::hold`](crate::lease::protocol::hold) → claim again, within one session);
//! - [`pool`]: pool gauges from watches, and `idcar pool`'s report.
//!
//! [`Negotiator`] is the context all of them share; [`start`] runs it on a task and returns
//! the [`LeaseHandle`]. A version mismatch or a vanished slot node stops issuing at once and
//! claims again; an unreachable ZooKeeper leaves the last mark in force (the generator stops
//! there); an expired session opens a new one and claims again, preferring the same slot.

pub(crate) mod access;
mod claim;
pub(crate) mod hold;
mod marks;
pub(crate) mod params;
pub mod pool;
mod session;
pub mod tree;

pub use access::{Access, AccessError, TlsFiles};
pub use marks::{PoolFence, Unreadable, ZkMarks};
pub use session::{connect, Retry};
pub use tree::{Owner, Paths};

use super::protocol::{Protocol, Timing};
use super::LeaseHandle;
use crate::clock::Clock;
use crate::layout::Scheme;
use crate::metrics::Metrics;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
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
    pub timing: Timing,
    /// TLS and credentials; with a digest credential or a client certificate, znodes are
    /// created creator-only.
    pub access: Access,
    /// The Kubernetes pod this instance runs in, shown in the slot's owner record.
    pub pod: Option<String>,
    /// What shapes the pool's ID space (name, value): recorded when the pool is created;
    /// an instance whose parameters differ refuses to join.
    pub pool_params: Vec<(String, String)>,
    /// Testing aid (cargo feature `fault-injection`): a deliberate bug for the campaign.
    pub planted: crate::lease::planted::PlantedBug,
    /// Which of the instance's leases this is (`--slots`).
    pub part: crate::lease::Part,
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
/// and the protocol's context (clock, metrics, the channel the lease is published on).
pub(crate) struct Negotiator {
    pub cfg: ZkConfig,
    pub proto: Protocol,
    pub paths: Paths,
    /// Random per lease: tells this lease's own expired sessions from other leases.
    pub instance: String,
}

impl Negotiator {
    /// The owner record for a node created by `client`'s session.
    pub(crate) fn owner(&self, client: &zk::Client) -> Vec<u8> {
        tree::owner_record(
            client.session_id().to_string(),
            &self.instance,
            self.cfg.pod.as_deref(),
            &self.cfg.part,
            self.proto.clock.now_unix_ns() / 1_000_000,
        )
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
    let span = tracing::info_span!(
        "lease",
        kind = "zookeeper",
        layout = cfg.layout,
        cluster = cfg.cluster,
        part = cfg.part.index
    );
    let (proto, rx) = Protocol::new(
        scheme,
        clock,
        metrics,
        cfg.timing,
        cfg.planted,
        cfg.part.clone(),
        "connecting to ZooKeeper",
    );
    let neg = Negotiator {
        paths: Paths::new(&cfg.root, cfg.layout, cfg.cluster),
        cfg,
        proto,
        instance: tree::instance_id(),
    };
    let (release_tx, release_rx) = oneshot::channel();
    let access = neg.cfg.access.clone();
    let task = tokio::spawn(
        async move {
            // Rotated certificate files are loaded within a second, for the client's next
            // connection (it reconnects by itself within a session).
            let watch = async {
                if !access.tls() {
                    return std::future::pending().await;
                }
                let mut every = tokio::time::interval(Duration::from_secs(1));
                every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    every.tick().await;
                    access.refresh();
                }
            };
            tokio::select! {
                r = session::run(neg, release_rx) => r,
                () = watch => unreachable!("the watch never ends"),
            }
        }
        .instrument(span),
    );
    LeaseHandle::new(rx, release_tx, task)
}
