//! Each change in what a lease may issue installed in its generator and logged as a lease
//! record (`lease_record = "issuing"` with slot, floor and generation, before the window is
//! installed; `"stopped"` with the reason, after it is removed), so a log bounds in time every
//! ID the process issued for each slot: the fault campaign's checker attributes IDs with it.

use super::following::Following;
use super::issuing::Issuing;
use crate::generator::Window;
use crate::lease::Issuance;

/// Installs each change of lease `part` in its generator until its channel closes, saying
/// to `told` what is installed and issued.
pub(super) async fn follow(leases: &Following, issuing: &Issuing, part: usize, told: &Issuance) {
    let mut rx = leases.lease(part);
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
