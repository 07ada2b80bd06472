//! Faults on one sidecar's process: killed, stopped, terminated, restarted with its clock
//! stepped, with a planted panic or abandoned release, or with parameters that disagree; and
//! a holder of the full pool killed and replaced at once.

use super::started::{secs, Heal, Started};
use super::{Fault, Nemesis};
use crate::procs::{now_ns, Cluster, SidecarSpec};
use anyhow::Result;
use nix::sys::signal::Signal;
use rand::seq::IndexedRandom;
use rand::Rng;
use std::time::{Duration, Instant};

impl Nemesis {
    /// Kill: sidecar `s` killed (kill -9), restarted later.
    pub(super) fn kill_sidecar(
        &mut self,
        cl: &mut Cluster,
        s: usize,
        fault: &mut Fault,
    ) -> Started {
        fault.sidecar = Some(s);
        cl.sidecars[s].kill9("kill -9");
        Some((secs(&mut self.rng, 0.5, 3.0), Heal::Restart { s, skew: 0 }))
    }

    /// Full kill: in the full pool, when every one of its sidecars is free and serves (every
    /// slot held, nobody waiting), one of them killed (kill -9) and its replacement started
    /// at once. `None` if the pool is not full.
    pub(super) fn full_kill(
        &mut self,
        cl: &mut Cluster,
        spec: &SidecarSpec,
        free: &[usize],
        fault: &mut Fault,
    ) -> Result<Started> {
        let Some(pool) = spec.pools.iter().find(|p| p.name == "full") else {
            return Ok(None);
        };
        let members: Vec<usize> = pool.sidecars.clone().collect();
        let full = members.iter().all(|s| free.contains(s))
            && members
                .iter()
                .all(|&s| crate::probe::serves(&cl.sidecars[s].socket));
        let Some(&s) = members.choose(&mut self.rng).filter(|_| full) else {
            eprintln!("campaign: full-kill: the full pool is not full now");
            return Ok(None);
        };
        fault.sidecar = Some(s);
        fault.did = format!(
            "kill -9 of a holder in the full pool ({} slots, all held), replaced at once",
            pool.size
        );
        fault.start_ns = now_ns();
        cl.sidecars[s].kill9("kill -9 (full pool)");
        cl.sidecars[s].spawn(spec, 0)?;
        Ok(Some((secs(&mut self.rng, 1.0, 2.0), Heal::Nothing)))
    }

    /// Stop: sidecar `s` stopped (SIGSTOP) past its session timeout, then continued.
    pub(super) fn stop_sidecar(
        &mut self,
        cl: &mut Cluster,
        s: usize,
        fault: &mut Fault,
    ) -> Started {
        fault.sidecar = Some(s);
        cl.sidecars[s].signal(Signal::SIGSTOP);
        let past = self.timing.session_timeout + secs(&mut self.rng, 0.5, 2.0);
        Some((past, Heal::Cont { s }))
    }

    /// Term: sidecar `s` sent SIGTERM (a graceful hand-over), restarted once it has exited.
    pub(super) fn term_sidecar(
        &mut self,
        cl: &mut Cluster,
        s: usize,
        fault: &mut Fault,
    ) -> Started {
        fault.sidecar = Some(s);
        cl.sidecars[s].signal(Signal::SIGTERM);
        let since = Instant::now();
        Some((
            secs(&mut self.rng, 0.5, 2.0),
            Heal::AfterExit {
                s,
                skew: 0,
                since,
                how: "SIGTERM",
            },
        ))
    }

    /// Clock: sidecar `s` restarted with its clock stepped ±3 s, later restarted true.
    pub(super) fn step_clock(
        &mut self,
        cl: &mut Cluster,
        spec: &SidecarSpec,
        s: usize,
        fault: &mut Fault,
    ) -> Result<Started> {
        let skew = if self.rng.random_bool(0.5) { 3 } else { -3 };
        fault.sidecar = Some(s);
        fault.skew_s = skew;
        cl.sidecars[s].kill9("kill -9 (clock step)");
        cl.sidecars[s].spawn(spec, skew)?;
        Ok(Some((secs(&mut self.rng, 8.0, 15.0), Heal::Unskew { s })))
    }

    /// Panic: sidecar `s` restarted with a panic planted in a request handler or on the lease
    /// thread; restarted plain once it has aborted.
    pub(super) fn plant_panic(
        &mut self,
        cl: &mut Cluster,
        spec: &SidecarSpec,
        s: usize,
        fault: &mut Fault,
    ) -> Result<Started> {
        fault.sidecar = Some(s);
        let plant = if self.rng.random_bool(0.5) {
            format!("request:{}", self.rng.random_range(20..150))
        } else {
            format!("lease:{}ms", self.rng.random_range(500..3_000))
        };
        fault.did = format!("--plant-panic {plant}");
        cl.sidecars[s].kill9("kill -9 (to plant a panic)");
        cl.sidecars[s].spawn_with(spec, 0, &["--plant-panic".into(), plant])?;
        Ok(Some((
            secs(&mut self.rng, 0.5, 1.0),
            Heal::AfterExit {
                s,
                skew: 0,
                since: Instant::now(),
                how: "planted panic",
            },
        )))
    }

    /// Abandon: sidecar `s` restarted so that it drops its leases' release handles a few
    /// seconds later; restarted plain once it has exited.
    pub(super) fn plant_abandon(
        &mut self,
        cl: &mut Cluster,
        spec: &SidecarSpec,
        s: usize,
        fault: &mut Fault,
    ) -> Result<Started> {
        fault.sidecar = Some(s);
        // Long enough to hold a slot again (session timeout, a mark to wait past).
        let after = secs(&mut self.rng, 8.0, 12.0);
        let plant = format!("abandon:{}ms", after.as_millis());
        fault.did = format!("--plant-panic {plant}");
        cl.sidecars[s].kill9("kill -9 (to plant an abandoned release)");
        cl.sidecars[s].spawn_with(spec, 0, &["--plant-panic".into(), plant])?;
        Ok(Some((
            after + Duration::from_millis(500),
            Heal::AfterExit {
                s,
                skew: 0,
                since: Instant::now() + after,
                how: "abandoned release",
            },
        )))
    }

    /// Disagree: sidecar `s` restarted with a longer --lease-horizon and --max-clock-wait than
    /// the others, later restarted plain.
    pub(super) fn restart_disagreeing(
        &mut self,
        cl: &mut Cluster,
        spec: &SidecarSpec,
        s: usize,
        fault: &mut Fault,
    ) -> Result<Started> {
        fault.sidecar = Some(s);
        let h = format!("{}s", self.rng.random_range(8..14));
        fault.did = format!("--lease-horizon {h} --max-clock-wait {h}");
        cl.sidecars[s].kill9("kill -9 (to restart disagreeing)");
        let extra = ["--lease-horizon", &h, "--max-clock-wait", &h].map(String::from);
        cl.sidecars[s].spawn_with(spec, 0, &extra)?;
        Ok(Some((secs(&mut self.rng, 8.0, 15.0), Heal::Unskew { s })))
    }
}
