//! Starting a fault: which kind (at random among those possible now) on which sidecar, and
//! the network faults themselves (a sidecar cut off, a split, a release cut off). The other
//! kinds are in `sidecar`, `store`, `operator`, `lock` and `busy`.

use super::started::{secs, Heal, Started};
use super::{Active, Fault, Kind, Nemesis, ENSEMBLE_REST};
use crate::procs::{now_ns, Cluster, SidecarSpec, Store};
use anyhow::Result;
use nix::sys::signal::Signal;
use rand::seq::IndexedRandom;
use rand::Rng;
use std::time::Instant;

impl Nemesis {
    /// Starts a fault of a kind possible now, drawn at random, on a free sidecar drawn at
    /// random (for the kinds that target one), and records it as active.
    pub(super) fn start_one(&mut self, cl: &mut Cluster, spec: &SidecarSpec) -> Result<()> {
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
        let Some(kind) = self.choose_kind(&free, spec) else {
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
            in_force_ns: 0,
            end_ns: 0,
            answered_ns: None,
        };
        let Some((after, heal)) = self.inject(cl, spec, target, &free, &mut fault)? else {
            return Ok(());
        };
        fault.in_force_ns = now_ns();
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

    /// A kind of fault possible now, at random (`free`: the running sidecars no fault
    /// targets); `None` if there is none.
    fn choose_kind(&mut self, free: &[usize], spec: &SidecarSpec) -> Option<Kind> {
        let ensemble_free = !self.active.iter().any(|a| a.fault.kind.ensemble())
            && self.ensemble_quiet_since.elapsed() >= ENSEMBLE_REST;
        let busy_free = !self
            .active
            .iter()
            .any(|a| matches!(a.fault.kind, Kind::Busy | Kind::Mark | Kind::Params));
        let no_busy = !self.active.iter().any(|a| a.fault.kind == Kind::Busy);
        let main_free = free.iter().any(|s| spec.pools[0].sidecars.contains(s));
        // Every sidecar of the full pool free (none under a fault, so each may hold its slot).
        let full_free = spec
            .pools
            .iter()
            .any(|p| p.name == "full" && p.sidecars.clone().all(|s| free.contains(&s)));
        let possible: Vec<Kind> = self
            .kinds
            .iter()
            .copied()
            .filter(|k| match k {
                Kind::Split | Kind::Leader | Kind::Outage | Kind::Params | Kind::Freeze => {
                    ensemble_free
                }
                Kind::Compact => ensemble_free && spec.store != Store::Zookeeper,
                Kind::FullKill => ensemble_free && no_busy && full_free,
                // Alone: every sidecar is frozen, none may be mid-restart.
                Kind::Restore => ensemble_free && self.snapshot.is_some() && self.active.is_empty(),
                Kind::Reconfigure => ensemble_free && main_free,
                Kind::Mark => ensemble_free && no_busy && main_free,
                Kind::Busy => busy_free,
                _ => !free.is_empty(),
            })
            .collect();
        possible.choose(&mut self.rng).copied()
    }

    /// Injects `fault` (its kind; `target`: the free sidecar drawn for the kinds that target
    /// one; `free`: every free sidecar).
    fn inject(
        &mut self,
        cl: &mut Cluster,
        spec: &SidecarSpec,
        target: Option<usize>,
        free: &[usize],
        fault: &mut Fault,
    ) -> Result<Started> {
        let sidecar = || target.expect("a free sidecar");
        // The operator's faults on sidecars act on the main pool.
        let main: Vec<usize> = free
            .iter()
            .copied()
            .filter(|s| spec.pools[0].sidecars.contains(s))
            .collect();
        match fault.kind {
            Kind::Partition => self.cut_sidecar(cl, sidecar(), fault),
            Kind::Split => self.split(cl, free, fault),
            Kind::Kill => Ok(self.kill_sidecar(cl, sidecar(), fault)),
            Kind::Stop => Ok(self.stop_sidecar(cl, sidecar(), fault)),
            Kind::Leader => Ok(self.kill_leader(cl, fault)),
            Kind::Outage => self.outage(cl, spec),
            Kind::Restore => self.restore(cl, spec, fault),
            Kind::Clock => self.step_clock(cl, spec, sidecar(), fault),
            Kind::Term => Ok(self.term_sidecar(cl, sidecar(), fault)),
            Kind::Params => Ok(self.delete_params(cl, spec, fault)),
            Kind::Mark => Ok(self.touch_mark(cl, spec, &main, fault)),
            Kind::Panic => self.plant_panic(cl, spec, sidecar(), fault),
            Kind::Abandon => self.plant_abandon(cl, spec, sidecar(), fault),
            Kind::Reconfigure => {
                let target = match target.filter(|t| main.contains(t)) {
                    Some(t) => t,
                    None => *main
                        .choose(&mut self.rng)
                        .expect("a free sidecar of the pool"),
                };
                self.reconfigure(cl, spec, target, &main, fault)
            }
            Kind::Lock => self.start_lock(spec, fault),
            Kind::Disagree => self.restart_disagreeing(cl, spec, sidecar(), fault),
            Kind::Release => self.cut_release(cl, sidecar(), fault),
            Kind::Busy => self.start_busy(),
            Kind::Freeze => Ok(self.freeze(cl, fault)),
            Kind::Compact => Ok(self.compact(cl, fault)),
            Kind::FullKill => self.full_kill(cl, spec, free, fault),
            Kind::Upgrade => anyhow::bail!("moves between versions are scheduled, not drawn"),
        }
    }

    /// Partition: sidecar `s` cut from every store node (silent drops).
    fn cut_sidecar(&mut self, cl: &mut Cluster, s: usize, fault: &mut Fault) -> Result<Started> {
        fault.sidecar = Some(s);
        let (a, b) = (vec![cl.sidecar_host(s)], cl.zk_hosts());
        cl.net.cut(&a, &b)?;
        Ok(Some((secs(&mut self.rng, 3.0, 8.0), Heal::Cut(a, b))))
    }

    /// Split: a store node drawn at random, and up to two free sidecars, cut from the rest.
    fn split(&mut self, cl: &mut Cluster, free: &[usize], fault: &mut Fault) -> Result<Started> {
        let k = self.rng.random_range(0..cl.zk.nodes.len());
        let n = self.rng.random_range(0..=2.min(free.len()));
        let minority: Vec<usize> = free.choose_multiple(&mut self.rng, n).copied().collect();
        fault.zk = Some(k + 1);
        fault.minority = minority.clone();
        let mut a = vec![k];
        a.extend(minority.iter().map(|&s| cl.sidecar_host(s)));
        let b: Vec<usize> = (0..cl.net.hosts.len()).filter(|h| !a.contains(h)).collect();
        cl.net.cut(&a, &b)?;
        Ok(Some((secs(&mut self.rng, 3.0, 8.0), Heal::Cut(a, b))))
    }

    /// Release: sidecar `s` cut from the store and sent SIGTERM, so that its release times
    /// out; the cut heals near the end of its shutdown grace.
    fn cut_release(&mut self, cl: &mut Cluster, s: usize, fault: &mut Fault) -> Result<Started> {
        fault.sidecar = Some(s);
        let (a, b) = (vec![cl.sidecar_host(s)], cl.zk_hosts());
        cl.net.cut(&a, &b)?;
        cl.sidecars[s].signal(Signal::SIGTERM);
        // The cut heals near the end of the sidecar's 3 s --shutdown-grace.
        Ok(Some((
            secs(&mut self.rng, 2.2, 3.2),
            Heal::CutRelease {
                s,
                cut: (a, b),
                since: Instant::now(),
            },
        )))
    }
}
