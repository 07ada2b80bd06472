//! One ZooKeeper session of a lease ([`ZkSession`]): its client, the pool's paths and what the
//! session agreed and may have left behind. How it does the negotiation's steps is in
//! `slots`, `params` and `demand`.

use super::tree::Paths;
use std::collections::BTreeSet;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use zookeeper_client as zk;

/// One ZooKeeper session of a lease.
pub struct ZkSession {
    pub(crate) client: zk::Client,
    pub(crate) paths: Paths,
    /// Digest auth or a client certificate in use: nodes are created creator-only.
    pub(crate) restricted: bool,
    /// Slots whose node this session may have created in a failed claim (ambiguous create,
    /// error after create): freed at the next claim if this session owns them.
    pub(super) suspects: Mutex<BTreeSet<u32>>,
    /// Whether this session may have a queue node it does not know the name of (a create
    /// whose reply was lost, a leave that failed): from joining the queue until the node is
    /// known gone. Only then does the next claim read the queue's nodes to find it.
    pub(super) queued: AtomicBool,
    /// The version of the pool's `params` node as agreed in this session: every slot is
    /// created in a `multi` that checks it.
    pub(super) params_version: i32,
    /// The creation (czxid) of the pool's `params` node as agreed: recreated, it is another
    /// pool.
    pub(super) params_creation: i64,
    /// The node of the pool's identity agreed in this session (`identity/<id>`): every slot
    /// is created, and every mark written, in a `multi` that checks it. `None`: not checked
    /// (a planted bug, for the campaign).
    pub(super) identity: Option<String>,
}

impl ZkSession {
    pub(crate) fn new(client: zk::Client, paths: Paths, restricted: bool) -> ZkSession {
        ZkSession {
            client,
            paths,
            restricted,
            suspects: Mutex::default(),
            queued: AtomicBool::new(false),
            params_version: 0,
            params_creation: 0,
            identity: None,
        }
    }

    pub(super) fn suspects(&self) -> std::sync::MutexGuard<'_, BTreeSet<u32>> {
        self.suspects.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The children of `dir` with a watch: held slot numbers below `pool`.
    pub(super) fn held_of(children: &[String], pool: u32) -> BTreeSet<u32> {
        children
            .iter()
            .filter_map(|c| c.parse::<u32>().ok())
            .filter(|n| *n < pool)
            .collect()
    }

    /// The queue's contenders, in queue order (sequence suffixes are zero-padded to ten
    /// digits, so names sort like their numbers).
    pub(super) async fn queue(&self) -> Result<Vec<String>, zk::Error> {
        let mut children = self.client.list_children(&self.paths.queue()).await?;
        children.retain(|c| c.starts_with("claim-"));
        children.sort();
        Ok(children)
    }
}
