//! The pools of slots the sidecars compete for: the main one (more sidecars than slots, so
//! some always wait), and beside it, in trees of their own in the same store, an idle pool
//! (slots to spare: nobody ever waits) and a full one (as many slots as sidecars: every slot
//! held, nobody waiting). Under the same faults, marks follow demand differently in each:
//! short where someone waits, far ahead where no one does.

use super::Store;
use std::ops::Range;

/// A pool of slots in the store, and the sidecars that compete for it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Pool {
    /// `main`, `idle` or `full`.
    pub name: &'static str,
    /// Its tree in the store (`--zk-root`, `--etcd-prefix`; `--kube-prefix` without the `/`): pools never share one, so their
    /// IDs may be equal (layouts without a cluster field), and uniqueness is judged per pool.
    pub root: &'static str,
    /// Its slots (`--pool-size`).
    pub size: u32,
    /// Slots each of its sidecars holds at once (`--slots`).
    pub slots: u32,
    /// Its sidecars (their indices).
    pub sidecars: Range<usize>,
}

/// The main pool's tree (idcar's default root), where the operator's faults act.
pub const MAIN_ROOT: &str = "/idcar";

impl Pool {
    /// The main pool (`sidecars` for `size` slots, `slots` each) and, after its sidecars,
    /// an idle pool of `idle` sidecars with two slots more, and a full pool of `full`
    /// sidecars for as many slots (each left out when 0). The pools beside the main one hold
    /// one slot per sidecar.
    pub fn layout(sidecars: u32, size: u32, slots: u32, idle: u32, full: u32) -> Vec<Pool> {
        let main = sidecars as usize;
        let mut pools = vec![Pool {
            name: "main",
            root: MAIN_ROOT,
            size,
            slots,
            sidecars: 0..main,
        }];
        let mut next = main;
        for (name, root, n, spare) in [
            ("idle", "/idcar-idle", idle, 2),
            ("full", "/idcar-full", full, 0),
        ] {
            if n == 0 {
                continue;
            }
            pools.push(Pool {
                name,
                root,
                size: n + spare,
                slots: 1,
                sidecars: next..next + n as usize,
            });
            next += n as usize;
        }
        pools
    }

    /// Whether someone may wait for a slot: more leases wanted than slots.
    pub fn contended(&self) -> bool {
        self.sidecars.len() as u32 * self.slots > self.size
    }

    /// How many of its sidecars serve when every fault is healed.
    pub fn holders(&self) -> usize {
        (self.size as usize).min(self.sidecars.len())
    }

    /// The flags that put a sidecar in this pool.
    pub fn args(&self, store: Store) -> Vec<String> {
        let root = match store {
            Store::Zookeeper => "--zk-root",
            Store::Etcd => "--etcd-prefix",
            Store::Kubernetes => "--kube-prefix",
        };
        [
            root,
            kube_prefix(store, self.root),
            "--pool-size",
            &self.size.to_string(),
            "--slots",
            &self.slots.to_string(),
        ]
        .map(String::from)
        .to_vec()
    }
}

/// A pool's root as `store` names it: Kubernetes object names have no `/`.
pub fn kube_prefix(store: Store, root: &str) -> &str {
    match store {
        Store::Kubernetes => root.trim_start_matches('/'),
        _ => root,
    }
}

/// The pool sidecar `s` belongs to (an index into `pools`; 0 when none says).
pub fn pool_of(pools: &[Pool], s: usize) -> usize {
    pools
        .iter()
        .position(|p| p.sidecars.contains(&s))
        .unwrap_or(0)
}
