//! **The negotiation**: how an instance gets a slot of a pool from a coordinating store, written
//! once for every store that hands out slots (ZooKeeper, etcd). A store says *how* it does each
//! step ([`Store`] opens a [`Session`]; the session queues, takes, lists and reads); *what* is
//! done, and in which order, is here:
//!
//! - [`session`]: the session loop — open a session (retrying), follow its end, agree the
//!   pool's parameters, hold slots in it, open another when it is gone; refusals and
//!   disagreements pause instead of hammering the store;
//! - [`params`]: the pool's parameters and identity, agreed at each session;
//! - [`claim`]: the one claim algorithm — queue, wait for the turn, take the preferred or the
//!   lowest-marked free slot (a claim and its mark read in one step), or probe large pools at
//!   random; exhaustion, and spares giving way (`--slots`);
//! - [`holding`]: claim → [`protocol::hold`](crate::protocol::hold) → claim again,
//!   within one session, and how a session ends ([`end::End`]);
//! - [`tree`] (the namespace and what its entries hold: owner records, marks) and [`report`]
//!   (`idcar pool`).
//!
//! A new store implements [`Store`] and [`Session`] here and
//! [`MarkStore`](crate::store::MarkStore) for its marks, and adds one line to each of
//! the conformance suites: `conformance!` in `crates/lease/tests/lease_conformance/` (the protocol) and
//! `negotiation!` in `crates/lease/tests/negotiation.rs` (the negotiation).

pub(crate) mod claim;
pub(crate) mod end;
pub(crate) mod holding;
mod order;
pub mod params;
pub mod report;
mod session;
pub(crate) mod spare;
pub mod tree;

pub use report::{ClusterReport, IdentityReport, MultiSlot, SlotReport, Waiter};
pub use tree::{Marked, Owner, Paths};

use super::identity::Record;
use super::planted::PlantedBug;
use super::protocol::{Protocol, Timing};
use super::stop::Stop;
use super::store::{MarkStore, Stored};
use crate::handle::LeaseHandle;
use crate::metrics::LeaseMetrics;
use crate::part::Part;
use end::End;
use idcar_core::clock::Clock;
use idcar_core::layout::Scheme;
use spare::Looked;
use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// What the negotiation needs to know, whatever the store.
#[derive(Clone, Debug)]
pub struct PoolConfig {
    /// Root of idcar's namespace in the store (`--zk-root`, `--etcd-prefix`; default `/idcar`).
    pub root: String,
    pub layout: &'static str,
    pub cluster: u8,
    /// Slots `0..pool_size` are negotiated.
    pub pool_size: u32,
    /// A slot to take when it is free.
    pub prefer: Option<u32>,
    pub timing: Timing,
    /// The Kubernetes pod this instance runs in, shown in the slot's owner record.
    pub pod: Option<String>,
    /// What shapes the pool's ID space (name, value): recorded when the pool is created;
    /// an instance whose parameters differ refuses to join.
    pub pool_params: Vec<(String, String)>,
    /// Testing aid (cargo feature `fault-injection`): a deliberate bug for the campaign.
    pub planted: PlantedBug,
    /// Which of the instance's leases this is (`--slots`).
    pub part: Part,
}

/// How a store operation of the negotiation failed, as the negotiation must treat it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Fault {
    /// Not reachable now, or no answer in time (a connection lost, a leader election):
    /// tried again.
    #[error("{0}")]
    Unavailable(String),
    /// The session (ZooKeeper) or lease (etcd) is gone, or the pool's parameters changed
    /// under it: every claim made in it is gone; a new session agrees on the pool again.
    #[error("{0}")]
    SessionGone(String),
    /// The store refused our identity (an ACL, a credential, a permission): not ready, tried
    /// again after a pause (the files may be fixed without a restart).
    #[error("{0}")]
    Refused(String),
    /// A request the store cannot serve at all (a bug, a server too old).
    #[error("{0}")]
    Fatal(String),
}

/// A change in the store a claimant waits for (a watch, or a bounded poll).
pub(crate) type Change = Pin<Box<dyn Future<Output = ()> + Send>>;

/// One look at the pool (see [`spare::give_back_when_asked`]).
pub(crate) type Look = Pin<Box<dyn Future<Output = Option<Looked>> + Send>>;

/// The `params` record as found or written: its data and what identifies this recording of it
/// (ZooKeeper: czxid and version; etcd: create and mod revisions; see
/// [`crate::identity::id_of`]).
#[derive(Clone, Debug)]
pub(crate) struct Recorded {
    pub data: Vec<u8>,
    pub creation: i64,
    pub version: i64,
}

/// What taking one slot found.
pub(crate) enum Took<V> {
    /// Ours now, its mark (the higher of mark and witness) as read in the same step.
    Claimed(Stored<V>),
    /// Someone else holds it.
    Taken,
    /// Ours now, but its mark is unreadable (why): let go and never taken by this process.
    Unreadable(String),
}

/// Which slot [`Session::take_first`] took, and what it found.
pub(crate) type TookOne<S> = (u32, Took<<<S as Session>::Marks as MarkStore>::Version>);

/// A coordinating store: how to open a [`Session`] with it.
pub(crate) trait Store: Send + Sync + 'static {
    type Session: Session;

    /// For messages: "ZooKeeper", "etcd".
    const NAME: &'static str;
    /// The `kind` of the lease's log span: "zookeeper", "etcd".
    const KIND: &'static str;
    /// What is said while the store cannot be reached: "cannot connect to ZooKeeper".
    const UNREACHABLE: &'static str;
    /// What is logged when a session is gone: "ZooKeeper session lost; opening a new one".
    const LOST: &'static str;
    /// An unanswered open is tried again at least this often (IDs flow again soon after the
    /// store answers).
    const RETRY_AT_MOST: Duration;

    /// Opens a session in `neg`'s namespace, credential and certificate files read again now,
    /// and logs it (its id, the TTL granted, ...).
    fn open(&self, neg: &Negotiation) -> impl Future<Output = Result<Self::Session, Fault>> + Send;

    /// What the operator should check after the store refused `what`.
    fn refused(&self, what: &str) -> String;

    /// Runs beside the sessions for the lease's whole life (ZooKeeper: rotated certificate
    /// files loaded within a second).
    fn beside(&self) -> impl Future<Output = ()> + Send + 'static {
        std::future::pending()
    }

    /// The session's state for `idcar_zk_session_state` (ZooKeeper only).
    fn state(&self, _metrics: &LeaseMetrics, _part: u32, _state: &'static str) {}

    /// The `n`th session is open (counted: ZooKeeper reconnects, etcd leases granted).
    fn opened(&self, _metrics: &LeaseMetrics, _n: u64) {}
}

/// One session with a coordinating store (ZooKeeper: a session; etcd: an etcd lease kept
/// alive): what the one claim algorithm and session loop ask of it. Queue and slot entries it
/// creates go with it.
pub(crate) trait Session: Send + Sync + Sized + 'static {
    type Marks: MarkStore;
    /// A contender's place in the queue.
    type Place: Send + Sync;

    /// The session as owner records name it, in hex.
    fn owner_id(&self) -> String;

    /// Follows the session; cancels `ended` once the store says it is over.
    fn follow(&self, neg: &Negotiation, ended: CancellationToken) -> JoinHandle<()>;

    /// Keeps the pool gauges current until aborted.
    fn gauges(&self, neg: &Negotiation) -> JoinHandle<()>;

    /// Publishes on `tx` whether anyone waits for a slot of the pool ([`Session::want`]), from a
    /// task of its own (a watch: nothing is read while nothing changes), until aborted.
    fn demand(&self, neg: &Negotiation, tx: tokio::sync::watch::Sender<bool>) -> JoinHandle<()>;

    /// Says in the store whether this session waits for a slot of the exhausted pool (best
    /// effort; a wait said goes with the session at its end).
    fn want(&self, neg: &Negotiation, wanted: bool) -> impl Future<Output = ()> + Send;

    /// How to look at the pool, again and again, from a task of its own.
    fn looker(&self, neg: &Negotiation) -> Box<dyn FnMut() -> Look + Send>;

    /// What must exist before anything is recorded (ZooKeeper: the directory nodes),
    /// retrying passing faults.
    fn prepare(
        &mut self,
        _neg: &Negotiation,
        _stop: &mut Stop,
    ) -> impl Future<Output = Result<(), End>> + Send {
        async { Ok(()) }
    }

    /// Records `params` (our parameters, JSON) if the pool has none, or reads the record:
    /// what is recorded now; `None` when it vanished meanwhile (look again).
    fn params(
        &self,
        neg: &Negotiation,
        params: &[u8],
    ) -> impl Future<Output = Result<Option<Recorded>, Fault>> + Send;

    /// Joins the identity of `recorded`, recording it first if no one has (see
    /// [`crate::identity`]), and fences this session's claims and mark writes with
    /// it; `None` when `params` changed meanwhile (agree again).
    fn join(
        &mut self,
        neg: &Negotiation,
        recorded: &Recorded,
    ) -> impl Future<Output = Result<Option<Record>, Fault>> + Send;

    /// Testing aid: the planted `ignore-pool-identity`, claims checked against `recorded`
    /// only, marks written unfenced.
    #[cfg(feature = "fault-injection")]
    fn unfenced(&mut self, recorded: &Recorded);

    /// The marks, fenced as agreed, their witness written and read too
    /// ([`crate::protocol::Protocol::keeps_witness`]).
    fn marks(&self, neg: &Negotiation) -> Self::Marks;

    /// Before a claim: removes what this session's earlier attempts may have left (a queue
    /// entry or a slot whose reply was lost).
    fn tidy(
        &self,
        neg: &Negotiation,
        marks: &Self::Marks,
    ) -> impl Future<Output = Result<(), Fault>> + Send;

    /// Before queueing, in one read: the free slots with their marks (as
    /// [`Session::marks_of`] reads them) if no contender is queued; `None` if one is, or if
    /// a slot of this session may be held (`prefer` held: the queue's path lets it go).
    fn glance(
        &self,
        neg: &Negotiation,
        prefer: Option<u32>,
    ) -> impl Future<Output = Result<Option<Vec<Marked>>, Fault>> + Send;

    /// Joins the queue with `owner`: our place.
    fn enqueue(
        &self,
        neg: &Negotiation,
        owner: &[u8],
    ) -> impl Future<Output = Result<Self::Place, Fault>> + Send;

    /// How many contenders are ahead of `place`, who is just ahead (for the log) and its
    /// change; `None` at the head.
    fn ahead(
        &self,
        neg: &Negotiation,
        place: &Self::Place,
    ) -> impl Future<Output = Result<Option<(usize, String, Change)>, Fault>> + Send;

    /// The owner records of the contenders queued after `place`.
    fn behind(
        &self,
        neg: &Negotiation,
        place: &Self::Place,
    ) -> impl Future<Output = Result<Vec<Option<Owner>>, Fault>> + Send;

    /// Leaves the queue (a failure is tidied later, or goes with the session).
    fn leave(&self, neg: &Negotiation, place: &Self::Place) -> impl Future<Output = ()> + Send;

    /// The slots of the pool held now, and their next change. Our own leftovers (a slot of
    /// this session whose lease was lost: `prefer`, or any carrying our session) are let go
    /// and count as free.
    fn held(
        &self,
        neg: &Negotiation,
        marks: &Self::Marks,
        prefer: Option<u32>,
    ) -> impl Future<Output = Result<(BTreeSet<u32>, Change), Fault>> + Send;

    /// The marks of `free` slots, in one round trip.
    fn marks_of(
        &self,
        neg: &Negotiation,
        free: &[u32],
    ) -> impl Future<Output = Result<Vec<Marked>, Fault>> + Send;

    /// Takes `slot` and reads its mark in one step, while the pool is still the one agreed:
    /// **the claim comes before the read** (or with it), so no one else writes the mark read.
    /// With `place`, the queue is left in the same step when the slot is taken (it stays
    /// queued otherwise).
    fn take(
        &self,
        neg: &Negotiation,
        marks: &Self::Marks,
        slot: u32,
        owner: &[u8],
        place: Option<&Self::Place>,
    ) -> impl Future<Output = Result<Took<<Self::Marks as MarkStore>::Version>, Fault>> + Send;

    /// Takes the first free slot of `slots` (in that order) as [`Session::take`] takes one,
    /// outside the queue: the slot and what was found ([`Took::Taken`] if every one was held).
    /// One take after another by default; a store that can try several in one round trip
    /// (etcd's nested transactions) does.
    fn take_first(
        &self,
        neg: &Negotiation,
        marks: &Self::Marks,
        slots: &[u32],
        owner: &[u8],
    ) -> impl Future<Output = Result<TookOne<Self>, Fault>> + Send {
        async move {
            let mut last = 0;
            for &slot in slots {
                last = slot;
                match self.take(neg, marks, slot, owner, None).await? {
                    Took::Taken => continue,
                    took => return Ok((slot, took)),
                }
            }
            Ok((last, Took::Taken))
        }
    }

    /// Lets `slot` go if this session holds it: whether it went (if not, it goes with the
    /// session, or at the next [`Session::tidy`]).
    fn let_go(&self, marks: &Self::Marks, slot: u32) -> impl Future<Output = bool> + Send;

    /// The session is gone by the store's word: what must still be ended once the next one
    /// is open (etcd: revoke the lease, which etcd may still keep), if anything.
    fn lost(self) -> Option<Self>;

    /// Ends the session now: its queue and slot entries go at once.
    fn close(self) -> impl Future<Output = ()> + Send + 'static;
}

/// What every step of one lease's negotiation shares: configuration, the namespace's paths,
/// and the protocol's context (clock, metrics, what is published).
pub(crate) struct Negotiation {
    pub cfg: PoolConfig,
    pub proto: Protocol,
    pub paths: Paths,
    /// Random per lease: tells this lease's own expired sessions from other leases.
    pub instance: String,
}

impl Negotiation {
    /// The owner record of a queue or slot entry created by `session`.
    pub fn owner(&self, session: String) -> Vec<u8> {
        tree::owner_record(
            session,
            &self.instance,
            self.cfg.pod.as_deref(),
            &self.cfg.part,
            self.proto.clock.now_unix_ns() / 1_000_000,
        )
    }
}

/// Starts one lease negotiated in `store`: it opens sessions, claims a slot, keeps the lease
/// and publishes it.
pub(crate) fn start<S: Store>(
    store: S,
    cfg: PoolConfig,
    scheme: Scheme,
    clock: Arc<dyn Clock>,
    metrics: Arc<LeaseMetrics>,
) -> LeaseHandle {
    metrics.pool_size.set(i64::from(cfg.pool_size));
    let span = tracing::info_span!(
        "lease",
        kind = S::KIND,
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
        &format!("connecting to {}", S::NAME),
    );
    let issuance = cfg.part.issuance.clone();
    let neg = Negotiation {
        paths: Paths::new(&cfg.root, cfg.layout, cfg.cluster),
        cfg,
        proto,
        instance: crate::part::instance_id(),
    };
    let (release_tx, release_rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(
        async move {
            let beside = store.beside();
            let run = session::run(&store, neg, release_rx);
            tokio::pin!(run);
            tokio::select! {
                r = &mut run => r,
                () = beside => run.await,
            }
        }
        .instrument(span),
    );
    LeaseHandle::new(rx, release_tx, task, issuance)
}

/// Publishes on `tx` whether anyone waits for a slot (see [`Session::demand`]), if it is news.
pub(crate) fn say(tx: &tokio::sync::watch::Sender<bool>, waiting: bool) {
    tx.send_if_modified(|w| std::mem::replace(w, waiting) != waiting);
}
