//! Who waits, in etcd: a contender at the head of an exhausted pool's queue (or probing an
//! exhausted large pool) puts `wanted/<lease>` (attached to its etcd lease: it goes with it)
//! until it holds a slot; every holder of the pool watches the `wanted/` prefix and keeps its
//! mark short while any key is there (see `crate::protocol::horizon`).

use super::client::{prefix_end, Etcd};
use super::handle::EtcdSession;
use super::ops::{delete, put};
use super::WATCH_TRUSTED;
use crate::pool::tree::Paths;
use idcar_etcd_api::etcdserverpb as rpc;
use std::time::Duration;
use tokio::sync::watch;

/// How long a failed read waits before it is tried again.
const AGAIN: Duration = Duration::from_millis(500);

impl EtcdSession {
    fn wanted_key(&self) -> String {
        format!("{}/{:016x}", self.paths.wanted(), self.lease)
    }

    /// Says in the store that this lease waits for a slot (best effort: holders then only
    /// shorten their marks later, at their next write).
    pub(super) async fn want_slot(&self) {
        let key = self.wanted_key();
        let req = rpc::TxnRequest {
            compare: vec![],
            success: vec![put(&key, Vec::new(), self.lease)],
            failure: vec![],
        };
        if let Err(e) = self.etcd.txn("saying a slot is wanted", req).await {
            tracing::warn!(%key, error = %e, "cannot say in etcd that a slot is wanted");
        }
    }

    /// No longer waiting (the key also goes with the etcd lease).
    pub(super) async fn unwant_slot(&self) {
        let req = rpc::TxnRequest {
            compare: vec![],
            success: vec![delete(&self.wanted_key())],
            failure: vec![],
        };
        // A few tries: a key left behind keeps every holder's mark short while this lease
        // lasts.
        for _ in 0..5 {
            if self
                .etcd
                .txn("no longer wanting a slot", req.clone())
                .await
                .is_ok()
            {
                return;
            }
            tokio::time::sleep(AGAIN).await;
        }
    }
}

/// Publishes on `tx` whether anyone waits for a slot of the pool, until aborted (a watch of the
/// `wanted/` prefix: nothing is read while nothing changes).
pub(super) async fn follow_demand(etcd: Etcd, paths: Paths, tx: watch::Sender<bool>) {
    let key = format!("{}/", paths.wanted()).into_bytes();
    let end = prefix_end(&key);
    // Bounded: each pass waits for a change, or up to WATCH_TRUSTED.
    for _ in 0..u32::MAX {
        let req = rpc::RangeRequest {
            key: key.clone(),
            range_end: end.clone(),
            count_only: true,
            ..Default::default()
        };
        match etcd.range("looking for contenders waiting", req).await {
            Ok(r) => {
                crate::pool::say(&tx, r.count > 0);
                let revision = r.header.map_or(0, |h| h.revision);
                etcd.wait_change(&key, &end, revision, WATCH_TRUSTED).await;
            }
            Err(_) => tokio::time::sleep(AGAIN).await,
        }
    }
}
