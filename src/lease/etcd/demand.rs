//! Who waits, in etcd: a contender at the head of an exhausted pool's queue (or probing an
//! exhausted large pool) puts `wanted/<lease>` (attached to its etcd lease: it goes with it)
//! until it holds a slot; every holder of the pool watches the `wanted/` prefix and keeps its
//! mark short while any key is there (see `crate::lease::protocol::horizon`). A holder also
//! watches its own mark, to write it back at once if someone else lowers it.

use super::client::{prefix_end, Etcd};
use super::marks::{delete, put};
use super::slots::EtcdSession;
use crate::lease::pool::tree::Paths;
use idcar_etcd_api::etcdserverpb as rpc;
use std::time::Duration;
use tokio::sync::watch;

/// How long a watch is trusted before the state is read again.
const RECHECK: Duration = Duration::from_secs(300);
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
    // Bounded: each pass waits for a change, or up to RECHECK.
    for _ in 0..u32::MAX {
        let req = rpc::RangeRequest {
            key: key.clone(),
            range_end: end.clone(),
            count_only: true,
            ..Default::default()
        };
        match etcd.range("looking for contenders waiting", req).await {
            Ok(r) => {
                crate::lease::zk::say(&tx, r.count > 0);
                let revision = r.header.map_or(0, |h| h.revision);
                etcd.wait_change(&key, &end, revision, RECHECK).await;
            }
            Err(_) => tokio::time::sleep(AGAIN).await,
        }
    }
}

/// Resolves when `key` (a mark) is no longer at `version` (its `mod_revision`) — changed or
/// deleted — or when any of `others` changes or goes after its revision (the slot's key after
/// our last mark write; the pool's `params` after the revision agreed, where fenced; see
/// `crate::lease::store::MarkStore::changed`). Each is read after a wake and watched again from
/// that read (see [`Etcd::wait_until`]): a compaction costs a read, never a poll.
pub(super) async fn mark_changed(
    etcd: Etcd,
    key: String,
    version: i64,
    others: Vec<(String, i64)>,
) {
    let mark = etcd.wait_until(&key, version, RECHECK, |now| now.unwrap_or(0) == version);
    // Any change after the revision (the key rewritten, or gone): the recheck tells whether it
    // matters.
    let other = |o: Option<(String, i64)>| {
        let etcd = etcd.clone();
        async move {
            let Some((other, revision)) = o else {
                return std::future::pending().await;
            };
            let still = |now: Option<i64>| now.is_some_and(|m| m <= revision);
            etcd.wait_until(&other, revision, RECHECK, still).await;
        }
    };
    let mut others = others.into_iter();
    tokio::select! {
        () = mark => {}
        () = other(others.next()) => {}
        () = other(others.next()) => {}
    }
}
