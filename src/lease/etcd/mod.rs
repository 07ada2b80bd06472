//! The etcd lease: a slot claimed from a pool, fenced by a compare-and-set time mark — the
//! ZooKeeper lease's protocol ([`crate::lease::protocol`]) over etcd v3 (docs/etcd.md
//! describes it for operators). Where ZooKeeper has a session and ephemeral nodes, etcd has a
//! lease per instance, kept alive, with the slot and queue keys attached to it:
//!
//! ```text
//! <prefix>/<layout>/<cluster>/params          no lease   the pool's parameters (JSON), written once
//! <prefix>/<layout>/<cluster>/queue/<lease>   our lease  a contender; its create_revision is its place
//! <prefix>/<layout>/<cluster>/slots/<N>       our lease  the slot's holder (JSON owner)
//! <prefix>/<layout>/<cluster>/marks/<N>       no lease   the slot's time mark: "<ticks> <token>"
//! ```
//!
//! - `client`: the gRPC client — endpoints in turn, TLS, user/password, bounded calls;
//! - `session`: grant a lease, keep it alive, agree the pool's parameters, claim and hold
//!   (etcd's `Slots` for the shared loop in `crate::lease::holding`), grant a new lease when
//!   one is gone;
//! - `claim`: queue in create-revision order and take a free slot (or probe large pools);
//! - `marks`: etcd as the protocol's [`MarkStore`](crate::lease::protocol::MarkStore);
//! - [`pool`]: pool gauges, and `idcar pool --etcd`'s report.

mod claim;
pub mod client;
mod marks;
pub mod pb;
pub mod pool;
mod session;

pub use client::{Etcd, EtcdAccess, EtcdError};
pub use marks::EtcdMarks;

use super::protocol::{Protocol, Timing};
use super::LeaseHandle;
use crate::clock::Clock;
use crate::layout::Scheme;
use crate::lease::zk::tree::{instance_id, owner_record, Paths};
use crate::metrics::Metrics;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tracing::Instrument;

/// What the etcd lease needs to know.
#[derive(Clone, Debug)]
pub struct EtcdConfig {
    pub access: EtcdAccess,
    /// The key prefix of idcar's keys (default `/idcar`).
    pub prefix: String,
    pub layout: &'static str,
    pub cluster: u8,
    /// Slots `0..pool_size` are negotiated.
    pub pool_size: u32,
    /// A slot to take when it is free.
    pub prefer: Option<u32>,
    /// The TTL of this instance's etcd lease (etcd's minimum is 2 s).
    pub ttl: Duration,
    pub timing: Timing,
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

/// The bound of one etcd call: a lost member is given up on well within the lease's TTL
/// (a keep-alive every third of it can fail and be tried again on another member).
pub fn call_timeout(ttl: Duration) -> Duration {
    (ttl / 4).clamp(Duration::from_millis(500), Duration::from_secs(2))
}

/// What every part of the etcd lease shares.
pub(crate) struct Negotiator {
    pub cfg: EtcdConfig,
    pub proto: Protocol,
    pub paths: Paths,
    /// Random per lease: shown in owner records.
    pub instance: String,
}

impl Negotiator {
    /// The owner record of a key attached to `lease`.
    pub(crate) fn owner(&self, lease: i64) -> Vec<u8> {
        owner_record(
            format!("{lease:#x}"),
            &self.instance,
            self.cfg.pod.as_deref(),
            &self.cfg.part,
            self.proto.clock.now_unix_ns() / 1_000_000,
        )
    }
}

/// Starts the etcd lease: it connects, claims a slot, keeps the lease and publishes it.
pub fn start(
    cfg: EtcdConfig,
    scheme: Scheme,
    clock: Arc<dyn Clock>,
    metrics: Arc<Metrics>,
) -> LeaseHandle {
    metrics.pool_size.set(i64::from(cfg.pool_size));
    let span = tracing::info_span!(
        "lease",
        kind = "etcd",
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
        "connecting to etcd",
    );
    let neg = Negotiator {
        paths: Paths::new(&cfg.prefix, cfg.layout, cfg.cluster),
        cfg,
        proto,
        instance: instance_id(),
    };
    let (release_tx, release_rx) = oneshot::channel();
    let task = tokio::spawn(session::run(neg, release_rx).instrument(span));
    LeaseHandle::new(rx, release_tx, task)
}
