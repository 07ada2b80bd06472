//! The nemesis: random, overlapping faults drawn from a seeded generator, each healed after a
//! random time, every one recorded. At most one ensemble-wide fault at a time (with a pause
//! after it so a restarted server can rejoin) and one fault per sidecar.
//!
//! This module holds the nemesis's state and its steps (storms, solo faults, noticing
//! sidecars that exit by themselves); the faults themselves are in the submodules: which
//! fault starts and how (`inject`, `sidecar`, `store`, `operator`, `lock`, `busy`) and how
//! each is healed (`heal`; after a freeze or an outage, a probe says when the store answered
//! again, which the availability bounds count from).

mod busy;
mod heal;
mod inject;
mod kind;
mod lock;
mod operator;
mod sidecar;
mod started;
mod store;

pub use busy::busy;
pub use kind::{Fault, Kind};

use crate::procs::{now_ns, Cluster, SidecarSpec};
use anyhow::Result;
use rand::rngs::StdRng;
use rand::Rng;
use started::Heal;
use std::time::{Duration, Instant};

/// A fault in force: what it is, and when and how it is healed.
struct Active {
    fault: Fault,
    heal_at: Instant,
    heal: Heal,
}

/// Timings the nemesis needs.
pub struct Timing {
    /// The sidecars' session timeout (with etcd: their lease TTL), as they are given it.
    pub session_timeout: Duration,
    /// What a successor may need after a loss (session timeout + horizon + 1 s): the quiet
    /// time around a solo fault, so its effects can be judged against the bounds.
    pub settle: Duration,
    /// How long a storm of overlapping faults lasts before a solo fault.
    pub storm: Duration,
    /// Mean time between two faults starting.
    pub interval: Duration,
    /// Longest a busy neighbour runs.
    pub busy_max: Duration,
}

/// The nemesis alternates storms of random, overlapping faults with a fault alone (nothing
/// else for `settle` before and after it), whose effects the checker can hold to the bounds.
#[derive(Clone, Copy, Debug)]
enum Phase {
    Storm {
        until: Instant,
    },
    /// Waiting for every fault to heal and then `settle` of quiet.
    Draining {
        quiet_since: Option<Instant>,
    },
    /// One fault runs alone; then `settle` of quiet.
    Solo {
        quiet_since: Option<Instant>,
    },
}

/// The nemesis: its seeded generator (every random choice of the campaign's faults), its
/// phase, the faults active and those done, and what it noticed by itself.
pub struct Nemesis {
    rng: StdRng,
    phase: Phase,
    kinds: Vec<Kind>,
    timing: Timing,
    next_at: Instant,
    active: Vec<Active>,
    pub done: Vec<Fault>,
    /// When the last ensemble fault healed (a restarted server needs time to rejoin).
    ensemble_quiet_since: Instant,
    /// Sidecars that exited while no fault touched them: (sidecar, incarnation, status).
    pub unexpected_exits: Vec<(usize, u32, String)>,
    /// A copy of the store's data taken during an outage (every node down), and when.
    snapshot: Option<(std::path::PathBuf, u64)>,
    /// What a fault found wrong by itself (the lock fault): (check, detail).
    pub violations: Vec<(&'static str, String)>,
    /// Lock faults so far (each its own state file).
    locks: u32,
    /// Until when, after a reconfigure fault healed, a sidecar refused at start (it read the
    /// reconfigured parameters) is expected.
    refusals_until: Option<Instant>,
}

/// Most faults active at once in a storm.
const MAX_ACTIVE: usize = 3;
/// Least quiet after an ensemble fault healed before another starts.
const ENSEMBLE_REST: Duration = Duration::from_secs(8);

impl Nemesis {
    /// A nemesis drawing from `kinds` with `rng`, starting with a storm.
    pub fn new(rng: StdRng, kinds: Vec<Kind>, timing: Timing) -> Nemesis {
        let now = Instant::now();
        Nemesis {
            rng,
            phase: Phase::Storm {
                until: now + timing.storm,
            },
            kinds,
            next_at: now + timing.interval,
            timing,
            active: Vec::new(),
            done: Vec::new(),
            ensemble_quiet_since: now,
            unexpected_exits: Vec::new(),
            snapshot: None,
            violations: Vec::new(),
            locks: 0,
            refusals_until: None,
        }
    }

    /// Whether a fault targets sidecar `s`.
    pub fn busy_sidecar(&self, s: usize) -> bool {
        self.active.iter().any(|a| a.fault.sidecar == Some(s))
    }

    /// Heals what is due, notices sidecars that died on their own, starts a fault when due.
    pub fn step(&mut self, cl: &mut Cluster, spec: &SidecarSpec, starting: bool) -> Result<()> {
        let now = Instant::now();
        let mut i = 0;
        while i < self.active.len() {
            if self.active[i].heal_at <= now && self.try_heal(i, cl, spec, false)? {
                let mut a = self.active.remove(i);
                // Unless its heal said when it healed (before waiting for the store to answer).
                if a.fault.end_ns == 0 {
                    a.fault.end_ns = now_ns();
                }
                if a.fault.kind.ensemble() {
                    self.ensemble_quiet_since = Instant::now();
                }
                self.done.push(a.fault);
            } else {
                i += 1;
            }
        }
        let reconfigured = self
            .active
            .iter()
            .any(|a| a.fault.kind == Kind::Reconfigure);
        for s in 0..cl.sidecars.len() {
            if !self.busy_sidecar(s) && cl.sidecars[s].running() && cl.sidecars[s].reap("itself") {
                // Restarted (a fault healed) into a pool whose parameters it disagrees with:
                // refused at start, as it must be. Started again when the pool's parameters
                // are back (at once, if they are already).
                if refused_at_start(&cl.sidecars[s]) {
                    if reconfigured {
                        continue;
                    }
                    if self.refusals_until.is_some_and(|t| now < t) {
                        cl.sidecars[s].spawn(spec, 0)?;
                        continue;
                    }
                }
                let h = cl.sidecars[s].history.last().cloned();
                if let Some(h) = h {
                    self.unexpected_exits
                        .push((s, h.number, h.ended_by.unwrap_or_default()));
                }
                cl.sidecars[s].spawn(spec, 0)?;
            }
        }
        if !starting {
            return Ok(());
        }
        let settle = self.timing.settle;
        // Quiet since when (none while a fault is active), and whether for `settle` already.
        let quiet = |since: Option<Instant>, active: bool| -> (Option<Instant>, bool) {
            let since = if active { None } else { since.or(Some(now)) };
            (since, since.is_some_and(|t| now >= t + settle))
        };
        let active = !self.active.is_empty();
        self.phase = match self.phase {
            Phase::Storm { until } if now >= until => Phase::Draining { quiet_since: None },
            storm @ Phase::Storm { .. } => {
                if now >= self.next_at {
                    if self.active.len() < MAX_ACTIVE {
                        self.start_one(cl, spec)?;
                    }
                    let mean = self.timing.interval.as_secs_f64();
                    // Exponential gaps (a Poisson process), at least 200 ms apart.
                    let gap = -mean * (1.0 - self.rng.random::<f64>()).ln();
                    self.next_at = now + Duration::from_secs_f64(gap.clamp(0.2, 6.0 * mean));
                }
                storm
            }
            Phase::Draining { quiet_since } => {
                let (quiet_since, quiet) = quiet(quiet_since, active);
                if quiet && self.ensemble_quiet_since.elapsed() >= ENSEMBLE_REST {
                    self.start_one(cl, spec)?;
                }
                // Quiet before, so anything active now is the solo fault.
                if quiet && !self.active.is_empty() {
                    Phase::Solo { quiet_since: None }
                } else {
                    Phase::Draining { quiet_since }
                }
            }
            Phase::Solo { quiet_since } => match quiet(quiet_since, active) {
                (_, true) => {
                    self.next_at = now;
                    Phase::Storm {
                        until: now + self.timing.storm,
                    }
                }
                (quiet_since, false) => Phase::Solo { quiet_since },
            },
        };
        Ok(())
    }

    /// Records a fault the campaign itself caused (a move between versions), so that the
    /// checker knows what it touched; the quiet before and after a solo fault starts again
    /// from it, so that solo faults stay alone.
    pub fn record(&mut self, fault: Fault) {
        self.done.push(fault);
        self.phase = match self.phase {
            Phase::Draining { .. } => Phase::Draining { quiet_since: None },
            Phase::Solo { .. } => Phase::Solo { quiet_since: None },
            storm => storm,
        };
    }

    /// Heals every active fault (waiting, bounded, for those that need a process to exit).
    pub fn heal_all(&mut self, cl: &mut Cluster, spec: &SidecarSpec) -> Result<()> {
        while !self.active.is_empty() {
            if self.try_heal(0, cl, spec, true)? {
                let mut a = self.active.remove(0);
                if a.fault.end_ns == 0 {
                    a.fault.end_ns = now_ns();
                }
                self.done.push(a.fault);
            }
        }
        cl.net.heal_all()?;
        for i in 0..cl.zk.nodes.len() {
            if !cl.zk.is_up(i) {
                cl.zk.launch(i)?;
            }
        }
        Ok(())
    }
}

impl Drop for Nemesis {
    /// A busy neighbour and the lock fault's static instances run outside the namespaces: end
    /// them too if the campaign stops early.
    fn drop(&mut self) {
        for a in &mut self.active {
            let children = match &mut a.heal {
                Heal::Busy(child) => vec![child],
                Heal::Lock(p) => vec![&mut p.first, &mut p.second],
                Heal::Probe { child, .. } => vec![child],
                _ => vec![],
            };
            for child in children {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// Whether the sidecar's last incarnation was refused at start by a pool whose parameters it
/// disagrees with (its log says so).
fn refused_at_start(sc: &crate::procs::Sidecar) -> bool {
    sc.history.last().is_some_and(|h| {
        std::fs::read_to_string(&h.log)
            .is_ok_and(|l| l.contains("parameters differ from those of the pool"))
    })
}
