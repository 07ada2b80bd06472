//! Attribution: every ID to a lease its sidecar's incarnation held while the request was open
//! (the configured cluster, the lease's slot, a tick above its floor); and the fence: no tick
//! acknowledged under a lease above the floor of a later lease of its slot.

use super::decode::fields;
use super::holds::{Hold, HoldKey};
use super::{show, Setup, Verdict, Violation, STAMP_SLACK_NS};
use crate::load::{Op, Outcome};
use std::collections::BTreeMap;

/// Every ID: the configured cluster, and a slot its sidecar's incarnation was issuing under
/// while the request was open, with a tick above that lease's floor.
pub(super) fn attribution(
    setup: &Setup,
    ops: &[Op],
    ids: &[u128],
    holds: &[Hold],
    v: &mut Verdict,
) {
    let mut by_inc: BTreeMap<(usize, u32), Vec<&Hold>> = BTreeMap::new();
    for h in holds {
        by_inc
            .entry((h.sidecar, h.incarnation))
            .or_default()
            .push(h);
    }
    let mut bad = 0usize;
    let mut issued: BTreeMap<HoldKey, Highest> = BTreeMap::new();
    // Reconfigured incarnations' IDs decode with the other parameters.
    let other = setup.for_other();
    for (at, op) in ops
        .iter()
        .enumerate()
        .filter(|(_, o)| o.outcome == Outcome::Ok)
    {
        let open = open_leases(&by_inc, op);
        let decode = match &other {
            Some(o) if setup.reconfigured(op) => o,
            _ => setup,
        };
        for &id in &ids[op.first..op.first + op.count] {
            let why = attribute(setup, decode, &open, id, at, &mut issued);
            if let Some(why) = why {
                bad += 1;
                if bad <= 5 {
                    v.violations.push(Violation {
                        check: "attribution",
                        detail: format!("{why}: {}", show(op)),
                    });
                }
            }
        }
    }
    if bad > 5 {
        v.violations.push(Violation {
            check: "attribution",
            detail: format!("... {} more IDs not attributable", bad - 5),
        });
    }
    fence(setup, ops, holds, &issued, v);
}

/// The leases of `op`'s incarnation open while the request was.
fn open_leases<'h>(by_inc: &BTreeMap<(usize, u32), Vec<&'h Hold>>, op: &Op) -> Vec<&'h Hold> {
    by_inc
        .get(&(op.sidecar, op.incarnation))
        .map(|c| {
            c.iter()
                .copied()
                .filter(|h| {
                    h.from_ns <= op.end_ns + STAMP_SLACK_NS
                        && h.to_ns.is_none_or(|t| t + STAMP_SLACK_NS >= op.start_ns)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Why `id` (acknowledged to request `at`, decoded by `decode`) is not attributable to one of
/// the `open` leases; `None` if it is (then `issued` records it if it is that lease's highest).
fn attribute(
    setup: &Setup,
    decode: &Setup,
    open: &[&Hold],
    id: u128,
    at: usize,
    issued: &mut BTreeMap<HoldKey, Highest>,
) -> Option<String> {
    match fields(decode, id) {
        Err(e) => Some(format!("ID {id:x} does not decode: {e}")),
        Ok(f) if f.cluster != setup.cluster => Some(format!(
            "ID {id:x} carries cluster {}, configured {}",
            f.cluster, setup.cluster
        )),
        // The latest lease of its slot open then whose floor the tick is above.
        Ok(f) => match open
            .iter()
            .rev()
            .find(|h| h.slot == f.slot && f.tick > h.floor)
        {
            Some(h) => {
                let top = issued.entry(h.key()).or_default();
                if f.tick >= top.tick {
                    *top = Highest {
                        tick: f.tick,
                        id,
                        op: at,
                    };
                }
                None
            }
            None => match open.iter().rev().find(|h| h.slot == f.slot) {
                None => Some(format!(
                    "ID {id:x} carries slot {} which its sidecar was not issuing under \
                     (its lease records) while the request was open",
                    f.slot
                )),
                Some(h) => Some(format!(
                    "ID {id:x} has tick {} at or below its lease's floor {}",
                    f.tick, h.floor
                )),
            },
        },
    }
}

/// The highest tick acknowledged under one lease, with the ID and the request (index).
#[derive(Default)]
struct Highest {
    tick: u64,
    id: u128,
    op: usize,
}

/// The invariant itself (`lease/protocol.rs`), per slot of a pool: every tick acknowledged
/// under a lease is at or below the floor of every lease of that slot claimed after it
/// (ordered by when each began issuing). A successor that did not wait past its
/// predecessor's mark, or a mark written below what was issued, breaks this even when no two
/// IDs happen to collide.
fn fence(
    setup: &Setup,
    ops: &[Op],
    holds: &[Hold],
    issued: &BTreeMap<HoldKey, Highest>,
    v: &mut Verdict,
) {
    // One entry per lease: a lease that lapsed and came back (same generation) has two
    // records with the same floor; the first says when it began.
    let mut first: BTreeMap<HoldKey, &Hold> = BTreeMap::new();
    for h in holds {
        let e = first.entry(h.key()).or_insert(h);
        if h.from_ns < e.from_ns {
            *e = h;
        }
    }
    let mut by_slot: BTreeMap<(usize, u64), Vec<&Hold>> = BTreeMap::new();
    for h in first.into_values() {
        by_slot
            .entry((setup.pool(h.sidecar), h.slot))
            .or_default()
            .push(h);
    }
    let mut found = 0usize;
    for ((pool, slot), mut hs) in by_slot {
        hs.sort_by_key(|h| h.from_ns);
        // The lowest floor among the leases claimed after each one.
        let mut later_floor: Vec<Option<(u64, &Hold)>> = vec![None; hs.len()];
        let mut low: Option<(u64, &Hold)> = None;
        for i in (0..hs.len()).rev() {
            later_floor[i] = low;
            if low.is_none_or(|(f, _)| hs[i].floor < f) {
                low = Some((hs[i].floor, hs[i]));
            }
        }
        for (h, later) in hs.iter().zip(later_floor) {
            let (Some(top), Some((floor, next))) = (issued.get(&h.key()), later) else {
                continue;
            };
            if top.tick > floor {
                found += 1;
                if found <= 5 {
                    v.violations.push(Violation {
                        check: "fence: a successor issues only above its predecessor's ticks",
                        detail: format!(
                            "{}slot {slot}: sidecar {} incarnation {} issued tick {} (ID {:x} to {}), \
                             above the floor {floor} of sidecar {} incarnation {}'s later lease",
                            setup.pools.get(pool).map_or(String::new(), |p| format!("{} pool ", p.name)),
                            h.sidecar,
                            h.incarnation,
                            top.tick,
                            top.id,
                            show(&ops[top.op]),
                            next.sidecar,
                            next.incarnation
                        ),
                    });
                }
            }
        }
    }
}
