//! Faults on the store's nodes: the leader killed, an outage of every node (when a snapshot
//! of the store may be taken), every node frozen past the sessions, the history compacted
//! (etcd), and a restore from a snapshot by the documented procedure.

use super::operator::store_op_in;
use super::started::{secs, Heal, Started};
use super::{Fault, Nemesis};
use crate::procs::{now_ns, Cluster, SidecarSpec};
use anyhow::Result;
use nix::sys::signal::Signal;
use rand::Rng;
use std::process::Command;
use std::time::Duration;

impl Nemesis {
    /// Leader: the store's leader killed (kill -9), restarted later. `None` if no node says
    /// it leads.
    pub(super) fn kill_leader(&mut self, cl: &mut Cluster, fault: &mut Fault) -> Started {
        let k = cl.zk.leader()?;
        fault.zk = Some(k + 1);
        cl.zk.kill(k);
        Some((secs(&mut self.rng, 2.0, 5.0), Heal::Launch(vec![k])))
    }

    /// Outage: every store node killed (kill -9), restarted later; meanwhile, a copy of the
    /// store's data for a later restore (the first time, then every other time at random).
    pub(super) fn outage(&mut self, cl: &mut Cluster, spec: &SidecarSpec) -> Result<Started> {
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
        // Started again, then probed until the store answers.
        Ok(Some((secs(&mut self.rng, 2.0, 6.0), Heal::Relaunch(all))))
    }

    /// Freeze: every store node stopped (SIGSTOP) past the sidecars' session timeout (etcd:
    /// their lease TTL), then continued and probed until the store answers: it comes back
    /// with the sessions of every sidecar expired.
    pub(super) fn freeze(&mut self, cl: &mut Cluster, fault: &mut Fault) -> Started {
        let all: Vec<usize> = (0..cl.zk.nodes.len()).collect();
        for &k in &all {
            cl.zk.signal(k, Signal::SIGSTOP);
        }
        // The store is cut once every node has stopped (a loaded machine delivers a stop
        // signal to a busy process's threads in tens of milliseconds, while the others still
        // commit): the cut holders' bound counts from then. At most a second.
        for _ in 0..200 {
            if all.iter().all(|&k| cl.zk.stopped(k)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        fault.start_ns = now_ns();
        let past = self.timing.session_timeout + secs(&mut self.rng, 0.5, 2.0);
        fault.did = format!("every node stopped for {:.1} s", past.as_secs_f64());
        Some((past, Heal::Thaw(all)))
    }

    /// Compact (etcd): the store's history compacted at its current revision. `None` if
    /// etcdctl could not.
    pub(super) fn compact(&mut self, cl: &mut Cluster, fault: &mut Fault) -> Started {
        match cl.zk.compact() {
            Ok(did) => fault.did = did,
            Err(e) => {
                eprintln!("campaign: compact: {e:#}");
                return None;
            }
        }
        Some((secs(&mut self.rng, 1.0, 2.0), Heal::Nothing))
    }

    /// Restore: every sidecar frozen, the store's data replaced by the snapshot and the store
    /// restarted, `params` deleted, the sidecars thawed. `None` without a snapshot.
    pub(super) fn restore(
        &mut self,
        cl: &mut Cluster,
        spec: &SidecarSpec,
        fault: &mut Fault,
    ) -> Result<Started> {
        let Some((dir, taken)) = self.snapshot.clone() else {
            return Ok(None);
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
        // The procedure's step for every pool in the store.
        let mut said = Vec::new();
        for pool in &spec.pools {
            let mut did = None;
            for _ in 0..10 {
                let seed = self.rng.random();
                did = store_op_in(cl, spec, pool.root, "delete-params", 0, seed, &[]);
                if did.as_deref().is_some_and(|d| d.starts_with("deleted")) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(500));
            }
            said.push(did.unwrap_or_else(|| format!("{} params NOT deleted", pool.root)));
        }
        for &s in &running {
            cl.sidecars[s].signal(Signal::SIGCONT);
        }
        fault.did = format!(
            "restored the snapshot of {:.1} s ago (store up: {up}); {}",
            (now_ns().saturating_sub(taken)) as f64 / 1e9,
            said.join("; ")
        );
        Ok(Some((secs(&mut self.rng, 1.0, 2.0), Heal::Nothing)))
    }
}

/// `cp -a from to`.
fn copy_dir(from: &std::path::Path, to: &std::path::Path) -> Result<()> {
    let st = Command::new("cp").arg("-a").arg(from).arg(to).status()?;
    anyhow::ensure!(st.success(), "cp -a {} {}", from.display(), to.display());
    Ok(())
}
