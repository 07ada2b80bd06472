//! The etcd lease loop, the counterpart of a ZooKeeper session: grant an etcd lease (retrying
//! until etcd answers), keep it alive, agree the pool's parameters, claim and hold slots
//! under it ([`crate::lease::protocol::hold`] with [`EtcdMarks`] as the store), and grant a
//! new one when it is gone — until the release is asked for or a fatal error.
//!
//! The lease is taken as gone when etcd says so (a keep-alive answered with TTL 0, a call
//! naming it "not found"), as a ZooKeeper session ends when the server says it expired: the
//! hold loop stops at once, and the mark already written keeps a successor waiting past every
//! tick issued. While etcd does not answer, the lease is kept (the mark runs out meanwhile,
//! counted as `unreachable`); once etcd answers, renewals resume under it, or a new lease is
//! granted if it expired. A lease given up on while etcd may still keep it is revoked as soon
//! as the next one is granted, so our old slot frees at once.

use super::claim::{self, ClaimHistory};
use super::client::{Etcd, EtcdError, Keeper};
use super::marks::{absent, cmp, delete, get, put, range_kvs, EtcdMarks, REFUSED};
use super::pb::etcdserverpb as rpc;
use super::{call_timeout, pool, Negotiator};
use crate::lease::holding::{self, Across, ClaimError, ClaimFailed, End, Slots};
use crate::lease::identity::{self, Record};
use crate::lease::planted::PlantedBug;
use crate::lease::protocol::{Protocol, Stored};
use crate::lease::stop::Stop;
use crate::lease::zk::params::mismatch;
use crate::lease::zk::tree::parse_mark_and_token;
use crate::lease::{Issued, LeaseError, LeaseState};
use crate::retry::Backoff;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// What crosses from one etcd lease to the next.
#[derive(Default)]
struct AcrossLeases {
    /// The hold loop's own: the slot held last, the generation, marks written.
    held: Across,
    claims: ClaimHistory,
    /// The etcd lease given up on last, revoked once the next one is granted.
    old: Option<(Etcd, i64)>,
}

/// The lease loop's task.
pub(crate) async fn run(
    neg: Negotiator,
    release: oneshot::Receiver<Option<Issued>>,
) -> Result<(), LeaseError> {
    let mut stop = Stop::new(release);
    let mut across = AcrossLeases {
        held: Across::new(neg.cfg.prefer, &neg.cfg.part),
        ..AcrossLeases::default()
    };
    // Retry at least twice a second: IDs flow again within a second of etcd answering.
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_millis(500));
    let mut refused_wait = Backoff::new(Duration::from_secs(1), Duration::from_secs(10));
    // Whether this instance ever agreed on the pool: a disagreement before refuses to start,
    // after (the pool replaced under it) it is not ready instead.
    let mut agreed_once = false;
    loop {
        // No lease yet: only the release request interrupts.
        stop.follow(CancellationToken::new());
        let (etcd, lease, ttl) = match stop.or(open(&neg)).await {
            Err(_) => return released(&neg, &mut across).await,
            Ok(Ok(g)) => g,
            Ok(Err(EtcdError::Refused(why))) => {
                let why = format!(
                    "etcd refused access ({why}): check {} and the permissions on --etcd-prefix",
                    neg.cfg.access.identity_flags()
                );
                tracing::warn!(reason = %why, "not ready; trying again in a few seconds");
                neg.proto.pending(why);
                if stop.sleep(refused_wait.next_wait()).await.is_err() {
                    return released(&neg, &mut across).await;
                }
                continue;
            }
            Ok(Err(EtcdError::Fatal(why))) => {
                return Err(neg.proto.fail(LeaseError::Task(why)));
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "cannot reach etcd; retrying");
                neg.proto.pending(format!("cannot reach etcd: {e}"));
                if stop.sleep(backoff.next_wait()).await.is_err() {
                    return released(&neg, &mut across).await;
                }
                continue;
            }
        };
        backoff.reset();
        neg.proto.metrics.lease.etcd_leases.inc();
        tracing::info!(
            lease = format!("{lease:#x}"),
            ttl_s = ttl.as_secs(),
            "etcd lease granted"
        );
        if let Some((old_etcd, old)) = across.old.take() {
            // Our slot keys under it go now, not when etcd expires it; in the background, so
            // that the new lease is kept alive meanwhile.
            tokio::spawn(async move {
                let _ = old_etcd.revoke(old).await;
            });
        }
        let ended = CancellationToken::new();
        stop.follow(ended.clone());
        let keeper = tokio::spawn(keep_alive(etcd.clone(), lease, ttl, ended.clone()));
        // With --slots: a slot given back to an instance holding none ends this etcd lease.
        let gave = CancellationToken::new();
        let give_back = (neg.proto.part.of > 1).then(|| {
            let (etcd_, paths, pool) = (etcd.clone(), neg.paths.clone(), neg.cfg.pool_size);
            tokio::spawn(holding::give_back_when_asked(
                neg.proto.part.clone(),
                gave.clone(),
                ended.clone(),
                move || pool::look(etcd_.clone(), paths.clone(), pool),
            ))
        });
        // One poller of the pool per instance: its first lease's.
        let gauges = (neg.proto.part.index == 0).then(|| {
            pool::spawn_gauges(
                etcd.clone(),
                neg.paths.clone(),
                neg.cfg.pool_size,
                neg.proto.metrics.clone(),
            )
        });
        let end = match agree(&neg, &etcd, &mut stop, !agreed_once).await {
            Ok(a) => {
                agreed_once = true;
                across.claims.params_revision = a.params_revision;
                across.claims.params_created = a.params_created;
                across.claims.not_before = a.not_before;
                let mut slots = EtcdSlots {
                    neg: &neg,
                    store: EtcdMarks {
                        etcd: etcd.clone(),
                        paths: neg.paths.clone(),
                        lease,
                        pool: (a.params_created != 0)
                            .then(|| (neg.paths.params(), a.params_created, a.params_revision)),
                        witness: neg.proto.planted() != PlantedBug::NoWriteBack,
                    },
                    claims: &mut across.claims,
                };
                holding::serve(&mut slots, &mut stop, &mut across.held).await
            }
            Err(end) => end,
        };
        keeper.abort();
        if let Some(gauges) = gauges {
            gauges.abort();
        }
        if let Some(task) = give_back {
            task.abort();
            let _ = task.await;
        }
        if holding::gave_back(&neg.proto, &gave, &end) {
            let _ = etcd.revoke(lease).await;
            continue;
        }
        match end {
            End::Released => {
                let _ = etcd.revoke(lease).await;
                neg.proto.tx.send_replace(LeaseState::Released);
                return Ok(());
            }
            End::SessionGone { reason, holding } => {
                if holding {
                    neg.proto
                        .metrics
                        .lease
                        .losses
                        .with_label_values(&["expired"])
                        .inc();
                }
                tracing::warn!(reason = %reason, "etcd lease lost; granting a new one");
                let refused = reason.contains(REFUSED);
                neg.proto.tx.send_replace(LeaseState::Lost {
                    reason: reason.clone(),
                });
                across.old = Some((etcd, lease));
                if refused {
                    // Refused mid-lease (a password rotated, a permission revoked): pause as
                    // a refusal at connect does, instead of a new round at once.
                    stop.follow(CancellationToken::new());
                    neg.proto.pending(format!(
                        "{reason}: check {} and the permissions on --etcd-prefix",
                        neg.cfg.access.identity_flags()
                    ));
                    if stop.sleep(refused_wait.next_wait()).await.is_err() {
                        return released(&neg, &mut across).await;
                    }
                    continue;
                }
            }
            End::Refused(what) => {
                let _ = etcd.revoke(lease).await;
                stop.follow(CancellationToken::new());
                let why = format!(
                    "etcd refused access ({what}): check {} and the permissions on --etcd-prefix",
                    neg.cfg.access.identity_flags()
                );
                tracing::warn!(reason = %why, "not ready; trying again in a few seconds");
                neg.proto.pending(why);
                if stop.sleep(refused_wait.next_wait()).await.is_err() {
                    return released(&neg, &mut across).await;
                }
                continue;
            }
            End::Replaced(why) => {
                let _ = etcd.revoke(lease).await;
                tracing::warn!(reason = %why, "the pool was replaced; agreeing on it again");
                neg.proto.tx.send_replace(LeaseState::Lost { reason: why });
            }
            End::Disagrees(why) => {
                let _ = etcd.revoke(lease).await;
                stop.follow(CancellationToken::new());
                tracing::warn!(reason = %why, "not ready; agreeing again in a few seconds");
                neg.proto.pending(why);
                if stop.sleep(refused_wait.next_wait()).await.is_err() {
                    return released(&neg, &mut across).await;
                }
                continue;
            }
            End::Fatal(e) => {
                let _ = etcd.revoke(lease).await;
                return Err(neg.proto.fail(e));
            }
        }
        refused_wait.reset();
    }
}

/// Released while no lease was held: a lease given up on is revoked on the way out.
async fn released(neg: &Negotiator, across: &mut AcrossLeases) -> Result<(), LeaseError> {
    if let Some((etcd, old)) = across.old.take() {
        let _ = etcd.revoke(old).await;
    }
    neg.proto.tx.send_replace(LeaseState::Released);
    Ok(())
}

/// Connects (files read again now) and grants a lease: the client, the lease and its TTL as
/// etcd granted it.
async fn open(neg: &Negotiator) -> Result<(Etcd, i64, Duration), EtcdError> {
    let etcd = Etcd::connect(&neg.cfg.access, call_timeout(neg.cfg.ttl)).await?;
    let want = i64::try_from(neg.cfg.ttl.as_secs()).unwrap_or(i64::MAX);
    let (lease, ttl) = etcd.grant(want).await?;
    if ttl != want {
        tracing::warn!(asked = want, granted = ttl, "etcd granted another TTL than --etcd-ttl (its minimum is raised by its election timeout)");
    }
    Ok((etcd, lease, Duration::from_secs(ttl.max(1) as u64)))
}

/// Keeps `lease` alive every third of its TTL; cancels `ended` once etcd says it is gone.
///
/// Only etcd's word ends the lease (a keep-alive answered with TTL 0, or "lease not found"),
/// never a timer of ours: a leader election can leave keep-alives unanswered for longer than
/// a short TTL while etcd keeps the lease (a new leader extends every lease), and giving it up
/// then would cost every holder its slot. Safety does not rest on this: a holder cut off from
/// etcd stops at its mark, which its successor waits past.
async fn keep_alive(etcd: Etcd, lease: i64, ttl: Duration, ended: CancellationToken) {
    let every = ttl / 3;
    let mut wait = every;
    let mut failing = 0u32;
    let mut keeper = None;
    let why = loop {
        tokio::time::sleep(wait).await;
        let answer = match keeper.as_mut() {
            Some(k) => Keeper::keep_alive(k).await,
            None => etcd.keeper(lease).await.map(|(k, ttl)| {
                keeper = Some(k);
                ttl
            }),
        };
        match answer {
            Ok(t) if t > 0 => {
                failing = 0;
                wait = every;
            }
            Ok(_) => break "etcd says the lease has expired".to_string(),
            Err(EtcdError::LeaseGone(e)) => break e,
            Err(e) => {
                // A broken stream: the next keep-alive opens another (on the next endpoint).
                keeper = None;
                // Logged once per run of failures, not once per attempt.
                if failing == 0 {
                    tracing::warn!(error = %e, "keep-alive failed; trying again");
                }
                failing = failing.saturating_add(1);
                wait = Duration::from_millis(100).min(every);
            }
        }
    };
    tracing::warn!(lease = format!("{lease:#x}"), reason = %why, "etcd lease gone");
    ended.cancel();
}

/// What a round agreed: `params`' `mod_revision` and `create_revision` (the pool's identity)
/// that every claim checks, and the floor of every claim.
struct Agreement {
    params_revision: i64,
    params_created: i64,
    not_before: u64,
}

/// Records the pool's parameters if it has none yet, or checks ours against them; then joins
/// the pool's identity, or records it (see [`crate::lease::identity`]). `first`: the
/// instance's first agreement, where a disagreement refuses to start; later (the pool replaced
/// under it) it is not ready instead, saying why.
async fn agree(
    neg: &Negotiator,
    etcd: &Etcd,
    stop: &mut Stop,
    first: bool,
) -> Result<Agreement, End> {
    let key = neg.paths.params();
    let ours: BTreeMap<String, String> = neg.cfg.pool_params.iter().cloned().collect();
    let data = serde_json::to_vec(&ours).expect("parameters serialise");
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
    let disagree =
        |why: String| End::disagreeing(first, identity::disagrees(&key, &why, "--etcd-prefix"));
    loop {
        let req = rpc::TxnRequest {
            compare: vec![absent(&key)],
            success: vec![put(&key, data.clone(), 0), get(&key)],
            failure: vec![get(&key)],
        };
        let r = match stop
            .or(etcd.txn("recording the pool's parameters", req))
            .await
        {
            Err(i) => return Err(End::interrupted(i, "agreeing the pool's parameters")),
            Ok(Ok(r)) => r,
            Ok(Err(EtcdError::Unavailable(e))) => {
                tracing::warn!(error = %e, "cannot record the pool's parameters yet; retrying");
                if let Err(i) = stop.sleep(backoff.next_wait()).await {
                    return Err(End::interrupted(i, "agreeing the pool's parameters"));
                }
                continue;
            }
            Ok(Err(e)) => return Err(end_for(e)),
        };
        let read = usize::from(r.succeeded);
        let Some(kv) = range_kvs(&r, read).into_iter().next() else {
            continue;
        };
        if let Some(why) = mismatch(&ours, &kv.value) {
            return Err(disagree(why));
        }
        let (params_revision, params_created) = (kv.mod_revision, kv.create_revision);
        if neg.proto.planted() == PlantedBug::IgnorePoolIdentity {
            return Ok(Agreement {
                params_revision,
                params_created: 0,
                not_before: 0,
            });
        }
        let rec = match join_or_record(neg, etcd, params_created, params_revision).await {
            Ok(Some(rec)) => rec,
            // `params` was recreated meanwhile: agree on the new one.
            Ok(None) => continue,
            Err(EtcdError::Unavailable(e)) => {
                tracing::warn!(error = %e, "cannot record the pool's identity yet; retrying");
                if let Err(i) = stop.sleep(backoff.next_wait()).await {
                    return Err(End::interrupted(i, "agreeing the pool's identity"));
                }
                continue;
            }
            Err(EtcdError::Fatal(why)) if why.contains("identity record") => {
                return Err(End::Fatal(LeaseError::Task(why)))
            }
            Err(e) => return Err(end_for(e)),
        };
        if let Some(why) = identity::pool_size_mismatch(&rec, neg.cfg.pool_size) {
            return Err(disagree(why));
        }
        return Ok(Agreement {
            params_revision,
            params_created,
            not_before: rec.not_before,
        });
    }
}

/// Joins the identity of the `params` key created at revision `created` and last written at
/// `modified`, recording it first if no one has: read every mark (the holders of an older
/// identity can no longer write one: their writes compare `params`' revisions) for the floor
/// of every claim under it, and delete older identities' records. `None` if `params` was
/// recreated or rewritten meanwhile.
async fn join_or_record(
    neg: &Negotiator,
    etcd: &Etcd,
    created: i64,
    modified: i64,
) -> Result<Option<Record>, EtcdError> {
    use super::pb::etcdserverpb::compare::{CompareTarget, TargetUnion};
    let paths = &neg.paths;
    let id = identity::id_of(created, modified);
    let key = paths.identity(&id);
    let params = paths.params();
    for _ in 0..5 {
        let r = etcd
            .range(
                "reading the pool's identity",
                rpc::RangeRequest {
                    key: key.as_bytes().to_vec(),
                    ..Default::default()
                },
            )
            .await?;
        if let Some(kv) = r.kvs.first() {
            return Record::parse(&kv.value)
                .map(Some)
                .ok_or_else(|| EtcdError::Fatal(identity::unreadable(&key)));
        }
        let mut marks = pool::under(etcd, &paths.marks(), false).await?;
        marks.extend(pool::under(etcd, &paths.witnesses(), false).await?);
        let highest = marks
            .iter()
            .map(|kv| parse_mark_and_token(&kv.value).map_or(0, |(m, _)| m))
            .max();
        let older = pool::under(etcd, &paths.identities(), true).await?;
        let used = highest.is_some() || !older.is_empty();
        let not_before = identity::floor_over(used, highest.unwrap_or(0), &neg.proto);
        let rec = Record {
            not_before,
            pool_size: neg.cfg.pool_size,
            recorded_ms: neg.proto.clock.now_unix_ns() / 1_000_000,
        };
        let req = rpc::TxnRequest {
            compare: vec![
                cmp(
                    &params,
                    CompareTarget::Create,
                    TargetUnion::CreateRevision(created),
                ),
                cmp(
                    &params,
                    CompareTarget::Mod,
                    TargetUnion::ModRevision(modified),
                ),
                absent(&key),
            ],
            success: vec![put(&key, rec.to_json(), 0)],
            failure: vec![get(&params)],
        };
        let r = etcd.txn("recording the pool's identity", req).await?;
        if !r.succeeded {
            let now = range_kvs(&r, 0)
                .first()
                .map(|kv| (kv.create_revision, kv.mod_revision));
            if now != Some((created, modified)) {
                return Ok(None);
            }
            continue;
        }
        // Older identities' records go (their holders are fenced by `params` already).
        for old in older {
            if old.key != key.as_bytes() {
                let old = String::from_utf8_lossy(&old.key).into_owned();
                let req = rpc::TxnRequest {
                    compare: vec![],
                    success: vec![delete(&old)],
                    failure: vec![],
                };
                let _ = etcd.txn("deleting an old identity record", req).await;
            }
        }
        tracing::info!(
            identity = %id,
            not_before,
            pool_size = neg.cfg.pool_size,
            "recorded the pool's identity; every claim under it starts above the highest mark in the pool"
        );
        return Ok(Some(rec));
    }
    Err(EtcdError::Unavailable(format!(
        "{key} keeps appearing and vanishing"
    )))
}

/// How an etcd error outside the mark's writes ends the lease loop's round.
fn end_for(e: EtcdError) -> End {
    match e {
        EtcdError::Refused(why) => End::Refused(why),
        EtcdError::Fatal(why) => End::Fatal(LeaseError::Task(why)),
        EtcdError::LeaseGone(why) | EtcdError::Unavailable(why) => End::gone(why),
    }
}

/// How etcd hands out slots under one etcd lease.
struct EtcdSlots<'a> {
    neg: &'a Negotiator,
    store: EtcdMarks,
    claims: &'a mut ClaimHistory,
}

impl Slots for EtcdSlots<'_> {
    type Store = EtcdMarks;

    fn proto(&self) -> &Protocol {
        &self.neg.proto
    }

    fn store(&self) -> &EtcdMarks {
        &self.store
    }

    async fn claim(&mut self, prefer: Option<u32>) -> Result<(u32, Stored<i64>), ClaimFailed> {
        claim::claim(self.neg, &self.store, prefer, self.claims)
            .await
            .map_err(|e| match e {
                ClaimError::GaveWay => ClaimFailed::GaveWay,
                ClaimError::Store(EtcdError::Unavailable(e)) => ClaimFailed::Retry(e),
                ClaimError::Store(e) => ClaimFailed::End(end_for(e)),
            })
    }

    fn not_before(&self) -> u64 {
        self.claims.not_before
    }

    /// A probed slot of a large pool is left (deleting our slot key is all there is to undo),
    /// up to [`FAR_AHEAD_SKIPS`] times.
    async fn leave_far_ahead(&mut self, slot: u32) -> bool {
        let h = &mut *self.claims;
        if self.neg.cfg.pool_size <= claim::PROBE_ABOVE || h.far_ahead >= FAR_AHEAD_SKIPS {
            return false;
        }
        h.far_ahead += 1;
        h.skip.insert(slot);
        // A key not deleted now goes with the lease, or is deleted by the next listing.
        self.store.delete_if_ours(slot).await;
        true
    }
}

/// How many far-ahead probed slots are given back before that is fatal.
const FAR_AHEAD_SKIPS: u32 = 16;
