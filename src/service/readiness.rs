//! Readiness: whether an ID can be issued at this moment — a valid lease is held, the wall
//! clock is inside its window, the generator has room, the clocks are sane and the service is
//! not shutting down (not merely "a lease was published").

use super::following::Following;
use super::issuing::Issuing;
use crate::clock::ClockFaults;
use crate::generator::Refusal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(Debug, Default)]
pub(super) struct Readiness {
    /// Set once shutdown begins: readiness is false from then on.
    draining: AtomicBool,
    /// Clocks found stalled (set by [`crate::clock::watch_clocks`] where one runs).
    pub(super) clock_faults: Arc<ClockFaults>,
}

impl Readiness {
    pub(super) fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    pub(super) fn ready(&self, issuing: &Issuing, leases: &Following) -> Result<(), String> {
        if self.draining.load(Ordering::SeqCst) {
            return Err("shutting down".into());
        }
        if let Some(why) = self.clock_faults.fault() {
            return Err(why.into());
        }
        let now = issuing.now_tick();
        let mut refused = None;
        for part in 0..issuing.parts() {
            match issuing.can_issue(part, now) {
                Ok(()) => return Ok(()),
                Err(Refusal::NoLease) => {}
                Err(r) => refused = refused.or(Some(r)),
            }
        }
        match refused {
            Some(r) => Err(r.to_string()),
            None => Err(leases.reason()),
        }
    }
}
