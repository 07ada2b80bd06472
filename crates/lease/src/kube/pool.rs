//! The pool as Lease objects hold it: followed by each lease (who waits, whether the pool is
//! full, the gauges: one list and a watch, so this process keeps judging the pool's sessions
//! and a claim judges them at once), a look for spares, and `idcar pool --kube`'s report (the
//! same report, rendered the same way, as for the other stores).

use super::api::{Event, Kube, KubeError};
use super::objects::{self, annotation, holder, queued, Names, IDENTITY, OWNER, PARAMS};
use super::record::identity_of;
use super::session::KubeSession;
use crate::metrics::LeaseMetrics;
use crate::pool::report::{effective_pool_size, ClusterReport, IdentityReport, SlotReport, Waiter};
use crate::pool::spare::Looked;
use crate::pool::tree::parse_owner;
use k8s_openapi::api::coordination::v1::Lease;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// How long one watch of the pool is trusted before the pool is listed again.
const FOLLOW_TRUSTED: Duration = Duration::from_secs(60);

/// Follows the pool — one list from the API server's cache, then its watch, each change applied
/// to the copy (no read per change) — and says on `tx` whether anyone waits for a slot, on the
/// session's `busy` whether anyone waits or every slot is held, and (`gauges`: the instance's
/// first lease) sets the pool gauges and says on `full` whether every slot is held.
pub(crate) async fn follow(
    me: KubeSession,
    pool: u32,
    tx: tokio::sync::watch::Sender<bool>,
    gauges: Option<(Arc<LeaseMetrics>, Arc<tokio::sync::watch::Sender<bool>>)>,
) {
    use futures_util::StreamExt;
    for _ in 0..u32::MAX {
        let Ok((items, version)) = me
            .kube
            .list_cached("following the pool", &me.names.all())
            .await
        else {
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        let mut copy: BTreeMap<String, Lease> = items
            .into_iter()
            .map(|l| (objects::name(&l).to_string(), l))
            .collect();
        let mut next = publish(&me, &copy, pool, &tx, gauges.as_ref()).await;
        let Ok(events) = me
            .kube
            .events(&me.names.all(), &version, FOLLOW_TRUSTED)
            .await
        else {
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        let mut events = std::pin::pin!(events);
        let apply = |copy: &mut BTreeMap<String, Lease>, e: Event| match e {
            Event::Put(l) => {
                copy.insert(objects::name(&l).to_string(), l);
            }
            Event::Gone(l) => {
                copy.remove(objects::name(&l));
            }
        };
        'watch: loop {
            // A session may be judged over meanwhile: looked at again then, without a read.
            match tokio::time::timeout(next, events.next()).await {
                Ok(Some(e)) => apply(&mut copy, e),
                Ok(None) => break,
                Err(_) => {}
            }
            // The changes that came together (a fleet starting, a rollout) judged once.
            for _ in 0..1_000 {
                match futures_util::FutureExt::now_or_never(events.next()) {
                    Some(Some(e)) => apply(&mut copy, e),
                    Some(None) => break 'watch,
                    None => break,
                }
            }
            next = publish(&me, &copy, pool, &tx, gauges.as_ref()).await;
        }
    }
}

/// Judges the pool's copy and says what [`follow`] says: how long until a session may be
/// judged over (or a minute).
async fn publish(
    me: &KubeSession,
    copy: &BTreeMap<String, Lease>,
    pool: u32,
    tx: &tokio::sync::watch::Sender<bool>,
    gauges: Option<&(Arc<LeaseMetrics>, Arc<tokio::sync::watch::Sender<bool>>)>,
) -> Duration {
    // Judged in place: every lease of a pool follows it, so a copy per change would cost
    // each of them the whole pool at every write.
    let mut sessions = Vec::new();
    let mut slots = BTreeMap::new();
    for l in copy.values() {
        match objects::role(l) {
            Some("session") => sessions.push(l),
            Some("slot") => {
                if let Some(n) = me.names.slot_of(objects::name(l)) {
                    slots.insert(n, l);
                }
            }
            _ => {}
        }
    }
    let judged = me
        .observer
        .judge(&sessions, &slots.values().copied().collect::<Vec<_>>());
    let (waiting, full) = me.busy(&sessions, &slots, &judged, pool);
    crate::pool::say(tx, waiting);
    crate::pool::say(&me.busy, waiting || full);
    if let Some((metrics, all_held)) = gauges {
        let held = slots
            .iter()
            .filter(|(n, l)| **n < pool && holder(l).is_some_and(|h| judged.alive.contains(h)))
            .count();
        let queued = sessions
            .iter()
            .filter(|s| queued(s).is_some() && judged.alive.contains(objects::name(s)))
            .count();
        metrics.pool_held.set(held as i64);
        metrics.pool_waiting.set(queued as i64);
        all_held.send_if_modified(|f| std::mem::replace(f, held >= pool as usize) != *f);
    }
    judged
        .next
        .map_or(Duration::from_secs(60), |n| n + Duration::from_millis(50))
}

/// One look at the pool for `give_back_when_asked`: whether every slot is held, and the head
/// of the queue (session name, owner record); `None` when the API server did not answer.
pub(crate) async fn look(me: &KubeSession, pool: u32) -> Option<Looked> {
    let snap = me.cached_snapshot("looking at the pool").await.ok()?;
    let held = (0..pool)
        .filter(|n| {
            snap.slots
                .get(n)
                .is_none_or(|l| holder(l).is_some_and(|h| snap.judged.alive.contains(h)))
        })
        .count();
    let head = snap
        .sessions
        .iter()
        .filter(|s| snap.judged.alive.contains(objects::name(s)))
        .filter_map(|s| Some((queued(s)?, s)))
        .min_by_key(|(t, _)| *t)
        .map(|(_, s)| {
            let owner = annotation(s, OWNER).and_then(|o| parse_owner(o.as_bytes()));
            (objects::name(s).to_string(), owner)
        });
    Some((held as u32 >= pool, head))
}

/// The report of the pools of `layout` under `prefix` (one `cluster`, or every one found).
/// A session's liveness is its object's existence here (one read cannot judge renewals).
pub async fn report(
    kube: &Kube,
    prefix: &str,
    layout: &str,
    cluster: Option<u8>,
    pool_size: u32,
    given: bool,
) -> Result<Vec<ClusterReport>, KubeError> {
    let clusters: BTreeSet<u8> = match cluster {
        Some(c) => [c].into(),
        None => {
            let (all, _) = kube.list("reading the pools", objects::ROLE).await?;
            let start = format!("{prefix}.{layout}.");
            all.iter()
                .filter_map(|l| {
                    let pool = l.metadata.labels.as_ref()?.get(objects::POOL)?;
                    pool.strip_prefix(&start)?.parse().ok()
                })
                .collect()
        }
    };
    let mut out = Vec::new();
    for c in clusters {
        let names = Names::new(prefix, layout, c);
        let (items, _) = kube.list("reading the pool", &names.all()).await?;
        let sessions: BTreeSet<&str> = items
            .iter()
            .filter(|l| objects::role(l) == Some("session"))
            .map(objects::name)
            .collect();
        let mut held = Vec::new();
        let mut waiting = Vec::new();
        let mut identity = None;
        for l in &items {
            match objects::role(l) {
                Some("slot") => {
                    let Some(n) = names.slot_of(objects::name(l)) else {
                        continue;
                    };
                    let Some(h) = holder(l).filter(|h| sessions.contains(h)) else {
                        continue;
                    };
                    let owner = annotation(l, OWNER).and_then(|o| parse_owner(o.as_bytes()));
                    let since = owner.as_ref().map_or("-".to_string(), |o| {
                        idcar_core::layout::rfc3339_millis(o.since_ms.saturating_mul(1_000_000))
                    });
                    held.push(SlotReport {
                        slot: n,
                        owner,
                        session: h
                            .rsplit_once(".session-")
                            .map_or(h, |(_, id)| id)
                            .to_string(),
                        since,
                        mark: objects::mark(l).ok().map(|(m, _)| m),
                    });
                }
                Some("session") if queued(l).is_some() => waiting.push((
                    queued(l).unwrap_or(0),
                    Waiter {
                        node: objects::name(l).to_string(),
                        owner: annotation(l, OWNER).and_then(|o| parse_owner(o.as_bytes())),
                    },
                )),
                Some("params") => {
                    let (uid, _) = identity_of(l);
                    identity = Some(IdentityReport::new(
                        annotation(l, PARAMS).unwrap_or("").as_bytes(),
                        &uid,
                        annotation(l, IDENTITY).map(str::as_bytes),
                    ));
                }
                _ => {}
            }
        }
        held.sort_by_key(|h| h.slot);
        waiting.sort_by_key(|(t, _)| *t);
        let size = effective_pool_size(pool_size, given, identity.as_ref());
        let waiting = waiting.into_iter().map(|(_, w)| w).collect();
        let mut r = ClusterReport::new(layout, c, size, held, waiting);
        r.identity = identity;
        out.push(r);
    }
    Ok(out)
}
