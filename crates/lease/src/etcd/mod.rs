//! etcd v3 as a coordinating store: how it does each step of the one negotiation
//! ([`crate::pool`]) and keeps marks for the one lease protocol
//! ([`crate::protocol`]). docs/etcd.md describes it for operators. Where ZooKeeper has a session and ephemeral nodes, etcd has a
//! lease per instance, kept alive, with the slot and queue keys attached to it:
//!
//! ```text
//! <prefix>/<layout>/<cluster>/params          no lease   the pool's parameters (JSON), written once
//! <prefix>/<layout>/<cluster>/queue/<lease>   our lease  a contender; its create_revision is its place
//! <prefix>/<layout>/<cluster>/slots/<N>       our lease  the slot's holder (JSON owner)
//! <prefix>/<layout>/<cluster>/marks/<N>       no lease   the slot's time mark: "<ticks> <token>"
//! <prefix>/<layout>/<cluster>/witness/<N>     no lease   its copy, put in the same transaction
//! <prefix>/<layout>/<cluster>/identity/<id>   no lease   the pool's identity record
//! ```
//!
//! - `access`: endpoints, TLS and user/password, checked naming the flag;
//! - `client`: the gRPC client — endpoints in turn, bounded calls, the token fetched again;
//! - `leases`: grant, revoke and keep alive an etcd lease; wait for a change;
//! - `ops`: the pieces of transactions and ranges; `handle`: one etcd lease of a lease and
//!   what was agreed under it; `demand`: who waits;
//! - `session`: grant a lease, keep it alive; record the pool's identity;
//! - `slots`: the etcd lease as the negotiation's [`Session`](crate::pool::Session) —
//!   queue in create-revision order, take a free slot in one transaction;
//! - `marks`: etcd as the protocol's [`MarkStore`](crate::protocol::MarkStore);
//! - [`pool`]: pool gauges, and `idcar pool --etcd`'s report.
//!
//! The steps themselves, and their order, are the negotiation's ([`crate::pool`]).

/// How long a watch of the pool's waiters or of a holder's own mark is trusted before the
/// keys are read again (a watch only saves polling; a broken one wakes its waiter at once).
const WATCH_TRUSTED: std::time::Duration = std::time::Duration::from_secs(300);

mod access;
pub mod client;
mod conn;
mod demand;
mod error;
mod handle;
mod leases;
mod marks;
mod ops;
pub mod pool;
mod session;
mod slots;
mod take;
mod watches;

pub use access::EtcdAccess;
pub use client::{Etcd, EtcdError};
pub use leases::Keeper;
pub use marks::EtcdMarks;

use handle::EtcdSession;

use crate::handle::LeaseHandle;
use crate::metrics::LeaseMetrics;
use crate::pool::{self as negotiation, Fault, Negotiation, PoolConfig, Store};
use idcar_core::clock::Clock;
use idcar_core::layout::Scheme;
use std::sync::Arc;
use std::time::Duration;

/// How to reach etcd.
#[derive(Clone, Debug)]
pub struct EtcdConfig {
    pub access: EtcdAccess,
    /// The TTL of this instance's etcd lease (etcd's minimum is 2 s).
    pub ttl: Duration,
}

/// The bound of one etcd call: a lost member is given up on well within the lease's TTL
/// (a keep-alive every third of it can fail and be tried again on another member).
pub fn call_timeout(ttl: Duration) -> Duration {
    (ttl / 4).clamp(Duration::from_millis(500), Duration::from_secs(2))
}

/// etcd as the store of a negotiated lease.
pub struct EtcdStore(pub EtcdConfig);

/// Starts one lease negotiated in etcd (see [`negotiation::start`]).
pub fn start(
    etcd: EtcdConfig,
    pool: PoolConfig,
    scheme: Scheme,
    clock: Arc<dyn Clock>,
    metrics: Arc<LeaseMetrics>,
) -> LeaseHandle {
    negotiation::start(EtcdStore(etcd), pool, scheme, clock, metrics)
}

impl Store for EtcdStore {
    type Session = EtcdSession;
    const NAME: &'static str = "etcd";
    const KIND: &'static str = "etcd";
    const UNREACHABLE: &'static str = "cannot reach etcd";
    const LOST: &'static str = "etcd lease lost; granting a new one";
    // IDs flow again within a second of etcd answering.
    const RETRY_AT_MOST: Duration = Duration::from_millis(500);

    async fn open(&self, neg: &Negotiation) -> Result<EtcdSession, Fault> {
        let (etcd, lease, ttl) = session::open(&self.0).await?;
        tracing::info!(
            lease = format!("{lease:#x}"),
            ttl_s = ttl.as_secs(),
            "etcd lease granted"
        );
        Ok(EtcdSession::new(etcd, lease, ttl, neg.paths.clone()))
    }

    fn refused(&self, what: &str) -> String {
        format!(
            "etcd refused access ({what}): check {} and the permissions on --etcd-prefix",
            self.0.access.identity_flags()
        )
    }

    fn opened(&self, metrics: &LeaseMetrics, _n: u64) {
        metrics.etcd_leases.inc();
    }
}
