//! The sidecars' own lease records (their `lease_record` log lines): when each incarnation
//! was issuing under which slot, above which floor.

use super::STAMP_SLACK_NS;
use crate::procs::Incarnation;
use serde::Serialize;

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
    /// When each mark write that changed how far the mark reaches landed, and whether it
    /// reached the idle horizon (`true`) or only the short one (the holder's own records).
    pub reach: Vec<(u64, bool)>,
}

impl Hold {
    /// Whether the mark in force at `t` may reach the idle horizon: the holder's last record
    /// before `t` says so, or it left none.
    pub fn idle_at(&self, t: u64) -> bool {
        self.reach
            .iter()
            .rev()
            .find(|(at, _)| *at <= t)
            .is_none_or(|(_, idle)| *idle)
    }
}

/// Reads an incarnation's lease records from its JSON log.
pub fn holds(inc: &Incarnation) -> Vec<Hold> {
    let text = std::fs::read_to_string(&inc.log).unwrap_or_default();
    let skew = inc.skew_s * 1_000_000_000;
    let mut out: Vec<Hold> = Vec::new();
    // Mark records logged before their hold's "issuing" one (the first write comes first).
    let mut early: Vec<(u64, u64, u64, bool)> = Vec::new();
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
            "issuing" => {
                let (slot, generation) = (num("slot"), num("generation"));
                let reach = early
                    .iter()
                    .filter(|e| e.0 == slot && e.1 == generation)
                    .map(|e| (e.2, e.3))
                    .collect();
                out.push(Hold {
                    sidecar: inc.sidecar,
                    incarnation: inc.number,
                    slot,
                    floor: num("floor"),
                    generation,
                    from_ns: at,
                    to_ns: None,
                    stopped_because: None,
                    reach,
                });
            }
            "mark" => {
                let (slot, generation) = (num("slot"), num("generation"));
                let idle = v.get("reach").and_then(|r| r.as_str()) != Some("short");
                match out
                    .iter_mut()
                    .rev()
                    .find(|h| h.to_ns.is_none() && h.slot == slot && h.generation == generation)
                {
                    Some(h) => h.reach.push((at, idle)),
                    None => early.push((slot, generation, at, idle)),
                }
            }
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

/// Which lease an ID was issued under.
pub(super) type HoldKey = (usize, u32, u64, u64);

impl Hold {
    pub(super) fn key(&self) -> HoldKey {
        (self.sidecar, self.incarnation, self.slot, self.generation)
    }
}

/// Whether sidecar `s` was issuing (by its records) at `t`, well inside a hold.
pub(super) fn issuing_at(holds: &[Hold], s: usize, t: u64) -> bool {
    holds.iter().any(|h| {
        h.sidecar == s
            && h.from_ns + STAMP_SLACK_NS < t
            && h.to_ns.is_none_or(|to| t + STAMP_SLACK_NS < to)
    })
}
