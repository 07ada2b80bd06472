//! Kubernetes as a coordinating store: `coordination.k8s.io/v1` Lease objects in one namespace,
//! through the API server. How it does each step of the one negotiation ([`crate::pool`]) and
//! keeps marks for the one lease protocol ([`crate::protocol`]); docs/kube.md describes it for
//! operators. Every object of a pool carries the label `idcar.dev/pool=<prefix>.<layout>.<cluster>`:
//!
//! ```text
//! <prefix>.<layout>.<cluster>                 params   the pool's parameters and identity record
//! <prefix>.<layout>.<cluster>.slot-<N>        slot     its holder (a session), owner record, time
//!                                                      mark and the identity it was stamped with
//! <prefix>.<layout>.<cluster>.session-<hex>   session  one lease's session: renewed; its place in
//!                                                      the queue and whether it waits for a slot
//! ```
//!
//! The API server has compare-and-set on one object (`metadata.resourceVersion`) and nothing
//! across objects, so everything a write must fence is in the object it writes: a slot's mark,
//! its holder and the identity it was claimed under are one object, and a claim, a mark write
//! and the hand-back are each one compare-and-set of it. Recording a pool's identity stamps every
//! slot object (a compare-and-set each), so a holder of a replaced pool fails its next write.
//!
//! There is no server-side session: a session is an object its lease renews, and it is gone when
//! the object is deleted — by its lease when it closes, or by a claimant that watched it go
//! unrenewed for its whole duration on the claimant's own monotonic clock ([`liveness`]). Taking
//! a slot from a live holder by mistake costs availability, never uniqueness: the take reads the
//! mark it fences on, and the old holder's next write fails on the changed `resourceVersion`.
//!
//! - `api`: the client (kube-rs), bounded calls, errors as the negotiation takes them;
//! - `objects`: names, labels, annotations, and what a Lease object says;
//! - `liveness`: sessions judged by their renewals as this process sees them; `look`: one look
//!   at the pool, the queue, a slot taken in one compare-and-set;
//! - `session`: open, renew and close a session; `record`: parameters and identity;
//! - `slots`: the session as the negotiation's [`Session`](crate::pool::Session);
//! - `marks`: slot objects as the protocol's [`MarkStore`](crate::protocol::MarkStore);
//! - `view`: one follower per process and pool, whose copy the leases' claims, demand and
//!   holders read;
//! - [`pool`]: gauges, a look for spares, and `idcar pool --kube`'s report.

mod api;
mod copy;
mod liveness;
mod look;
mod marks;
pub mod objects;
pub mod pool;
mod record;
mod session;
mod slots;
mod view;

pub use api::{Event, Kube, KubeError};
pub use marks::KubeMarks;
pub use objects::{check_prefix, DEFAULT_POOL, MAX_POOL};
pub use session::idle_duration;
pub use view::Followers;

use crate::handle::LeaseHandle;
use crate::metrics::LeaseMetrics;
use crate::pool::{self as negotiation, Fault, Negotiation, PoolConfig, Store};
use idcar_core::clock::Clock;
use idcar_core::layout::Scheme;
use session::KubeSession;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How to reach the API server and what the sessions declare.
#[derive(Clone, Debug)]
pub struct KubeConfig {
    /// A kubeconfig file (`--kubeconfig`); `None`: `KUBECONFIG`, then `~/.kube/config`, then
    /// the pod's service account (in-cluster).
    pub kubeconfig: Option<PathBuf>,
    /// The namespace of the pool's objects (`--kube-namespace`); `None`: the kubeconfig
    /// context's, or the pod's own (in-cluster).
    pub namespace: Option<String>,
    /// How long a session stays held after its last renewal as a claimant sees it; renewed
    /// every third of it.
    pub ttl: Duration,
    /// The followers of the pools of the leases started with this configuration (and its
    /// clones): one per pool, shared.
    pub followers: Followers,
}

/// The bound of one API call: a call that hangs is given up on well within the session's
/// duration, so a renewal can be tried again.
pub fn call_timeout(ttl: Duration) -> Duration {
    (ttl / 6).clamp(Duration::from_millis(500), Duration::from_secs(5))
}

/// Kubernetes as the store of a negotiated lease.
pub struct KubeStore(pub KubeConfig);

/// Starts one lease negotiated in Kubernetes (see [`negotiation::start`]).
pub fn start(
    kube: KubeConfig,
    pool: PoolConfig,
    scheme: Scheme,
    clock: Arc<dyn Clock>,
    metrics: Arc<LeaseMetrics>,
) -> LeaseHandle {
    negotiation::start(KubeStore(kube), pool, scheme, clock, metrics)
}

impl Store for KubeStore {
    type Session = KubeSession;
    const NAME: &'static str = "the Kubernetes API server";
    const KIND: &'static str = "kubernetes";
    const UNREACHABLE: &'static str = "cannot reach the Kubernetes API server";
    const LOST: &'static str = "Kubernetes session lost; opening a new one";
    // IDs flow again within a second of the API server answering.
    const RETRY_AT_MOST: Duration = Duration::from_millis(500);

    async fn open(&self, neg: &Negotiation) -> Result<KubeSession, Fault> {
        let s = session::open(&self.0, neg).await?;
        tracing::info!(
            session = %s.name,
            namespace = %s.kube.namespace(),
            ttl_s = s.ttl.as_secs(),
            "Kubernetes session opened"
        );
        Ok(s)
    }

    fn refused(&self, what: &str) -> String {
        format!(
            "the Kubernetes API server refused access ({what}): bind the Role of \
             deploy/kubernetes/kube/rbac.yaml to this pod's service account in its namespace"
        )
    }
}
