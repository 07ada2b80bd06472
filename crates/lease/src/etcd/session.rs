//! An etcd lease, the counterpart of a ZooKeeper session: granted (files read again), kept
//! alive, taken as gone only when etcd says so (a keep-alive answered with TTL 0, a call
//! naming it "not found"); and how the pool's identity is recorded in keys.

use super::client::{Etcd, EtcdError};
use super::handle::EtcdSession;
use super::leases::Keeper;
use super::ops::{absent, cmp, delete, get, put, range_kvs};
use super::{call_timeout, pool, EtcdConfig};
use crate::identity::{self, Record};
use crate::pool::tree::{parse_mark_and_token, Paths};
use crate::pool::{Negotiation, Recorded};
use crate::repeated::Repeated;
use idcar_etcd_api::etcdserverpb as rpc;
use idcar_etcd_api::mvccpb::KeyValue;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Connects (files read again now) and grants a lease: the client, the lease and its TTL as
/// etcd granted it.
pub(crate) async fn open(cfg: &EtcdConfig) -> Result<(Etcd, i64, Duration), EtcdError> {
    let etcd = Etcd::connect(&cfg.access, call_timeout(cfg.ttl)).await?;
    let want = i64::try_from(cfg.ttl.as_secs()).unwrap_or(i64::MAX);
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
pub(crate) async fn keep_alive(etcd: Etcd, lease: i64, ttl: Duration, ended: CancellationToken) {
    let every = ttl / 3;
    let mut wait = every;
    let mut failing = Repeated::new("keep-alive failed");
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
                failing.ended();
                wait = every;
            }
            Ok(_) => break "etcd says the lease has expired".to_string(),
            Err(EtcdError::LeaseGone(e)) => break e,
            Err(e) => {
                // A broken stream: the next keep-alive opens another (on the next endpoint).
                keeper = None;
                failing.failed(&e);
                wait = Duration::from_millis(100).min(every);
            }
        }
    };
    tracing::warn!(lease = format!("{lease:#x}"), reason = %why, "etcd lease gone");
    ended.cancel();
}

/// Joins the identity of the `params` key created at revision `created` and last written at
/// `modified`, recording it first if no one has: read every mark (the holders of an older
/// identity can no longer write one: their writes compare `params`' revisions) for the floor
/// of every claim under it, and delete older identities' records. `None` if `params` was
/// recreated or rewritten meanwhile.
pub(crate) async fn join_or_record(
    neg: &Negotiation,
    session: &EtcdSession,
    params: &Recorded,
) -> Result<Option<Record>, EtcdError> {
    let (etcd, paths) = (&session.etcd, &session.paths);
    let (created, modified) = (params.creation, params.version);
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
        let older = pool::under(etcd, &paths.identities(), false).await?;
        // A pool that a newer idcar recorded is not recorded over (nor its marks trusted): its
        // record comes back, and the agreement refuses it, naming its format.
        if let Some(newer) = older
            .iter()
            .filter_map(|kv| Record::parse(&kv.value))
            .find(|r| !identity::reads(r.format))
        {
            return Ok(Some(newer));
        }
        let highest = highest_mark(etcd, paths).await?;
        let used = highest.is_some() || !older.is_empty();
        let not_before =
            identity::floor_over(used, highest.unwrap_or(0), neg.proto.horizon_ahead());
        let rec = Record {
            format: identity::FORMAT,
            not_before,
            pool_size: neg.cfg.pool_size,
            recorded_ms: neg.proto.clock.now_unix_ns() / 1_000_000,
        };
        let req = record_if_params_are(&params, (created, modified), &key, &rec);
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
        delete_older(etcd, older, &key).await;
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

/// The highest mark (or witness) in the pool, if any.
async fn highest_mark(etcd: &Etcd, paths: &Paths) -> Result<Option<u64>, EtcdError> {
    let mut marks = pool::under(etcd, &paths.marks(), false).await?;
    marks.extend(pool::under(etcd, &paths.witnesses(), false).await?);
    Ok(marks
        .iter()
        .map(|kv| parse_mark_and_token(&kv.value).map_or(0, |(m, _)| m))
        .max())
}

/// Puts `rec` at `key` if no record is there and `params` is still the recording read
/// (`(create, mod)` revisions); `params` is read back if not.
fn record_if_params_are(
    params: &str,
    (created, modified): (i64, i64),
    key: &str,
    rec: &Record,
) -> rpc::TxnRequest {
    use idcar_etcd_api::etcdserverpb::compare::{CompareTarget, TargetUnion};
    rpc::TxnRequest {
        compare: vec![
            cmp(
                params,
                CompareTarget::Create,
                TargetUnion::CreateRevision(created),
            ),
            cmp(
                params,
                CompareTarget::Mod,
                TargetUnion::ModRevision(modified),
            ),
            absent(key),
        ],
        success: vec![put(key, rec.to_json(), 0)],
        failure: vec![get(params)],
    }
}

/// Older identities' records go (their holders are fenced by `params` already): best effort.
async fn delete_older(etcd: &Etcd, older: Vec<KeyValue>, key: &str) {
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
}
