//! The pool as etcd holds it: gauges for this instance's metrics, and `idcar pool --etcd`'s
//! report (the same report, rendered the same way, as for ZooKeeper).

use super::client::{prefix_end, Etcd, EtcdError};
use crate::metrics::LeaseMetrics;
use crate::pool::report::{effective_pool_size, ClusterReport, IdentityReport, SlotReport, Waiter};
use crate::pool::spare::Looked;
use crate::pool::tree::{parse_mark, parse_owner, Paths};
use idcar_etcd_api::etcdserverpb as rpc;
use idcar_etcd_api::mvccpb::KeyValue;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// Follows `slots/` and `queue/` into the pool gauges, read every 5 s (keys only: as many
/// as there are holders and waiters), and says on `full` whether every slot of the pool is
/// held. Polled rather than watched: a watch per instance and directory would wake every
/// instance of a cluster at every claim.
pub fn spawn_gauges(
    etcd: Etcd,
    paths: Paths,
    pool_size: u32,
    metrics: Arc<LeaseMetrics>,
    full: Arc<tokio::sync::watch::Sender<bool>>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let slots = format!("{}/", paths.slots());
        let queue = format!("{}/", paths.queue());
        let held = |kvs: &[KeyValue]| {
            let held = kvs
                .iter()
                .filter(|kv| key_number(&kv.key, &slots).is_some_and(|n| n < pool_size))
                .count();
            full.send_if_modified(|f| std::mem::replace(f, held >= pool_size as usize) != *f);
            held
        };
        tokio::join!(
            follow(&etcd, &slots, held, &metrics.pool_held),
            follow(&etcd, &queue, |kvs| kvs.len(), &metrics.pool_waiting),
        );
    })
}

async fn follow(
    etcd: &Etcd,
    prefix: &str,
    count: impl Fn(&[KeyValue]) -> usize,
    gauge: &prometheus::IntGauge,
) {
    let end = prefix_end(prefix.as_bytes());
    loop {
        let req = rpc::RangeRequest {
            key: prefix.as_bytes().to_vec(),
            range_end: end.clone(),
            keys_only: true,
            ..Default::default()
        };
        if let Ok(r) = etcd.range("reading the pool", req).await {
            gauge.set(count(&r.kvs) as i64);
        }
        tokio::time::sleep(GAUGE_EVERY).await;
    }
}

/// How often the pool gauges are read.
const GAUGE_EVERY: Duration = Duration::from_secs(5);

/// `<prefix><N>` as N.
fn key_number(key: &[u8], prefix: &str) -> Option<u32> {
    std::str::from_utf8(key)
        .ok()?
        .strip_prefix(prefix)?
        .parse()
        .ok()
}

/// One look at the pool for `give_back_when_asked`: whether every slot of the pool is held,
/// and the head of the queue (key, owner record); `None` when etcd did not answer.
pub(crate) async fn look(etcd: Etcd, paths: Paths, pool_size: u32) -> Option<Looked> {
    let slots = format!("{}/", paths.slots());
    let queue = format!("{}/", paths.queue());
    let waiting = range_prefix(&etcd, &queue, false).await.ok()?;
    // Sorted by create revision: the first is the head.
    let head = waiting.first().map(|kv| {
        let key = String::from_utf8_lossy(&kv.key).to_string();
        (key, parse_owner(&kv.value))
    });
    let held = range_prefix(&etcd, &slots, true).await.ok()?;
    let held = held
        .iter()
        .filter(|kv| key_number(&kv.key, &slots).is_some_and(|n| n < pool_size))
        .count();
    Some((held as u32 >= pool_size, head))
}

/// Every key under `dir/` (values too unless `keys_only`).
pub(crate) async fn under(
    etcd: &Etcd,
    dir: &str,
    keys_only: bool,
) -> Result<Vec<KeyValue>, EtcdError> {
    range_prefix(etcd, &format!("{dir}/"), keys_only).await
}

async fn range_prefix(
    etcd: &Etcd,
    prefix: &str,
    keys_only: bool,
) -> Result<Vec<KeyValue>, EtcdError> {
    let req = rpc::RangeRequest {
        key: prefix.as_bytes().to_vec(),
        range_end: prefix_end(prefix.as_bytes()),
        keys_only,
        sort_target: rpc::range_request::SortTarget::Create as i32,
        sort_order: rpc::range_request::SortOrder::Ascend as i32,
        ..Default::default()
    };
    Ok(etcd.range("reading the pool", req).await?.kvs)
}

/// The pool of `layout` per cluster (one, or every cluster found under the prefix).
pub async fn report(
    etcd: &Etcd,
    prefix: &str,
    layout: &str,
    cluster: Option<u8>,
    pool_size: u32,
    given: bool,
) -> Result<Vec<ClusterReport>, EtcdError> {
    let base = format!("{}/{layout}/", prefix.trim_end_matches('/'));
    let clusters: BTreeSet<u8> = match cluster {
        Some(c) => [c].into(),
        None => range_prefix(etcd, &base, true)
            .await?
            .iter()
            .filter_map(|kv| {
                let k = std::str::from_utf8(&kv.key).ok()?.strip_prefix(&base)?;
                k.split('/').next()?.parse().ok()
            })
            .collect(),
    };
    let mut out = Vec::new();
    for c in clusters {
        let paths = Paths::new(prefix, layout, c);
        let (slots_p, marks_p, queue_p) = (
            format!("{}/", paths.slots()),
            format!("{}/", paths.marks()),
            format!("{}/", paths.queue()),
        );
        let marks: BTreeMap<u32, u64> = range_prefix(etcd, &marks_p, false)
            .await?
            .iter()
            .filter_map(|kv| Some((key_number(&kv.key, &marks_p)?, parse_mark(&kv.value)?)))
            .collect();
        let mut held: Vec<SlotReport> = range_prefix(etcd, &slots_p, false)
            .await?
            .iter()
            .filter_map(|kv| {
                let n = key_number(&kv.key, &slots_p)?;
                let owner = parse_owner(&kv.value);
                let since = owner.as_ref().map_or("-".to_string(), |o| {
                    idcar_core::layout::rfc3339_millis(o.since_ms.saturating_mul(1_000_000))
                });
                Some(SlotReport {
                    slot: n,
                    owner,
                    session: format!("{:#x}", kv.lease),
                    since,
                    mark: marks.get(&n).copied(),
                })
            })
            .collect();
        held.sort_by_key(|h| h.slot);
        let waiting = range_prefix(etcd, &queue_p, false)
            .await?
            .iter()
            .map(|kv| Waiter {
                node: String::from_utf8_lossy(&kv.key[queue_p.len()..]).to_string(),
                owner: parse_owner(&kv.value),
            })
            .collect();
        let identity = match range_prefix(etcd, &paths.params(), false)
            .await?
            .into_iter()
            .find(|kv| kv.key == paths.params().as_bytes())
        {
            None => None,
            Some(params) => {
                let id = crate::identity::id_of(params.create_revision, params.mod_revision);
                let rec = range_prefix(etcd, &paths.identity(&id), false)
                    .await?
                    .into_iter()
                    .find(|kv| kv.key == paths.identity(&id).as_bytes());
                Some(IdentityReport::new(
                    &params.value,
                    &id,
                    rec.as_ref().map(|kv| kv.value.as_slice()),
                ))
            }
        };
        let size = effective_pool_size(pool_size, given, identity.as_ref());
        let mut r = ClusterReport::new(layout, c, size, held, waiting);
        r.identity = identity;
        out.push(r);
    }
    Ok(out)
}
