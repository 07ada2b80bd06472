//! The lease seam: who may issue IDs for which slot, and up to which time.
//!
//! A lease is a maintainer task that claims a slot, keeps its time mark ahead of the clock
//! and publishes what it holds on a `watch` channel as a [`LeaseState`]. The service follows
//! that channel and installs each [`Window`] in the generator. [`LeaseHandle::release`] hands
//! the task the highest tick issued so it can write the mark down before letting go.
//!
//! [`protocol`] is the one lease protocol — wait past the mark, write ahead by
//! compare-and-set, publish, renew, lapse, release — and the invariant it keeps, over a small
//! store seam ([`store::MarkStore`]). The stores, and how each hands out slots: [`local`]
//! (a static slot, its mark in a state file), [`zk`] (a slot negotiated in ZooKeeper, its
//! mark in a znode) and [`etcd`] (a slot negotiated in etcd, its mark in a key); the two that
//! negotiate share the loop of `holding`. [`stop`] ends any wait on the release request or a
//! session's end.

pub mod etcd;
pub(crate) mod holding;
pub mod local;
pub mod pace;
pub mod planted;
pub mod protocol;
pub mod runtime;
mod statefile;
pub mod stop;
pub mod store;
pub mod zk;

use crate::clock::Clock;
pub use crate::generator::{Issued, Window};
use crate::layout::Scheme;
use crate::metrics::Metrics;
use planted::PlantedBug;
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
}

impl LeaseHandle {
    pub(crate) fn new(
        state: watch::Receiver<LeaseState>,
        release: oneshot::Sender<Option<Issued>>,
        task: JoinHandle<Result<(), LeaseError>>,
    ) -> LeaseHandle {
        LeaseHandle {
            state,
            release,
            task,
        }
    }

    /// A receiver of every state change.
    pub fn subscribe(&self) -> watch::Receiver<LeaseState> {
        self.state.clone()
    }

    /// Lets the lease go: writes the mark down to the highest tick issued for the slot held
    /// (never below the floor it claimed) and ends the maintainer task.
    pub async fn release(self, highest_issued: Option<Issued>) -> Result<(), LeaseError> {
        // The task may have ended already (its error is then what `await` returns).
        let _ = self.release.send(highest_issued);
        self.task
            .await
            .map_err(|e| LeaseError::Task(e.to_string()))?
    }
}

/// The timings of a lease.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// How far ahead of the clock each written mark reaches.
    pub horizon: Duration,
    /// How often the mark is pushed forward.
    pub renew_every: Duration,
    /// How long to wait for the clock to pass a claimed slot's mark before giving up.
    pub max_clock_wait: Duration,
    /// Testing aid (cargo feature `fault-injection`, `--starve-renewals`; ignored in other
    /// builds): every mark write is held back this long after its mark was chosen, as on a
    /// starved renewal path.
    pub starve: Duration,
}

/// What every lease shares: layout, clock, timings, metrics and the channel the lease is
/// published on.
pub struct Protocol {
    pub scheme: Scheme,
    pub clock: Arc<dyn Clock>,
    pub metrics: Arc<Metrics>,
    pub timing: Timing,
    pub tx: watch::Sender<LeaseState>,
    /// Testing aid (cargo feature `fault-injection`): a deliberate bug for the campaign.
    pub planted: PlantedBug,
}

impl Protocol {
    /// A protocol context and the receiver of what it publishes, starting as "pending" for
    /// `reason`.
    pub fn new(
        scheme: Scheme,
        clock: Arc<dyn Clock>,
        metrics: Arc<Metrics>,
        timing: Timing,
        planted: PlantedBug,
        reason: &str,
    ) -> (Protocol, watch::Receiver<LeaseState>) {
        let (tx, rx) = watch::channel(LeaseState::Pending {
            reason: reason.into(),
        });
        let p = Protocol {
            scheme,
            clock,
            metrics,
            timing,
            tx,
            planted,
        };
        (p, rx)
    }

    pub fn now_tick(&self) -> u64 {
        self.scheme.now_tick(&*self.clock)
    }

    /// How long until the clock is past `mark`.
    pub fn wait_past(&self, mark: u64) -> Duration {
        self.scheme.wait_past(mark, self.clock.now_unix_ns())
    }

    /// Publishes "no lease yet", with why.
    pub fn pending(&self, reason: impl Into<String>) {
        self.tx.send_replace(LeaseState::Pending {
            reason: reason.into(),
        });
    }

    /// Publishes a failure for good, and returns it.
    pub fn fail(&self, e: LeaseError) -> LeaseError {
        self.tx.send_replace(LeaseState::Failed {
            reason: e.to_string(),
        });
        e
    }

    /// The testing aid [`Timing::starve`]: zero unless built with `fault-injection`.
    pub(crate) fn starve(&self) -> Duration {
        #[cfg(feature = "fault-injection")]
        return self.timing.starve;
        #[cfg(not(feature = "fault-injection"))]
        Duration::ZERO
    }

    pub(crate) fn planted(&self) -> PlantedBug {
        #[cfg(feature = "fault-injection")]
        return self.planted;
        #[cfg(not(feature = "fault-injection"))]
        PlantedBug::None
    }
}
