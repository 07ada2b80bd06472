//! The pool as Lease objects hold it: each lease's demand from the process's copy of it (who
//! waits, whether the pool is full, the gauges), a look for spares, and `idcar pool --kube`'s
//! report (the same report, rendered the same way, as for the other stores).

use super::api::{Kube, KubeError};
use super::objects::{self, annotation, holder, queued, Names, IDENTITY, OWNER, PARAMS};
use super::record::identity_of;
use super::session::KubeSession;
use crate::metrics::LeaseMetrics;
use crate::pool::report::{effective_pool_size, ClusterReport, IdentityReport, SlotReport, Waiter};
use crate::pool::spare::Looked;
use crate::pool::tree::parse_owner;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Says, at every copy of the pool the process's follower publishes, on `tx` whether anyone
/// waits for a slot, on the session's `busy` whether anyone waits or every slot is held, and
/// (`gauges`: the instance's first lease) sets the pool gauges and says on `full` whether every
/// slot is held.
pub(crate) async fn demand(
    me: KubeSession,
    pool: u32,
    tx: tokio::sync::watch::Sender<bool>,
    gauges: Option<(Arc<LeaseMetrics>, Arc<tokio::sync::watch::Sender<bool>>)>,
) {
    let mut copies = me.view.subscribe();
    loop {
        let view = copies.borrow_and_update().clone();
        if view.listed {
            let (waiting, full) = me.busy(&view, pool);
            crate::pool::say(&tx, waiting);
            crate::pool::say(&me.busy, waiting || full);
            if let Some((metrics, all_held)) = &gauges {
                let alive = &view.judged.alive;
                let held = view
                    .slots
                    .iter()
                    .filter(|(n, l)| **n < pool && holder(l).is_some_and(|h| alive.contains(h)))
                    .count();
                let queued = view.queued().len();
                metrics.pool_held.set(held as i64);
                metrics.pool_waiting.set(queued as i64);
                all_held.send_if_modified(|f| std::mem::replace(f, held >= pool as usize) != *f);
            }
        }
        if copies.changed().await.is_err() {
            return;
        }
    }
}

/// One look at the pool for `give_back_when_asked`: whether every slot is held, and the head
/// of the queue (session name, owner record), as the process's copy shows it; `None` before
/// the pool was read.
pub(crate) async fn look(me: &KubeSession, pool: u32) -> Option<Looked> {
    let view = me.view.now();
    if !view.listed {
        return None;
    }
    let alive = &view.judged.alive;
    let held = (0..pool)
        .filter(|n| {
            view.slots
                .get(n)
                .is_none_or(|l| holder(l).is_some_and(|h| alive.contains(h)))
        })
        .count();
    let head = view.queued().into_iter().next().map(|(_, n, s)| {
        let owner = annotation(s, OWNER).and_then(|o| parse_owner(o.as_bytes()));
        (n.to_string(), owner)
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
