//! Who waits, in ZooKeeper: a contender at the head of an exhausted pool's queue (or probing
//! an exhausted large pool) creates `wanted/<session>` (ephemeral: it goes with its session)
//! until it holds a slot; every holder of the pool watches `wanted/`'s children and keeps its
//! mark short while any is there (see `crate::protocol::horizon`).

use super::handle::ZkSession;
use super::{acls, session_gone, Paths, AGAIN};
use crate::pool::say;
use tokio::sync::watch;
use zookeeper_client as zk;

impl ZkSession {
    fn wanted_entry(&self) -> String {
        format!("{}/{:x}", self.paths.wanted(), self.client.session_id().0)
    }

    /// Says in the store that this session waits for a slot (best effort: holders then only
    /// shorten their marks later, at their next write).
    pub(super) async fn want_slot(&self) {
        let ephemeral = zk::CreateMode::Ephemeral.with_acls(acls(self.restricted));
        let path = self.wanted_entry();
        let mut r = self.client.create(&path, b"", &ephemeral).await.map(|_| ());
        if matches!(r, Err(zk::Error::NoNode)) {
            // A pool made by an older version: no `wanted/` yet.
            let dir = zk::CreateMode::Persistent.with_acls(acls(self.restricted));
            r = match self.client.mkdir(&self.paths.wanted(), &dir).await {
                Ok(()) | Err(zk::Error::NodeExists) => {
                    self.client.create(&path, b"", &ephemeral).await.map(|_| ())
                }
                Err(e) => Err(e),
            };
        }
        match r {
            Ok(()) | Err(zk::Error::NodeExists) => {}
            Err(e) => {
                tracing::warn!(%path, error = %e, "cannot say in ZooKeeper that a slot is wanted")
            }
        }
    }

    /// No longer waiting (the entry also goes with the session).
    pub(super) async fn unwant_slot(&self) {
        // A few tries: an entry left behind keeps every holder's mark short while this session
        // lasts.
        for _ in 0..5 {
            match self.client.delete(&self.wanted_entry(), None).await {
                Ok(()) | Err(zk::Error::NoNode) => return,
                Err(e) if session_gone(&e) => return,
                Err(_) => tokio::time::sleep(AGAIN).await,
            }
        }
    }
}

/// Publishes on `tx` whether anyone waits for a slot of the pool, for as long as the session
/// lasts (a watch of `wanted/`: nothing is read while nothing changes).
pub(super) async fn follow_demand(client: zk::Client, paths: Paths, tx: watch::Sender<bool>) {
    let dir = paths.wanted();
    // Bounded: each pass waits for a change (or half a second after a failure).
    for _ in 0..u32::MAX {
        let watcher = match client.list_and_watch_children(&dir).await {
            Ok((children, watcher)) => {
                say(&tx, !children.is_empty());
                watcher
            }
            Err(zk::Error::NoNode) => match client.check_and_watch_stat(&dir).await {
                Ok((None, watcher)) => {
                    say(&tx, false);
                    watcher
                }
                Ok((Some(_), _)) => continue,
                Err(e) if session_gone(&e) => return,
                Err(_) => {
                    tokio::time::sleep(AGAIN).await;
                    continue;
                }
            },
            Err(e) if session_gone(&e) => return,
            Err(_) => {
                tokio::time::sleep(AGAIN).await;
                continue;
            }
        };
        watcher.changed().await;
    }
}
