//! The nemesis: random, overlapping faults drawn from a seeded generator, each healed after a
//! random time, every one recorded. At most one ensemble-wide fault at a time (with a pause
//! after it so a restarted server can rejoin) and one fault per sidecar.

use crate::procs::{now_ns, Cluster, SidecarSpec};
use anyhow::Result;
use nix::sys::signal::Signal;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::Rng;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The kinds of fault, by their flag names.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, clap::ValueEnum, serde::Serialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Cut one sidecar from every ZooKeeper server (silent drops).
    Partition,
    /// Cut one ZooKeeper server (and up to two sidecars) from the rest.
    Split,
    /// kill -9 a sidecar, restart it.
    Kill,
    /// SIGSTOP a sidecar past its session timeout, then SIGCONT.
    Stop,
    /// kill -9 the ZooKeeper leader, restart it.
    Leader,
    /// kill -9 every ZooKeeper server, restart them.
    Outage,
    /// Restart a sidecar with its clock stepped ±3 s (libfaketime), later restart it true.
    Clock,
    /// SIGTERM a sidecar (graceful hand-over), restart it.
    Term,
    /// A CPU-saturating process beside the sidecars for tens of seconds.
    Busy,
    /// An operator deletes the pool's `params` (a parameter change, a restore's procedure):
    /// every holder stops and the pool records a new identity.
    Params,
    /// An operator lowers a held slot's mark by 10 s, or deletes it: its holder writes it back;
    /// or its holder is killed at once, and its successor's floor comes from the witness.
    Mark,
    /// Restart a sidecar with a panic planted in a request handler or on the lease thread: it
    /// aborts, and is restarted plain.
    Panic,
    /// Restart a sidecar with a longer --lease-horizon and --max-clock-wait than the others
    /// (an instance that disagrees), later restart it plain (SIGTERM).
    Disagree,
    /// Cut a sidecar from the store and SIGTERM it: its release times out (`--shutdown-grace`);
    /// the cut healed near the end of the grace, then it is restarted.
    Release,
    /// Restore the store from a snapshot taken during an earlier outage, by the documented
    /// procedure: every sidecar frozen, the store's data replaced and the store restarted,
    /// `params` deleted, the sidecars thawed.
    Restore,
    /// Restart a sidecar so that it drops its leases' release handles without a release a
    /// few seconds later, living on until its shutdown grace ends (what an unwinding panic
    /// would do; `--plant-panic abandon:..`), then restart it plain.
    Abandon,
    /// An operator changes the pool's parameters: `params` deleted and recreated with other
    /// ones (see `procs::Reconfig`), one sidecar restarted with them; the others stop and
    /// disagree. Healed by restarting it plain and deleting `params` again.
    Reconfigure,
    /// A static instance (a state file, generator = the pool's size + 1: outside the pool, even one a reconfigure made larger) is
    /// started beside the sidecars; an operator deletes its lock file and starts a second one
    /// on the same state file, which must be refused while the first serves on.
    Lock,
}

impl Kind {
    pub const ALL: [Kind; 18] = [
        Kind::Partition,
        Kind::Split,
        Kind::Kill,
        Kind::Stop,
        Kind::Leader,
        Kind::Outage,
        Kind::Clock,
        Kind::Term,
        Kind::Busy,
        Kind::Params,
        Kind::Mark,
        Kind::Panic,
        Kind::Disagree,
        Kind::Release,
        Kind::Restore,
        Kind::Abandon,
        Kind::Reconfigure,
        Kind::Lock,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Partition => "partition",
            Kind::Split => "split",
            Kind::Kill => "kill",
            Kind::Stop => "stop",
            Kind::Leader => "leader",
            Kind::Outage => "outage",
            Kind::Clock => "clock",
            Kind::Term => "term",
            Kind::Busy => "busy",
            Kind::Params => "params",
            Kind::Mark => "mark",
            Kind::Panic => "panic",
            Kind::Disagree => "disagree",
            Kind::Release => "release",
            Kind::Restore => "restore",
            Kind::Abandon => "abandon",
            Kind::Reconfigure => "reconfigure",
            Kind::Lock => "lock",
        }
    }

    /// At most one of these at a time. An operator's fault on the store counts too: a lowered
    /// mark is written back by a holder that can reach the store, so it never overlaps a fault
    /// that could cost its holder the session before then (outage, split, busy neighbour).
    fn ensemble(self) -> bool {
        matches!(
            self,
            Kind::Split
                | Kind::Leader
                | Kind::Outage
                | Kind::Params
                | Kind::Mark
                | Kind::Restore
                | Kind::Reconfigure
        )
    }

    /// Whether the fault may cost any sidecar its lease, not only the one it targets: an
    /// outage, the busy neighbour, and a split (a silent cut of a server costs the clients
    /// connected to it their session when the session timeout is short: see
    /// docs/zookeeper.md#bounds; which sidecars those were, the campaign does not know).
    pub fn touches_all(self) -> bool {
        matches!(
            self,
            Kind::Outage
                | Kind::Busy
                | Kind::Split
                | Kind::Params
                | Kind::Restore
                | Kind::Reconfigure
        )
    }
}

/// A fault as it happened.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Fault {
    pub kind: Kind,
    /// The sidecar it targets.
    pub sidecar: Option<usize>,
    /// The ZooKeeper server it targets (1-based as in `myid`).
    pub zk: Option<usize>,
    /// Sidecars on the minority side of a split.
    pub minority: Vec<usize>,
    /// What an operator's fault did (the store-op's word), or how a sidecar was restarted.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub did: String,
    pub skew_s: i64,
    pub start_ns: u64,
    pub end_ns: u64,
}

impl Fault {
    /// Whether sidecar `s` is in this fault's reach.
    pub fn touches(&self, s: usize) -> bool {
        self.kind.touches_all() || self.sidecar == Some(s) || self.minority.contains(&s)
    }
}

/// What healing a fault takes.
enum Heal {
    Cut(Vec<usize>, Vec<usize>),
    Restart {
        s: usize,
        skew: i64,
    },
    Cont {
        s: usize,
    },
    Launch(Vec<usize>),
    /// Wait (bounded) for a sidecar to exit (`how`: what ends it — a SIGTERM, a planted
    /// panic), then start it with `skew`.
    AfterExit {
        s: usize,
        skew: i64,
        since: Instant,
        how: &'static str,
    },
    /// A clock fault's end: SIGTERM the skewed incarnation, then restart it true.
    Unskew {
        s: usize,
    },
    Busy(Child),
    /// Nothing to undo (an operator's fault on the store).
    Nothing,
    /// A release cut off from the store: heal the cut, then wait for the exit and restart.
    CutRelease {
        s: usize,
        cut: (Vec<usize>, Vec<usize>),
        since: Instant,
    },
    /// The reconfigure fault's end: the reconfigured sidecar stopped, `params` deleted again
    /// (the others record theirs), the sidecar restarted plain.
    Reconfigured {
        s: usize,
    },
    /// The lock fault's end: the second static instance must have been refused, the first
    /// must still serve; both stopped.
    Lock(StaticPair),
}

/// The lock fault's two static instances on one state file.
struct StaticPair {
    first: Child,
    second: Child,
    socket: std::path::PathBuf,
    second_log: std::path::PathBuf,
}

struct Active {
    fault: Fault,
    heal_at: Instant,
    heal: Heal,
}

/// Timings the nemesis needs.
pub struct Timing {
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

const MAX_ACTIVE: usize = 3;
const ENSEMBLE_REST: Duration = Duration::from_secs(8);
const TERM_WAIT: Duration = Duration::from_secs(15);

impl Nemesis {
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

    fn busy_sidecar(&self, s: usize) -> bool {
        self.active.iter().any(|a| a.fault.sidecar == Some(s))
    }

    /// Heals what is due, notices sidecars that died on their own, starts a fault when due.
    pub fn step(&mut self, cl: &mut Cluster, spec: &SidecarSpec, starting: bool) -> Result<()> {
        let now = Instant::now();
        let mut i = 0;
        while i < self.active.len() {
            if self.active[i].heal_at <= now && self.try_heal(i, cl, spec, false)? {
                let mut a = self.active.remove(i);
                a.fault.end_ns = now_ns();
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

    /// Heals every active fault (waiting, bounded, for those that need a process to exit).
    pub fn heal_all(&mut self, cl: &mut Cluster, spec: &SidecarSpec) -> Result<()> {
        while !self.active.is_empty() {
            if self.try_heal(0, cl, spec, true)? {
                let mut a = self.active.remove(0);
                a.fault.end_ns = now_ns();
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

    fn start_one(&mut self, cl: &mut Cluster, spec: &SidecarSpec) -> Result<()> {
        // Nothing starts while the pool is reconfigured: every other sidecar disagrees with
        // it, and one restarted meanwhile is refused at start.
        if self
            .active
            .iter()
            .any(|a| a.fault.kind == Kind::Reconfigure)
        {
            return Ok(());
        }
        let free: Vec<usize> = (0..cl.sidecars.len())
            .filter(|&s| !self.busy_sidecar(s) && cl.sidecars[s].running())
            .collect();
        let ensemble_free = !self.active.iter().any(|a| a.fault.kind.ensemble())
            && self.ensemble_quiet_since.elapsed() >= ENSEMBLE_REST;
        let busy_free = !self
            .active
            .iter()
            .any(|a| matches!(a.fault.kind, Kind::Busy | Kind::Mark | Kind::Params));
        let no_busy = !self.active.iter().any(|a| a.fault.kind == Kind::Busy);
        let possible: Vec<Kind> = self
            .kinds
            .iter()
            .copied()
            .filter(|k| match k {
                Kind::Split | Kind::Leader | Kind::Outage | Kind::Params => ensemble_free,
                // Alone: every sidecar is frozen, none may be mid-restart.
                Kind::Restore => ensemble_free && self.snapshot.is_some() && self.active.is_empty(),
                Kind::Reconfigure => ensemble_free && !free.is_empty(),
                Kind::Mark => ensemble_free && no_busy && !free.is_empty(),
                Kind::Busy => busy_free,
                _ => !free.is_empty(),
            })
            .collect();
        let Some(&kind) = possible.choose(&mut self.rng) else {
            return Ok(());
        };
        let target = free.choose(&mut self.rng).copied();
        let mut fault = Fault {
            kind,
            sidecar: None,
            zk: None,
            minority: Vec::new(),
            did: String::new(),
            skew_s: 0,
            start_ns: now_ns(),
            end_ns: 0,
        };
        let secs =
            |rng: &mut StdRng, lo: f64, hi: f64| Duration::from_secs_f64(rng.random_range(lo..hi));
        let (after, heal) = match kind {
            Kind::Partition => {
                let s = target.expect("a free sidecar");
                fault.sidecar = Some(s);
                let (a, b) = (vec![cl.sidecar_host(s)], cl.zk_hosts());
                cl.net.cut(&a, &b)?;
                (secs(&mut self.rng, 3.0, 8.0), Heal::Cut(a, b))
            }
            Kind::Split => {
                let k = self.rng.random_range(0..cl.zk.nodes.len());
                let n = self.rng.random_range(0..=2.min(free.len()));
                let minority: Vec<usize> =
                    free.choose_multiple(&mut self.rng, n).copied().collect();
                fault.zk = Some(k + 1);
                fault.minority = minority.clone();
                let mut a = vec![k];
                a.extend(minority.iter().map(|&s| cl.sidecar_host(s)));
                let b: Vec<usize> = (0..cl.net.hosts.len()).filter(|h| !a.contains(h)).collect();
                cl.net.cut(&a, &b)?;
                (secs(&mut self.rng, 3.0, 8.0), Heal::Cut(a, b))
            }
            Kind::Kill => {
                let s = target.expect("a free sidecar");
                fault.sidecar = Some(s);
                cl.sidecars[s].kill9("kill -9");
                (secs(&mut self.rng, 0.5, 3.0), Heal::Restart { s, skew: 0 })
            }
            Kind::Stop => {
                let s = target.expect("a free sidecar");
                fault.sidecar = Some(s);
                cl.sidecars[s].signal(Signal::SIGSTOP);
                let past = self.timing.session_timeout + secs(&mut self.rng, 0.5, 2.0);
                (past, Heal::Cont { s })
            }
            Kind::Leader => {
                let Some(k) = cl.zk.leader() else {
                    return Ok(());
                };
                fault.zk = Some(k + 1);
                cl.zk.kill(k);
                (secs(&mut self.rng, 2.0, 5.0), Heal::Launch(vec![k]))
            }
            Kind::Outage => {
                let all: Vec<usize> = (0..cl.zk.nodes.len()).collect();
                for &k in &all {
                    cl.zk.kill(k);
                }
                // Every node is down: a consistent copy of the store, for a later restore.
                if self.snapshot.is_none() || self.rng.random_bool(0.5) {
                    let dir = spec.dir.join("snapshot");
                    let _ = std::fs::remove_dir_all(&dir);
                    std::fs::create_dir_all(&dir)?;
                    for &k in &all {
                        copy_dir(&cl.zk.data_dir(k), &dir.join(format!("node{k}")))?;
                    }
                    self.snapshot = Some((dir, now_ns()));
                }
                (secs(&mut self.rng, 2.0, 6.0), Heal::Launch(all))
            }
            Kind::Restore => {
                let Some((dir, taken)) = self.snapshot.clone() else {
                    return Ok(());
                };
                let running: Vec<usize> = (0..cl.sidecars.len())
                    .filter(|&s| cl.sidecars[s].running())
                    .collect();
                for &s in &running {
                    cl.sidecars[s].signal(Signal::SIGSTOP);
                }
                let all: Vec<usize> = (0..cl.zk.nodes.len()).collect();
                for &k in &all {
                    cl.zk.kill(k);
                }
                for &k in &all {
                    let data = cl.zk.data_dir(k);
                    std::fs::remove_dir_all(&data)?;
                    copy_dir(&dir.join(format!("node{k}")), &data)?;
                }
                for &k in &all {
                    cl.zk.launch(k)?;
                }
                let up = cl.zk.wait_leader(Duration::from_secs(30));
                let mut did = None;
                for _ in 0..10 {
                    let seed = self.rng.random();
                    did = store_op(cl, spec, "delete-params", 0, seed, &[]);
                    if did.as_deref().is_some_and(|d| d.starts_with("deleted")) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(500));
                }
                for &s in &running {
                    cl.sidecars[s].signal(Signal::SIGCONT);
                }
                fault.did = format!(
                    "restored the snapshot of {:.1} s ago (store up: {up}); {}",
                    (now_ns().saturating_sub(taken)) as f64 / 1e9,
                    did.unwrap_or_else(|| "params NOT deleted".into())
                );
                (secs(&mut self.rng, 1.0, 2.0), Heal::Nothing)
            }
            Kind::Clock => {
                let s = target.expect("a free sidecar");
                let skew = if self.rng.random_bool(0.5) { 3 } else { -3 };
                fault.sidecar = Some(s);
                fault.skew_s = skew;
                cl.sidecars[s].kill9("kill -9 (clock step)");
                cl.sidecars[s].spawn(spec, skew)?;
                (secs(&mut self.rng, 8.0, 15.0), Heal::Unskew { s })
            }
            Kind::Term => {
                let s = target.expect("a free sidecar");
                fault.sidecar = Some(s);
                cl.sidecars[s].signal(Signal::SIGTERM);
                let since = Instant::now();
                (
                    secs(&mut self.rng, 0.5, 2.0),
                    Heal::AfterExit {
                        s,
                        skew: 0,
                        since,
                        how: "SIGTERM",
                    },
                )
            }
            Kind::Params => {
                let seed = self.rng.random();
                match store_op(cl, spec, "delete-params", 0, seed, &[]) {
                    Some(did) => fault.did = did,
                    None => return Ok(()),
                }
                (secs(&mut self.rng, 1.0, 3.0), Heal::Nothing)
            }
            Kind::Mark => {
                let op = if self.rng.random_bool(0.5) {
                    "lower-mark"
                } else {
                    "delete-mark"
                };
                let pods: Vec<String> = free
                    .iter()
                    .filter_map(|&s| Some(format!("sc{s}:{}", cl.sidecars[s].pid()?)))
                    .collect();
                let seed = self.rng.random();
                let lower_by = spec.scheme.ticks_in(Duration::from_secs(10));
                let did = match store_op(cl, spec, op, lower_by, seed, &pods) {
                    Some(did) if !did.starts_with("skip") => did,
                    Some(skip) => {
                        eprintln!("campaign: {op}: {skip}");
                        return Ok(());
                    }
                    None => return Ok(()),
                };
                // The holder it touched: "OP slot N of scK: ...".
                fault.sidecar = did
                    .split(" of sc")
                    .nth(1)
                    .and_then(|r| r.split(':').next())
                    .and_then(|n| n.parse().ok());
                fault.did = did;
                match fault.sidecar {
                    // Half the time its holder dies at once (kill -9), before it could write
                    // the mark back: its successor's floor must come from the mark's witness.
                    Some(s) if self.rng.random_bool(0.5) => {
                        cl.sidecars[s].kill9("kill -9 (its mark just lowered)");
                        fault.did.push_str("; its holder killed at once");
                        (secs(&mut self.rng, 0.5, 2.0), Heal::Restart { s, skew: 0 })
                    }
                    // Its holder is left alone meanwhile: it writes the mark back within a
                    // renewal.
                    _ => (secs(&mut self.rng, 2.0, 4.0), Heal::Nothing),
                }
            }
            Kind::Panic => {
                let s = target.expect("a free sidecar");
                fault.sidecar = Some(s);
                let plant = if self.rng.random_bool(0.5) {
                    format!("request:{}", self.rng.random_range(20..150))
                } else {
                    format!("lease:{}ms", self.rng.random_range(500..3_000))
                };
                fault.did = format!("--plant-panic {plant}");
                cl.sidecars[s].kill9("kill -9 (to plant a panic)");
                cl.sidecars[s].spawn_with(spec, 0, &["--plant-panic".into(), plant])?;
                (
                    secs(&mut self.rng, 0.5, 1.0),
                    Heal::AfterExit {
                        s,
                        skew: 0,
                        since: Instant::now(),
                        how: "planted panic",
                    },
                )
            }
            Kind::Abandon => {
                let s = target.expect("a free sidecar");
                fault.sidecar = Some(s);
                // Long enough to hold a slot again (session timeout, a mark to wait past).
                let after = secs(&mut self.rng, 8.0, 12.0);
                let plant = format!("abandon:{}ms", after.as_millis());
                fault.did = format!("--plant-panic {plant}");
                cl.sidecars[s].kill9("kill -9 (to plant an abandoned release)");
                cl.sidecars[s].spawn_with(spec, 0, &["--plant-panic".into(), plant])?;
                (
                    after + Duration::from_millis(500),
                    Heal::AfterExit {
                        s,
                        skew: 0,
                        since: Instant::now() + after,
                        how: "abandoned release",
                    },
                )
            }
            Kind::Reconfigure => {
                // The holder of a slot whose IDs overlap another's under the other
                // parameters, where there is one (a pool that ignored them would then issue
                // duplicates); else any.
                let mut s = target.expect("a free sidecar");
                for &slot in &spec.other.overlapping {
                    let seed = self.rng.random();
                    let pod = store_op(cl, spec, "holder", slot, seed, &[]);
                    let held_by = pod
                        .as_deref()
                        .and_then(|p| p.rsplit_once(" sc"))
                        .and_then(|(_, n)| n.parse::<usize>().ok());
                    if let Some(h) = held_by.filter(|h| free.contains(h)) {
                        s = h;
                        break;
                    }
                }
                fault.sidecar = Some(s);
                cl.sidecars[s].kill9("kill -9 (to restart with other parameters)");
                let seed = self.rng.random();
                match store_op(cl, spec, "recreate-params", 0, seed, &spec.other.params) {
                    Some(did) if did.starts_with("recreated") => {
                        fault.did = format!("{did}; restarted with {}", spec.other.flags.join(" "));
                        cl.sidecars[s].spawn_reconfigured(spec)?;
                    }
                    other => {
                        eprintln!("campaign: recreate-params: {other:?}");
                        cl.sidecars[s].spawn(spec, 0)?;
                        return Ok(());
                    }
                }
                (secs(&mut self.rng, 8.0, 15.0), Heal::Reconfigured { s })
            }
            Kind::Lock => {
                self.locks += 1;
                let Some(pair) = lock_fault(spec, self.locks, &mut self.violations)? else {
                    return Ok(());
                };
                fault.did = format!(
                    "static instance {} started, its lock file deleted, a second one started",
                    self.locks
                );
                (secs(&mut self.rng, 2.0, 4.0), Heal::Lock(pair))
            }
            Kind::Disagree => {
                let s = target.expect("a free sidecar");
                fault.sidecar = Some(s);
                let h = format!("{}s", self.rng.random_range(8..14));
                fault.did = format!("--lease-horizon {h} --max-clock-wait {h}");
                cl.sidecars[s].kill9("kill -9 (to restart disagreeing)");
                let extra = ["--lease-horizon", &h, "--max-clock-wait", &h].map(String::from);
                cl.sidecars[s].spawn_with(spec, 0, &extra)?;
                (secs(&mut self.rng, 8.0, 15.0), Heal::Unskew { s })
            }
            Kind::Release => {
                let s = target.expect("a free sidecar");
                fault.sidecar = Some(s);
                let (a, b) = (vec![cl.sidecar_host(s)], cl.zk_hosts());
                cl.net.cut(&a, &b)?;
                cl.sidecars[s].signal(Signal::SIGTERM);
                // The cut heals near the end of the sidecar's 3 s --shutdown-grace.
                (
                    secs(&mut self.rng, 2.2, 3.2),
                    Heal::CutRelease {
                        s,
                        cut: (a, b),
                        since: Instant::now(),
                    },
                )
            }
            Kind::Busy => {
                let d = secs(&mut self.rng, 10.0, 25.0).min(self.timing.busy_max);
                let child = Command::new(std::env::current_exe()?)
                    .args(["busy", "--threads", "16", "--seconds"])
                    .arg(format!("{:.1}", d.as_secs_f64()))
                    .stdin(Stdio::null())
                    .spawn()?;
                (d, Heal::Busy(child))
            }
        };
        // The fault is in force from before its action at the latest: a request that ends in
        // the instant between a kill and its reaping (a reset connection) is touched by it.
        // `start_ns` was taken just before the action.
        self.active.push(Active {
            fault,
            heal_at: Instant::now() + after,
            heal,
        });
        Ok(())
    }

    /// Heals active fault `i`; `Ok(false)` when it must be tried again later. With `now`,
    /// waits for what it waits for instead of returning.
    fn try_heal(
        &mut self,
        i: usize,
        cl: &mut Cluster,
        spec: &SidecarSpec,
        now: bool,
    ) -> Result<bool> {
        let heal = &mut self.active[i].heal;
        match heal {
            Heal::Cut(a, b) => cl.net.heal(a, b)?,
            Heal::Restart { s, skew } => cl.sidecars[*s].spawn(spec, *skew)?,
            Heal::Cont { s } => cl.sidecars[*s].signal(Signal::SIGCONT),
            Heal::Launch(nodes) => {
                for &k in nodes.iter() {
                    cl.zk.launch(k)?;
                }
            }
            Heal::Unskew { s } => {
                let s = *s;
                cl.sidecars[s].signal(Signal::SIGTERM);
                *heal = Heal::AfterExit {
                    s,
                    skew: 0,
                    since: Instant::now(),
                    how: "SIGTERM",
                };
                return if now {
                    self.try_heal(i, cl, spec, now)
                } else {
                    Ok(false)
                };
            }
            Heal::AfterExit {
                s,
                skew,
                since,
                how,
            } => {
                let (s, skew, since, how) = (*s, *skew, *since, *how);
                loop {
                    if cl.sidecars[s].reap(how) {
                        break;
                    }
                    if since.elapsed() > TERM_WAIT {
                        cl.sidecars[s].kill9(&format!("{how}, then kill -9 after 15 s"));
                        break;
                    }
                    if !now {
                        return Ok(false);
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                cl.sidecars[s].spawn(spec, skew)?;
            }
            Heal::Busy(child) => {
                let _ = child.kill();
                let _ = child.wait();
            }
            Heal::Nothing => {}
            Heal::Lock(pair) => {
                // Refused at once, normally; a busy neighbour may slow it (bounded).
                let until = Instant::now() + Duration::from_secs(5);
                while matches!(pair.second.try_wait(), Ok(None)) && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(50));
                }
                let second = pair.second.try_wait();
                let said = std::fs::read_to_string(&pair.second_log).unwrap_or_default();
                let refused = matches!(&second, Ok(Some(st)) if !st.success())
                    && said.contains("locked by another process");
                if !refused {
                    self.violations.push((
                        "static slot: a second instance on a state file is refused",
                        format!(
                            "its lock file deleted, a second instance on it {}: {}",
                            match second {
                                Ok(Some(st)) => format!("exited ({st})"),
                                _ => "still runs".into(),
                            },
                            said.lines().last().unwrap_or_default()
                        ),
                    ));
                }
                let first_serves = std::os::unix::net::UnixStream::connect(&pair.socket)
                    .and_then(|mut c| {
                        c.set_read_timeout(Some(Duration::from_secs(2)))?;
                        crate::load::exchange(&mut c, 1)
                    })
                    .is_ok_and(|r| r.is_ok());
                if !first_serves {
                    self.violations.push((
                        "static slot: the first instance serves on",
                        "after a second instance was started on its state file".into(),
                    ));
                }
                for c in [&mut pair.first, &mut pair.second] {
                    let _ = c.kill();
                    let _ = c.wait();
                }
            }
            Heal::Reconfigured { s } => {
                let s = *s;
                cl.sidecars[s].kill9("kill -9 (to restart with the pool's parameters)");
                let mut did = None;
                for seed in 0..10 {
                    did = store_op(cl, spec, "delete-params", 0, seed, &[]);
                    if did.as_deref().is_some_and(|d| d.starts_with("deleted")) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
                let f = &mut self.active[i].fault;
                f.did = format!(
                    "{}; {}",
                    f.did,
                    did.unwrap_or_else(|| "params NOT deleted".into())
                );
                // It, and those refused at start meanwhile (not those another fault restarts).
                let others: Vec<usize> = (self.active.iter().enumerate())
                    .filter(|&(j, _)| j != i)
                    .filter_map(|(_, a)| a.fault.sidecar)
                    .collect();
                for x in (0..cl.sidecars.len()).filter(|x| !others.contains(x)) {
                    // Exited but not reaped yet: refused at start, or a crash to report.
                    if cl.sidecars[x].running() {
                        if !cl.sidecars[x].reap("itself") {
                            continue;
                        }
                        if !refused_at_start(&cl.sidecars[x]) {
                            let h = cl.sidecars[x].history.last().cloned();
                            if let Some(h) = h {
                                self.unexpected_exits.push((
                                    x,
                                    h.number,
                                    h.ended_by.unwrap_or_default(),
                                ));
                            }
                        }
                    }
                    cl.sidecars[x].spawn(spec, 0)?;
                }
                // One restarted just before may still be refused: expected for a while.
                self.refusals_until = Some(Instant::now() + Duration::from_secs(10));
            }
            Heal::CutRelease { s, cut, since } => {
                let (s, since) = (*s, *since);
                if !cut.0.is_empty() {
                    cl.net.heal(&cut.0, &cut.1)?;
                    cut.0.clear();
                }
                *heal = Heal::AfterExit {
                    s,
                    skew: 0,
                    since,
                    how: "SIGTERM",
                };
                return if now {
                    self.try_heal(i, cl, spec, now)
                } else {
                    Ok(false)
                };
            }
        }
        Ok(true)
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

/// Starts a static instance on a new state file (generator = the pool's size + 1: outside it),
/// waits (bounded) until it serves, deletes its lock file and starts a second one on the same
/// state file. `None` (and a violation) if the first never served.
fn lock_fault(
    spec: &SidecarSpec,
    n: u32,
    violations: &mut Vec<(&'static str, String)>,
) -> Result<Option<StaticPair>> {
    // Outside the pool, and outside the one a reconfigure fault may make one larger.
    let generator = spec.pool_size + 1;
    if generator >= spec.scheme.slots {
        return Ok(None);
    }
    let dir = spec.dir.join(format!("static{n}"));
    std::fs::create_dir_all(&dir)?;
    let state = dir.join("state");
    let start = |i: u32| -> Result<(Child, std::path::PathBuf, std::path::PathBuf)> {
        let socket = dir.join(format!("{i}.sock"));
        let log = dir.join(format!("{i}.log"));
        let out = std::fs::File::create(&log)?;
        let child = Command::new(&spec.idcar)
            .arg("serve")
            .arg("--state-file")
            .arg(&state)
            .arg("--socket")
            .arg(&socket)
            .args(["--admin-addr", "none", "--log-format", "json"])
            .args(["--layout", &spec.layout])
            .args(["--cluster-id", &spec.cluster.to_string()])
            .args(["--generator-id", &generator.to_string()])
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()?;
        Ok((child, socket, log))
    };
    let (mut first, socket, _) = start(1)?;
    let until = Instant::now() + Duration::from_secs(10);
    let serves = loop {
        let ok = std::os::unix::net::UnixStream::connect(&socket)
            .and_then(|mut c| {
                c.set_read_timeout(Some(Duration::from_secs(1)))?;
                crate::load::exchange(&mut c, 1)
            })
            .is_ok_and(|r| r.is_ok());
        if ok || Instant::now() > until {
            break ok;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    if !serves {
        let _ = first.kill();
        let _ = first.wait();
        violations.push((
            "static slot: a static instance serves",
            format!("static instance {n} did not serve within 10 s"),
        ));
        return Ok(None);
    }
    let mut lock = state.clone().into_os_string();
    lock.push(".lock");
    let second = std::fs::remove_file(&lock)
        .map_err(anyhow::Error::from)
        .and_then(|()| start(2));
    let (second, _, second_log) = match second {
        Ok(s) => s,
        Err(e) => {
            let _ = first.kill();
            let _ = first.wait();
            return Err(e);
        }
    };
    Ok(Some(StaticPair {
        first,
        second,
        socket,
        second_log,
    }))
}

/// `cp -a from to`.
fn copy_dir(from: &std::path::Path, to: &std::path::Path) -> Result<()> {
    let st = Command::new("cp").arg("-a").arg(from).arg(to).status()?;
    anyhow::ensure!(st.success(), "cp -a {} {}", from.display(), to.display());
    Ok(())
}

/// Runs an operator's operation on the store (see `storeop.rs`) inside the namespace of a
/// store node that is up: what it did, or `None` if it could not run.
fn store_op(
    cl: &Cluster,
    spec: &SidecarSpec,
    op: &str,
    lower_by: u64,
    seed: u64,
    only: &[String],
) -> Option<String> {
    let i = (0..cl.zk.nodes.len()).find(|&i| cl.zk.is_up(i))?;
    let store = match cl.zk.store {
        crate::procs::Store::Zookeeper => "zookeeper",
        crate::procs::Store::Etcd => "etcd",
    };
    let out = Command::new("ip")
        .args(["netns", "exec", &cl.zk.nodes[i].host.ns, "timeout", "15"])
        .arg(std::env::current_exe().ok()?)
        .arg("store-op")
        .args([
            store,
            &cl.zk.connect(),
            &spec.layout,
            &spec.cluster.to_string(),
            op,
            &lower_by.to_string(),
            &seed.to_string(),
        ])
        .args(only)
        .stdin(Stdio::null())
        .output()
        .ok()?;
    let said = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || said.is_empty() {
        eprintln!(
            "campaign: store-op {op} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        return None;
    }
    Some(said)
}

/// The busy neighbour itself: `threads` threads spinning for `seconds` (bounded), then exit.
pub fn busy(threads: usize, seconds: f64) {
    let until = Instant::now() + Duration::from_secs_f64(seconds.clamp(0.0, 600.0));
    let workers: Vec<_> = (0..threads.clamp(1, 256))
        .map(|_| {
            std::thread::spawn(move || {
                let mut x = 0u64;
                while Instant::now() < until {
                    for _ in 0..10_000 {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                }
            })
        })
        .collect();
    for w in workers {
        let _ = w.join();
    }
}
