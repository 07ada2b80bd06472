//! The checker: judges the whole recorded history after the run.
//!
//! - **uniqueness**: no ID acknowledged twice, across sidecars and restarts;
//! - **order** (layouts that promise it: uuid7): every ID of a slot above every ID of that
//!   slot acknowledged before it was asked for, across holders;
//! - **attribution**: every ID decodes to the configured cluster and to a slot its sidecar was
//!   issuing under at that time, above that lease's floor (the sidecar's own lease records:
//!   its `lease_record` log lines);
//! - **bounds** (from docs/operations.md): a holder cut from the store stops at its mark — within
//!   the horizon when a sidecar had been waiting for a slot (marks come down within a second of
//!   a waiter's arrival), within the idle horizon otherwise; a waiting sidecar takes over a lost
//!   holder's slot within session timeout + that horizon + 1 s; a holder no fault touches is
//!   never refused while the ensemble has a quorum;
//! - **availability after faults** (`recovery`): after a store freeze or outage, every
//!   sidecar it stopped issues again within 2 s of the store answering; a full pool's killed
//!   holder's replacement serves within session timeout + horizon + 2 s; a compaction stops
//!   no one;
//! - **liveness** at the end: checked by the campaign's closing probe (see `main.rs`).
//!
//! Sidecars compete in pools of their own (`procs::Pool`: trees of their own in the store),
//! whose IDs may be equal when the layout has no cluster field: uniqueness, the fence and
//! order are judged per pool and slot.
//!
//! This module holds what the checker is given and what it finds; each check is in its own
//! submodule, the lease records it judges by in `holds`, the decoding of IDs in `decode`.

mod attribution;
mod bounds;
mod decode;
mod holds;
mod order;
mod recovery;

pub use holds::{holds, Hold};
pub use recovery::{Recovery, Took};

use crate::load::Op;
use crate::nemesis::Fault;
use crate::procs::{Incarnation, Pool};
use idcar_core::layout::{Layout, Scheme};
use serde::Serialize;
use std::collections::BTreeMap;

/// Slack for comparing a sidecar's log time stamps with the client's (both from the same host
/// clock, corrected for libfaketime's offset): scheduling, and the microseconds of the stamp.
pub const STAMP_SLACK_NS: u64 = 50_000_000;

/// What the checker needs to know of the run.
pub struct Setup<'a> {
    pub layout: &'a dyn Layout,
    pub scheme: Scheme,
    pub cluster: u64,
    pub medallion_base: u64,
    /// The pools and their sidecars (none: every sidecar in one pool).
    pub pools: &'a [Pool],
    /// The sidecars' session timeout (with etcd: their lease TTL).
    pub session_timeout_ns: u64,
    pub horizon_ns: u64,
    /// The sidecars' --idle-horizon: how far ahead a mark may reach when no one waited.
    pub idle_horizon_ns: u64,
    /// From here on the campaign was healing and shutting down: not judged for refusals.
    pub faults_end_ns: u64,
    /// The pool's other parameters (the reconfigure fault) and the incarnations (sidecar,
    /// number) started with them, whose IDs decode with them.
    pub other: Option<Other<'a>>,
}

impl<'a> Setup<'a> {
    /// The setup that decodes the IDs of incarnations started with the pool's other
    /// parameters (the reconfigure fault), if there are any.
    fn for_other(&self) -> Option<Setup<'a>> {
        self.other.as_ref().map(|o| Setup {
            layout: o.layout,
            scheme: o.layout.scheme(),
            medallion_base: o.medallion_base,
            other: None,
            ..*self
        })
    }

    /// The pool sidecar `s` competes in (an index into `pools`).
    fn pool(&self, s: usize) -> usize {
        crate::procs::pool_of(self.pools, s)
    }

    /// Whether `op`'s incarnation was started with the pool's other parameters.
    fn reconfigured(&self, op: &Op) -> bool {
        self.other
            .as_ref()
            .is_some_and(|o| o.incarnations.contains(&(op.sidecar, op.incarnation)))
    }
}

/// The pool's other parameters, as a layout to decode with.
pub struct Other<'a> {
    pub layout: &'a dyn Layout,
    pub medallion_base: u64,
    pub incarnations: std::collections::BTreeSet<(usize, u32)>,
}

/// One violation, for people.
#[derive(Clone, Debug, Serialize)]
pub struct Violation {
    pub check: &'static str,
    pub detail: String,
}

/// One measured quantity of a fault kind, against its bound.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Measure {
    /// Faults measured (no other fault near enough to blur it).
    pub judged: usize,
    /// The longest time measured, ms.
    pub longest_ms: Option<f64>,
    /// The bound from docs/zookeeper.md of the longest one, ms (`None`: none promised; refusals
    /// are judged). Bounds differ by pool (an idle pool's marks reach further).
    pub bound_ms: Option<f64>,
}

impl Measure {
    fn add(&mut self, ns: u64, bound_ns: Option<u64>) {
        self.judged += 1;
        let ms = ns as f64 / 1e6;
        if self.longest_ms.is_none_or(|m| ms >= m) {
            self.longest_ms = Some(ms);
            self.bound_ms = bound_ns.map(|b| b as f64 / 1e6);
        }
    }
}

/// Unavailability figures of one fault kind: what was measured, by name.
#[derive(Clone, Debug, Default, Serialize)]
pub struct KindFigures {
    pub faults: usize,
    pub measures: BTreeMap<&'static str, Measure>,
}

/// The names of the measures.
pub const CUT_STOPS: &str = "a cut holder's last ID after the cut";
pub const TAKE_OVER: &str = "a waiting sidecar's first ID after a holder's loss";
pub const GAP: &str = "longest gap in IDs of holders it did not touch";

/// The verdict.
#[derive(Debug, Default, Serialize)]
pub struct Verdict {
    pub ids_checked: usize,
    pub duplicates: usize,
    /// Whether the layout promises order per slot (uuid7), so [`order`] judged it.
    pub order_checked: bool,
    /// IDs not above an earlier acknowledged ID of their slot (when `order_checked`).
    pub order_violations: usize,
    pub violations: Vec<Violation>,
    pub per_kind: BTreeMap<String, KindFigures>,
    /// Availability after faults, per kind with a bound on the time to IDs again.
    pub recovery: BTreeMap<String, Recovery>,
    /// Refused or unanswered requests during busy-neighbour faults (not judged: a neighbour
    /// that starves the host is outside the bounds).
    pub refusals_under_busy_neighbour: usize,
}

/// A request, for people.
fn show(op: &Op) -> String {
    format!(
        "sidecar {} incarnation {} {} count {} [{:.3} s .. {:.3} s]",
        op.sidecar,
        op.incarnation,
        if op.http { "HTTP" } else { "binary" },
        op.asked,
        op.start_ns as f64 / 1e9,
        op.end_ns as f64 / 1e9
    )
}

/// Judges the history. `ops` index into `ids` through `first`/`count`.
pub fn check(
    setup: &Setup,
    ops: &[Op],
    ids: &[u128],
    holds: &[Hold],
    faults: &[Fault],
    incarnations: &[Incarnation],
) -> Verdict {
    let mut v = Verdict {
        ids_checked: ids.len(),
        ..Verdict::default()
    };
    uniqueness(
        ops,
        ids,
        setup.layout.random_low_bits(),
        setup.pools,
        &mut v,
    );
    order::order(setup, ops, ids, incarnations, &mut v);
    attribution::attribution(setup, ops, ids, holds, &mut v);
    bounds::bounds(setup, ops, holds, faults, incarnations, &mut v);
    recovery::recovery(setup, ops, holds, faults, incarnations, &mut v);
    v
}

/// No ID twice within a pool: sort (pool, ID) pairs and compare neighbours. IDs are compared
/// without their `random_low` bits (random bits and what derives from them): two IDs that
/// differ only there are one ID issued twice.
fn uniqueness(ops: &[Op], ids: &[u128], random_low: u32, pools: &[Pool], v: &mut Verdict) {
    let mut owner = vec![0u32; ids.len()];
    let mut pool = vec![0u8; ids.len()];
    for (i, op) in ops.iter().enumerate() {
        let p = crate::procs::pool_of(pools, op.sidecar) as u8;
        for (o, q) in owner[op.first..op.first + op.count]
            .iter_mut()
            .zip(&mut pool[op.first..op.first + op.count])
        {
            *o = i as u32;
            *q = p;
        }
    }
    let key = |i: u32| {
        let id = ids[i as usize].checked_shr(random_low).unwrap_or(0);
        (pool[i as usize], id)
    };
    let mut order: Vec<u32> = (0..ids.len() as u32).collect();
    order.sort_unstable_by_key(|&i| key(i));
    for w in order.windows(2) {
        if key(w[0]) == key(w[1]) {
            let (a, b) = (w[0] as usize, w[1] as usize);
            v.duplicates += 1;
            if v.duplicates <= 5 {
                v.violations.push(Violation {
                    check: "uniqueness",
                    detail: format!(
                        "ID {:x} acknowledged twice (as {:x}): to {} and to {}",
                        ids[a],
                        ids[b],
                        show(&ops[owner[a] as usize]),
                        show(&ops[owner[b] as usize])
                    ),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::Outcome;
    use crate::nemesis::Kind;
    use crate::procs::Pool;
    use idcar_core::layout::lable64;
    use idcar_core::layout::{by_name, LayoutParams};

    const MS: u64 = 1_000_000;
    const S: u64 = 1_000_000_000;
    /// The run's start, in ns since the epoch (2026).
    const T0: u64 = 1_790_000_000 * S;

    fn id(ms: u64, seq: u8, slot: u8, cluster: u8) -> u128 {
        let f = lable64::Fields {
            timestamp_ms: ms,
            sequence: seq,
            generator: slot,
            cluster,
        };
        u128::from(f.pack().expect("in range"))
    }

    #[test]
    fn a_measure_shows_the_bound_of_its_longest() {
        let mut m = Measure::default();
        m.add(7_000 * MS, Some(60_000 * MS));
        m.add(3_000 * MS, Some(4_000 * MS));
        assert_eq!(
            (m.judged, m.longest_ms, m.bound_ms),
            (2, Some(7_000.0), Some(60_000.0))
        );
        m.add(9_000 * MS, Some(4_000 * MS));
        assert_eq!((m.longest_ms, m.bound_ms), (Some(9_000.0), Some(4_000.0)));
    }

    fn op(sidecar: usize, at: u64, first: usize, count: usize, ok: bool) -> Op {
        Op {
            sidecar,
            incarnation: 1,
            http: false,
            asked: count.max(1) as u32,
            start_ns: at,
            end_ns: at + MS,
            outcome: if ok {
                Outcome::Ok
            } else {
                Outcome::Refused("no lease is held".into())
            },
            first,
            count,
        }
    }

    fn hold(sidecar: usize, slot: u64, floor_ms: u64, from: u64, to: Option<u64>) -> Hold {
        Hold {
            sidecar,
            incarnation: 1,
            slot,
            floor: floor_ms,
            generation: 1,
            from_ns: from,
            to_ns: to,
            stopped_because: None,
            reach: Vec::new(),
        }
    }

    /// `h`, its mark written down at the short horizon (a contender waiting) since `at`.
    fn short_since(mut h: Hold, at: u64) -> Hold {
        h.reach.push((at, false));
        h
    }

    fn inc(sidecar: usize) -> Incarnation {
        Incarnation {
            sidecar,
            number: 1,
            skew_s: 0,
            started_ns: T0 - 60 * S,
            ended_ns: None,
            ended_by: None,
            log: "/nonexistent".into(),
            reconfigured: false,
            version: "this",
        }
    }

    /// The run's setup for `layout`: cluster 3, T = 2 s, H = 4 s.
    fn setup(layout: &dyn idcar_core::layout::Layout) -> Setup<'_> {
        Setup {
            layout,
            scheme: layout.scheme(),
            cluster: 3,
            medallion_base: 0,
            pools: &[],
            session_timeout_ns: 2 * S,
            horizon_ns: 4 * S,
            idle_horizon_ns: 30 * S,
            faults_end_ns: T0 + 1_000 * S,
            other: None,
        }
    }

    fn judge(ops: &[Op], ids: &[u128], holds: &[Hold], faults: &[Fault]) -> Verdict {
        let layout = by_name("lable64", LayoutParams::default()).expect("lable64");
        check(
            &setup(layout.as_ref()),
            ops,
            ids,
            holds,
            faults,
            &[inc(0), inc(1)],
        )
    }

    fn checks(v: &Verdict) -> Vec<&'static str> {
        v.violations.iter().map(|x| x.check).collect()
    }

    /// Two sidecars, each issuing under its own slot: a clean history passes.
    fn clean() -> (Vec<Op>, Vec<u128>, Vec<Hold>) {
        let ms = T0 / MS;
        let ids = vec![
            id(ms + 10, 0, 1, 3),
            id(ms + 10, 0, 2, 3),
            id(ms + 11, 0, 1, 3),
        ];
        let ops = vec![
            op(0, T0 + 10 * MS, 0, 1, true),
            op(1, T0 + 10 * MS, 1, 1, true),
            op(0, T0 + 11 * MS, 2, 1, true),
        ];
        let holds = vec![
            hold(0, 1, ms - 5_000, T0 - S, None),
            hold(1, 2, ms - 5_000, T0 - S, None),
        ];
        (ops, ids, holds)
    }

    #[test]
    fn a_clean_history_passes() {
        let (ops, ids, holds) = clean();
        let v = judge(&ops, &ids, &holds, &[]);
        assert!(v.violations.is_empty(), "{:?}", v.violations);
        assert_eq!((v.ids_checked, v.duplicates), (3, 0));
    }

    #[test]
    fn an_id_acknowledged_twice_is_a_duplicate() {
        let (mut ops, mut ids, holds) = clean();
        ids.push(ids[0]);
        ops.push(op(0, T0 + 12 * MS, 3, 1, true));
        let v = judge(&ops, &ids, &holds, &[]);
        assert_eq!(v.duplicates, 1);
        assert_eq!(checks(&v), ["uniqueness"]);
    }

    #[test]
    fn wrong_cluster_foreign_slot_and_ticks_at_the_floor_are_not_attributable() {
        let ms = T0 / MS;
        for bad in [
            id(ms + 10, 5, 1, 4),    // another cluster
            id(ms + 10, 5, 9, 3),    // a slot sidecar 0 never held
            id(ms - 5_000, 5, 1, 3), // at its lease's floor
        ] {
            let (mut ops, mut ids, holds) = clean();
            ids.push(bad);
            ops.push(op(0, T0 + 12 * MS, 3, 1, true));
            assert_eq!(checks(&judge(&ops, &ids, &holds, &[])), ["attribution"]);
        }
        // An ID served after the sidecar's records say it stopped issuing.
        let (mut ops, mut ids, mut holds) = clean();
        holds[0].to_ns = Some(T0 + 5 * MS);
        ids.push(id(ms + 900, 0, 1, 3));
        ops.push(op(0, T0 + 900 * MS, 3, 1, true));
        assert!(checks(&judge(&ops, &ids, &holds, &[])).contains(&"attribution"));
    }

    /// An incarnation started with the pool's other parameters (si53 with 6 MID bits, the
    /// reconfigure fault) is judged by them: slot 3's IDs under 6 bits read as slot 1 under 5.
    #[test]
    fn a_reconfigured_incarnation_decodes_with_the_other_parameters() {
        let pool = by_name("si53", LayoutParams::default()).expect("si53");
        let six = LayoutParams {
            mid_bits: 6,
            ..LayoutParams::default()
        };
        let other_layout = by_name("si53", six).expect("si53 with 6 MID bits");
        let ms = T0 / MS;
        let mab = ms - six.base_clock_ms;
        let ids = vec![u128::from(mab << 13 | 3 << 7 | 5)];
        let ops = vec![op(0, T0 + 10 * MS, 0, 1, true)];
        let holds = vec![hold(0, 3, mab - 5_000, T0 - S, None)];
        let judge = |reconfigured: bool| {
            let setup = Setup {
                layout: pool.as_ref(),
                scheme: pool.scheme(),
                cluster: 0,
                medallion_base: 0,
                pools: &[],
                session_timeout_ns: 2 * S,
                horizon_ns: 4 * S,
                idle_horizon_ns: 30 * S,
                faults_end_ns: T0 + 1_000 * S,
                other: Some(Other {
                    layout: other_layout.as_ref(),
                    medallion_base: 0,
                    incarnations: reconfigured.then_some((0, 1)).into_iter().collect(),
                }),
            };
            check(&setup, &ops, &ids, &holds, &[], &[inc(0)])
        };
        assert_eq!(checks(&judge(false)), ["attribution"]);
        let v = judge(true);
        assert!(v.violations.is_empty(), "{:?}", v.violations);
    }

    fn fault(kind: Kind, sidecar: usize, start: u64, end: u64) -> Fault {
        Fault {
            kind,
            sidecar: Some(sidecar),
            zk: None,
            minority: Vec::new(),
            did: String::new(),
            skew_s: 0,
            start_ns: start,
            in_force_ns: start,
            end_ns: end,
            answered_ns: None,
        }
    }

    #[test]
    fn a_cut_holder_serving_past_its_mark_is_flagged() {
        let ms = T0 / MS;
        let cut = fault(Kind::Partition, 0, T0 + 100 * MS, T0 + 40 * S);
        // No record of the mark coming down: it may be the idle horizon (30 s) ahead.
        let (mut ops, mut ids, holds) = clean();
        ids.push(id(ms + 5_000, 0, 1, 3));
        ops.push(op(0, T0 + 5 * S, 3, 1, true));
        let v = judge(&ops, &ids, &holds, std::slice::from_ref(&cut));
        assert!(v.violations.is_empty(), "{:?}", checks(&v));
        let mut late = (ops.clone(), ids.clone());
        late.1.push(id(ms + 31_000, 0, 1, 3));
        late.0.push(op(0, T0 + 31 * S, 4, 1, true));
        assert_eq!(
            checks(&judge(&late.0, &late.1, &holds, std::slice::from_ref(&cut))),
            ["bounded: a cut-off holder stops at its mark"]
        );
        // Its mark was down at the short horizon (4 s) since before the cut.
        let mut holds = holds;
        holds[0] = short_since(holds[0].clone(), T0 - 2 * S);
        assert_eq!(
            checks(&judge(&ops, &ids, &holds, std::slice::from_ref(&cut))),
            ["bounded: a cut-off holder stops at its mark"]
        );
        ops.pop();
        ids.pop();
        ids.push(id(ms + 3_000, 0, 1, 3));
        ops.push(op(0, T0 + 3 * S, 3, 1, true));
        let v = judge(&ops, &ids, &holds, &[cut]);
        assert!(v.violations.is_empty(), "{:?}", checks(&v));
    }

    #[test]
    fn an_untouched_holder_refused_is_flagged_but_not_under_a_fault() {
        let (mut ops, ids, holds) = clean();
        ops.push(op(1, T0 + 20 * MS, 3, 0, false));
        assert_eq!(
            checks(&judge(&ops, &ids, &holds, &[])),
            ["bounded: a holder no fault touches is never refused"]
        );
        let kill = fault(Kind::Stop, 1, T0 + 15 * MS, T0 + 3 * S);
        assert!(judge(&ops, &ids, &holds, &[kill]).violations.is_empty());
    }

    #[test]
    fn an_untouched_holder_stopping_is_flagged_unless_it_gave_the_slot_back() {
        let (ops, ids, mut holds) = clean();
        // Sidecar 1 holds a second slot and stops issuing it with no fault near.
        let mut extra = hold(1, 3, T0 / MS - 5_000, T0 - S, Some(T0 + 2 * S));
        extra.stopped_because = Some("slot 3 lost: node not exists".into());
        holds.push(extra.clone());
        assert_eq!(
            checks(&judge(&ops, &ids, &holds, &[])),
            ["bounded: a holder no fault touches keeps its lease"]
        );
        // Given back to a sidecar holding none (--slots): a hand-over, not a loss.
        extra.stopped_because = Some(idcar_lease::GAVE_BACK.into());
        *holds.last_mut().unwrap() = extra;
        assert!(judge(&ops, &ids, &holds, &[]).violations.is_empty());
    }

    #[test]
    fn a_successor_slower_than_the_bound_is_flagged() {
        let ms = T0 / MS;
        // Sidecar 0 holds slot 1 and is killed at T0 + 1 s; sidecar 1 waits, then serves.
        // Its mark down at the short horizon: a contender waited.
        let holds = vec![short_since(
            hold(0, 1, ms - 5_000, T0 - S, Some(T0 + S)),
            T0 - S,
        )];
        let kill = fault(Kind::Kill, 0, T0 + S, T0 + 2 * S);
        let late = |after: u64| {
            let ids = vec![id(ms + 1_000, 0, 1, 3), id((T0 + S + after) / MS, 0, 1, 3)];
            let ops = vec![op(0, T0, 0, 1, true), op(1, T0 + S + after, 1, 1, true)];
            let mut h = holds.clone();
            h.push(hold(1, 1, ms + 1_000, T0 + S + after - MS, None));
            judge(&ops, &ids, &h, std::slice::from_ref(&kill))
        };
        assert!(late(6 * S).violations.is_empty());
        assert_eq!(
            checks(&late(9 * S)),
            ["bounded: a successor serves within session timeout + horizon + 1 s"]
        );
    }

    #[test]
    fn a_successor_below_its_predecessors_ticks_breaks_the_fence() {
        let ms = T0 / MS;
        // Sidecar 0 issued slot 1 up to ms + 900, was killed; sidecar 1 took slot 1 later
        // with a floor below that (it did not wait past the mark): no two IDs collide.
        let ids = vec![id(ms + 900, 0, 1, 3), id(ms + 2_000, 5, 1, 3)];
        let ops = vec![
            op(0, T0 + 900 * MS, 0, 1, true),
            op(1, T0 + 2 * S, 1, 1, true),
        ];
        let holds = |floor: u64| {
            vec![
                hold(0, 1, ms - 5_000, T0 - S, Some(T0 + S)),
                hold(1, 1, floor, T0 + 1_500 * MS, None),
            ]
        };
        let kill = [fault(Kind::Kill, 0, T0 + S, T0 + 2 * S)];
        let v = judge(&ops, &ids, &holds(ms + 500), &kill);
        assert_eq!(v.duplicates, 0);
        assert_eq!(
            checks(&v),
            ["fence: a successor issues only above its predecessor's ticks"]
        );
        assert!(judge(&ops, &ids, &holds(ms + 900), &kill)
            .violations
            .is_empty());
    }

    #[test]
    fn a_lease_that_lapses_and_comes_back_is_not_its_own_successor() {
        let ms = T0 / MS;
        let ids = vec![id(ms + 10, 0, 1, 3), id(ms + 9_000, 0, 1, 3)];
        let ops = vec![
            op(0, T0 + 10 * MS, 0, 1, true),
            op(0, T0 + 9 * S, 1, 1, true),
        ];
        // Issuing, stopped at the mark in an outage, issuing again under the same lease.
        let holds = vec![
            hold(0, 1, ms - 5_000, T0 - S, Some(T0 + 4 * S)),
            hold(0, 1, ms - 5_000, T0 + 8 * S, None),
        ];
        let outage = Fault {
            sidecar: None,
            ..fault(Kind::Outage, 0, T0 + S, T0 + 7 * S)
        };
        let v = judge(&ops, &ids, &holds, &[outage]);
        assert!(v.violations.is_empty(), "{:?}", v.violations);
    }

    fn uuid7_id(ms: u64, counter: u32, slot: u16) -> u128 {
        let f = idcar_core::layout::uuid7::Fields {
            unix_ts_ms: ms,
            counter,
            cluster: 3,
            slot,
            random: 0x5a5a5a,
        };
        f.pack().expect("in range")
    }

    /// Judges order; sidecar 1's clock is `skew_1` seconds off.
    fn order_of(ops: &[Op], ids: &[u128], skew_1: i64) -> Verdict {
        let layout = by_name("uuid7", LayoutParams::default()).expect("uuid7");
        let mut v = Verdict::default();
        let mut skewed = inc(1);
        skewed.skew_s = skew_1;
        order::order(&setup(layout.as_ref()), ops, ids, &[inc(0), skewed], &mut v);
        v
    }

    /// Two uuid7 IDs that differ only in their random bits (and check byte) are one ID
    /// issued twice.
    #[test]
    fn ids_are_compared_without_their_random_bits() {
        let ms = T0 / MS;
        let a = uuid7_id(ms, 10, 1);
        let b = idcar_core::layout::uuid7::Fields {
            random: 0x123456,
            ..idcar_core::layout::uuid7::Fields::unpack(a).unwrap()
        }
        .pack()
        .unwrap();
        assert_ne!(a, b);
        let ops = vec![op(0, T0, 0, 1, true), op(1, T0 + MS, 1, 1, true)];
        let mut v = Verdict::default();
        uniqueness(&ops, &[a, b], 32, &[], &mut v);
        assert_eq!(v.duplicates, 1, "{:?}", v.violations);
        let mut v = Verdict::default();
        uniqueness(&ops, &[a, uuid7_id(ms, 11, 1)], 32, &[], &mut v);
        assert_eq!(v.duplicates, 0);
    }

    /// uuid7 promises order per slot: an ID not above one acknowledged before it was asked
    /// for is a violation, whichever sidecar had it; open requests and other slots are not
    /// ordered against each other.
    #[test]
    fn order_per_slot_is_judged_for_layouts_that_promise_it() {
        let ms = T0 / MS;
        let ids = vec![
            uuid7_id(ms, 10, 1),
            uuid7_id(ms, 11, 1),
            uuid7_id(ms, 5, 2),
            uuid7_id(ms + 1, 0, 1),
        ];
        let ops = vec![
            op(0, T0, 0, 2, true),
            op(1, T0, 2, 1, true),
            op(1, T0 + 10 * MS, 3, 1, true),
        ];
        let v = order_of(&ops, &ids, 0);
        assert!(v.order_checked);
        assert_eq!(v.order_violations, 0, "{:?}", v.violations);
        // A successor's ID below its predecessor's, asked for after that was acknowledged.
        let mut late = ids.clone();
        late[3] = uuid7_id(ms, 9, 1);
        let v = order_of(&ops, &late, 0);
        assert_eq!(v.order_violations, 1, "{:?}", v.violations);
        assert_eq!(checks(&v), ["order"]);
        // The same two, asked for while the first was open: not ordered.
        let mut open = ops.clone();
        open[2].start_ns = T0;
        assert_eq!(order_of(&open, &late, 0).order_violations, 0);
        // One answer out of order.
        let mut swapped = ids.clone();
        swapped.swap(0, 1);
        assert_eq!(order_of(&ops, &swapped, 0).order_violations, 1);
        // A sidecar whose clock is 3 s behind: a predecessor cut from its store may still
        // serve under its old claim after its successor began. Lease order is the fence's.
        assert_eq!(order_of(&ops, &late, -3).order_violations, 0);
        // An ID of another cluster is judged with its own cluster's slot.
        let mut foreign = ids.clone();
        foreign[3] = idcar_core::layout::uuid7::Fields {
            cluster: 4,
            ..idcar_core::layout::uuid7::Fields::unpack(uuid7_id(ms, 9, 1)).unwrap()
        }
        .pack()
        .unwrap();
        assert_eq!(order_of(&ops, &foreign, 0).order_violations, 0);
        // Layouts that do not promise order are not judged.
        let v = judge(&ops, &[id(ms, 1, 1, 3); 4], &[], &[]);
        assert!(!v.order_checked);
    }

    /// The pools of the availability tests: main (sidecars 0..3 for 2 slots: one waits),
    /// idle (3 and 4, for 4 slots), full (5 and 6, for 2 slots).
    fn pools() -> Vec<Pool> {
        Pool::layout(3, 2, 1, 2, 2)
    }

    /// Judges with `pools()`, every sidecar's first incarnation alive throughout.
    fn judge_pools(ops: &[Op], ids: &[u128], holds: &[Hold], faults: &[Fault]) -> Verdict {
        let layout = by_name("lable64", LayoutParams::default()).expect("lable64");
        let pools = pools();
        let setup = Setup {
            pools: &pools,
            ..setup(layout.as_ref())
        };
        let incs: Vec<Incarnation> = (0..7).map(inc).collect();
        check(&setup, ops, ids, holds, faults, &incs)
    }

    /// The times measured, ms.
    fn times(r: &Recovery) -> Vec<f64> {
        r.took.iter().map(|t| t.ms).collect()
    }

    fn store_fault(kind: Kind, start: u64, end: u64, answered: u64) -> Fault {
        Fault {
            sidecar: None,
            answered_ns: Some(answered),
            ..fault(kind, 0, start, end)
        }
    }

    /// The same ID in two pools is not a duplicate (pools have trees of their own; layouts
    /// without a cluster field issue equal IDs in them), twice in one pool it is.
    #[test]
    fn uniqueness_is_judged_per_pool() {
        let ms = T0 / MS;
        let a = id(ms, 1, 1, 3);
        let pools = pools();
        let twice = |other: usize| {
            let ops = vec![op(0, T0, 0, 1, true), op(other, T0 + MS, 1, 1, true)];
            let mut v = Verdict::default();
            uniqueness(&ops, &[a, a], 0, &pools, &mut v);
            v.duplicates
        };
        assert_eq!(twice(1), 1, "two sidecars of the main pool");
        assert_eq!(twice(3), 0, "a main and an idle sidecar");
        assert_eq!(twice(5), 0, "a main and a full sidecar");
    }

    /// Slot 1 of the idle pool is not slot 1 of the main pool: their leases do not fence each
    /// other.
    #[test]
    fn the_fence_is_judged_per_pool() {
        let ms = T0 / MS;
        let ids = vec![id(ms + 900, 0, 1, 3), id(ms + 2_000, 5, 1, 3)];
        let holds = |successor: usize| {
            vec![
                hold(0, 1, ms - 5_000, T0 - S, Some(T0 + S)),
                hold(successor, 1, ms + 500, T0 + 1_500 * MS, None),
            ]
        };
        let ops = |successor: usize| {
            vec![
                op(0, T0 + 900 * MS, 0, 1, true),
                op(successor, T0 + 2 * S, 1, 1, true),
            ]
        };
        // A fault that ends sidecar 0's lease (no successor judged).
        let kill = [fault(Kind::Panic, 0, T0 + S, T0 + 2 * S)];
        assert_eq!(
            checks(&judge_pools(&ops(1), &ids, &holds(1), &kill)),
            ["fence: a successor issues only above its predecessor's ticks"]
        );
        let v = judge_pools(&ops(3), &ids, &holds(3), &kill);
        assert!(v.violations.is_empty(), "{:?}", v.violations);
    }

    /// The store frozen from T0 + 1 s to T0 + 4 s answers at T0 + 4.2 s; sidecar 3 of the idle
    /// pool (its mark far ahead) serves through the freeze, is refused once the store answers
    /// (its session gone) and serves again `after` the answer.
    fn frozen_idle_holder(after: u64) -> Verdict {
        let ms = T0 / MS;
        let answered = T0 + 4_200 * MS;
        let ops = vec![
            op(3, T0, 0, 0, true),
            op(3, T0 + 2 * S, 0, 0, true),
            op(3, answered + 100 * MS, 0, 0, false),
            op(3, answered + 300 * MS, 0, 0, false),
            op(3, answered + after, 0, 0, true),
        ];
        let holds = vec![
            hold(3, 1, ms - 5_000, T0 - S, Some(answered + 100 * MS)),
            hold(3, 1, ms + 1_000, answered + after - MS, None),
        ];
        let freeze = store_fault(Kind::Freeze, T0 + S, T0 + 4 * S, answered);
        judge_pools(&ops, &[], &holds, &[freeze])
    }

    #[test]
    fn a_sidecar_a_frozen_store_stopped_must_issue_again_within_2_s_of_its_answer() {
        let v = frozen_idle_holder(1_500 * MS);
        assert!(v.violations.is_empty(), "{:?}", v.violations);
        let r = &v.recovery["freeze"];
        assert_eq!((r.faults, r.judged, r.broken), (1, 1, 0));
        assert_eq!(times(r), [1_501.0]);
        let v = frozen_idle_holder(37 * S);
        assert_eq!(
            checks(&v),
            ["availability: IDs again within 2 s of the store answering"]
        );
        assert_eq!(v.recovery["freeze"].broken, 1);
        assert_eq!(v.recovery["freeze"].worst().map(|t| t.ms), Some(37_001.0));
        // Killed 10 s after the answer, before it issued again: at least 10 s, still late.
        let answered = T0 + 4_200 * MS;
        let ms = T0 / MS;
        let ops = vec![
            op(3, T0, 0, 0, true),
            op(3, answered + 100 * MS, 0, 0, false),
            op(3, answered + 37 * S, 0, 0, true),
        ];
        let holds = vec![hold(3, 1, ms - 5_000, T0 - S, Some(answered + 100 * MS))];
        let faults = [
            store_fault(Kind::Freeze, T0 + S, T0 + 4 * S, answered),
            fault(Kind::Kill, 3, answered + 10 * S, answered + 11 * S),
        ];
        let v = judge_pools(&ops, &[], &holds, &faults);
        let worst = v.recovery["freeze"].worst().expect("measured");
        assert_eq!((worst.ms, worst.at_least), (10_000.0, true));
        assert_eq!(
            checks(&v),
            ["availability: IDs again within 2 s of the store answering"]
        );
    }

    /// In a pool where sidecars wait, a waiter that takes the place of a holder the fault
    /// stopped counts: the pool serves with as many sidecars as before.
    #[test]
    fn a_waiter_taking_a_stopped_holders_place_counts() {
        let ms = T0 / MS;
        let answered = T0 + 6 * S;
        let took = |after: u64| {
            let ops = vec![
                op(0, T0, 0, 0, true),
                op(1, T0, 0, 0, true),
                op(2, T0, 0, 0, false),
                // Holder 0 refused from the outage on, and never again serves.
                op(0, T0 + 2 * S, 0, 0, false),
                op(0, answered + 3 * S, 0, 0, false),
                op(1, answered + 100 * MS, 0, 0, true),
                // The waiter serves in its place.
                op(2, answered + after, 0, 0, true),
            ];
            let holds = vec![
                hold(0, 1, ms - 5_000, T0 - S, Some(T0 + 2 * S)),
                hold(1, 2, ms - 5_000, T0 - S, None),
                hold(2, 1, ms + 4_000, answered + after - MS, None),
            ];
            let outage = store_fault(Kind::Outage, T0 + S, T0 + 5 * S, answered);
            judge_pools(&ops, &[], &holds, &[outage])
        };
        let v = took(800 * MS);
        assert!(v.violations.is_empty(), "{:?}", v.violations);
        assert_eq!(times(&v.recovery["outage"]), [801.0]);
        assert_eq!(v.recovery["outage"].watched, 2);
        assert_eq!(
            checks(&took(5 * S)),
            ["availability: IDs again within 2 s of a restarted store answering, and 1 s for its cold start"]
        );
    }

    /// A holder of the full pool killed at T0 + 1 s and replaced at once: the replacement
    /// serves within session timeout + horizon + 2 s (8 s here) of the kill.
    #[test]
    fn a_full_pools_replacement_must_serve_within_the_bound() {
        let ms = T0 / MS;
        let kill = T0 + S;
        let replaced = |after: u64| {
            let ops = vec![
                op(5, T0, 0, 0, true),
                op(6, T0, 0, 0, true),
                op(5, kill + 10 * MS, 0, 0, false),
                op(5, kill + 3 * S, 0, 0, false),
                op(6, kill + 3 * S, 0, 0, true),
                op(5, kill + after, 0, 0, true),
            ];
            let holds = vec![
                hold(5, 0, ms - 5_000, T0 - S, Some(kill)),
                hold(6, 1, ms - 5_000, T0 - S, None),
                hold(5, 0, ms + 5_000, kill + after - MS, None),
            ];
            let f = fault(Kind::FullKill, 5, kill, kill + S);
            judge_pools(&ops, &[], &holds, &[f])
        };
        let v = replaced(7 * S);
        assert!(v.violations.is_empty(), "{:?}", v.violations);
        let r = &v.recovery["full-kill"];
        assert_eq!(
            (r.judged, r.bound_ms, times(r)),
            (1, 8_000.0, vec![7_001.0])
        );
        assert_eq!(
            checks(&replaced(57 * S)),
            [
                "availability: a full pool's replacement serves within session timeout + \
                 horizon + 2 s"
            ]
        );
        // Another fault on the pool near it blurs the measure: not judged.
        let mut ops = vec![op(5, T0, 0, 0, true), op(5, kill + 57 * S, 0, 0, true)];
        ops.push(op(5, kill + 10 * MS, 0, 0, false));
        let holds = vec![hold(5, 0, ms - 5_000, T0 - S, Some(kill))];
        let faults = [
            fault(Kind::FullKill, 5, kill, kill + S),
            fault(Kind::Stop, 6, kill + 2 * S, kill + 4 * S),
        ];
        let v = judge_pools(&ops, &[], &holds, &faults);
        assert_eq!(v.recovery["full-kill"].judged, 0);
        assert!(v.violations.is_empty(), "{:?}", v.violations);
    }

    /// A compaction must stop no sidecar that was issuing.
    #[test]
    fn a_compaction_that_stops_a_holder_is_flagged() {
        let ms = T0 / MS;
        let compaction = fault(Kind::Compact, 0, T0 + S, T0 + 2 * S);
        let compaction = Fault {
            sidecar: None,
            ..compaction
        };
        let mut ops = vec![
            op(3, T0, 0, 0, true),
            op(3, T0 + 1_500 * MS, 0, 0, true),
            op(4, T0, 0, 0, true),
            op(4, T0 + 1_500 * MS, 0, 0, true),
        ];
        let holds = vec![
            hold(3, 1, ms - 5_000, T0 - S, None),
            hold(4, 2, ms - 5_000, T0 - S, None),
        ];
        let v = judge_pools(&ops, &[], &holds, std::slice::from_ref(&compaction));
        assert!(v.violations.is_empty(), "{:?}", v.violations);
        assert_eq!(
            (v.recovery["compact"].watched, v.recovery["compact"].broken),
            (2, 0)
        );
        ops.push(op(4, T0 + 1_600 * MS, 0, 0, false));
        ops.push(op(4, T0 + 1_700 * MS, 0, 0, true));
        let v = judge_pools(&ops, &[], &holds, &[compaction]);
        assert_eq!(checks(&v), ["availability: a compaction stops no sidecar"]);
        assert_eq!(times(&v.recovery["compact"]), [101.0]);
    }
}
