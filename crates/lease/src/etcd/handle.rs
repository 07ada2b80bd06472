//! One etcd lease of a lease of ours ([`EtcdSession`]): the client, the lease, the pool's keys
//! and what was agreed under it. How it does the negotiation's steps is in `slots`, `take`,
//! `session` and `demand`.

use super::client::Etcd;
use crate::pool::tree::Paths;
use crate::pool::Change;
use std::time::Duration;

/// How long a watch is trusted before the state is read again.
const RECHECK: Duration = Duration::from_secs(2);

/// One etcd lease of a lease of ours, and what was agreed under it.
pub struct EtcdSession {
    pub(crate) etcd: Etcd,
    pub(crate) lease: i64,
    /// The TTL as etcd granted it.
    pub(crate) ttl: Duration,
    pub(crate) paths: Paths,
    /// The `mod_revision` of the pool's `params` as agreed under this lease.
    pub(super) params_revision: i64,
    /// Its `create_revision`: the pool's identity, compared by every claim and mark write (0:
    /// not compared, a planted bug for the campaign).
    pub(super) params_created: i64,
}

impl EtcdSession {
    pub(crate) fn new(etcd: Etcd, lease: i64, ttl: Duration, paths: Paths) -> EtcdSession {
        EtcdSession {
            etcd,
            lease,
            ttl,
            paths,
            params_revision: 0,
            params_created: 0,
        }
    }

    pub(super) fn queue_key(&self) -> String {
        format!("{}/{:016x}", self.paths.queue(), self.lease)
    }

    /// A change of the keys `key`..`end` after `revision` (or [`RECHECK`]).
    pub(super) fn change(&self, key: Vec<u8>, end: Vec<u8>, revision: i64) -> Change {
        let etcd = self.etcd.clone();
        Box::pin(async move { etcd.wait_change(&key, &end, revision, RECHECK).await })
    }
}
