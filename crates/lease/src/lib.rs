//! idcar's lease: who may issue IDs for which slot, and up to which time.
//!
//! From outside, a program names the store its pool lives in once, as a [`StoreSpec`]
//! (features `zk`, `etcd`), and starts leases in it ([`StoreSpec::start`]) or reads the pool's
//! report ([`StoreSpec::report`]); a static slot is [`local::start`]. Every lease's metrics
//! are [`metrics::LeaseMetrics`], registered in the registry the program exports.
//!
//! A lease is a maintainer task that claims a slot, keeps its time mark ahead of the clock
//! and publishes what it holds on a `watch` channel as a [`LeaseState`]. The service follows
//! that channel and installs each [`Window`] in the generator. [`LeaseHandle::release`] hands
//! the task the highest tick issued so it can write the mark down before letting go.
//!
//! Two seams, each with one implementation of what is done over it:
//!
//! - [`protocol`] is the one lease protocol — wait past the mark, write ahead by
//!   compare-and-set, publish, renew, lapse, release — and the invariant it keeps, over the
//!   mark seam ([`store::MarkStore`]);
//! - [`pool`] is the one negotiation of a slot — session loop, parameter agreement, queue,
//!   claim, hold, claim again — over the seam of a coordinating store ([`pool::Store`],
//!   [`pool::Session`]).
//!
//! The stores: [`local`] (a static slot, its mark in a state file: a `MarkStore` only),
//! [`zk`] (ZooKeeper: marks in znodes, slots negotiated in a session) and [`etcd`] (etcd:
//! marks in keys, slots negotiated under an etcd lease); [`tls`] is the certificate and
//! credential files both negotiating stores read. [`stop`] ends any wait on the release
//! request or a session's end. Testing aids (planted bugs, starved renewals) act only in
//! builds with the feature `fault-injection`.

#![forbid(unsafe_code)]
// The negotiation's seam is filled by the stores behind features: built with none (the protocol
// and the state-file store alone), its parts are compiled and unit-tested but not called.
#![cfg_attr(not(any(feature = "zk", feature = "etcd")), allow(dead_code))]

#[cfg(feature = "etcd")]
pub mod etcd;
pub mod identity;
pub mod issuance;
pub mod local;
pub mod metrics;
pub mod pace;
pub mod planted;
pub mod pool;
pub mod protocol;
pub mod repeated;
pub mod retry;
pub mod runtime;
#[cfg(any(feature = "zk", feature = "etcd"))]
pub mod spec;
mod statefile;
pub mod stop;
pub mod store;
#[cfg(feature = "tls")]
pub mod tls;
#[cfg(feature = "zk")]
pub mod zk;

pub use issuance::{Issuance, Left, LeftBehind};
pub use protocol::Protocol;
#[cfg(any(feature = "zk", feature = "etcd"))]
pub use spec::{ReportError, StoreSpec};

pub use idcar_core::generator::{Issued, Window};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

/// What a lease holds right now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaseState {
    /// No usable lease yet: claiming, or waiting for the clock to pass the slot's mark.
    Pending { reason: String },
    /// A slot is held and IDs may be issued with ticks in `(floor, mark]`.
    Held(Window),
    /// The lease was lost; the maintainer is trying to claim again.
    Lost { reason: String },
    /// The lease cannot be held and will not be tried again (the process should exit).
    Failed { reason: String },
    /// Released on shutdown.
    Released,
}

impl LeaseState {
    pub fn window(&self) -> Option<Window> {
        match self {
            LeaseState::Held(w) => Some(*w),
            _ => None,
        }
    }

    /// A short human reason for not being ready, or `None` when held.
    pub fn reason(&self) -> Option<&str> {
        match self {
            LeaseState::Pending { reason }
            | LeaseState::Lost { reason }
            | LeaseState::Failed { reason } => Some(reason),
            LeaseState::Held(_) => None,
            LeaseState::Released => Some("lease released (shutting down)"),
        }
    }
}

/// Errors that stop a lease from being taken at all.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("state file {path}: {why}")]
    StateFile { path: String, why: String },
    #[error(
        "the stored time mark for {key} is {ahead:?} ahead of this host's clock, more than \
         the {max:?} allowed by --max-clock-wait; the clock may have been set back. Fix the \
         clock or raise --max-clock-wait"
    )]
    ClockBehind {
        key: String,
        ahead: std::time::Duration,
        max: std::time::Duration,
    },
    #[error("lease task failed: {0}")]
    Task(String),
}

/// The owner's side of a running lease.
#[derive(Debug)]
pub struct LeaseHandle {
    state: watch::Receiver<LeaseState>,
    release: oneshot::Sender<Option<Issued>>,
    task: JoinHandle<Result<(), LeaseError>>,
    /// Where the service says what it issued under this lease.
    issuance: Issuance,
}

impl LeaseHandle {
    pub(crate) fn new(
        state: watch::Receiver<LeaseState>,
        release: oneshot::Sender<Option<Issued>>,
        task: JoinHandle<Result<(), LeaseError>>,
        issuance: Issuance,
    ) -> LeaseHandle {
        LeaseHandle {
            state,
            release,
            task,
            issuance,
        }
    }

    /// Where the service's follower of this lease says what it installed and issued.
    pub fn issuance(&self) -> Issuance {
        self.issuance.clone()
    }

    /// A receiver of every state change.
    pub fn subscribe(&self) -> watch::Receiver<LeaseState> {
        self.state.clone()
    }

    /// Lets the lease go: writes the mark down to the highest tick issued for the slot held
    /// (never below the floor it claimed) and ends the maintainer task. The request is sent
    /// when this is called, not when the returned future is first polled: a caller that gives
    /// up waiting (a release timeout) can never leave the lease without the highest tick.
    pub fn release(
        self,
        highest_issued: Option<Issued>,
    ) -> impl std::future::Future<Output = Result<(), LeaseError>> {
        // The task may have ended already (its error is then what `await` returns).
        let _ = self.release.send(highest_issued);
        let task = self.task;
        async move { task.await.map_err(|e| LeaseError::Task(e.to_string()))? }
    }
}

/// The reason a lease publishes when it gives its slot back to an instance holding none
/// (`--slots`): a deliberate hand-over, not a loss.
pub const GAVE_BACK: &str = "gave a slot back to an instance holding none; trying again later";

/// An instance's leases: one per slot it holds at once (`--slots`), each its own
/// [`LeaseHandle`], in the order of their [`Part`]s.
#[derive(Debug)]
pub struct Leases(Vec<LeaseHandle>);

impl Leases {
    pub fn new(leases: Vec<LeaseHandle>) -> Leases {
        Leases(leases)
    }

    /// A receiver of every state change of each lease.
    pub fn subscribe(&self) -> Vec<watch::Receiver<LeaseState>> {
        self.0.iter().map(LeaseHandle::subscribe).collect()
    }

    /// Where the service says what it issued under each lease (see [`Issuance`]).
    pub fn issuances(&self) -> Vec<Issuance> {
        self.0.iter().map(LeaseHandle::issuance).collect()
    }

    /// Waits until a lease fails for good (or its task ends): its reason.
    pub async fn failed(&self) -> String {
        let mut waits = tokio::task::JoinSet::new();
        for mut rx in self.subscribe() {
            waits.spawn(async move {
                let r = rx
                    .wait_for(|s| matches!(s, LeaseState::Failed { .. }))
                    .await;
                r.map(|s| s.reason().unwrap_or_default().to_string())
                    .unwrap_or_default()
            });
        }
        match waits.join_next().await {
            Some(r) => r.unwrap_or_default(),
            None => std::future::pending().await,
        }
    }

    /// Releases every lease at once, each with the highest tick issued under it (see
    /// [`LeaseHandle::release`]; every request is sent when this is called): the first error,
    /// if any.
    pub fn release(
        self,
        highest: Vec<Option<Issued>>,
    ) -> impl std::future::Future<Output = Result<(), LeaseError>> {
        let waits: Vec<_> = self
            .0
            .into_iter()
            .zip(highest)
            .map(|(lease, h)| lease.release(h))
            .collect();
        // The leases release at once on their own thread; waiting for them in turn.
        async move {
            let mut first = Ok(());
            for w in waits {
                let r = w.await;
                if first.is_ok() {
                    first = r;
                }
            }
            first
        }
    }
}

/// The timings of a lease.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// How far ahead of the clock the generator's window reaches, and the mark while someone
    /// waits for a slot (`--lease-horizon`).
    pub horizon: Duration,
    /// How far ahead of the clock the mark reaches while no one waits (`--idle-horizon`; at or
    /// below `horizon`, the mark always follows the window).
    pub idle_horizon: Duration,
    /// How often the mark is pushed forward.
    pub renew_every: Duration,
    /// How long to wait for the clock to pass a claimed slot's mark before giving up.
    pub max_clock_wait: Duration,
    /// Testing aid (cargo feature `fault-injection`, `--starve-renewals`; ignored in other
    /// builds): every mark write is held back this long after its mark was chosen, as on a
    /// starved renewal path.
    pub starve: Duration,
}

/// Which of an instance's leases this is: with `--slots K` an instance runs K leases, each
/// claiming, fencing, renewing and releasing one slot exactly as a lone lease does.
#[derive(Clone, Debug)]
pub struct Part {
    /// 0..`of`.
    pub index: u32,
    /// How many slots the instance holds at once.
    pub of: u32,
    /// Shared by the instance's parts: a slot lost by one may be claimed by another.
    pub written: Written,
    /// The parts holding a slot now (bit per index), shared by the instance's parts.
    holding: Arc<AtomicU64>,
    /// Woken when a part takes a slot (a waiting sibling may have become a spare).
    took: Arc<tokio::sync::Notify>,
    /// Random per instance, shared by its parts: in owner records with `--slots` above 1.
    pub process: Arc<str>,
    /// This part's own: what the service issued under its windows.
    pub issuance: Issuance,
    /// Shared by the instance's parts: what their holds left when their sessions ended, for a
    /// claim back by any of them.
    pub left: LeftBehind,
    /// Shared by the instance's parts: while it holds no slot, one part claims at a time.
    first: Arc<tokio::sync::Mutex<()>>,
    /// Whether every slot of the pool is held, as the instance's pool gauges last saw it
    /// (shared by its parts): holders then keep their marks within twice the horizon.
    pub full: Arc<watch::Sender<bool>>,
}

impl Default for Part {
    fn default() -> Part {
        Part::all(1).next().expect("one part")
    }
}

/// The highest mark this process wrote per slot whose lease was lost to a foreign write: a
/// new claim of that slot, by any of the instance's leases, starts above it.
#[derive(Clone, Debug, Default)]
pub struct Written(Arc<std::sync::Mutex<std::collections::BTreeMap<u32, u64>>>);

impl Written {
    fn map(&self) -> std::sync::MutexGuard<'_, std::collections::BTreeMap<u32, u64>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remembers that `mark` was written for `slot` (never lowers what is remembered).
    pub fn raise(&self, slot: u32, mark: u64) {
        let mut m = self.map();
        let w = m.entry(slot).or_default();
        *w = (*w).max(mark);
    }

    /// The highest mark remembered for `slot`.
    pub fn get(&self, slot: u32) -> Option<u64> {
        self.map().get(&slot).copied()
    }
}

impl Part {
    /// The instance's `of` parts, sharing what they remember of foreign writes and which of
    /// them hold a slot.
    pub fn all(of: u32) -> impl Iterator<Item = Part> {
        let written = Written::default();
        let holding = Arc::new(AtomicU64::new(0));
        let took = Arc::new(tokio::sync::Notify::new());
        let process: Arc<str> = pool::tree::instance_id().into();
        let full = Arc::new(watch::channel(false).0);
        let left = LeftBehind::default();
        let first = Arc::new(tokio::sync::Mutex::new(()));
        (0..of).map(move |index| Part {
            index,
            of,
            written: written.clone(),
            holding: holding.clone(),
            took: took.clone(),
            process: process.clone(),
            issuance: Issuance::default(),
            left: left.clone(),
            first: first.clone(),
            full: full.clone(),
        })
    }

    fn bit(&self) -> u64 {
        1 << (self.index % 64)
    }

    /// Says whether this part holds a slot (claimed, until its hold ends).
    pub(crate) fn set_holding(&self, holding: bool) {
        if holding {
            self.holding.fetch_or(self.bit(), Ordering::AcqRel);
            self.took.notify_waiters();
        } else {
            self.holding.fetch_and(!self.bit(), Ordering::AcqRel);
        }
    }

    /// Whether this part gives its slot back when an instance holding none waits for one: it
    /// holds a slot, another part of the instance does too, and it is the last of them (one
    /// part gives back at a time, and the instance keeps a slot).
    pub(crate) fn is_surplus(&self) -> bool {
        let h = self.holding.load(Ordering::Acquire);
        h & self.bit() != 0 && h & !self.bit() != 0 && h >> (self.index % 64) == 1
    }

    /// Returns once this part is a spare (at once if it is one now).
    pub(crate) async fn became_spare(&self) {
        loop {
            let took = self.took.notified();
            tokio::pin!(took);
            took.as_mut().enable();
            if self.is_spare() {
                return;
            }
            took.await;
        }
    }

    /// Waits until this part may claim as the instance's first: no other part of it claims
    /// while it holds no slot (its parts would take several slots of a pool where other
    /// instances then hold none; the one that takes a slot makes the others spares). `None`
    /// once this part is a spare (a sibling took a slot meanwhile): it claims as one.
    pub(crate) async fn claim_first(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        if self.of == 1 || self.is_spare() {
            return None;
        }
        tokio::select! {
            guard = self.first.lock() => (!self.is_spare()).then_some(guard),
            () = self.became_spare() => None,
        }
    }

    /// How many of the instance's parts hold a slot now.
    pub(crate) fn holding_count(&self) -> u32 {
        self.holding.load(Ordering::Acquire).count_ones()
    }

    /// Whether another part of the instance holds a slot now: this one is then a spare that
    /// gives way to instances holding none when the pool is exhausted.
    pub(crate) fn is_spare(&self) -> bool {
        self.holding.load(Ordering::Acquire) & !self.bit() != 0
    }

    /// The slot this part prefers, given the slot the instance prefers first: the one
    /// `index` after it, if that is still in a pool of `pool`.
    pub fn prefer(&self, first: Option<u32>, pool: u32) -> Option<u32> {
        first
            .and_then(|f| f.checked_add(self.index))
            .filter(|s| *s < pool)
    }

    /// The first generation this part publishes: the parts of one process never publish
    /// the same generation, so one process's lease records tell its leases apart.
    pub fn first_generation(&self) -> u64 {
        u64::from(self.index) << 40
    }
}

#[cfg(test)]
mod tests {
    use super::Part;

    #[test]
    fn an_instances_parts_share_foreign_writes_and_know_their_siblings() {
        let parts: Vec<Part> = Part::all(3).collect();
        // Part 0 lost slot 5 to a foreign write after writing mark 900: part 2, claiming
        // slot 5 later, starts above it.
        parts[0].written.raise(5, 900);
        parts[0].written.raise(5, 700);
        assert_eq!(parts[2].written.get(5), Some(900));
        assert_eq!(parts[2].written.get(6), None);
        // Another instance shares nothing.
        assert_eq!(Part::default().written.get(5), None);

        assert!(!parts[1].is_spare(), "no part holds a slot yet");
        parts[0].set_holding(true);
        assert!(
            !parts[0].is_spare(),
            "its own slot does not make a part a spare"
        );
        assert!(parts[1].is_spare() && parts[2].is_spare());
        assert_eq!(parts[2].holding_count(), 1);
        parts[0].set_holding(false);
        assert!(!parts[1].is_spare());
        assert_eq!(parts[0].prefer(Some(62), 64), Some(62));
        assert_eq!(
            parts[2].prefer(Some(62), 64),
            None,
            "past the pool: no preference"
        );
        assert_eq!(parts[2].prefer(Some(u32::MAX), u32::MAX), None);
        assert_ne!(parts[1].first_generation(), parts[2].first_generation());
        assert_eq!(parts[0].process, parts[2].process);
        assert_ne!(parts[0].process, Part::default().process);
    }

    #[test]
    fn a_spare_gives_way_only_to_instances_holding_none() {
        use super::pool::spare::spare_may_take;
        use super::pool::tree::Owner;
        let owner = |process: Option<&str>, spare: bool| {
            let mut o = Owner::for_this_process("s".into(), "i", None, &Part::default(), 0);
            o.process = process.map(str::to_string);
            o.spare = spare.then_some(true);
            Some(o)
        };
        let parts: Vec<Part> = Part::all(2).collect();
        let behind = [
            owner(None, false),
            owner(Some("p"), false),
            owner(Some("p"), false),
        ];
        // Not a spare: always takes.
        assert!(spare_may_take(&parts[1], 1, &behind));
        parts[0].set_holding(true);
        // Two instances holding none behind (one of one slot, one of several): two free
        // slots are not enough to take one, three are.
        assert!(!spare_may_take(&parts[1], 2, &behind));
        assert!(spare_may_take(&parts[1], 3, &behind));
        // Other hot instances' spares, and unreadable records, are no reason... except an
        // unreadable record counts as one instance holding none.
        let spares = [owner(Some("q"), true), owner(Some("r"), true)];
        assert!(spare_may_take(&parts[1], 1, &spares));
        assert!(!spare_may_take(&parts[1], 1, &[None]));
        assert!(spare_may_take(&parts[1], 1, &[]));
        // Its own instance's other parts behind it do not count, spare-marked or not.
        let own = Owner::for_this_process("s".into(), "i", None, &parts[0], 0);
        assert!(spare_may_take(
            &parts[1],
            1,
            &[Some(own.clone()), Some(own)]
        ));
    }

    #[test]
    fn a_slot_is_given_back_once_the_same_hungry_head_is_seen_twice() {
        use super::pool::spare::give_back_now;
        use super::pool::tree::Owner;
        let parts: Vec<Part> = Part::all(3).collect();
        let hungry = |key: &str| {
            let o = Owner::for_this_process("s".into(), "i", None, &Part::default(), 0);
            Some((key.to_string(), Some(o)))
        };
        let mut seen = None;
        // Only part 0 holds: nothing is surplus.
        parts[0].set_holding(true);
        assert!(!parts[0].is_surplus());
        assert!(!give_back_now(&parts[0], true, hungry("a"), &mut seen));
        assert!(!give_back_now(&parts[0], true, hungry("a"), &mut seen));
        // Parts 0 and 2 hold: 2 (the last) is surplus, 0 is not.
        parts[2].set_holding(true);
        assert!(parts[2].is_surplus() && !parts[0].is_surplus());
        let mut seen = None;
        assert!(
            !give_back_now(&parts[2], true, hungry("a"), &mut seen),
            "seen once"
        );
        assert!(
            give_back_now(&parts[2], true, hungry("a"), &mut seen),
            "seen twice"
        );
        // Another head, a pool with room, or a head that is a spare: not yet.
        let mut seen = None;
        assert!(!give_back_now(&parts[2], true, hungry("a"), &mut seen));
        assert!(!give_back_now(&parts[2], true, hungry("b"), &mut seen));
        assert!(!give_back_now(&parts[2], false, hungry("b"), &mut seen));
        assert!(!give_back_now(&parts[2], true, hungry("b"), &mut seen));
        let mut spare = Owner::for_this_process("s".into(), "i", None, &Part::default(), 0);
        spare.spare = Some(true);
        let mut seen = None;
        for _ in 0..3 {
            let head = Some(("c".to_string(), Some(spare.clone())));
            assert!(!give_back_now(&parts[2], true, head, &mut seen));
        }
        // Our own instance's waiter at the head is no reason either.
        let mut own = Owner::for_this_process("s".into(), "i", None, &parts[1], 0);
        own.spare = None;
        let mut seen = None;
        for _ in 0..3 {
            let head = Some(("d".to_string(), Some(own.clone())));
            assert!(!give_back_now(&parts[2], true, head, &mut seen));
        }
    }
}
