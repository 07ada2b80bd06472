//! Order, for layouts that promise it (uuid7). Each ID of a slot is above every ID of that
//! slot acknowledged before its request was sent, when both came from sidecars on the same
//! clock (the same libfaketime offset): one holder's IDs across clock steps, and a successor's
//! above its predecessor's across restarts and takeovers. One answer's IDs of a slot increase.
//!
//! Requests open at the same time are not ordered against each other. Nor are IDs of sidecars
//! whose clocks disagree: a holder cut from its store serves up to its mark by its own clock,
//! so one whose clock is behind its successor's may still issue IDs under its old claim after
//! the successor began — lower ones, never equal. What holds there is lease order, every ID
//! under a later claim above every ID under an earlier one: the fence check judges it.

use super::decode::fields;
use super::{show, Setup, Verdict, Violation};
use crate::load::{Op, Outcome};
use crate::procs::Incarnation;
use std::collections::BTreeMap;

/// The IDs one request got of one slot.
struct Span {
    op: usize,
    start_ns: u64,
    end_ns: u64,
    min: u128,
    max: u128,
}

/// Spans are compared within a group: one slot of one cluster of one pool, one clock.
type Group = (usize, u64, u64, i64);

pub(super) fn order(
    setup: &Setup,
    ops: &[Op],
    ids: &[u128],
    incarnations: &[Incarnation],
    v: &mut Verdict,
) {
    if !setup.layout.increasing() {
        return;
    }
    v.order_checked = true;
    let skew: BTreeMap<(usize, u32), i64> = incarnations
        .iter()
        .map(|i| ((i.sidecar, i.number), i.skew_s))
        .collect();
    // Incarnations started with the pool's other parameters decode with them.
    let other = setup.for_other();
    let mut groups: BTreeMap<Group, Vec<Span>> = BTreeMap::new();
    let mut bad = Vec::new();
    for (at, op) in ops
        .iter()
        .enumerate()
        .filter(|(_, o)| o.outcome == Outcome::Ok)
    {
        let decode = match &other {
            Some(o) if setup.reconfigured(op) => o,
            _ => setup,
        };
        let clock = skew
            .get(&(op.sidecar, op.incarnation))
            .copied()
            .unwrap_or(0);
        let mut mine: BTreeMap<Group, Span> = BTreeMap::new();
        for &id in &ids[op.first..op.first + op.count] {
            // An ID that does not decode is attribution's to report.
            let Ok(f) = fields(decode, id) else { continue };
            let group = (setup.pool(op.sidecar), f.cluster, f.slot, clock);
            match mine.get_mut(&group) {
                Some(s) => {
                    if id <= s.max {
                        bad.push(format!(
                            "slot {}: {id:x} after {:x} in one answer: {}",
                            f.slot,
                            s.max,
                            show(op)
                        ));
                    }
                    s.min = s.min.min(id);
                    s.max = s.max.max(id);
                }
                None => {
                    let span = Span {
                        op: at,
                        start_ns: op.start_ns,
                        end_ns: op.end_ns,
                        min: id,
                        max: id,
                    };
                    mine.insert(group, span);
                }
            }
        }
        for (group, span) in mine {
            groups.entry(group).or_default().push(span);
        }
    }
    for ((_, _, slot, _), spans) in groups {
        not_above_earlier(slot, spans, ops, &mut bad);
    }
    v.order_violations = bad.len();
    for detail in bad.iter().take(5) {
        v.violations.push(Violation {
            check: "order",
            detail: detail.clone(),
        });
    }
    if bad.len() > 5 {
        v.violations.push(Violation {
            check: "order",
            detail: format!("... {} more IDs out of their slot's order", bad.len() - 5),
        });
    }
}

/// Slot `slot`'s answers (`spans`, one per request) against the requests answered before
/// each was asked for: every ID must be above all of theirs; what is not goes to `bad`.
fn not_above_earlier(slot: u64, mut spans: Vec<Span>, ops: &[Op], bad: &mut Vec<String>) {
    // Sweep the requests by when they were sent, keeping the greatest ID of every request
    // answered before then.
    spans.sort_unstable_by_key(|s| s.start_ns);
    let mut ends: Vec<(u64, u128, usize)> = spans
        .iter()
        .enumerate()
        .map(|(i, s)| (s.end_ns, s.max, i))
        .collect();
    ends.sort_unstable_by_key(|e| e.0);
    let mut done = 0;
    let mut greatest: Option<(u128, usize)> = None;
    for b in &spans {
        while done < ends.len() && ends[done].0 < b.start_ns {
            let (_, max, i) = ends[done];
            if greatest.is_none_or(|(g, _)| max > g) {
                greatest = Some((max, i));
            }
            done += 1;
        }
        if let Some((g, i)) = greatest {
            if b.min <= g {
                bad.push(format!(
                    "slot {slot}: {:x} acknowledged to {} is not above {g:x}, acknowledged \
                     before it was asked for to {}",
                    b.min,
                    show(&ops[b.op]),
                    show(&ops[spans[i].op])
                ));
            }
        }
    }
}
