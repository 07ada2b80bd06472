//! The checker: judges the whole recorded history after the run.
//!
//! - **uniqueness**: no ID acknowledged twice, across sidecars and restarts;
//! - **attribution**: every ID decodes to the configured cluster and to a slot its sidecar was
//!   issuing under at that time, above that lease's floor (the sidecar's own lease records:
//!   its `lease_record` log lines);
//! - **bounds** (from docs/zookeeper.md): a partitioned holder stops within the horizon; a
//!   waiting sidecar takes over a lost holder's slot within session timeout + horizon + 1 s; a
//!   holder no fault touches is never refused while the ensemble has a quorum;
//! - **liveness** at the end: checked by the campaign's closing probe (see `main.rs`).

use crate::load::{to_bytes, Op, Outcome};
use crate::nemesis::{Fault, Kind};
use crate::procs::Incarnation;
use idcar::layout::{Layout, Scheme};
use serde::Serialize;
use std::collections::BTreeMap;

/// Slack for comparing a sidecar's log time stamps with the client's (both from the same host
/// clock, corrected for libfaketime's offset): scheduling, and the microseconds of the stamp.
pub const STAMP_SLACK_NS: u64 = 50_000_000;

/// An interval in which a sidecar's generator could issue for a slot (its own records).
#[derive(Clone, Debug, Serialize)]
pub struct Hold {
    pub sidecar: usize,
    pub incarnation: u32,
    pub slot: u64,
    pub floor: u64,
    pub generation: u64,
    pub from_ns: u64,
    /// `None`: still issuing when the history ended.
    pub to_ns: Option<u64>,
    pub stopped_because: Option<String>,
}

/// Reads an incarnation's lease records from its JSON log.
pub fn holds(inc: &Incarnation) -> Vec<Hold> {
    let text = std::fs::read_to_string(&inc.log).unwrap_or_default();
    let skew = inc.skew_s * 1_000_000_000;
    let mut out: Vec<Hold> = Vec::new();
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let Some(kind) = v.get("lease_record").and_then(|k| k.as_str()) else {
            continue;
        };
        let Some(ts) = v
            .get("timestamp")
            .and_then(|t| t.as_str())
            .and_then(|t| humantime::parse_rfc3339_weak(t).ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        else {
            continue;
        };
        let at = (ts.as_nanos() as i128 - i128::from(skew)).max(0) as u64;
        let num = |k: &str| v.get(k).and_then(|n| n.as_u64()).unwrap_or(0);
        match kind {
            "issuing" => out.push(Hold {
                sidecar: inc.sidecar,
                incarnation: inc.number,
                slot: num("slot"),
                floor: num("floor"),
                generation: num("generation"),
                from_ns: at,
                to_ns: None,
                stopped_because: None,
            }),
            "stopped" => {
                // The record names the lease it ends (a change from one window straight to
                // another logs the new one's "issuing" first).
                let (slot, generation) = (num("slot"), num("generation"));
                if let Some(h) = out
                    .iter_mut()
                    .rev()
                    .find(|h| h.to_ns.is_none() && h.slot == slot && h.generation == generation)
                {
                    h.to_ns = Some(at);
                    h.stopped_because = v.get("reason").and_then(|r| r.as_str()).map(String::from);
                }
            }
            _ => {}
        }
    }
    // A process killed while issuing stopped when it died.
    if let Some(end) = inc.ended_ns {
        for h in out.iter_mut().filter(|h| h.to_ns.is_none()) {
            h.to_ns = Some(end);
            h.stopped_because = inc.ended_by.clone();
        }
    }
    out
}

/// What the checker needs to know of the run.
pub struct Setup<'a> {
    pub layout: &'a dyn Layout,
    pub scheme: Scheme,
    pub cluster: u64,
    pub medallion_base: u64,
    pub session_timeout_ns: u64,
    pub horizon_ns: u64,
    /// From here on the campaign was healing and shutting down: not judged for refusals.
    pub faults_end_ns: u64,
    /// The pool's other parameters (the reconfigure fault) and the incarnations (sidecar,
    /// number) started with them, whose IDs decode with them.
    pub other: Option<Other<'a>>,
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
    /// The bound from docs/zookeeper.md, ms (`None`: none promised; refusals are judged).
    pub bound_ms: Option<f64>,
}

impl Measure {
    fn add(&mut self, ns: u64, bound_ns: Option<u64>) {
        self.judged += 1;
        let ms = ns as f64 / 1e6;
        self.longest_ms = Some(self.longest_ms.map_or(ms, |m| m.max(ms)));
        self.bound_ms = bound_ns.map(|b| b as f64 / 1e6);
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
    pub violations: Vec<Violation>,
    pub per_kind: BTreeMap<String, KindFigures>,
    /// Refused or unanswered requests during busy-neighbour faults (not judged: see issue 20).
    pub refusals_under_busy_neighbour: usize,
}

/// The decoded fields the checker uses.
struct Fields {
    slot: u64,
    cluster: u64,
    tick: u64,
}

/// The fields of the layouts the campaign runs most, read without building a JSON map
/// (a long run checks tens of millions of IDs).
fn fast_fields(setup: &Setup, id: u128) -> Option<(u64, u64, u64)> {
    use idcar::layout::{lable64, muid128, sno80, ugd60};
    match setup.layout.name() {
        "lable64" => {
            let f = lable64::Fields::unpack(u64::try_from(id).ok()?).ok()?;
            Some((
                f.generator.into(),
                f.cluster.into(),
                f.timestamp_ms * 1_000_000,
            ))
        }
        "sno80" => {
            let bytes: [u8; sno80::WIDTH] = to_bytes(id, sno80::WIDTH).try_into().ok()?;
            let f = sno80::Fields::unpack(&bytes);
            Some((f.partition.into(), 0, f.unix_ns()))
        }
        "ugd60" => {
            let f = ugd60::Fields::unpack(u64::try_from(id).ok()?);
            let s = ugd60::EPOCH_S + u64::from(f.timestamp_s);
            Some((f.worker.into(), 0, s * 1_000_000_000))
        }
        "muid128" => {
            let f = muid128::Fields::unpack(id);
            let slot = f.medallion.wrapping_sub(setup.medallion_base);
            Some((slot, 0, f.timestamp * 1_000))
        }
        _ => None,
    }
}

fn fields(setup: &Setup, id: u128) -> Result<Fields, String> {
    if let Some((slot, cluster, unix_ns)) = fast_fields(setup, id) {
        if let Some(tick) = setup.scheme.tick_at(unix_ns) {
            return Ok(Fields {
                slot,
                cluster,
                tick,
            });
        }
    }
    let bytes = to_bytes(id, setup.layout.width());
    let m = setup.layout.decode(&bytes).map_err(|e| e.to_string())?;
    let num = |k: &str| m.get(k).and_then(|v| v.as_u64());
    let (slot, cluster) = match setup.layout.name() {
        "lable64" => (num("generator"), num("cluster")),
        "ugd60" => (num("worker"), Some(0)),
        "si53" => (num("MID"), Some(0)),
        "sno80" => (num("partition"), Some(0)),
        "muid128" => (
            num("medallion").map(|m| m.wrapping_sub(setup.medallion_base)),
            Some(0),
        ),
        other => return Err(format!("no field map for layout {other}")),
    };
    let unix_ns = match setup.layout.name() {
        "muid128" => num("timestamp").map(|us| us * 1_000),
        _ => m
            .get("time")
            .and_then(|t| t.as_str())
            .and_then(|t| humantime::parse_rfc3339_weak(t).ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_nanos() as u64),
    };
    let tick = unix_ns.and_then(|ns| setup.scheme.tick_at(ns));
    match (slot, cluster, tick) {
        (Some(slot), Some(cluster), Some(tick)) => Ok(Fields {
            slot,
            cluster,
            tick,
        }),
        _ => Err(format!("decoded fields missing in {m:?}")),
    }
}

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
    uniqueness(ops, ids, &mut v);
    attribution(setup, ops, ids, holds, &mut v);
    bounds(setup, ops, holds, faults, incarnations, &mut v);
    v
}

/// No ID twice: sort (ID, op) pairs and compare neighbours.
fn uniqueness(ops: &[Op], ids: &[u128], v: &mut Verdict) {
    let mut owner = vec![0u32; ids.len()];
    for (i, op) in ops.iter().enumerate() {
        for o in &mut owner[op.first..op.first + op.count] {
            *o = i as u32;
        }
    }
    let mut order: Vec<u32> = (0..ids.len() as u32).collect();
    order.sort_unstable_by_key(|&i| ids[i as usize]);
    for w in order.windows(2) {
        let (a, b) = (w[0] as usize, w[1] as usize);
        if ids[a] == ids[b] {
            v.duplicates += 1;
            if v.duplicates <= 5 {
                v.violations.push(Violation {
                    check: "uniqueness",
                    detail: format!(
                        "ID {:x} acknowledged twice: to {} and to {}",
                        ids[a],
                        show(&ops[owner[a] as usize]),
                        show(&ops[owner[b] as usize])
                    ),
                });
            }
        }
    }
}

/// Every ID: the configured cluster, and a slot its sidecar's incarnation was issuing under
/// while the request was open, with a tick above that lease's floor.
fn attribution(setup: &Setup, ops: &[Op], ids: &[u128], holds: &[Hold], v: &mut Verdict) {
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
    let other = setup.other.as_ref().map(|o| Setup {
        layout: o.layout,
        scheme: o.layout.scheme(),
        medallion_base: o.medallion_base,
        other: None,
        ..*setup
    });
    let reconfigured = |op: &Op| {
        setup
            .other
            .as_ref()
            .is_some_and(|o| o.incarnations.contains(&(op.sidecar, op.incarnation)))
    };
    for (at, op) in ops
        .iter()
        .enumerate()
        .filter(|(_, o)| o.outcome == Outcome::Ok)
    {
        // The leases of its incarnation open while the request was.
        let open: Vec<&Hold> = by_inc
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
            .unwrap_or_default();
        let decode = match &other {
            Some(o) if reconfigured(op) => o,
            _ => setup,
        };
        for &id in &ids[op.first..op.first + op.count] {
            let why = match fields(decode, id) {
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
            };
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
    fence(ops, holds, &issued, v);
}

/// Which lease an ID was issued under.
type HoldKey = (usize, u32, u64, u64);

impl Hold {
    fn key(&self) -> HoldKey {
        (self.sidecar, self.incarnation, self.slot, self.generation)
    }
}

/// The highest tick acknowledged under one lease, with the ID and the request (index).
#[derive(Default)]
struct Highest {
    tick: u64,
    id: u128,
    op: usize,
}

/// The invariant itself (`lease/protocol.rs`), per slot: every tick acknowledged under a lease is at or
/// below the floor of every lease of that slot claimed after it (ordered by when each began
/// issuing). A successor that did not wait past its predecessor's mark, or a mark written
/// below what was issued, breaks this even when no two IDs happen to collide.
fn fence(ops: &[Op], holds: &[Hold], issued: &BTreeMap<HoldKey, Highest>, v: &mut Verdict) {
    // One entry per lease: a lease that lapsed and came back (same generation) has two
    // records with the same floor; the first says when it began.
    let mut first: BTreeMap<HoldKey, &Hold> = BTreeMap::new();
    for h in holds {
        let e = first.entry(h.key()).or_insert(h);
        if h.from_ns < e.from_ns {
            *e = h;
        }
    }
    let mut by_slot: BTreeMap<u64, Vec<&Hold>> = BTreeMap::new();
    for h in first.into_values() {
        by_slot.entry(h.slot).or_default().push(h);
    }
    let mut found = 0usize;
    for (slot, mut hs) in by_slot {
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
                            "slot {slot}: sidecar {} incarnation {} issued tick {} (ID {:x} to {}), \
                             above the floor {floor} of sidecar {} incarnation {}'s later lease",
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

/// Whether sidecar `s` was issuing (by its records) at `t`, well inside a hold.
fn issuing_at(holds: &[Hold], s: usize, t: u64) -> bool {
    holds.iter().any(|h| {
        h.sidecar == s
            && h.from_ns + STAMP_SLACK_NS < t
            && h.to_ns.is_none_or(|to| t + STAMP_SLACK_NS < to)
    })
}

fn bounds(
    setup: &Setup,
    ops: &[Op],
    holds: &[Hold],
    faults: &[Fault],
    incarnations: &[Incarnation],
    v: &mut Verdict,
) {
    let tick_ns = setup.scheme.tick_ns;
    let settle = setup.session_timeout_ns + setup.horizon_ns + 1_000_000_000;
    let sidecars = incarnations
        .iter()
        .map(|i| i.sidecar + 1)
        .max()
        .unwrap_or(0);
    // Windows in which sidecar s is disturbed by some fault (its own or an ensemble's).
    let disturbed = |s: usize, t: u64| {
        faults
            .iter()
            .any(|f| f.touches(s) && f.start_ns <= t && t <= f.end_ns + settle)
    };
    for f in faults {
        let e = v.per_kind.entry(f.kind.name().to_string()).or_default();
        e.faults += 1;
    }

    // 1. A holder cut from ZooKeeper (partitioned, on a split's minority side, or in an
    // outage) stops within the horizon.
    let stop_by = setup.horizon_ns + 2 * tick_ns + STAMP_SLACK_NS;
    for f in faults
        .iter()
        .filter(|f| matches!(f.kind, Kind::Partition | Kind::Split | Kind::Outage))
    {
        let cut: Vec<usize> = if f.kind == Kind::Outage {
            (0..sidecars).collect()
        } else {
            f.sidecar
                .into_iter()
                .chain(f.minority.iter().copied())
                .collect()
        };
        let mut last: Option<u64> = None;
        for op in ops.iter().filter(|o| {
            cut.contains(&o.sidecar)
                && o.outcome == Outcome::Ok
                && o.start_ns < f.end_ns
                && o.start_ns >= f.start_ns
        }) {
            last = Some(last.map_or(op.end_ns, |l: u64| l.max(op.end_ns)));
            if op.start_ns > f.start_ns + stop_by {
                v.violations.push(Violation {
                    check: "bounded: a partitioned holder stops within the horizon",
                    detail: format!(
                        "served {:.0} ms into its partition (horizon {:.0} ms): {}",
                        (op.start_ns - f.start_ns) as f64 / 1e6,
                        setup.horizon_ns as f64 / 1e6,
                        show(op)
                    ),
                });
                break;
            }
        }
        if let Some(last) = last {
            let e = v.per_kind.get_mut(f.kind.name()).expect("counted");
            let m = e.measures.entry(CUT_STOPS).or_default();
            m.add(last.saturating_sub(f.start_ns), Some(stop_by));
        }
    }

    // 2. A waiting sidecar takes over within session timeout + horizon + 1 s of a holder's
    // loss, when no other fault is near.
    let take_over =
        setup.session_timeout_ns + setup.horizon_ns + 1_000_000_000 + 2 * tick_ns + STAMP_SLACK_NS;
    for f in faults.iter().filter(|f| {
        matches!(
            f.kind,
            Kind::Kill | Kind::Stop | Kind::Partition | Kind::Term | Kind::Clock
        )
    }) {
        let Some(s) = f.sidecar else { continue };
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
        // Every sidecar alive and not issuing when the holder was lost is a successor.
        let waiting: Vec<usize> = (0..sidecars)
            .filter(|&w| {
                w != s
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
                waiting.contains(&o.sidecar) && o.outcome == Outcome::Ok && o.end_ns > f.start_ns
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
                g.touches(s) && g.start_ns <= f.end_ns + settle && g.end_ns + settle >= f.start_ns
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

    // 3. A holder no fault touches is never refused while the ensemble has a quorum.
    let mut untouched_refusals = 0usize;
    for op in ops
        .iter()
        .filter(|o| o.outcome != Outcome::Ok && o.start_ns < setup.faults_end_ns)
    {
        if faults
            .iter()
            .any(|f| f.kind == Kind::Busy && f.start_ns <= op.start_ns && op.start_ns <= f.end_ns)
        {
            v.refusals_under_busy_neighbour += 1;
        }
        // A request still open when a fault began is touched by it.
        if disturbed(op.sidecar, op.start_ns)
            || disturbed(op.sidecar, op.end_ns)
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
        let gave_back = h.stopped_because.as_deref() == Some(idcar::lease::GAVE_BACK);
        if gave_back || disturbed(h.sidecar, t) || inc_end.is_some_and(|e| e <= t + STAMP_SLACK_NS)
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

#[cfg(test)]
mod tests {
    use super::*;
    use idcar::layout::lable64;
    use idcar::layout::{by_name, LayoutParams};

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
        }
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
        }
    }

    fn judge(ops: &[Op], ids: &[u128], holds: &[Hold], faults: &[Fault]) -> Verdict {
        let layout = by_name("lable64", LayoutParams::default()).expect("lable64");
        let setup = Setup {
            layout: layout.as_ref(),
            scheme: layout.scheme(),
            cluster: 3,
            medallion_base: 0,
            session_timeout_ns: 2 * S,
            horizon_ns: 4 * S,
            faults_end_ns: T0 + 1_000 * S,
            other: None,
        };
        check(&setup, ops, ids, holds, faults, &[inc(0), inc(1)])
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
                session_timeout_ns: 2 * S,
                horizon_ns: 4 * S,
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
            end_ns: end,
        }
    }

    #[test]
    fn a_cut_holder_serving_past_the_horizon_is_flagged() {
        let (mut ops, mut ids, holds) = clean();
        let cut = fault(Kind::Partition, 0, T0 + 100 * MS, T0 + 8 * S);
        ids.push(id(T0 / MS + 3_000, 0, 1, 3));
        ops.push(op(0, T0 + 3 * S, 3, 1, true));
        assert!(judge(&ops, &ids, &holds, std::slice::from_ref(&cut))
            .violations
            .is_empty());
        ids.push(id(T0 / MS + 5_000, 0, 1, 3));
        ops.push(op(0, T0 + 5 * S, 4, 1, true));
        assert_eq!(
            checks(&judge(&ops, &ids, &holds, &[cut])),
            ["bounded: a partitioned holder stops within the horizon"]
        );
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
        extra.stopped_because = Some(idcar::lease::GAVE_BACK.into());
        *holds.last_mut().unwrap() = extra;
        assert!(judge(&ops, &ids, &holds, &[]).violations.is_empty());
    }

    #[test]
    fn a_successor_slower_than_the_bound_is_flagged() {
        let ms = T0 / MS;
        // Sidecar 0 holds slot 1 and is killed at T0 + 1 s; sidecar 1 waits, then serves.
        let holds = vec![hold(0, 1, ms - 5_000, T0 - S, Some(T0 + S))];
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
}
