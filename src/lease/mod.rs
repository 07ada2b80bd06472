//! The lease seam: who may issue IDs for which slot, and up to which time.
//!
//! A lease is a maintainer task that claims a slot, keeps its time mark ahead of the clock
//! and publishes what it holds on a `watch` channel as a [`LeaseState`]. The service follows
//! that channel and installs each [`Window`] in the generator. [`LeaseHandle::release`] hands
//! the task the highest tick issued so it can write the mark down before letting go.
//!
//! Implementations: [`local`] (a static slot with its mark in a state file) and [`zk`] (a slot
//! negotiated in ZooKeeper, its mark in a znode).

/// The mark to write on release: the highest tick issued for `slot`, never below `floor`.
pub(crate) fn mark_down(slot: u32, floor: u64, highest: Option<Issued>) -> u64 {
    match highest {
        Some(h) if h.slot == slot => h.tick.max(floor),
        _ => floor,
    }
}

pub mod local;
pub mod planted;
pub mod runtime;
mod statefile;
pub mod zk;

pub use crate::generator::{Issued, Window};
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
