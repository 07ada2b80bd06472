//! Healing a fault: what each kind of fault takes to undo, and undoing it (some in steps:
//! a sidecar asked to exit is restarted once it has).

use super::lock;
use super::operator::{probe_store, store_op};
use super::started::Heal;
use super::{refused_at_start, Nemesis};
use crate::procs::{now_ns, Cluster, SidecarSpec};
use anyhow::Result;
use nix::sys::signal::Signal;
use std::io::Read;
use std::time::{Duration, Instant};

/// How long a sidecar asked to exit gets before it is killed.
const TERM_WAIT: Duration = Duration::from_secs(15);

impl Nemesis {
    /// Heals active fault `i`; `Ok(false)` when it must be tried again later. With `now`,
    /// waits for what it waits for instead of returning.
    pub(super) fn try_heal(
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
            Heal::Relaunch(nodes) | Heal::Thaw(nodes) => {
                let (nodes, thaw) = (nodes.clone(), matches!(heal, Heal::Thaw(_)));
                for &k in &nodes {
                    if thaw {
                        cl.zk.signal(k, Signal::SIGCONT);
                    } else {
                        cl.zk.launch(k)?;
                    }
                }
                let healed_ns = now_ns();
                let child = probe_store(cl, spec)?;
                self.active[i].heal = Heal::Probe { child, healed_ns };
                return self.heal_again(i, cl, spec, now);
            }
            Heal::Probe { .. } => {
                if !self.probe_done(i, now) {
                    return Ok(false);
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
                return self.heal_again(i, cl, spec, now);
            }
            Heal::AfterExit {
                s,
                skew,
                since,
                how,
            } => {
                let exit = (*s, *skew, *since, *how);
                if !restart_after_exit(cl, spec, exit, now)? {
                    return Ok(false);
                }
            }
            Heal::Busy(child) => {
                let _ = child.kill();
                let _ = child.wait();
            }
            Heal::Nothing => {}
            Heal::Lock(pair) => lock::judge_and_stop(pair, &mut self.violations),
            Heal::Reconfigured { s } => {
                let s = *s;
                self.heal_reconfigured(i, s, cl, spec)?;
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
                return self.heal_again(i, cl, spec, now);
            }
        }
        Ok(true)
    }

    /// Whether the store probe after fault `i`'s heal is done (waiting for it with `now`):
    /// the fault then ends when the heal began, and the store answered when the probe says.
    fn probe_done(&mut self, i: usize, now: bool) -> bool {
        let Heal::Probe { child, healed_ns } = &mut self.active[i].heal else {
            return true;
        };
        let healed_ns = *healed_ns;
        match child.try_wait() {
            Ok(None) if !now => return false,
            Ok(None) => {
                let _ = child.wait();
            }
            _ => {}
        }
        let mut said = String::new();
        if let Some(out) = child.stdout.as_mut() {
            let _ = out.read_to_string(&mut said);
        }
        let f = &mut self.active[i].fault;
        f.end_ns = healed_ns;
        f.answered_ns = said
            .trim()
            .strip_prefix("answered ")
            .and_then(|t| t.parse().ok());
        if f.answered_ns.is_none() {
            eprintln!(
                "campaign: the store did not answer a probe after the {} fault: {}",
                f.kind.name(),
                said.trim()
            );
        }
        true
    }

    /// After a heal's first step: its next one at once (with `now`), or later.
    fn heal_again(
        &mut self,
        i: usize,
        cl: &mut Cluster,
        spec: &SidecarSpec,
        now: bool,
    ) -> Result<bool> {
        if now {
            self.try_heal(i, cl, spec, now)
        } else {
            Ok(false)
        }
    }

    /// The reconfigure fault's end (active fault `i`, on sidecar `s`): it is restarted with the
    /// pool's parameters once `params` is deleted again, and so are those refused at start
    /// meanwhile.
    fn heal_reconfigured(
        &mut self,
        i: usize,
        s: usize,
        cl: &mut Cluster,
        spec: &SidecarSpec,
    ) -> Result<()> {
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
                        self.unexpected_exits
                            .push((x, h.number, h.ended_by.unwrap_or_default()));
                    }
                }
            }
            cl.sidecars[x].spawn(spec, 0)?;
        }
        // One restarted just before may still be refused: expected for a while.
        self.refusals_until = Some(Instant::now() + Duration::from_secs(10));
        Ok(())
    }
}

/// A sidecar's restart once it has exited (`exit`: the sidecar, the skew to start it with,
/// since when it is expected to exit, what ends it): `Ok(false)` while it runs on, unless
/// `now` (then it waits, bounded). Killed if it has not exited after `TERM_WAIT`.
fn restart_after_exit(
    cl: &mut Cluster,
    spec: &SidecarSpec,
    exit: (usize, i64, Instant, &'static str),
    now: bool,
) -> Result<bool> {
    let (s, skew, since, how) = exit;
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
    Ok(true)
}
