//! How far ahead a holder's mark reaches, and so what it costs its store.
//!
//! Two limits are kept apart:
//!
//! - the **window** the generator is given: never more than the short horizon
//!   (`--lease-horizon`) past the clock, pushed forward every `--renew-interval` with no write
//!   at all while it stays under the stored mark;
//! - the **stored mark**, which only has to stay at or above the window: while no one waits
//!   for a slot of the pool it reaches the idle horizon (`--idle-horizon`) ahead and is written
//!   again only when less than half of that is left (one write every half idle horizon); as
//!   soon as someone waits, the holder writes it *down* to its window (by compare-and-set, like
//!   every write) and keeps it there, renewing each interval as a short-horizon lease does, so
//!   a successor after a crash waits at most the short horizon past the session's end.
//!
//! Nothing above the window is ever issued, and the window never passes the stored mark — nor
//! any mark write still unanswered (a lowered mark may have landed) — so every value written,
//! lowered or raised, is at or above every tick issued: the invariant of
//! [`crate::protocol`] holds as it did. A holder cut from its store keeps its window
//! moving up to the stored mark, then stops.

use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// How far a holder's mark may reach now, from what the store says of its pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Someone waits for a slot: the mark follows the window.
    Short,
    /// Every slot of the pool is held and no one waits: a crash would leave whoever comes next
    /// waiting past the mark, so it reaches no more than twice the short horizon.
    Full,
    /// Room to spare and no one waits: the idle horizon.
    Idle,
}

impl Reach {
    /// As lease records and logs say it.
    pub fn name(self) -> &'static str {
        match self {
            Reach::Short => "short",
            Reach::Full => "full",
            Reach::Idle => "idle",
        }
    }
}

/// What the store says of the holder's pool: whether anyone waits for a slot (a waiter at the
/// head of an exhausted pool's queue says so in the store while it waits), and whether every
/// slot is held (the instance's pool gauges). A store without waiters (the state file) never
/// says either.
#[derive(Debug)]
pub struct Demand {
    waiting: Option<watch::Receiver<bool>>,
    full: Option<watch::Receiver<bool>>,
    /// How long a pool seen full counts as full still (see [`Demand::reach`]).
    linger: Duration,
    /// When the pool was last seen full.
    full_seen: Option<Instant>,
}

impl Demand {
    /// No one can ever wait (a static slot).
    pub fn none() -> Demand {
        Demand {
            waiting: None,
            full: None,
            linger: Duration::ZERO,
            full_seen: None,
        }
    }

    /// Follows what a store's watcher of its waiters publishes on `waiting`, and its watcher
    /// of the held slots on `full`; a pool seen full counts as full for `linger` after.
    pub fn new(
        waiting: watch::Receiver<bool>,
        full: watch::Receiver<bool>,
        linger: Duration,
    ) -> Demand {
        Demand {
            waiting: Some(waiting),
            full: Some(full),
            linger,
            full_seen: None,
        }
    }

    /// Whether someone waits now.
    pub fn waiting(&self) -> bool {
        self.waiting.as_ref().is_some_and(|rx| *rx.borrow())
    }

    /// How far the mark may reach now. A pool seen full within `linger` counts as full: a
    /// slot handed over (a release, a slot given back) leaves the pool with room for a moment
    /// only, and a mark written to the idle horizon then would stand in a successor's way if
    /// its holder died before the next write.
    pub fn reach(&mut self) -> Reach {
        let now = Instant::now();
        if self.full.as_ref().is_some_and(|rx| *rx.borrow()) {
            self.full_seen = Some(now);
        }
        let full = self
            .full_seen
            .is_some_and(|seen| now.saturating_duration_since(seen) <= self.linger);
        if self.waiting() {
            Reach::Short
        } else if full {
            Reach::Full
        } else {
            Reach::Idle
        }
    }

    /// Returns when someone starts (or stops) waiting, or the pool fills (or gains room);
    /// never for [`Demand::none`] or once both watchers are gone.
    pub async fn changed(&mut self) {
        tokio::select! {
            () = changed(&mut self.waiting) => {}
            () = changed(&mut self.full) => {}
        }
    }
}

/// Returns when `rx` changes; never once its sender is gone (it is dropped then).
async fn changed(rx: &mut Option<watch::Receiver<bool>>) {
    match rx {
        Some(r) => {
            if r.changed().await.is_err() {
                *rx = None;
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending().await,
    }
}

/// The horizons of a hold, in ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Horizons {
    /// How far past the clock the window reaches (and the mark, while someone waits).
    pub short: u64,
    /// How far past the clock the mark reaches while no one waits; at or below `short`, the
    /// mark always follows the window (a static slot, or `--idle-horizon` set to the horizon).
    pub idle: u64,
    /// How far past the clock the mark reaches while every slot of the pool is held and no one
    /// waits: twice `short`, within `idle`.
    pub full: u64,
    /// How much earlier than at half the idle horizon the next idle renewal comes: drawn anew
    /// after each write ([`Horizons::draw`]), so that holders started together do not write
    /// together ever after.
    pub early: u64,
}

impl Horizons {
    /// Horizons of `short` and `idle` ticks, the first renewal's lead drawn.
    pub fn new(short: u64, idle: u64) -> Horizons {
        let mut h = Horizons {
            short,
            idle,
            full: short.saturating_mul(2).min(idle).max(short),
            early: 0,
        };
        h.draw();
        h
    }

    /// Draws the next idle renewal's lead: up to an eighth of the idle horizon beyond the short
    /// one (so one write every 3/8 to 1/2 of that: 21-27 s at the defaults).
    pub fn draw(&mut self) {
        let spread = self.idle.saturating_sub(self.short) / 8;
        self.early = if spread == 0 {
            0
        } else {
            rand::random_range(0..spread)
        };
    }

    /// The window to give the generator at `now`: `short` past the clock, never below the
    /// window given already (the clock may have stepped back).
    pub fn window(&self, window: u64, now: u64) -> u64 {
        window.max(now.saturating_add(self.short))
    }

    /// The mark to write now, if any. `mark`: the mark stored (last written); `window`: the
    /// window the generator is to have (see [`Horizons::window`]) — every value returned is at
    /// or above it; `first`: nothing written under this claim yet; `reach`: what the store says
    /// of the pool.
    ///
    /// While someone waits the mark follows the window (written down to it if it is higher),
    /// renewed every pass even when the clock stepped back and the window stays where it is.
    /// Otherwise it reaches the pool's horizon (idle, or full) past the clock, written again
    /// when less than half of that (beyond the short one) is left — or a little more, drawn per
    /// holder — and written down to it when it reaches further (the pool has just filled).
    pub fn to_write(
        &self,
        mark: u64,
        window: u64,
        now: u64,
        first: bool,
        reach: Reach,
    ) -> Option<u64> {
        let lead = match reach {
            Reach::Short => self.short,
            Reach::Full => self.full,
            Reach::Idle => self.idle,
        };
        if lead <= self.short {
            return Some(window);
        }
        let target = window.max(now.saturating_add(lead));
        let beyond = lead - self.short;
        // The drawn lead, in proportion to this reach (it is drawn for the idle one).
        let early = (u128::from(self.early) * u128::from(beyond)
            / u128::from((self.idle - self.short).max(1))) as u64;
        let due = now
            .saturating_add(self.short)
            .saturating_add(beyond / 2)
            .saturating_add(early);
        (first || mark < due || mark < window || mark > target).then_some(target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: Horizons = Horizons {
        short: 5_000,
        idle: 60_000,
        full: 10_000,
        early: 0,
    };

    const IDLE: Reach = Reach::Idle;
    const SHORT: Reach = Reach::Short;

    #[test]
    fn an_idle_holder_writes_once_per_half_idle_horizon() {
        // First write: the idle horizon ahead.
        assert_eq!(H.to_write(0, 105_000, 100_000, true, IDLE), Some(160_000));
        // Every interval the window moves on with no write, until less than half is left.
        let mut writes = 0;
        let mut mark = 160_000;
        for now in (100_000..400_000).step_by(1_000) {
            let w = H.window(0, now);
            if let Some(m) = H.to_write(mark, w, now, false, IDLE) {
                assert!(m >= w && m >= mark);
                mark = m;
                writes += 1;
            }
            assert!(mark >= w, "the window never passes the mark");
        }
        // 300 s at one write per 27.5 s.
        assert_eq!(writes, 10);
    }

    #[test]
    fn a_waiter_brings_the_mark_down_to_the_window_never_below_it() {
        // Mark 50 s ahead, window 5 s ahead: written down to the window at once.
        assert_eq!(
            H.to_write(150_000, 105_000, 100_000, false, SHORT),
            Some(105_000)
        );
        // Then renewed each interval, as a short-horizon lease is.
        assert_eq!(
            H.to_write(105_000, 106_000, 101_000, false, SHORT),
            Some(106_000)
        );
        // A clock stepped back: the window stays where it was, and so does the mark (written
        // again, as every interval while someone waits).
        let w = H.window(106_000, 90_000);
        assert_eq!(w, 106_000);
        assert_eq!(H.to_write(106_000, w, 90_000, false, SHORT), Some(106_000));
        // The waiter gone: the next interval writes the idle horizon again.
        assert_eq!(
            H.to_write(106_000, 107_000, 102_000, false, IDLE),
            Some(162_000)
        );
    }

    #[test]
    fn a_full_pool_keeps_the_mark_within_twice_the_horizon() {
        let full = Reach::Full;
        // An idle mark 60 s ahead: written down to twice the horizon once the pool fills.
        assert_eq!(
            H.to_write(160_000, 105_000, 100_000, false, full),
            Some(110_000)
        );
        // Then written again when less than half of the rest is left: every 2.5 s.
        let (mut mark, mut writes) = (110_000, 0);
        for now in (100_000..200_000).step_by(1_000) {
            let w = H.window(0, now);
            if let Some(m) = H.to_write(mark, w, now, false, full) {
                assert!(m >= w && m <= now + H.full, "{m} at {now}");
                mark = m;
                writes += 1;
            }
            assert!(mark >= w && mark <= now + H.full);
        }
        assert!((30..=40).contains(&writes), "{writes}");
        // Room again: back to the idle horizon at the next write.
        let w = H.window(0, 200_000);
        assert_eq!(H.to_write(mark, w, 200_000, false, IDLE), Some(260_000));
        // No idle horizon: the full one cannot exceed it either.
        let fixed = Horizons::new(3_000, 4_000);
        assert_eq!(fixed.full, 4_000);
        assert_eq!(Horizons::new(3_000, 60_000).full, 6_000);
    }

    #[test]
    fn without_an_idle_horizon_the_mark_follows_the_window() {
        let fixed = Horizons::new(3_000, 3_000);
        assert_eq!(fixed.early, 0);
        assert_eq!(
            fixed.to_write(0, 103_000, 100_000, true, IDLE),
            Some(103_000)
        );
        assert_eq!(
            fixed.to_write(103_000, 104_000, 101_000, false, IDLE),
            Some(104_000)
        );
    }

    #[test]
    fn idle_renewals_of_holders_started_together_spread_out() {
        let leads: std::collections::BTreeSet<u64> = (0..50)
            .map(|_| Horizons::new(5_000, 60_000).early)
            .collect();
        assert!(leads.len() > 10, "{leads:?}");
        assert!(leads.iter().all(|e| *e < 55_000 / 8));
        // Even the earliest renewal of a holder left alone comes after 7/16 of the horizon.
        let h = Horizons {
            early: 55_000 / 8 - 1,
            ..H
        };
        assert_eq!(h.to_write(160_000, 106_000, 101_000, false, IDLE), None);
        assert!(h.to_write(160_000, 126_000, 121_000, false, IDLE).is_some());
    }

    #[test]
    fn saturates_instead_of_wrapping() {
        let w = H.window(0, u64::MAX - 10);
        assert_eq!(w, u64::MAX);
        assert_eq!(H.to_write(u64::MAX, w, u64::MAX - 10, false, IDLE), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_pool_seen_full_counts_as_full_for_a_while_after() {
        let (waiting, rx_waiting) = watch::channel(false);
        let (full, rx_full) = watch::channel(false);
        let mut d = Demand::new(rx_waiting, rx_full, Duration::from_secs(5));
        assert_eq!(d.reach(), Reach::Idle);
        full.send_replace(true);
        assert_eq!(d.reach(), Reach::Full);
        // A slot handed over: room for a moment, still full for the linger.
        full.send_replace(false);
        tokio::time::advance(Duration::from_secs(4)).await;
        assert_eq!(d.reach(), Reach::Full);
        waiting.send_replace(true);
        assert_eq!(d.reach(), Reach::Short, "a waiter comes first");
        waiting.send_replace(false);
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(d.reach(), Reach::Idle, "room for longer than the linger");
    }
}
