//! Reporting: the gauges read when `/metrics` is scraped — what can be issued now, each
//! slot's time left, the layout's time left.

use super::Service;
use crate::generator::Window;

impl Service {
    /// Seconds until the time mark of `w`.
    fn remaining(&self, w: &Window) -> f64 {
        let i = &self.issuing;
        let end = i.scheme.tick_start_ns(w.mark.saturating_add(1));
        end.saturating_sub(i.clock.now_unix_ns()) as f64 / 1e9
    }

    /// Seconds until the lease's mark (with `--slots`, the soonest of the slots held: a
    /// renewal stuck on any of them shows), or 0 without a lease.
    pub fn lease_remaining(&self) -> f64 {
        self.issuing
            .windows()
            .iter()
            .flatten()
            .map(|w| self.remaining(w))
            .reduce(f64::min)
            .unwrap_or(0.0)
    }

    /// Seconds until the layout's time field runs out (negative once it has).
    pub fn layout_remaining(&self) -> f64 {
        crate::layout::seconds_left(&self.issuing.scheme, self.issuing.clock.now_unix_ns())
    }

    /// How many generators can issue now (`idcar_lease_slots_held` when scraped).
    fn slots_issuing(&self) -> usize {
        let now = self.issuing.now_tick();
        (0..self.issuing.parts())
            .filter(|i| self.issuing.can_issue(*i, now).is_ok())
            .count()
    }

    /// Updates the gauges that are read when scraped: what can be issued now, each slot's
    /// time left, the layout's time left.
    pub fn refresh_gauges(&self) {
        let m = &self.issuing.metrics;
        m.lease.remaining_seconds.set(self.lease_remaining());
        // Held means "can issue now", as /readyz says, not merely "a lease was published".
        m.lease.held.set(i64::from(self.ready().is_ok()));
        let issuing = self.slots_issuing();
        m.slots_held.set(issuing as i64);
        let held: Vec<Window> = self.issuing.windows().into_iter().flatten().collect();
        let lowest = held.iter().map(|w| i64::from(w.slot)).min();
        m.lease.slot.set(lowest.unwrap_or(-1));
        // Exhausted means "waits with nothing to issue from": a spare lease of an instance
        // that holds slots already is `idcar_lease_slots_held` below `_wanted`.
        m.lease
            .pool_exhausted
            .set(i64::from(m.lease.exhausted_parts() != 0 && issuing == 0));
        let mut shown = self.shown.lock().unwrap_or_else(|p| p.into_inner());
        for gone in shown.iter().filter(|s| !held.iter().any(|w| w.slot == **s)) {
            let _ = m
                .slot_remaining_seconds
                .remove_label_values(&[&gone.to_string()]);
        }
        *shown = held.iter().map(|w| w.slot).collect();
        for w in &held {
            m.slot_remaining_seconds
                .with_label_values(&[&w.slot.to_string()])
                .set(self.remaining(w));
        }
        drop(shown);
        m.layout_seconds_remaining.set(self.layout_remaining());
    }
}
