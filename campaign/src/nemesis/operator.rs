//! An operator's faults on the pool's store: `params` deleted, a held slot's mark lowered or
//! deleted, the pool's parameters changed under running sidecars; and running such an
//! operation (`storeop.rs`) inside a store node's namespace.

use super::started::{secs, Heal, Started};
use super::{Fault, Nemesis};
use crate::procs::{Cluster, SidecarSpec, MAIN_ROOT};
use anyhow::{Context, Result};
use rand::Rng;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

impl Nemesis {
    /// Params: the pool's `params` deleted. `None` if the operation could not run.
    pub(super) fn delete_params(
        &mut self,
        cl: &mut Cluster,
        spec: &SidecarSpec,
        fault: &mut Fault,
    ) -> Started {
        let seed = self.rng.random();
        fault.did = store_op(cl, spec, "delete-params", 0, seed, &[])?;
        Some((secs(&mut self.rng, 1.0, 3.0), Heal::Nothing))
    }

    /// Mark: the mark of a slot held by a free sidecar lowered by 10 s, or deleted; half the
    /// time its holder killed at once. `None` if no such slot could be touched.
    pub(super) fn touch_mark(
        &mut self,
        cl: &mut Cluster,
        spec: &SidecarSpec,
        free: &[usize],
        fault: &mut Fault,
    ) -> Started {
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
                return None;
            }
            None => return None,
        };
        // The holder it touched: "OP slot N of scK: ...".
        fault.sidecar = did
            .split(" of sc")
            .nth(1)
            .and_then(|r| r.split(':').next())
            .and_then(|n| n.parse().ok());
        fault.did = did;
        Some(match fault.sidecar {
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
        })
    }

    /// Reconfigure: `params` recreated with the pool's other parameters and a sidecar (the
    /// holder of an overlapping slot where there is one, else `target`) restarted with them.
    /// `None` if `params` could not be recreated (the sidecar restarted plain).
    pub(super) fn reconfigure(
        &mut self,
        cl: &mut Cluster,
        spec: &SidecarSpec,
        target: usize,
        free: &[usize],
        fault: &mut Fault,
    ) -> Result<Started> {
        // The holder of a slot whose IDs overlap another's under the other
        // parameters, where there is one (a pool that ignored them would then issue
        // duplicates); else any.
        let mut s = target;
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
                return Ok(None);
            }
        }
        Ok(Some((
            secs(&mut self.rng, 8.0, 15.0),
            Heal::Reconfigured { s },
        )))
    }
}

/// Runs an operator's operation on the main pool's store (see `storeop.rs`) inside the
/// namespace of a store node that is up: what it did, or `None` if it could not run.
pub(super) fn store_op(
    cl: &Cluster,
    spec: &SidecarSpec,
    op: &str,
    lower_by: u64,
    seed: u64,
    only: &[String],
) -> Option<String> {
    store_op_in(cl, spec, MAIN_ROOT, op, lower_by, seed, only)
}

/// [`store_op`] on the pool whose tree is at `root`.
pub(super) fn store_op_in(
    cl: &Cluster,
    spec: &SidecarSpec,
    root: &str,
    op: &str,
    lower_by: u64,
    seed: u64,
    only: &[String],
) -> Option<String> {
    let out = store_op_command(
        cl,
        spec,
        root,
        op,
        15,
        &[&lower_by.to_string(), &seed.to_string()],
    )?
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

/// Starts a probe of the store (`store-op probe`, bounded to a minute) that prints when the
/// store first answered; read once it has exited.
pub(super) fn probe_store(cl: &Cluster, spec: &SidecarSpec) -> Result<Child> {
    let mut cmd = store_op_command(cl, spec, MAIN_ROOT, "probe", 70, &["0", "0"])
        .context("no store node to probe from")?;
    Ok(cmd.stdin(Stdio::null()).stdout(Stdio::piped()).spawn()?)
}

/// `idcar-campaign store-op` for `op` on the pool at `root`, inside the namespace of a store
/// node that is up, bounded to `limit` seconds (`rest`: its arguments after the operation).
fn store_op_command(
    cl: &Cluster,
    spec: &SidecarSpec,
    root: &str,
    op: &str,
    limit: u32,
    rest: &[&str],
) -> Option<Command> {
    let i = (0..cl.zk.nodes.len()).find(|&i| cl.zk.is_up(i))?;
    let store = match cl.zk.store {
        crate::procs::Store::Zookeeper => "zookeeper",
        crate::procs::Store::Etcd => "etcd",
        crate::procs::Store::Kubernetes => "kubernetes",
    };
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &cl.zk.nodes[i].host.ns, "timeout"])
        .arg(limit.to_string())
        .arg(std::env::current_exe().ok()?)
        .arg("store-op")
        .args([
            store,
            &cl.zk.operator(),
            crate::procs::kube_prefix(cl.zk.store, root),
            &spec.layout,
            &spec.cluster.to_string(),
            op,
        ])
        .args(rest);
    Some(cmd)
}
