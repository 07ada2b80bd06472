//! Availability after faults: for each fault of a kind with a documented bound on the time
//! until IDs flow again, the time from its heal to the first ID acknowledged by each sidecar
//! it stopped, held to that bound like the duplicate count:
//!
//! - the store frozen past the sessions (`freeze`) or down (`outage`): counted from the
//!   store's first answer to the campaign's probe after the heal, every sidecar that was
//!   issuing and was refused meanwhile issues again within [`AFTER_ANSWER_NS`] (and
//!   [`COLD_START_NS`] more after an outage: restarted servers are still starting). In a pool
//!   where sidecars wait for slots, whoever takes a slot counts: the sidecars that were
//!   issuing are matched, earliest first, with the first IDs of those that stopped and of
//!   the waiters (the pool serves with as many sidecars as before);
//! - a holder killed in the full pool and replaced at once (`full-kill`): counted from the
//!   kill, the replacement (or whoever takes the slot) serves within session timeout (etcd:
//!   lease TTL) + horizon + 2 s;
//! - a compaction of etcd's history (`compact`): no sidecar issuing when it ran is refused or
//!   stops issuing in the session timeout + horizon + 1 s after it.
//!
//! A fault is judged only where nothing else blurs it: no other fault touching the whole
//! store or every sidecar near it (from `settle` before it to `settle` past its heal, or the
//! end of its bound if later), and only the sidecars no other fault near it touches (in a
//! pool where sidecars wait, and in the full pool after a kill, none if one is: a waiter's
//! turn depends on every holder).

use super::holds::{issuing_at, Hold};
use super::{Setup, Verdict, Violation, STAMP_SLACK_NS};
use crate::load::{Op, Outcome};
use crate::nemesis::{Fault, Kind};
use crate::procs::Incarnation;
use serde::Serialize;

/// After the store answers again (a freeze, an outage), every sidecar it stopped issues again
/// within this.
pub const AFTER_ANSWER_NS: u64 = 2_000_000_000;

/// What an outage adds: every server restarted from kill -9 answers its first request while
/// it still starts up (a cold process, every sidecar's session and claim at once, on the two
/// cores that also run the sidecars and the load).
pub const COLD_START_NS: u64 = 1_000_000_000;

const S: u64 = 1_000_000_000;

/// One time until IDs again.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Took {
    /// The sidecar stopped (in a pool where sidecars wait, its place was taken by a waiter
    /// perhaps).
    pub sidecar: usize,
    pub ms: f64,
    /// Not yet issuing again then, when another fault touched it or the history ended: the
    /// time is at least this.
    pub at_least: bool,
}

/// The availability figures of one fault kind.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Recovery {
    /// What is measured, from when.
    pub what: &'static str,
    pub faults: usize,
    /// Faults judged (nothing else near enough to blur them).
    pub judged: usize,
    /// Sidecars issuing when a judged fault began (and not touched by another fault).
    pub watched: usize,
    /// For each sidecar a judged fault stopped, the time until it (or the waiter that took
    /// its place) issued again (compaction: how long it went without IDs).
    pub took: Vec<Took>,
    /// The bound, ms (compaction: 0, none may stop).
    pub bound_ms: f64,
    /// Times over the bound.
    pub broken: usize,
}

impl Recovery {
    /// The longest time.
    pub fn worst(&self) -> Option<Took> {
        self.sorted().last().copied()
    }

    /// The median time (at least, if either middle one is).
    pub fn median(&self) -> Option<Took> {
        let t = self.sorted();
        if t.is_empty() {
            return None;
        }
        let n = t.len();
        let (a, b) = (t[(n - 1) / 2], t[n / 2]);
        Some(Took {
            sidecar: b.sidecar,
            ms: (a.ms + b.ms) / 2.0,
            at_least: a.at_least || b.at_least,
        })
    }

    /// The times, shortest first.
    fn sorted(&self) -> Vec<Took> {
        let mut t = self.took.clone();
        t.sort_by(|a, b| a.ms.total_cmp(&b.ms));
        t
    }
}

/// What each kind judges: (what is measured, the check's name).
fn names(kind: Kind) -> Option<(&'static str, &'static str)> {
    Some(match kind {
        Kind::Freeze => (
            "from the store's first answer to each sidecar it stopped issuing again",
            "availability: IDs again within 2 s of the store answering",
        ),
        Kind::Outage => (
            "from the store's first answer to each sidecar it stopped issuing again",
            "availability: IDs again within 2 s of a restarted store answering, and 1 s for its cold start",
        ),
        Kind::FullKill => (
            "from the kill to the replacement's first ID",
            "availability: a full pool's replacement serves within session timeout + horizon + 2 s",
        ),
        Kind::Compact => (
            "holders issuing when it ran that stopped",
            "availability: a compaction stops no sidecar",
        ),
        _ => return None,
    })
}

/// Each sidecar's requests, by when they started.
struct Requests<'a> {
    ops: &'a [Op],
    by_sidecar: Vec<Vec<u32>>,
}

impl<'a> Requests<'a> {
    fn new(ops: &'a [Op]) -> Requests<'a> {
        let n = ops.iter().map(|o| o.sidecar + 1).max().unwrap_or(0);
        let mut by_sidecar: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (i, o) in ops.iter().enumerate() {
            by_sidecar[o.sidecar].push(i as u32);
        }
        for v in &mut by_sidecar {
            v.sort_unstable_by_key(|&i| ops[i as usize].start_ns);
        }
        Requests { ops, by_sidecar }
    }

    /// Sidecar `s`'s requests that started in `[from, to]`.
    fn started(&self, s: usize, from: u64, to: u64) -> impl Iterator<Item = &'a Op> + '_ {
        let mine = self.by_sidecar.get(s).map_or(&[][..], |v| &v[..]);
        let at = mine.partition_point(|&i| self.ops[i as usize].start_ns < from);
        mine[at..]
            .iter()
            .map(|&i| &self.ops[i as usize])
            .take_while(move |o| o.start_ns <= to)
    }

    /// When sidecar `s` was last refused (or not answered) among requests started in
    /// `[from, to]`: that request's start.
    fn last_refused(&self, s: usize, from: u64, to: u64) -> Option<u64> {
        self.started(s, from, to)
            .filter(|o| o.outcome != Outcome::Ok)
            .map(|o| o.start_ns)
            .last()
    }

    /// When sidecar `s` first acknowledged IDs to a request started at or after `from`.
    fn first_ids(&self, s: usize, from: u64) -> Option<u64> {
        self.started(s, from, u64::MAX)
            .filter(|o| o.outcome == Outcome::Ok)
            .map(|o| o.end_ns)
            .min()
    }
}

/// Judges every fault of a kind with an availability bound (see the module's comment).
pub(super) fn recovery(
    setup: &Setup,
    ops: &[Op],
    holds: &[Hold],
    faults: &[Fault],
    incarnations: &[Incarnation],
    v: &mut Verdict,
) {
    let settle = setup.session_timeout_ns + setup.horizon_ns + S;
    let requests = Requests::new(ops);
    let history = History {
        setup,
        holds,
        faults,
        incarnations,
        requests: &requests,
        end: ops.iter().map(|o| o.end_ns).max().unwrap_or(0),
    };
    for f in faults {
        let Some((what, check)) = names(f.kind) else {
            continue;
        };
        let (heal, bound) = heal_and_bound(setup, f);
        let r = v.recovery.entry(f.kind.name().to_string()).or_default();
        r.what = what;
        r.bound_ms = bound as f64 / 1e6;
        r.faults += 1;
        // The store never answered the probe: nothing to count from.
        if heal == u64::MAX {
            continue;
        }
        // Until when the fault's effects are looked for: a sidecar refused up to `settle`
        // after the heal (one that finds its session gone only then) was stopped by it too.
        let until = match f.kind {
            Kind::Compact => f.end_ns + settle,
            _ => heal + bound.max(settle),
        };
        let near: Vec<&Fault> = faults
            .iter()
            .filter(|g| {
                !std::ptr::eq(*g, f) && g.start_ns <= until && g.end_ns + settle >= f.start_ns
            })
            .collect();
        if near
            .iter()
            .any(|g| g.kind.ensemble() || g.kind.touches_all())
        {
            continue;
        }
        let judged = Judged {
            f,
            heal,
            bound,
            until,
            near,
            check,
        };
        let pools: Vec<usize> = match (f.kind, f.sidecar) {
            (Kind::FullKill, Some(s)) => vec![setup.pool(s)],
            _ => (0..setup.pools.len().max(1)).collect(),
        };
        let mut any = false;
        for p in pools {
            any |= history.judge_pool(&judged, p, r, &mut v.violations);
        }
        if any {
            r.judged += 1;
        }
    }
}

/// When a fault healed (the store answered again; a kill or a compaction: its start) and how
/// long after it IDs must flow again.
fn heal_and_bound(setup: &Setup, f: &Fault) -> (u64, u64) {
    match f.kind {
        Kind::FullKill => (
            f.start_ns,
            setup.session_timeout_ns + setup.horizon_ns + 2 * S,
        ),
        Kind::Compact => (f.start_ns, 0),
        Kind::Outage => (
            f.answered_ns.unwrap_or(u64::MAX),
            AFTER_ANSWER_NS + COLD_START_NS,
        ),
        _ => (f.answered_ns.unwrap_or(u64::MAX), AFTER_ANSWER_NS),
    }
}

/// The recorded history a fault's recovery is judged from.
struct History<'a> {
    setup: &'a Setup<'a>,
    holds: &'a [Hold],
    faults: &'a [Fault],
    incarnations: &'a [Incarnation],
    requests: &'a Requests<'a>,
    /// When the last request ended.
    end: u64,
}

/// One fault being judged: when it healed, its bound, until when its effects are looked
/// for, the faults near it, and the check it counts under.
struct Judged<'a> {
    f: &'a Fault,
    heal: u64,
    bound: u64,
    until: u64,
    near: Vec<&'a Fault>,
    check: &'static str,
}

impl History<'_> {
    /// Judges the fault in pool `p`: whether the pool could be judged (no other fault blurs
    /// it), each stopped sidecar's time to IDs again in `r`, and a violation for each past
    /// the bound.
    fn judge_pool(
        &self,
        j: &Judged<'_>,
        p: usize,
        r: &mut Recovery,
        violations: &mut Vec<Violation>,
    ) -> bool {
        let f = j.f;
        let pool = self.setup.pools.get(p);
        let members: Vec<usize> = match pool {
            Some(pool) => pool.sidecars.clone().collect(),
            None => (0..self.requests.by_sidecar.len()).collect(),
        };
        let contended = pool.is_some_and(|p| p.contended());
        let touched = |s: usize| j.near.iter().any(|g| g.touches(s));
        // Where a sidecar waits for a slot (and a full pool's replacement does), every
        // holder's fault is the waiter's too.
        if (contended || f.kind == Kind::FullKill) && members.iter().any(|&s| touched(s)) {
            return false;
        }
        let alive = |s: usize| {
            self.incarnations.iter().any(|i| {
                i.sidecar == s
                    && i.started_ns < f.start_ns
                    && i.ended_ns.is_none_or(|e| e > f.start_ns)
            })
        };
        let candidates: Vec<usize> = members
            .into_iter()
            .filter(|&s| !touched(s) && alive(s))
            .collect();
        // Issuing just before the fault (its start is stamped once it is in force).
        let before = f.start_ns.saturating_sub(2 * STAMP_SLACK_NS);
        let (issuing, waiting): (Vec<usize>, Vec<usize>) = candidates
            .iter()
            .partition(|&&s| issuing_at(self.holds, s, before));
        r.watched += issuing.len();
        if f.kind == Kind::Compact {
            let looked = Looked {
                requests: self.requests,
                holds: self.holds,
                incarnations: self.incarnations,
                until: j.until,
                history_end: self.end,
            };
            looked.compaction(self.setup, f, &issuing, r, j.check, violations);
            return true;
        }
        // Those it stopped: refused (or unanswered) meanwhile, and when each last was.
        let stopped: Vec<(usize, u64)> = issuing
            .iter()
            .filter_map(|&s| Some((s, self.requests.last_refused(s, f.start_ns, j.until)?)))
            .collect();
        // When each issued again; in a pool where sidecars wait, a waiter's first IDs
        // count too, earliest first.
        let mut again: Vec<u64> = stopped
            .iter()
            .filter_map(|&(s, refused)| self.requests.first_ids(s, refused + 1))
            .collect();
        if contended {
            again.extend(
                waiting
                    .iter()
                    .filter_map(|&w| self.requests.first_ids(w, f.start_ns)),
            );
        }
        again.sort_unstable();
        let whole_pool = (contended || f.kind == Kind::FullKill).then_some(p);
        for (k, &(s, _)) in stopped.iter().enumerate() {
            let end = self.cut_off(f, s, whole_pool);
            let (t, at_least) = match again.get(k) {
                Some(&t) if t <= end => (t.saturating_sub(j.heal), false),
                _ => (end.saturating_sub(j.heal), true),
            };
            if at_least && t <= j.bound {
                // Cut off before the bound: not known.
                continue;
            }
            r.took.push(Took {
                sidecar: s,
                ms: t as f64 / 1e6,
                at_least,
            });
            if t > j.bound {
                r.broken += 1;
                violations.push(too_slow(j, s, contended, t, at_least));
            }
        }
        true
    }

    /// How long sidecar `s`'s measure after fault `f` can run: until a later fault touches it
    /// (in `whole_pool`, where sidecars wait or the full pool after a kill: any of the pool's)
    /// or the whole store, or the history ends.
    fn cut_off(&self, f: &Fault, s: usize, whole_pool: Option<usize>) -> u64 {
        let blurs = |g: &Fault| {
            g.kind.ensemble()
                || g.kind.touches_all()
                || match whole_pool.and_then(|p| self.setup.pools.get(p)) {
                    Some(pool) => pool.sidecars.clone().any(|m| g.touches(m)),
                    None if whole_pool.is_some() => false,
                    None => g.touches(s),
                }
        };
        self.faults
            .iter()
            .filter(|g| !std::ptr::eq(*g, f) && g.start_ns > f.start_ns && blurs(g))
            .map(|g| g.start_ns)
            .min()
            .map_or(self.end, |t| t.min(self.end))
    }
}

/// The violation of a sidecar `s` that took `t` ns to issue again (`at_least`: had not yet
/// when its measure was cut off), past the fault's bound.
fn too_slow(j: &Judged<'_>, s: usize, contended: bool, t: u64, at_least: bool) -> Violation {
    Violation {
        check: j.check,
        detail: format!(
            "{} at {:.3} s (healed at {:.3} s): sidecar {s}{} {} {:.0} ms (bound {:.0} ms)",
            j.f.kind.name(),
            j.f.start_ns as f64 / 1e9,
            j.heal as f64 / 1e9,
            if contended {
                " (or a waiter in its place)"
            } else {
                ""
            },
            if at_least {
                "not issuing again yet after"
            } else {
                "issued again after"
            },
            t as f64 / 1e6,
            j.bound as f64 / 1e6
        ),
    }
}

/// What a compaction's holders are judged on: their requests, lease records and
/// incarnations, until when.
struct Looked<'a> {
    requests: &'a Requests<'a>,
    holds: &'a [Hold],
    incarnations: &'a [Incarnation],
    until: u64,
    history_end: u64,
}

impl Looked<'_> {
    /// A compaction (`f`): none of the sidecars `issuing` when it ran is refused or stops
    /// issuing.
    fn compaction(
        &self,
        setup: &Setup,
        f: &Fault,
        issuing: &[usize],
        r: &mut Recovery,
        check: &'static str,
        violations: &mut Vec<Violation>,
    ) {
        for &s in issuing {
            let refused = self
                .requests
                .started(s, f.start_ns, self.until)
                .find(|o| o.outcome != Outcome::Ok)
                .map(|o| o.start_ns);
            // A lease it stopped issuing under: not given back (--slots), not the end of its
            // process, not the campaign's own end.
            let lost = self
                .holds
                .iter()
                .filter(|h| h.sidecar == s)
                .filter_map(|h| Some((h, h.to_ns?)))
                .filter(|&(_, t)| t >= f.start_ns && t <= self.until && t < setup.faults_end_ns)
                .filter(|(h, _)| h.stopped_because.as_deref() != Some(idcar_lease::GAVE_BACK))
                .filter(|&(h, t)| {
                    !self.incarnations.iter().any(|i| {
                        i.sidecar == s
                            && i.number == h.incarnation
                            && i.ended_ns.is_some_and(|e| e <= t + STAMP_SLACK_NS)
                    })
                })
                .map(|(_, t)| t)
                .min();
            let Some(from) = refused.into_iter().chain(lost).min() else {
                continue;
            };
            let gap = self
                .requests
                .first_ids(s, from + 1)
                .map(|t| t.saturating_sub(from));
            r.took.push(Took {
                sidecar: s,
                ms: gap.unwrap_or(self.history_end.saturating_sub(from)) as f64 / 1e6,
                at_least: gap.is_none(),
            });
            r.broken += 1;
            violations.push(Violation {
                check,
                detail: format!(
                    "compaction at {:.3} s ({}): sidecar {s} {} {:.0} ms after it, IDs again {}",
                    f.start_ns as f64 / 1e9,
                    f.did,
                    if refused.is_some() {
                        "refused"
                    } else {
                        "stopped issuing"
                    },
                    from.saturating_sub(f.start_ns) as f64 / 1e6,
                    gap.map_or("never".into(), |t| format!(
                        "{:.0} ms later",
                        t as f64 / 1e6
                    ))
                ),
            });
        }
    }
}
