//! The bounds from docs/operations.md, held to the faults that allow judging them: a holder
//! cut from the store (or whose store is frozen) stops at its mark; a waiting sidecar of its
//! pool takes over a lost holder's slot
//! within session timeout + horizon + 1 s; holders a fault leaving a quorum does not touch are
//! measured; a holder no fault touches is never refused and keeps its lease.
//!
//! How far a mark may reach depends on who waited: a holder brings its mark down to the short
//! horizon within a second of a contender starting to wait, and says so in its log (a `mark`
//! lease record, `reach` short or idle, at each change). When its last record before a fault
//! says short, the short horizon bounds it; otherwise the mark may be the idle horizon ahead —
//! the documented worst case.

use super::holds::{issuing_at, Hold};
use super::{show, Setup, Verdict, Violation, CUT_STOPS, GAP, STAMP_SLACK_NS, TAKE_OVER};
use crate::load::{Op, Outcome};
use crate::nemesis::{Fault, Kind};
use crate::procs::Incarnation;

/// Judges the bounds (counting the faults of each kind, and measuring them).
pub(super) fn bounds(
    setup: &Setup,
    ops: &[Op],
    holds: &[Hold],
    faults: &[Fault],
    incarnations: &[Incarnation],
    v: &mut Verdict,
) {
    let settle = setup.session_timeout_ns + setup.horizon_ns + 1_000_000_000;
    let sidecars = incarnations
        .iter()
        .map(|i| i.sidecar + 1)
        .max()
        .unwrap_or(0);
    let history = History {
        setup,
        ops,
        holds,
        faults,
        incarnations,
        settle,
        sidecars,
    };
    for f in faults {
        let e = v.per_kind.entry(f.kind.name().to_string()).or_default();
        e.faults += 1;
    }
    history.cut_holders_stop(v);
    history.successors_take_over(v);
    history.gaps_beside_a_quorum(v);
    history.untouched_not_refused(v);
    history.untouched_keep_leases(v);
}

/// What the bounds are judged on.
#[derive(Clone, Copy)]
struct History<'a> {
    setup: &'a Setup<'a>,
    ops: &'a [Op],
    holds: &'a [Hold],
    faults: &'a [Fault],
    incarnations: &'a [Incarnation],
    /// What a successor may need after a loss: session timeout + horizon + 1 s.
    settle: u64,
    /// Sidecars in the run.
    sidecars: usize,
}

impl History<'_> {
    /// Whether sidecar `s` is disturbed at `t` by some fault (its own or an ensemble's).
    fn disturbed(&self, s: usize, t: u64) -> bool {
        self.faults
            .iter()
            .any(|f| f.touches(s) && f.start_ns <= t && t <= f.end_ns + self.settle)
    }

    /// How far ahead of the clock sidecar `s`'s mark may have been at `t`: the short horizon
    /// if its own records say every slot it held then had its mark written down at it (a
    /// contender waited), else the idle horizon.
    fn reach_of(&self, s: usize, t: u64) -> u64 {
        let setup = self.setup;
        let mut held = self.holds.iter().filter(|h| {
            h.sidecar == s
                && h.from_ns <= t + STAMP_SLACK_NS
                && h.to_ns.is_none_or(|to| to + STAMP_SLACK_NS >= t)
        });
        let mut any = false;
        let short = held.all(|h| {
            any = true;
            !h.idle_at(t)
        });
        if any && short {
            setup.horizon_ns
        } else {
            setup.idle_horizon_ns.max(setup.horizon_ns)
        }
    }

    /// Check 1: a holder cut from the store stops at its mark.
    fn cut_holders_stop(&self, v: &mut Verdict) {
        let History {
            setup,
            ops,
            faults,
            sidecars,
            ..
        } = *self;
        let tick_ns = setup.scheme.tick_ns;
        // 1. A holder cut from the store (partitioned, on a split's minority side, or in an
        // outage) stops at its mark.
        for f in faults.iter().filter(|f| {
            matches!(
                f.kind,
                Kind::Partition | Kind::Split | Kind::Outage | Kind::Freeze
            )
        }) {
            // From when the cut was in force: a mark write that completed before it counts.
            let cut_at = f.start_ns.max(f.in_force_ns);
            let stop_by = |s: usize| self.reach_of(s, f.start_ns) + 2 * tick_ns + STAMP_SLACK_NS;
            let cut: Vec<usize> = if matches!(f.kind, Kind::Outage | Kind::Freeze) {
                (0..sidecars).collect()
            } else {
                f.sidecar
                    .into_iter()
                    .chain(f.minority.iter().copied())
                    .collect()
            };
            // The latest served after the cut, and the bound of the holder that served it.
            let mut last: Option<(u64, u64)> = None;
            for op in ops.iter().filter(|o| {
                cut.contains(&o.sidecar)
                    && o.outcome == Outcome::Ok
                    && o.start_ns < f.end_ns
                    && o.start_ns >= f.start_ns
            }) {
                let bound = stop_by(op.sidecar);
                if last.is_none_or(|(l, _)| op.end_ns > l) {
                    last = Some((op.end_ns, bound));
                }
                if op.start_ns > cut_at + bound {
                    v.violations.push(Violation {
                        check: "bounded: a cut-off holder stops at its mark",
                        detail: format!(
                            "served {:.0} ms into its partition (its mark at most {:.0} ms ahead): {}",
                            (op.start_ns - cut_at) as f64 / 1e6,
                            (bound - 2 * tick_ns - STAMP_SLACK_NS) as f64 / 1e6,
                            show(op)
                        ),
                    });
                    break;
                }
            }
            if let Some((last, bound)) = last {
                let e = v.per_kind.get_mut(f.kind.name()).expect("counted");
                let m = e.measures.entry(CUT_STOPS).or_default();
                m.add(last.saturating_sub(cut_at), Some(bound));
            }
        }
    }

    /// Check 2: a waiting sidecar takes over a lost holder's slot in time.
    fn successors_take_over(&self, v: &mut Verdict) {
        let History {
            setup,
            ops,
            holds,
            faults,
            incarnations,
            settle,
            sidecars,
        } = *self;
        let tick_ns = setup.scheme.tick_ns;
        // 2. A waiting sidecar takes over within session timeout + horizon + 1 s of a holder's
        // loss, when no other fault is near (the idle horizon if the holder's mark was not
        // down at the short one by its own records).
        for f in faults.iter().filter(|f| {
            matches!(
                f.kind,
                Kind::Kill
                    | Kind::Stop
                    | Kind::Partition
                    | Kind::Term
                    | Kind::Clock
                    | Kind::Upgrade
            )
        }) {
            let Some(s) = f.sidecar else { continue };
            let take_over = setup.session_timeout_ns
                + self.reach_of(s, f.start_ns)
                + 1_000_000_000
                + 2 * tick_ns
                + STAMP_SLACK_NS;
            // Issuing just before the fault (its start is stamped once the fault is in force).
            if !issuing_at(holds, s, f.start_ns.saturating_sub(2 * STAMP_SLACK_NS)) {
                continue;
            }
            let near =
                |g: &Fault| g.end_ns + settle >= f.start_ns && g.start_ns <= f.start_ns + take_over;
            // No ensemble-wide fault near; waiters that no fault near touches.
            // Judged only alone (a solo fault): another fault near could hold up or take away
            // the successor (a waiter killed after taking the slot, a restarted one ahead of it).
            let alone = !faults.iter().any(|g| !std::ptr::eq(g, f) && near(g));
            // Every sidecar of its pool alive and not issuing when the holder was lost is a
            // successor.
            let waiting: Vec<usize> = (0..sidecars)
                .filter(|&w| {
                    w != s
                        && setup.pool(w) == setup.pool(s)
                        && !issuing_at(holds, w, f.start_ns)
                        && incarnations.iter().any(|i| {
                            i.sidecar == w
                                && i.started_ns < f.start_ns
                                && i.ended_ns.is_none_or(|e| e > f.start_ns)
                        })
                })
                .collect();
            if !alone || waiting.is_empty() {
                continue;
            }
            let first = ops
                .iter()
                .filter(|o| {
                    waiting.contains(&o.sidecar)
                        && o.outcome == Outcome::Ok
                        && o.end_ns > f.start_ns
                })
                .map(|o| o.end_ns)
                .min();
            let took = first.map(|t| t - f.start_ns);
            if let Some(t) = took {
                let e = v.per_kind.get_mut(f.kind.name()).expect("counted");
                e.measures
                    .entry(TAKE_OVER)
                    .or_default()
                    .add(t, Some(take_over));
            }
            match took {
            Some(t) if t <= take_over => {}
            _ if f.start_ns + take_over > setup.faults_end_ns => {}
            _ => v.violations.push(Violation {
                check: "bounded: a successor serves within session timeout + horizon + 1 s",
                detail: format!(
                    "{} of sidecar {s} at {:.3} s: waiting sidecars {waiting:?} served first after {}",
                    f.kind.name(),
                    f.start_ns as f64 / 1e9,
                    took.map_or("never".into(), |t| format!("{:.0} ms", t as f64 / 1e6))
                ),
            }),
        }
        }
    }

    /// Check 2b: the longest gap in IDs of the holders a fault leaving a quorum does not touch.
    fn gaps_beside_a_quorum(&self, v: &mut Verdict) {
        let History {
            ops,
            holds,
            faults,
            settle,
            sidecars,
            ..
        } = *self;
        // 2b. Faults that leave a quorum (a leader killed, a minority split off): the longest
        // gap in IDs of the holders they do not touch (their refusals are judged below).
        for f in faults
            .iter()
            .filter(|f| matches!(f.kind, Kind::Leader | Kind::Split))
        {
            let mut longest: Option<u64> = None;
            // For a split: the sidecars on the majority side (some may have been connected to
            // the server cut off, which the campaign does not know: their gaps show it).
            let spared = |s: usize| match f.kind {
                Kind::Split => !f.minority.contains(&s),
                _ => !f.touches(s),
            };
            for s in (0..sidecars).filter(|&s| spared(s) && issuing_at(holds, s, f.start_ns)) {
                if faults.iter().any(|g| {
                    g.touches(s)
                        && g.start_ns <= f.end_ns + settle
                        && g.end_ns + settle >= f.start_ns
                }) {
                    continue;
                }
                let mut prev = f.start_ns;
                let mut gap = 0;
                for op in ops.iter().filter(|o| {
                    o.sidecar == s
                        && o.outcome == Outcome::Ok
                        && o.end_ns > f.start_ns
                        && o.start_ns < f.end_ns + settle
                }) {
                    gap = gap.max(op.end_ns.saturating_sub(prev));
                    prev = prev.max(op.end_ns);
                }
                longest = Some(longest.map_or(gap, |l| l.max(gap)));
            }
            if let Some(l) = longest {
                let e = v.per_kind.get_mut(f.kind.name()).expect("counted");
                e.measures.entry(GAP).or_default().add(l, None);
            }
        }
    }

    /// Check 3: a holder no fault touches is never refused (refusals under a busy neighbour are
    /// counted, not judged).
    fn untouched_not_refused(&self, v: &mut Verdict) {
        let History {
            setup,
            ops,
            holds,
            faults,
            ..
        } = *self;
        // 3. A holder no fault touches is never refused while the ensemble has a quorum.
        let mut untouched_refusals = 0usize;
        for op in ops
            .iter()
            .filter(|o| o.outcome != Outcome::Ok && o.start_ns < setup.faults_end_ns)
        {
            if faults.iter().any(|f| {
                f.kind == Kind::Busy && f.start_ns <= op.start_ns && op.start_ns <= f.end_ns
            }) {
                v.refusals_under_busy_neighbour += 1;
            }
            // A request still open when a fault began is touched by it.
            if self.disturbed(op.sidecar, op.start_ns)
                || self.disturbed(op.sidecar, op.end_ns)
                || !issuing_at(holds, op.sidecar, op.start_ns)
            {
                continue;
            }
            untouched_refusals += 1;
            if untouched_refusals <= 5 {
                v.violations.push(Violation {
                    check: "bounded: a holder no fault touches is never refused",
                    detail: format!("{:?}: {}", op.outcome, show(op)),
                });
            }
        }
    }

    /// Check 3: a holder no fault touches keeps its lease.
    fn untouched_keep_leases(&self, v: &mut Verdict) {
        let History {
            setup,
            holds,
            incarnations,
            ..
        } = *self;
        for h in holds
            .iter()
            .filter(|h| h.to_ns.is_some_and(|t| t < setup.faults_end_ns))
        {
            let t = h.to_ns.expect("filtered");
            let inc_end = incarnations
                .iter()
                .find(|i| i.sidecar == h.sidecar && i.number == h.incarnation)
                .and_then(|i| i.ended_ns);
            // With --slots, a slot given back to a sidecar holding none is a hand-over, not a loss.
            let gave_back = h.stopped_because.as_deref() == Some(idcar_lease::GAVE_BACK);
            if gave_back
                || self.disturbed(h.sidecar, t)
                || inc_end.is_some_and(|e| e <= t + STAMP_SLACK_NS)
            {
                continue;
            }
            v.violations.push(Violation {
                check: "bounded: a holder no fault touches keeps its lease",
                detail: format!(
                    "sidecar {} incarnation {} stopped issuing slot {} at {:.3} s: {}",
                    h.sidecar,
                    h.incarnation,
                    h.slot,
                    t as f64 / 1e9,
                    h.stopped_because.as_deref().unwrap_or("-")
                ),
            });
        }
    }
}
