//! What the rest of a program sees of a lease: its state on a `watch` channel
//! ([`LeaseState`]), how it ends ([`LeaseError`]), its handle ([`LeaseHandle`]) and an
//! instance's leases together ([`Leases`]).

use crate::issuance::Issuance;
use idcar_core::generator::{Issued, Window};
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
