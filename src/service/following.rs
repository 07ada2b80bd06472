//! Following the leases: each change in what a lease may issue is installed in its generator
//! and logged as a lease record (`lease_record = "issuing"` with slot, floor and generation,
//! before the window is installed; `"stopped"` with the reason, after it is removed), so a log
//! bounds in time every ID the process issued for each slot: the fault campaign's checker
//! attributes IDs with it.

use super::issuing::Issuing;
use crate::generator::Window;
use crate::lease::{Issuance, LeaseState};
use tokio::sync::watch;

/// What each lease publishes, in the order of the generators.
#[derive(Debug)]
pub(super) struct Following {
    leases: Vec<watch::Receiver<LeaseState>>,
}

impl Following {
    pub(super) fn new(leases: Vec<watch::Receiver<LeaseState>>) -> Following {
        assert!(!leases.is_empty(), "a service needs a lease");
        Following { leases }
    }

    /// What each lease holds now, in order.
    pub(super) fn windows(&self) -> impl Iterator<Item = Option<Window>> + '_ {
        self.leases.iter().map(|l| l.borrow().window())
    }

    pub(super) fn len(&self) -> usize {
        self.leases.len()
    }

    /// Why the lease holds nothing now, in the lease's words (with `--slots`, every lease's).
    pub(super) fn reason(&self) -> String {
        let reason = |rx: &watch::Receiver<LeaseState>| rx.borrow().reason().map(str::to_string);
        match self.leases.as_slice() {
            [one] => reason(one).unwrap_or_else(|| "no lease".into()),
            all => {
                let mut why: Vec<String> = Vec::new();
                for r in all.iter().filter_map(reason) {
                    if !why.contains(&r) {
                        why.push(r);
                    }
                }
                format!("no slot is held (of {}): {}", all.len(), why.join("; "))
            }
        }
    }

    /// Installs each change of lease `part` in its generator until its channel closes, saying
    /// to `told` what is installed and issued.
    pub(super) async fn follow(&self, issuing: &Issuing, part: usize, told: &Issuance) {
        let mut rx = self.leases[part].clone();
        let mut was: Option<Window> = None;
        loop {
            let state = rx.borrow_and_update().clone();
            let window = state.window();
            let same = |a: Option<Window>, b: Option<Window>| match (a, b) {
                (Some(a), Some(b)) => a.slot == b.slot && a.generation == b.generation,
                _ => false,
            };
            let changed = !same(was, window);
            if let Some(w) = window.filter(|_| changed) {
                tracing::info!(
                    lease_record = "issuing",
                    part,
                    slot = w.slot,
                    floor = w.floor,
                    mark = w.mark,
                    generation = w.generation,
                    "issuing IDs under the lease"
                );
            }
            issuing.install(part, window, told);
            if let Some(a) = was.filter(|_| changed) {
                tracing::info!(
                    lease_record = "stopped",
                    part,
                    slot = a.slot,
                    generation = a.generation,
                    reason = state.reason().unwrap_or("another lease"),
                    "stopped issuing IDs"
                );
            }
            was = window;
            let held: Vec<u32> = issuing.windows().iter().flatten().map(|w| w.slot).collect();
            let m = &issuing.metrics;
            m.lease.held.set(i64::from(!held.is_empty()));
            m.slots_held.set(held.len() as i64);
            let lowest = held.iter().min().map_or(-1, |s| i64::from(*s));
            m.lease.slot.set(lowest);
            if rx.changed().await.is_err() {
                return;
            }
        }
    }
}
