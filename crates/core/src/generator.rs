//! The sequence state machine for one lease: hands out [`Run`]s of `(tick, sequence)` pairs.
//!
//! Pure: the current tick is an argument, nothing here sleeps or reads a clock. The caller
//! (the server's `service`) holds it under a mutex only for the duration of [`Generator::take`].
//!
//! Invariants (tested below with properties):
//! - every issued `(tick, seq)` is strictly greater than every one issued before under the
//!   same lease, so IDs from one slot never repeat;
//! - every issued tick is `> floor` (the mark the lease read when it claimed) and `<= mark`
//!   (the mark the lease last wrote), which is what makes IDs unique across successive holders;
//! - when the wall clock steps back, issuing continues from the last tick used, moving one tick
//!   ahead each time a tick's sequence is spent (a logical clock ahead of the wall clock), and
//!   stops at the mark; the regression is counted once per step;
//! - with a tick-tock scheme (sno80) a step back first tries the other timeline: it switches
//!   there, at the wall clock's tick, when nothing was issued on that timeline at or after that
//!   tick — so `(timeline, tick, seq)` never repeats, and each timeline alone strictly increases;
//! - with a lead (muid128) a spent tick moves on to the next one while that stays within
//!   `lead_ticks` of the wall clock (and within the mark), instead of waiting for the clock.

use crate::layout::{Run, Scheme};

/// What the lease currently allows: which slot, and the open-closed tick window `(floor, mark]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub slot: u32,
    /// The mark read at claim time: every issued tick is strictly above it.
    pub floor: u64,
    /// The mark last written: no issued tick is above it.
    pub mark: u64,
    /// Changes on every new claim; renewals keep it.
    pub generation: u64,
}

/// The highest tick issued for a slot: what a lease writes its mark down to on release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Issued {
    pub slot: u32,
    pub tick: u64,
}

/// Why no ID can be issued now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("no lease is held")]
    NoLease,
    #[error("the lease's time mark (tick {mark}) is reached and not yet renewed")]
    MarkReached { mark: u64 },
    #[error("the clock is behind the last issued time by more than the lease horizon")]
    ClockBehind { mark: u64 },
    #[error("the layout's time field is exhausted (tick {tick} > {max})")]
    TimeOverflow { tick: u64, max: u64 },
}

impl Refusal {
    pub fn kind(&self) -> &'static str {
        match self {
            Refusal::NoLease => "no_lease",
            Refusal::MarkReached { .. } => "mark_reached",
            Refusal::ClockBehind { .. } => "clock_behind",
            Refusal::TimeOverflow { .. } => "time_overflow",
        }
    }
}

/// The outcome of one [`Generator::take`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Take {
    /// Up to the requested number of IDs, all from one tick.
    Run(Run),
    /// This tick's sequence is spent: call again once the clock reaches `tick`.
    WaitFor { tick: u64 },
}

/// Sequence state for one slot.
#[derive(Debug)]
pub struct Generator {
    scheme: Scheme,
    window: Option<Window>,
    /// The tick of the last run issued, or the floor before the first.
    tick: u64,
    /// The next sequence number within `tick`; above `seq_max` means the tick is spent.
    next_seq: u32,
    /// Whether the wall clock is currently behind `tick` (a regression in progress).
    behind: bool,
    /// The last wall-clock tick seen: a lower reading is a step back.
    wall: u64,
    /// The highest wall-clock tick seen (or floor installed).
    wall_hi: u64,
    /// The tick-tock timeline in use (always 0 without `tick_tock`).
    timeline: u8,
    /// No tick above this was issued on the other timeline (at least the floor).
    other: u64,
    /// The slot the sequence state belongs to.
    slot: Option<u32>,
    /// The highest tick issued for `slot`, if any.
    highest: Option<u64>,
    /// Set by [`Generator::close`]: no window is installed any more.
    closed: bool,
    regressions: u64,
    exhausted: u64,
}

impl Generator {
    pub fn new(scheme: Scheme) -> Generator {
        Generator {
            scheme,
            window: None,
            tick: 0,
            next_seq: scheme.seq_max + 1,
            behind: false,
            wall: 0,
            wall_hi: 0,
            timeline: 0,
            other: 0,
            slot: None,
            highest: None,
            closed: false,
            regressions: 0,
            exhausted: 0,
        }
    }

    /// Installs what the lease now allows; `None` stops issuing until a window comes back.
    ///
    /// The sequence state belongs to the *slot*, not to one window: when a window for the
    /// slot already used arrives (a renewal, or the same slot held again after a loss), issuing
    /// continues from `max(last tick, floor)` and the highest issued tick is kept, so a lease
    /// that flaps never re-issues a `(tick, seq)` and never under-reports what it issued. A
    /// renewal in the same generation never lowers the mark. Only a different slot starts
    /// afresh from its floor. After [`Generator::close`] nothing is installed any more.
    pub fn set_window(&mut self, window: Option<Window>) {
        if self.closed {
            return;
        }
        let Some(new) = window else {
            self.window = None;
            return;
        };
        let mark = match self.window {
            Some(old) if old.generation == new.generation && old.slot == new.slot => {
                old.mark.max(new.mark)
            }
            _ => new.mark,
        };
        if self.slot == Some(new.slot) {
            if new.floor >= self.tick {
                self.tick = new.floor;
                self.next_seq = self.scheme.seq_max + 1;
                self.behind = false;
            }
            self.other = self.other.max(new.floor);
        } else {
            self.slot = Some(new.slot);
            self.tick = new.floor;
            self.next_seq = self.scheme.seq_max + 1;
            self.behind = false;
            self.other = new.floor;
            self.highest = None;
        }
        // A clock reading below the floor is treated as a step back: some holder already
        // issued up to the floor, so issuing runs ahead of the clock from there.
        self.wall = self.wall.max(new.floor);
        self.wall_hi = self.wall_hi.max(new.floor);
        self.window = Some(Window { mark, ..new });
    }

    /// Stops issuing for good and returns the highest tick issued, with its slot.
    pub fn close(&mut self) -> Option<Issued> {
        self.closed = true;
        self.window = None;
        Some(Issued {
            slot: self.slot?,
            tick: self.highest?,
        })
    }

    pub fn window(&self) -> Option<Window> {
        self.window
    }

    /// The highest tick issued for the current slot.
    pub fn highest_issued(&self) -> Option<u64> {
        self.highest
    }

    /// The slot the sequence state belongs to, with the highest tick issued for it (`None`:
    /// none yet).
    pub fn slot_issued(&self) -> Option<(u32, Option<u64>)> {
        Some((self.slot?, self.highest))
    }

    /// How often the clock was seen stepping back, in total.
    pub fn regressions(&self) -> u64 {
        self.regressions
    }

    /// How often a tick's sequence was spent and the caller had to wait, in total.
    pub fn exhausted(&self) -> u64 {
        self.exhausted
    }

    /// Whether an ID could be issued at wall-clock tick `now`, without issuing one: a window
    /// is held, `now` has not passed its mark, the clock is not behind beyond what running
    /// ahead can cover, and the time field is not exhausted. Readiness asks this.
    pub fn can_issue(&self, now: u64) -> Result<(), Refusal> {
        let w = self.window.ok_or(Refusal::NoLease)?;
        if now > w.mark {
            return Err(Refusal::MarkReached { mark: w.mark });
        }
        let tick = self.tick.max(now);
        if tick > self.scheme.max_tick {
            return Err(Refusal::TimeOverflow {
                tick,
                max: self.scheme.max_tick,
            });
        }
        if now < self.tick && self.tick >= w.mark && self.next_seq > self.scheme.seq_max {
            // Behind the last tick issued, with nothing left to run ahead into.
            return Err(Refusal::ClockBehind { mark: w.mark });
        }
        Ok(())
    }

    /// Issues up to `want` IDs at wall-clock tick `now`, all from one tick.
    #[inline]
    pub fn take(&mut self, now: u64, want: u32) -> Result<Take, Refusal> {
        let w = self.window.ok_or(Refusal::NoLease)?;
        let lead = self.scheme.lead_ticks;
        if now < self.wall {
            // The clock stepped back since the last reading (readings are taken under the
            // same lock, so this is the clock's doing, not a race between requests).
            self.regressions += 1;
            if now < self.tick {
                if self.scheme.tick_tock && now > self.other {
                    // Nothing was issued on the other timeline at or after `now`: move there.
                    self.other = self.tick;
                    self.timeline ^= 1;
                    self.tick = now;
                    self.next_seq = self.scheme.seq_min;
                    self.behind = false;
                } else if self.tick > now.saturating_add(lead)
                    && (lead == 0 || self.wall_hi > now.saturating_add(lead))
                {
                    self.behind = true;
                }
                // Else the step back is within the lead: the lead's bound still applies (a
                // wait of at most the step), so a small step cannot let issuing run away.
            }
        }
        self.wall = now;
        self.wall_hi = self.wall_hi.max(now);
        if now > self.tick {
            if now > w.mark {
                return Err(Refusal::MarkReached { mark: w.mark });
            }
            self.tick = now;
            self.next_seq = self.scheme.seq_min;
            self.behind = false;
        } else if now == self.tick {
            // The wall clock has caught up with the logical one.
            self.behind = false;
        }
        if self.next_seq > self.scheme.seq_max {
            if !self.behind && self.tick >= now.saturating_add(lead) {
                self.exhausted += 1;
                return Ok(Take::WaitFor {
                    tick: self.tick + 1 - lead,
                });
            }
            if self.tick >= w.mark {
                if self.behind {
                    return Err(Refusal::ClockBehind { mark: w.mark });
                }
                // The lead ran into the mark: wait for the clock to pass it (a renewal
                // raises the mark; otherwise the next take refuses).
                self.exhausted += 1;
                return Ok(Take::WaitFor { tick: w.mark + 1 });
            }
            // Run ahead of the wall clock: after a step back without bound (up to the
            // mark), else within the lead.
            self.tick += 1;
            self.next_seq = self.scheme.seq_min;
        }
        if self.tick > self.scheme.max_tick {
            return Err(Refusal::TimeOverflow {
                tick: self.tick,
                max: self.scheme.max_tick,
            });
        }
        let len = want.min(self.scheme.seq_max - self.next_seq + 1);
        let run = Run {
            tick: self.tick,
            seq: self.next_seq,
            len,
            slot: w.slot,
            timeline: self.timeline,
        };
        self.next_seq += len;
        if len > 0 {
            self.highest = Some(self.highest.map_or(self.tick, |h| h.max(self.tick)));
        }
        Ok(Take::Run(run))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn scheme() -> Scheme {
        Scheme {
            tick_ns: 1_000_000,
            epoch_unix_ns: 0,
            max_tick: (1 << 42) - 1,
            seq_min: 0,
            seq_max: 63,
            slots: 64,
            tick_tock: false,
            lead_ticks: 0,
        }
    }

    fn held(floor: u64, mark: u64) -> Generator {
        let mut g = Generator::new(scheme());
        g.set_window(Some(Window {
            slot: 7,
            floor,
            mark,
            generation: 1,
        }));
        g
    }

    #[test]
    fn can_issue_agrees_with_take() {
        let mut g = Generator::new(scheme());
        assert_eq!(g.can_issue(10), Err(Refusal::NoLease));
        g = held(100, 200);
        assert_eq!(g.can_issue(150), Ok(()));
        assert_eq!(g.can_issue(201), Err(Refusal::MarkReached { mark: 200 }));
        assert!(g.take(201, 1).is_err());
        // Spend the mark's tick, then step the clock back: nothing left to run ahead into.
        while let Ok(Take::Run(_)) = g.take(200, 64) {}
        assert_eq!(g.can_issue(150), Err(Refusal::ClockBehind { mark: 200 }));
        assert!(g.take(150, 1).is_err());
    }

    #[test]
    fn refuses_without_lease() {
        let mut g = Generator::new(scheme());
        assert_eq!(g.take(10, 1), Err(Refusal::NoLease));
    }

    #[test]
    fn sequence_resets_each_tick_and_waits_when_spent() {
        let mut g = held(99, 1_000);
        assert_eq!(
            g.take(100, 60),
            Ok(Take::Run(Run {
                tick: 100,
                seq: 0,
                len: 60,
                slot: 7,
                timeline: 0,
            }))
        );
        assert_eq!(
            g.take(100, 10),
            Ok(Take::Run(Run {
                tick: 100,
                seq: 60,
                len: 4,
                slot: 7,
                timeline: 0,
            }))
        );
        assert_eq!(g.take(100, 1), Ok(Take::WaitFor { tick: 101 }));
        assert_eq!(g.exhausted(), 1);
        assert_eq!(
            g.take(101, 1),
            Ok(Take::Run(Run {
                tick: 101,
                seq: 0,
                len: 1,
                slot: 7,
                timeline: 0,
            }))
        );
    }

    #[test]
    fn never_issues_at_or_below_floor() {
        let mut g = held(100, 1_000);
        // The clock sits exactly at the floor: wait for the next tick.
        assert_eq!(g.take(100, 1), Ok(Take::WaitFor { tick: 101 }));
        // The clock is below the floor: run ahead from floor + 1.
        let Ok(Take::Run(r)) = g.take(50, 1) else {
            panic!()
        };
        assert_eq!(r.tick, 101);
    }

    #[test]
    fn never_issues_above_mark() {
        let mut g = held(0, 100);
        assert_eq!(g.take(101, 1), Err(Refusal::MarkReached { mark: 100 }));
        // Renewal in the same generation raises the mark, never lowers it.
        g.set_window(Some(Window {
            slot: 7,
            floor: 0,
            mark: 200,
            generation: 1,
        }));
        g.set_window(Some(Window {
            slot: 7,
            floor: 0,
            mark: 150,
            generation: 1,
        }));
        assert_eq!(g.window().unwrap().mark, 200);
        assert!(matches!(g.take(101, 1), Ok(Take::Run(_))));
    }

    #[test]
    fn clock_step_back_runs_ahead_then_stalls_at_mark() {
        let mut g = held(0, 102);
        assert!(matches!(g.take(100, 64), Ok(Take::Run(_))));
        // Clock goes back 50 ticks: continue at 101, 102, then stall at the mark.
        let Ok(Take::Run(r)) = g.take(50, 64) else {
            panic!()
        };
        assert_eq!((r.tick, r.seq, r.len), (101, 0, 64));
        assert_eq!(g.regressions(), 1);
        let Ok(Take::Run(r)) = g.take(50, 64) else {
            panic!()
        };
        assert_eq!(r.tick, 102);
        assert_eq!(g.take(51, 1), Err(Refusal::ClockBehind { mark: 102 }));
        assert_eq!(g.regressions(), 1, "one step back counts once");
        // Clock catches up: back to normal.
        assert!(matches!(g.take(102, 1), Ok(Take::WaitFor { tick: 103 })));
    }

    #[test]
    fn another_slot_starts_over_from_its_floor() {
        let mut g = held(0, 1_000);
        assert!(matches!(g.take(500, 1), Ok(Take::Run(_))));
        assert_eq!(g.highest_issued(), Some(500));
        g.set_window(Some(Window {
            slot: 9,
            floor: 600,
            mark: 2_000,
            generation: 2,
        }));
        assert_eq!(g.highest_issued(), None);
        let Ok(Take::Run(r)) = g.take(550, 1) else {
            panic!()
        };
        assert_eq!((r.tick, r.slot), (601, 9));
        g.set_window(None);
        assert_eq!(g.take(700, 1), Err(Refusal::NoLease));
    }

    #[test]
    fn same_slot_again_continues_where_it_was() {
        let mut g = held(0, 1_000);
        let Ok(Take::Run(r)) = g.take(500, 10) else {
            panic!()
        };
        assert_eq!((r.tick, r.seq, r.len), (500, 0, 10));
        // The lease flaps (lost, then held again, even with a new generation and an old floor)
        // while the clock steps back: no (tick, seq) is issued twice, highest is kept.
        g.set_window(None);
        assert_eq!(g.take(400, 1), Err(Refusal::NoLease));
        assert_eq!(g.highest_issued(), Some(500));
        g.set_window(Some(Window {
            slot: 7,
            floor: 300,
            mark: 1_000,
            generation: 2,
        }));
        let Ok(Take::Run(r)) = g.take(400, 1) else {
            panic!()
        };
        assert_eq!((r.tick, r.seq), (500, 10));
        // A floor above the last tick moves the state up to it.
        g.set_window(Some(Window {
            slot: 7,
            floor: 800,
            mark: 1_000,
            generation: 3,
        }));
        let Ok(Take::Run(r)) = g.take(801, 1) else {
            panic!()
        };
        assert_eq!((r.tick, r.seq), (801, 0));
    }

    #[test]
    fn close_is_permanent() {
        let mut g = held(0, 1_000);
        assert!(matches!(g.take(500, 1), Ok(Take::Run(_))));
        assert_eq!(g.close(), Some(Issued { slot: 7, tick: 500 }));
        g.set_window(Some(Window {
            slot: 7,
            floor: 0,
            mark: 2_000,
            generation: 1,
        }));
        assert_eq!(g.take(501, 1), Err(Refusal::NoLease));
    }

    #[test]
    fn time_field_overflow_is_refused() {
        let s = scheme();
        let mut g = held(s.max_tick, u64::MAX);
        assert!(matches!(
            g.take(s.max_tick + 1, 1),
            Err(Refusal::TimeOverflow { .. })
        ));
    }

    fn with(tick_tock: bool, lead_ticks: u64, floor: u64, mark: u64) -> Generator {
        let mut g = Generator::new(Scheme {
            tick_tock,
            lead_ticks,
            // One ID per tick with a lead (muid128), 64 otherwise.
            seq_max: if lead_ticks > 0 { 0 } else { 63 },
            ..scheme()
        });
        g.set_window(Some(Window {
            slot: 7,
            floor,
            mark,
            generation: 1,
        }));
        g
    }

    fn run(t: Result<Take, Refusal>) -> Run {
        match t {
            Ok(Take::Run(r)) => r,
            other => panic!("expected a run, got {other:?}"),
        }
    }

    #[test]
    fn tick_tock_switches_timeline_once_then_runs_ahead() {
        let mut g = with(true, 0, 0, 1_000);
        let r = run(g.take(500, 64));
        assert_eq!((r.tick, r.timeline), (500, 0));
        // A step back: the other timeline is unused above the floor, so go there at once,
        // at the wall clock's own tick (no waiting, no running ahead).
        let r = run(g.take(400, 1));
        assert_eq!((r.tick, r.seq, r.timeline), (400, 0, 1));
        assert_eq!(g.regressions(), 1);
        // Time moves on along timeline 1, through ticks timeline 0 already used.
        let r = run(g.take(500, 1));
        assert_eq!((r.tick, r.seq, r.timeline), (500, 0, 1));
        // A second step back into a frame timeline 0 used: no switch, run ahead on timeline 1.
        let r = run(g.take(450, 1));
        assert_eq!((r.tick, r.seq, r.timeline), (500, 1, 1));
        assert_eq!(g.regressions(), 2);
        // Highest issued stays the highest over both timelines.
        assert_eq!(g.highest_issued(), Some(500));
        // Past timeline 0's last tick, a step back may switch again.
        assert_eq!(run(g.take(700, 1)).tick, 700);
        let r = run(g.take(600, 1));
        assert_eq!((r.tick, r.timeline), (600, 0));
        assert_eq!(g.highest_issued(), Some(700));
    }

    #[test]
    fn lead_runs_ahead_of_the_clock_up_to_its_bound_and_the_mark() {
        let mut g = with(false, 3, 0, 1_000);
        let ticks: Vec<u64> = (0..4).map(|_| run(g.take(100, 5)).tick).collect();
        assert_eq!(ticks, [100, 101, 102, 103]);
        // Lead spent: wait until the clock allows the next tick (104 - 3).
        assert_eq!(g.take(100, 1), Ok(Take::WaitFor { tick: 101 }));
        assert_eq!(run(g.take(101, 1)).tick, 104);
        assert_eq!(g.regressions(), 0, "running ahead is not a step back");
        // Near the mark the lead stops at it, and the caller waits past it.
        let mut g = with(false, 3, 0, 101);
        assert_eq!(run(g.take(100, 1)).tick, 100);
        assert_eq!(run(g.take(100, 1)).tick, 101);
        assert_eq!(g.take(100, 1), Ok(Take::WaitFor { tick: 102 }));
        assert_eq!(g.take(102, 1), Err(Refusal::MarkReached { mark: 101 }));
        // A step back smaller than the lead keeps the lead's bound: wait out the step.
        let mut g = with(false, 3, 0, 1_000);
        let ticks: Vec<u64> = (0..4).map(|_| run(g.take(100, 1)).tick).collect();
        assert_eq!(ticks, [100, 101, 102, 103]);
        assert_eq!(g.take(99, 1), Ok(Take::WaitFor { tick: 101 }));
        assert_eq!(g.take(100, 1), Ok(Take::WaitFor { tick: 101 }));
        assert_eq!(run(g.take(101, 1)).tick, 104);
        // A larger step back runs ahead as in every layout (bounded by the mark).
        assert_eq!(run(g.take(80, 1)).tick, 105);
        assert_eq!(run(g.take(80, 1)).tick, 106);
    }

    proptest! {
        /// With tick-tock and a lead, whatever the clock does: no (timeline, tick, seq) twice,
        /// each timeline strictly increasing, every tick in (floor, mark], highest = the max.
        #[test]
        fn tick_tock_never_repeats(
            floor in 0u64..1_000,
            horizon in 1u64..300,
            lead in 0u64..4,
            steps in proptest::collection::vec((-40i64..40, 1u32..100), 1..300),
        ) {
            let mark = floor + horizon;
            let mut g = with(true, lead, floor, mark);
            let mut now = floor as i64;
            let mut last: [Option<(u64, u32)>; 2] = [None, None];
            let mut max = None;
            for (dt, want) in steps {
                now = (now + dt).max(0);
                match g.take(now as u64, want) {
                    Ok(Take::Run(r)) => {
                        prop_assert!(r.len >= 1 && r.len <= want);
                        prop_assert!(r.tick > floor && r.tick <= mark);
                        let t = usize::from(r.timeline);
                        if let Some(prev) = last[t] {
                            prop_assert!((r.tick, r.seq) > prev);
                        }
                        last[t] = Some((r.tick, r.seq + r.len - 1));
                        max = max.max(Some(r.tick));
                        prop_assert_eq!(g.highest_issued(), max);
                    }
                    Ok(Take::WaitFor { tick }) => prop_assert!(tick as i64 > now),
                    Err(_) => {}
                }
            }
        }

        /// Across window changes — renewals moving the mark, the slot lost and claimed again
        /// (from the mark last written, as the lease does), another slot — and a clock
        /// stepping both ways: no (slot, tick, seq) is issued twice, and every tick is inside
        /// the window in force when it was issued.
        #[test]
        fn never_repeats_across_window_changes(
            ops in proptest::collection::vec((0u8..6, -60i64..60, 1u32..100), 1..400),
        ) {
            let mut g = Generator::new(scheme());
            let mut marks = [0u64; 2];
            let mut win: Option<Window> = None;
            let mut generation = 0;
            let mut now = 1_000i64;
            let mut seen = std::collections::HashSet::new();
            for (op, dt, x) in ops {
                now = (now + dt).max(0);
                match op {
                    // Claim slot 0 or 1 again: the floor is the mark last written for it.
                    0 | 1 => {
                        let slot = u32::from(op);
                        let floor = marks[op as usize];
                        let mark = floor.max(now as u64) + u64::from(x);
                        marks[op as usize] = mark;
                        generation += 1;
                        win = Some(Window { slot, floor, mark, generation });
                        g.set_window(win);
                    }
                    // Renew: the mark moves up (never down).
                    2 => if let Some(w) = win.as_mut() {
                        w.mark = w.mark.max(now as u64 + u64::from(x));
                        marks[w.slot as usize] = w.mark;
                        g.set_window(win);
                    },
                    // Lost: no window.
                    3 => {
                        win = None;
                        g.set_window(None);
                    }
                    _ => {
                        if let Ok(Take::Run(r)) = g.take(now as u64, x) {
                            let w = win.expect("a run only with a window");
                            prop_assert!(r.tick > w.floor && r.tick <= w.mark);
                            prop_assert_eq!(r.slot, w.slot);
                            for seq in r.seq..r.seq + r.len {
                                prop_assert!(seen.insert((r.slot, r.tick, seq)), "repeated");
                            }
                        }
                    }
                }
            }
        }

        /// Whatever the clock does, issued (tick, seq) pairs strictly increase and stay in
        /// (floor, mark].
        #[test]
        fn strictly_increasing_within_window(
            floor in 0u64..1_000,
            horizon in 1u64..300,
            steps in proptest::collection::vec((-40i64..40, 1u32..100), 1..300),
        ) {
            let mark = floor + horizon;
            let mut g = held(floor, mark);
            let mut now = floor as i64;
            let mut last: Option<(u64, u32)> = None;
            for (dt, want) in steps {
                now = (now + dt).max(0);
                match g.take(now as u64, want) {
                    Ok(Take::Run(r)) => {
                        prop_assert!(r.len >= 1 && r.len <= want);
                        prop_assert!(r.tick > floor && r.tick <= mark);
                        if let Some(prev) = last {
                            prop_assert!((r.tick, r.seq) > prev);
                        }
                        last = Some((r.tick, r.seq + r.len - 1));
                        prop_assert_eq!(g.highest_issued(), Some(r.tick));
                    }
                    Ok(Take::WaitFor { tick }) => prop_assert!(tick as i64 > now),
                    Err(_) => {}
                }
            }
        }
    }
}
