//! The ID service: the generator, the clock, the lease it follows, and the waits between ticks,
//! in four parts a reader can take one at a time — [`issuing`] (the generators and the lane:
//! the hot path), [`following`] (lease changes installed in the generators, and the lease
//! records in the log), [`readiness`] (whether an ID can be issued now) and [`reporting`]
//! (the gauges read when scraped) — built together, in one step, by [`Service::new`].
//!
//! Both socket interfaces call [`Service::issue`] (or [`Service::issue_blocking`]). The
//! generator is held under a std mutex only while runs are taken and packed (no await, no
//! sleep, no log line under the lock).
//!
//! **Two paths.** While no request is waiting for a tick, a request takes its IDs straight
//! under that short lock: many threads asking at once cost a few uncontended atomics each,
//! never a sleep or a hand-over between threads. A request that finds the tick's sequence
//! spent joins the *lane* (FIFO) and waits there for the next tick on the precise [`Timer`],
//! bounded by the request timeout; while anyone is in the lane, newcomers queue behind it, so
//! waits are shared out in arrival order instead of won by races (docs/benchmarks.md).

mod following;
mod install;
mod issuing;
mod readiness;
mod reporting;

use crate::clock::{Clock, ClockFaults};
use crate::generator::{Issued, Refusal};
use crate::layout::{Layout, RequestOptions};
use crate::lease::LeaseState;
use crate::metrics::Metrics;
use following::Following;
use issuing::Issuing;
use readiness::Readiness;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// Per-request limits.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The most IDs one request may ask for.
    pub max_batch: u32,
    /// The longest a request may wait for sequence numbers before it is refused.
    pub max_wait: Duration,
}

/// Why a request got no IDs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IssueError {
    #[error("count must be between 1 and {max}, got {count}")]
    BadCount { count: u64, max: u32 },
    #[error("{0}")]
    BadOption(crate::layout::LayoutError),
    /// No lease: with the lease's own reason (claiming, pool exhausted, mark reached, ...).
    #[error("no lease is held: {0}")]
    NoLease(String),
    #[error("{0}")]
    Refused(#[from] Refusal),
    #[error("timed out after {0:?} waiting for sequence numbers")]
    TimedOut(Duration),
}

impl IssueError {
    /// Whether retrying later may succeed (HTTP 503) rather than never (HTTP 400).
    pub fn is_unavailable(&self) -> bool {
        !matches!(self, IssueError::BadCount { .. } | IssueError::BadOption(_))
    }
}

/// What an instance says about itself beyond its IDs: for describe requests and `/readyz`.
#[derive(Clone, Debug, Default)]
pub struct Describe {
    /// What shapes the layout's IDs (flag name without dashes, value).
    pub params: Vec<(String, String)>,
    /// What this instance issues for, when it is not negotiated (a static generator): said by
    /// `/readyz` under its first line.
    pub issues_for: Option<String>,
}

/// Everything a request handler needs.
#[derive(Debug)]
pub struct Service {
    issuing: Issuing,
    leases: Following,
    readiness: Readiness,
    describe: Describe,
    /// The slots `idcar_lease_slot_remaining_seconds` shows (stale ones are removed).
    shown: Mutex<Vec<u32>>,
}

impl Service {
    /// A service issuing under every lease of `leases` (one slot each, `--slots`): requests
    /// are spread over the slots held (see [`Service::issue`]).
    pub fn new(
        layout: Box<dyn Layout>,
        clock: Arc<dyn Clock>,
        metrics: Arc<Metrics>,
        leases: Vec<watch::Receiver<LeaseState>>,
        limits: Limits,
        describe: Describe,
    ) -> std::io::Result<Arc<Service>> {
        let leases = Following::new(leases);
        metrics.slots_wanted.set(leases.len() as i64);
        let issuing = Issuing::new(layout, clock, metrics, leases.windows(), limits)?;
        Ok(Arc::new(Service {
            issuing,
            leases,
            readiness: Readiness::default(),
            describe,
            shown: Mutex::new(Vec::new()),
        }))
    }

    pub fn layout(&self) -> &dyn Layout {
        &*self.issuing.layout
    }

    pub fn metrics(&self) -> &Metrics {
        &self.issuing.metrics
    }

    pub fn metrics_arc(&self) -> Arc<Metrics> {
        self.issuing.metrics.clone()
    }

    pub fn limits(&self) -> Limits {
        self.issuing.limits
    }

    /// What this instance issues for, when it is not negotiated (a static generator).
    pub fn issues_for(&self) -> Option<&str> {
        self.describe.issues_for.as_deref()
    }

    /// The parameters that shape the layout's IDs (flag name without dashes, value).
    pub fn params(&self) -> &[(String, String)] {
        &self.describe.params
    }

    /// Where a clock watchdog reports stalled clocks; readiness follows it.
    pub fn clock_faults(&self) -> Arc<ClockFaults> {
        self.readiness.clock_faults.clone()
    }

    /// Installs each lease change in its generator until the lease channels close (see
    /// [`install`]), saying to each lease's `issuances` (in the leases' order; missing ones
    /// are told nothing) what is installed and issued.
    pub async fn follow_lease(self: Arc<Self>, issuances: Vec<crate::lease::Issuance>) {
        let mut parts = tokio::task::JoinSet::new();
        for part in 0..self.issuing.parts() {
            let svc = self.clone();
            let told = issuances.get(part).cloned().unwrap_or_default();
            parts.spawn(
                async move { install::follow(&svc.leases, &svc.issuing, part, &told).await },
            );
        }
        // Dropping the set (this task aborted) aborts every part's follower.
        while parts.join_next().await.is_some() {}
    }

    /// Stops issuing and returns, per lease, the highest tick issued with its slot.
    ///
    /// Permanent: a lease change arriving afterwards cannot re-open a generator, so each
    /// returned tick bounds every ID this process issued under that lease's slot.
    pub fn close(&self) -> Vec<Option<Issued>> {
        self.readiness.drain();
        self.issuing.close()
    }

    /// Marks the service as shutting down: readiness turns false at once.
    pub fn drain(&self) {
        self.readiness.drain();
    }

    /// Whether an ID can be issued at this moment (see [`readiness`]).
    pub fn ready(&self) -> Result<(), String> {
        self.readiness.ready(&self.issuing, &self.leases)
    }

    /// Appends `count` IDs in binary form to `out`, waiting for ticks as needed.
    ///
    /// A transaction (`opts.transaction`) takes a single `(tick, sequence)` for the whole
    /// request and the layout packs all `count` IDs from it.
    pub async fn issue(
        &self,
        count: u64,
        opts: &RequestOptions,
        out: &mut Vec<u8>,
    ) -> Result<(), IssueError> {
        self.issuing.issue(count, opts, out, &self.leases).await
    }

    /// [`Service::issue`] for a blocking thread (the binary protocol's connections): the same
    /// lane, generator and deadlines; tick waits sleep the thread. `rt` serves only a wait for
    /// the lane while another request holds it.
    pub fn issue_blocking(
        &self,
        count: u64,
        opts: &RequestOptions,
        out: &mut Vec<u8>,
        rt: &tokio::runtime::Handle,
    ) -> Result<(), IssueError> {
        self.issuing
            .issue_blocking(count, opts, out, rt, &self.leases)
    }
}

#[cfg(test)]
mod tests;
