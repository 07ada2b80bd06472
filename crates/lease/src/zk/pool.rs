//! The pool as seen from ZooKeeper: gauges for metrics (watches on `slots/` and `queue/`,
//! re-read on a change, at most once a second; while the session is down they keep their last values, and
//! `idcar_zk_session_state` says so), and the report behind `idcar pool`.

use super::tree::{parse_mark, parse_owner};
use super::{session_gone, Paths};
use crate::metrics::LeaseMetrics;
use crate::pool::report::{
    effective_pool_size, rfc3339_ms, ClusterReport, IdentityReport, SlotReport, Waiter,
};
use crate::pool::spare::Looked;
use prometheus::IntGauge;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;
use zookeeper_client as zk;

/// Keeps `idcar_pool_slots_held` and `idcar_pool_contenders_waiting` current until aborted or
/// the session ends, and says on `full` whether every slot of the pool is held.
pub fn spawn_gauges(
    client: zk::Client,
    paths: Paths,
    pool_size: u32,
    metrics: Arc<LeaseMetrics>,
    full: Arc<tokio::sync::watch::Sender<bool>>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let held = |c: &[String]| {
            let held = c
                .iter()
                .filter(|n| n.parse::<u32>().is_ok_and(|n| n < pool_size))
                .count();
            full.send_if_modified(|f| std::mem::replace(f, held >= pool_size as usize) != *f);
            held
        };
        let waiting = |c: &[String]| c.iter().filter(|n| n.starts_with("claim-")).count();
        tokio::join!(
            follow(&client, paths.slots(), held, metrics.pool_held.clone()),
            follow(
                &client,
                paths.queue(),
                waiting,
                metrics.pool_waiting.clone()
            ),
        );
    })
}

/// One look at the pool for `give_back_when_asked`: whether every slot of the pool is held,
/// and the head of the queue (node name, owner record); `None` when ZooKeeper did not answer.
pub(crate) async fn look(client: zk::Client, paths: Paths, pool_size: u32) -> Option<Looked> {
    let mut queue = client.list_children(&paths.queue()).await.ok()?;
    queue.retain(|c| c.starts_with("claim-"));
    let Some(head) = queue.into_iter().min() else {
        return Some((false, None));
    };
    let path = format!("{}/{head}", paths.queue());
    let Some((data, _)) = data_or_none(&client, &path).await.ok()? else {
        return Some((false, None));
    };
    let held = client
        .list_children(&paths.slots())
        .await
        .ok()?
        .iter()
        .filter(|n| n.parse::<u32>().is_ok_and(|n| n < pool_size))
        .count();
    Some((held as u32 >= pool_size, Some((head, parse_owner(&data)))))
}

async fn follow(
    client: &zk::Client,
    path: String,
    count: impl Fn(&[String]) -> usize,
    gauge: IntGauge,
) {
    // At most one re-list a second per instance (65 instances starting together must not turn
    // every change into a herd of reads), at once after a quiet second.
    let mut listed: Option<Instant> = None;
    loop {
        if let Some(at) = listed {
            tokio::time::sleep_until((at + Duration::from_secs(1)).into()).await;
        }
        listed = Some(Instant::now());
        match client.list_and_watch_children(&path).await {
            Ok((children, watcher)) => {
                gauge.set(count(&children) as i64);
                watcher.changed().await;
            }
            Err(e) if session_gone(&e) => return,
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

pub(crate) async fn data_or_none(
    client: &zk::Client,
    path: &str,
) -> Result<Option<(Vec<u8>, zk::Stat)>, zk::Error> {
    match client.get_data(path).await {
        Ok(d) => Ok(Some(d)),
        Err(zk::Error::NoNode) => Ok(None),
        Err(e) => Err(e),
    }
}

/// What a pool's instances agreed on, as recorded (`None`: no `params` yet).
async fn identity_report(
    client: &zk::Client,
    paths: &Paths,
) -> Result<Option<IdentityReport>, zk::Error> {
    Ok(match data_or_none(client, &paths.params()).await? {
        None => None,
        Some((params, stat)) => {
            let id = crate::identity::id_of(stat.czxid, i64::from(stat.version));
            let mut records = match client.list_children(&paths.identities()).await {
                Ok(r) => r,
                Err(zk::Error::NoNode) => Vec::new(),
                Err(e) => return Err(e),
            };
            records.sort();
            let first = records
                .into_iter()
                .find(|r| r.starts_with(&format!("{id}-")));
            let rec = match &first {
                Some(name) => data_or_none(client, &paths.identity(name)).await?,
                None => None,
            };
            Some(IdentityReport::new(
                &params,
                first.as_deref().unwrap_or(&id),
                rec.as_ref().map(|(d, _)| d.as_slice()),
            ))
        }
    })
}

/// Reads the pool of `layout` for `cluster` (or every cluster found) under `root`; free
/// slots counted in `pool_size` if `given`, else in the pool's recorded size.
pub async fn report(
    client: &zk::Client,
    root: &str,
    layout: &str,
    cluster: Option<u8>,
    pool_size: u32,
    given: bool,
) -> Result<Vec<ClusterReport>, zk::Error> {
    let clusters: Vec<u8> = match cluster {
        Some(c) => vec![c],
        None => {
            let base = format!("{}/{layout}", root.trim_end_matches('/'));
            let mut cs: Vec<u8> = match client.list_children(&base).await {
                Ok(c) => c.iter().filter_map(|c| c.parse().ok()).collect(),
                Err(zk::Error::NoNode) => Vec::new(),
                Err(e) => return Err(e),
            };
            cs.sort_unstable();
            cs
        }
    };
    let mut out = Vec::new();
    for c in clusters {
        let paths = Paths::new(root, layout, c);
        let children = match client.list_children(&paths.slots()).await {
            Ok(ch) => ch,
            Err(zk::Error::NoNode) => Vec::new(),
            Err(e) => return Err(e),
        };
        let mut slots: Vec<u32> = children.iter().filter_map(|n| n.parse().ok()).collect();
        slots.sort_unstable();
        let mut held = Vec::new();
        for n in slots {
            let Some((data, stat)) = data_or_none(client, &paths.slot(n)).await? else {
                continue;
            };
            let mark = data_or_none(client, &paths.mark(n))
                .await?
                .and_then(|(d, _)| parse_mark(&d));
            held.push(SlotReport {
                slot: n,
                owner: parse_owner(&data),
                session: format!("{:#x}", stat.ephemeral_owner),
                since: rfc3339_ms(stat.ctime),
                mark,
            });
        }
        let mut queue = match client.list_children(&paths.queue()).await {
            Ok(q) => q,
            Err(zk::Error::NoNode) => Vec::new(),
            Err(e) => return Err(e),
        };
        queue.sort();
        let mut waiting = Vec::new();
        for node in queue {
            let owner = data_or_none(client, &format!("{}/{node}", paths.queue()))
                .await?
                .and_then(|(d, _)| parse_owner(&d));
            waiting.push(Waiter { node, owner });
        }
        let identity = identity_report(client, &paths).await?;
        let size = effective_pool_size(pool_size, given, identity.as_ref());
        let mut r = ClusterReport::new(layout, c, size, held, waiting);
        r.identity = identity;
        out.push(r);
    }
    Ok(out)
}
