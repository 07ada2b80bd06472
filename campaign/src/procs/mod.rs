//! The processes of the campaign: the store's three nodes (a ZooKeeper ensemble through
//! `zk/lib.sh`, or an etcd cluster, with a Kubernetes API server on the first for
//! `--store kubernetes`) and the idcar sidecars, each started inside its own
//! network namespace, each incarnation recorded.
//!
//! The store's nodes are in `ensemble`, the sidecars in `sidecar`, the pool's other
//! parameters (the reconfigure fault) in `reconfig`, the pools the sidecars compete for in
//! `pool`; here, the whole cluster.

mod apiserver;
mod ensemble;
mod pool;
mod reconfig;
mod sidecar;

pub use apiserver::NAMESPACE as KUBE_NAMESPACE;
pub use ensemble::{Ensemble, Store};
pub use pool::{kube_prefix, pool_of, Pool, MAIN_ROOT};
pub use reconfig::Reconfig;
pub use sidecar::{Incarnation, Sidecar, SidecarSpec, FAKETIME};

use crate::net::Net;

/// Now, in ns since the epoch (the time stamps of the history).
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The network and everything running in it.
pub struct Cluster {
    // Field order is drop order: processes before the namespaces they live in.
    pub sidecars: Vec<Sidecar>,
    pub zk: Ensemble,
    pub net: Net,
}

impl Cluster {
    /// Host indices of the ZooKeeper nodes on the network.
    pub fn zk_hosts(&self) -> Vec<usize> {
        (0..self.zk.nodes.len()).collect()
    }

    /// Host index of sidecar `s` on the network.
    pub fn sidecar_host(&self, s: usize) -> usize {
        self.zk.nodes.len() + s
    }
}

/// What `call` prints with the workspace's shell library `lib` sourced (`etcd/lib.sh`'s
/// `etcd_bin etcd`, `kube/lib.sh`'s `kube_home`): a path in the store cache.
pub(crate) fn from_lib(lib: &str, call: &str) -> anyhow::Result<std::path::PathBuf> {
    let lib = workspace().join(lib);
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(". \"{}\" && {call}", lib.display()))
        .stdin(std::process::Stdio::null())
        .output()?;
    if !out.status.success() {
        anyhow::bail!("{}", String::from_utf8_lossy(&out.stderr).trim_end());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim_end().into())
}

/// The repository this campaign was built in (its scripts: `zk/lib.sh`; its `target/`).
pub(crate) fn workspace() -> std::path::PathBuf {
    let campaign = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    campaign.parent().unwrap_or(campaign).to_path_buf()
}
