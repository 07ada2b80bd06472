//! When to renew: early enough that a slow node cannot make the mark run out.
//!
//! A fixed interval is what starved leases under CPU pressure: a mark written
//! `horizon` ahead at the moment the renewal was *due* is in force only until then, and on a
//! node where every wake-up waits its turn behind a hundred busy threads, a renewal that is
//! due a second after the last one landed and then takes a second itself leaves nothing of a
//! 3 s horizon. So the next renewal is timed from what is left of the mark just written and
//! from how long renewals take here and now:
//!
//! - `took`: from the moment a renewal was due (the timer's deadline) to the moment its write
//!   was confirmed — timer lateness, scheduling delays and the store's reply all included;
//! - `worst`: the largest `took` lately (each renewal lets it decay by a tenth);
//! - the next renewal is due when what is left of the mark falls to `reserve =
//!   max(horizon - renew_every, 2 x worst)` — on a quiet node exactly `renew_every` after
//!   the last one, on a starved node at once — but never sooner than a tenth of
//!   `renew_every` (at least 10 ms) after it, and never later than `renew_every`.
//!
//! **Headroom** is what was left of the mark in force when a renewal landed: how close IDs
//! came to stopping. Every renewal records it (`idcar_lease_renewal_headroom_seconds`); one
//! that landed with less than a third of the horizon left is *late*
//! (`idcar_lease_renewals_late_total`, logged, alerted on) — the warning an operator gets
//! before IDs stop.

use crate::metrics::LeaseMetrics;
use crate::timing::Timing;
use std::time::Duration;

/// The renewal schedule of one hold.
#[derive(Debug, Clone)]
pub struct Pace {
    timing: Timing,
    /// The slowest recent renewal, decaying.
    worst: Duration,
}

impl Pace {
    pub fn new(timing: Timing) -> Pace {
        Pace {
            timing,
            worst: Duration::ZERO,
        }
    }

    /// A renewal (or the first write) was confirmed `took` after it was due, and the mark
    /// now written runs out in `left`: how long to wait before the next one is due.
    pub fn next(&mut self, took: Duration, left: Duration) -> Duration {
        let t = &self.timing;
        // A reserve beyond the horizon means nothing (one VM pause must not pin renewals to
        // the least gap for long).
        self.worst = took.min(t.horizon).max(self.worst.mul_f64(0.9));
        let reserve = t
            .horizon
            .saturating_sub(t.renew_every)
            .max(self.worst.saturating_mul(2));
        let least = (t.renew_every / 10).max(Duration::from_millis(10));
        left.saturating_sub(reserve)
            .clamp(least.min(t.renew_every), t.renew_every)
    }

    /// Records a renewal that landed with `headroom` left of the mark in force: the
    /// histogram, and a late renewal (less than a third of the horizon left) counted and
    /// logged. Returns whether it was late.
    pub fn record(&self, metrics: &LeaseMetrics, headroom: Duration, took: Duration) -> bool {
        let lease = metrics;
        lease.renewal_headroom.observe(headroom.as_secs_f64());
        let late = headroom < self.timing.horizon / 3;
        if late {
            lease.renewals_late.inc();
            tracing::warn!(
                headroom_ms = headroom.as_millis() as u64,
                took_ms = took.as_millis() as u64,
                horizon_ms = self.timing.horizon.as_millis() as u64,
                "a lease renewal landed late: the mark was this close to running out (a busy \
                 or throttled node, or a slow store); renewing earlier from now on"
            );
        }
        late
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pace(horizon_ms: u64, every_ms: u64) -> Pace {
        Pace::new(Timing {
            horizon: Duration::from_millis(horizon_ms),
            idle_horizon: Duration::from_millis(horizon_ms),
            renew_every: Duration::from_millis(every_ms),
            max_clock_wait: Duration::from_secs(10),
            starve: Duration::ZERO,
        })
    }

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn a_quiet_node_renews_every_interval() {
        let mut p = pace(3_000, 1_000);
        for _ in 0..5 {
            // A 2 ms write: the mark just written runs out in 2,998 ms.
            assert_eq!(p.next(MS(2), MS(2_998)), MS(998));
        }
    }

    #[test]
    fn slow_renewals_pull_the_next_one_forward() {
        let mut p = pace(3_000, 1_000);
        // Due, then confirmed 1.2 s later: the mark (written for due + 3 s) has 1.8 s left.
        // The next must start at once (not before 100 ms): 2 x 1.2 s > 1.8 s.
        assert_eq!(p.next(MS(1_200), MS(1_800)), MS(100));
        // 700 ms: 2 x max(700, 1,080 decayed) = 2,160 ms reserve; 2,300 left -> 140 ms.
        assert_eq!(p.next(MS(700), MS(2_300)), MS(140));
        // Once renewals are quick again, the worst decays and the interval comes back.
        let mut waits = Vec::new();
        for _ in 0..20 {
            waits.push(p.next(MS(2), MS(2_998)));
        }
        assert_eq!(*waits.last().unwrap(), MS(998), "{waits:?}");
        assert!(waits.windows(2).all(|w| w[0] <= w[1]), "{waits:?}");
    }

    /// The least headroom (ms, negative: the mark ran out) over 50 renewals on a node where
    /// each is confirmed `d` ms after it is due; its mark reaches 3 s past the due time.
    fn least_headroom(d: i64, adaptive: bool) -> i64 {
        let mut p = pace(3_000, 1_000);
        let ms = |v: i64| Duration::from_millis(v.max(0) as u64);
        let mut wait = |landed: i64, mark: i64| {
            if adaptive {
                p.next(ms(d), ms(mark - landed)).as_millis() as i64
            } else {
                1_000
            }
        };
        let (mut landed, mut mark) = (d, 3_000);
        let mut next = wait(landed, mark);
        let mut least = i64::MAX;
        for _ in 0..50 {
            let due = landed + next;
            landed = due + d;
            least = least.min(mark - landed);
            mark = due + 3_000;
            next = wait(landed, mark);
        }
        least
    }

    /// Simulated starvation: the mark outlives renewals slower than the interval while
    /// 2 d stays below the horizon (less the least gap); a fixed interval lapses as soon as
    /// 2 d + interval passes it.
    #[test]
    fn the_mark_outlives_renewals_slower_than_the_interval() {
        for d in [5, 400, 900, 1_200, 1_400] {
            let least = least_headroom(d, true);
            assert!(least > 0, "d = {d} ms: the mark ran out ({least} ms)");
        }
        assert_eq!(least_headroom(5, true), 3_000 - 1_000 - 5);
        for d in [1_200, 1_400] {
            assert!(
                least_headroom(d, false) < 0,
                "a fixed interval lapses at d = {d} ms"
            );
        }
    }

    #[test]
    fn the_least_gap_never_exceeds_the_interval() {
        // A tiny interval (10 ms, the flag's least): the floor of 10 ms is the interval.
        let mut p = pace(20, 10);
        assert_eq!(p.next(MS(50), MS(0)), MS(10));
        assert_eq!(p.next(MS(0), MS(100)), MS(10));
    }
}
