//! The lease's context: what every lease shares (layout, clock, timings, metrics, its part)
//! and the channel its states are published on, which only the protocol writes.

use crate::handle::{LeaseError, LeaseState};
use crate::issuance::Left;
use crate::metrics::LeaseMetrics;
use crate::part::Part;
use crate::planted::PlantedBug;
use crate::timing::Timing;
use idcar_core::clock::Clock;
use idcar_core::generator::Window;
use idcar_core::layout::Scheme;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// What every lease shares: layout, clock, timings, metrics and the channel the lease is
/// published on.
pub struct Protocol {
    pub scheme: Scheme,
    pub clock: Arc<dyn Clock>,
    pub metrics: Arc<LeaseMetrics>,
    pub timing: Timing,
    /// Only the protocol publishes lease states: through [`Protocol::pending`],
    /// [`Protocol::lost`], [`Protocol::released`], [`Protocol::fail`] and its own hold loop.
    tx: watch::Sender<LeaseState>,
    /// Testing aid (cargo feature `fault-injection`): a deliberate bug for the campaign.
    pub planted: PlantedBug,
    /// Which of the instance's leases this is.
    pub part: Part,
}

impl Protocol {
    /// A protocol context and the receiver of what it publishes, starting as "pending" for
    /// `reason`.
    pub fn new(
        scheme: Scheme,
        clock: Arc<dyn Clock>,
        metrics: Arc<LeaseMetrics>,
        timing: Timing,
        planted: PlantedBug,
        part: Part,
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
            part,
        };
        (p, rx)
    }

    pub fn now_tick(&self) -> u64 {
        self.scheme.tick_at(self.clock.now_unix_ns()).unwrap_or(0)
    }

    /// The tick one `--lease-horizon` past the clock now.
    pub fn horizon_ahead(&self) -> u64 {
        self.now_tick()
            .saturating_add(self.scheme.ticks_in(self.timing.horizon))
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

    /// Publishes that the lease was lost and is being claimed again, with why.
    pub fn lost(&self, reason: impl Into<String>) {
        self.tx.send_replace(LeaseState::Lost {
            reason: reason.into(),
        });
    }

    /// Publishes a window: only after a write of its mark succeeded.
    pub(super) fn held(&self, window: Window) {
        self.tx.send_replace(LeaseState::Held(window));
    }

    /// Publishes that the lease was released on the owner's request.
    pub fn released(&self) {
        self.tx.send_replace(LeaseState::Released);
    }

    /// Publishes a failure for good, and returns it.
    pub fn fail(&self, e: LeaseError) -> LeaseError {
        self.tx.send_replace(LeaseState::Failed {
            reason: e.to_string(),
        });
        e
    }

    /// Remembers what a hold left behind, for a claim back by any of the instance's leases
    /// (see [`super::again`]).
    pub(super) fn leave(&self, left: Left) {
        let part = &self.part;
        part.left.leave(part.index, left, part.issuance.clone());
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

    /// Whether mark writes keep their witness (a store's marks ask): always, but under the
    /// planted `no-write-back`.
    pub(crate) fn keeps_witness(&self) -> bool {
        self.planted() != PlantedBug::NoWriteBack
    }
}
