//! A holder's watch of its own mark (and of the pool's identity), so that a mark someone else
//! lowers is written back at once.

use super::{session_gone, AGAIN};
use zookeeper_client as zk;

/// Resolves when `path` (a mark) is no longer at `version` — changed, deleted, or the
/// session's end — or when `others` (the slot's node; the pool's parameters and identity node,
/// where fenced) change or go (see `crate::store::MarkStore::changed`).
pub(super) async fn mark_changed(
    client: zk::Client,
    path: String,
    version: i32,
    others: Vec<String>,
) {
    let mark = async {
        for _ in 0..u32::MAX {
            match client.get_and_watch_data(&path).await {
                Ok((_, stat, _)) if stat.version != version => return,
                Ok((_, _, watcher)) => {
                    watcher.changed().await;
                    return;
                }
                Err(zk::Error::NoNode) => return,
                Err(e) if session_gone(&e) => return std::future::pending().await,
                Err(_) => tokio::time::sleep(AGAIN).await,
            }
        }
    };
    let node = |node: Option<String>| {
        let client = client.clone();
        async move {
            let Some(node) = node else {
                return std::future::pending().await;
            };
            for _ in 0..u32::MAX {
                match client.check_and_watch_stat(&node).await {
                    Ok((_, watcher)) => {
                        watcher.changed().await;
                        return;
                    }
                    Err(e) if session_gone(&e) => return std::future::pending().await,
                    Err(_) => tokio::time::sleep(AGAIN).await,
                }
            }
        }
    };
    let mut others = others.into_iter();
    tokio::select! {
        () = mark => {}
        () = node(others.next()) => {}
        () = node(others.next()) => {}
        () = node(others.next()) => {}
    }
}
