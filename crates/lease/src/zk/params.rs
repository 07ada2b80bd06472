//! The pool's parameters: what shapes its ID space (the layout, si53's base clock and MID
//! bits, sno80's sequence range, muid128's medallion base, ...), recorded in
//! `<root>/<layout>/<cluster>/params` by the first instance and checked by every other. Two
//! instances of one pool with different parameters could issue the same IDs (si53 with
//! different MID bits maps two slots onto overlapping ID ranges), so a mismatch refuses to
//! start, naming each parameter and both values. Every slot is then claimed in a `multi`
//! that checks this node's version and the pool's identity (`identity/<czxid of params>`, see
//! [`crate::identity`]), and every mark write checks the identity too, so the
//! agreement holds for as long as a lease does, even if `params` is deleted and recreated.
//! What is agreed, and how a disagreement is told, is the negotiation's
//! ([`crate::pool::params`]); this file is how ZooKeeper records it.

use super::handle::ZkSession;
use super::tree::{parse_mark, Paths};
use super::{acls, fault};
use crate::identity::{self, Record};
use crate::pool::{Fault, Negotiation, Recorded};
use zookeeper_client as zk;

/// `e`, saying what was being done. A node missing here is a directory someone deleted
/// (`identity/`, the pool's own): a new session creates the namespace again.
fn context(e: zk::Error, what: &str) -> Fault {
    if e == zk::Error::NoNode {
        return Fault::SessionGone(format!("{what}: {e} (opening a new session)"));
    }
    match fault(e) {
        Fault::Unavailable(e) => Fault::Unavailable(format!("{what}: {e}")),
        Fault::SessionGone(e) => Fault::SessionGone(format!("{what}: {e}")),
        Fault::Refused(e) => Fault::Refused(format!("{what}: {e}")),
        Fault::Fatal(e) => Fault::Fatal(format!("{what}: {e}")),
    }
}

/// Creates `params` holding `data` if it is missing, or reads it: what is recorded now;
/// `None` if it vanished between the two.
pub(crate) async fn record(session: &ZkSession, data: &[u8]) -> Result<Option<Recorded>, Fault> {
    let (client, path) = (&session.client, session.paths.params());
    let mode = zk::CreateMode::Persistent.with_acls(acls(session.restricted));
    // Read first: nearly always recorded, and a create that finds the node is a transaction.
    // Synced first: a follower that lags would show parameters since recorded anew, and an
    // instance of the new ones would refuse to start over a disagreement that is not there
    // (a sync is a round trip through the leader, not a transaction).
    client
        .sync(&path)
        .await
        .map_err(|e| context(e, &format!("cannot sync {path}")))?;
    let (data, stat) = match client.get_data(&path).await {
        Ok(r) => r,
        Err(zk::Error::NoNode) => match client.create(&path, data, &mode).await {
            Ok((stat, _)) => (data.to_vec(), stat),
            Err(zk::Error::NodeExists) => match client.get_data(&path).await {
                Ok(r) => r,
                Err(zk::Error::NoNode) => return Ok(None),
                Err(e) => return Err(context(e, &format!("cannot read {path}"))),
            },
            Err(e) => return Err(context(e, &format!("cannot record {path}"))),
        },
        Err(e) => return Err(context(e, &format!("cannot read {path}"))),
    };
    Ok(Some(Recorded {
        data,
        creation: stat.czxid,
        version: i64::from(stat.version),
    }))
}

/// Joins the identity `id` (the `params` node as read, `params`), recording it first if no one
/// has. Records are `identity/<id>-<sequence>` (persistent sequential): a name is never used
/// twice, so a retired record cannot come back — an instance that read `params` before it was
/// replaced can only record a node of its own, which no holder checks, and it checks `params`
/// again before agreeing. Recording: delete every other `params`' records (their holders'
/// next write fails), read every mark (none of those holders can write one now) for the floor
/// of every claim under the new identity, create ours; the lowest record of an identity is the
/// one its instances check. The record's node name, and the record; `None` if `params` was
/// recreated or rewritten meanwhile.
pub(crate) async fn join_or_record(
    neg: &Negotiation,
    session: &ZkSession,
    params: &Recorded,
) -> Result<Option<(String, Record)>, Fault> {
    let (client, paths) = (&session.client, &session.paths);
    let id = identity::id_of(params.creation, params.version);
    let prefix = format!("{id}-");
    let mode = zk::CreateMode::PersistentSequential.with_acls(acls(session.restricted));
    let still =
        |now: &zk::Stat| now.czxid == params.creation && i64::from(now.version) == params.version;
    for _ in 0..5 {
        let mut records = list(client, &paths.identities()).await?;
        records.sort();
        if let Some(first) = records.iter().find(|r| r.starts_with(&prefix)) {
            let key = paths.identity(first);
            match client.get_data(&key).await {
                Ok((data, _)) => {
                    let rec = Record::parse(&data)
                        .ok_or_else(|| Fault::Fatal(identity::unreadable(&key)))?;
                    return Ok(Some((key, rec)));
                }
                Err(zk::Error::NoNode) => continue,
                Err(e) => return Err(context(e, &format!("cannot read {key}"))),
            }
        }
        // Still the `params` we read? Then no one else records another identity over it.
        match client.check_stat(&paths.params()).await {
            Ok(Some(now)) if still(&now) => {}
            Ok(_) => return Ok(None),
            Err(e) => return Err(context(e, &format!("cannot read {}", paths.params()))),
        }
        let used = !records.is_empty();
        if let Some(newer) = newer_or_clear(client, paths, &records, &prefix, &id).await? {
            return Ok(Some(newer));
        }
        let (used_marks, highest) = highest_mark(client, paths).await?;
        let not_before =
            identity::floor_over(used || used_marks, highest, neg.proto.horizon_ahead());
        let rec = Record {
            format: identity::FORMAT,
            not_before,
            pool_size: neg.cfg.pool_size,
            recorded_ms: neg.proto.clock.now_unix_ns() / 1_000_000,
        };
        let base = paths.identity(&prefix);
        let ours = match client.create(&base, &rec.to_json(), &mode).await {
            Ok((_, seq)) => format!("{base}{seq}"),
            Err(e) => return Err(context(e, &format!("cannot record {base}"))),
        };
        // Recorded for the `params` we read: if it changed meanwhile, take ours back.
        match client.check_stat(&paths.params()).await {
            Ok(Some(now)) if still(&now) => {}
            Ok(_) => {
                let _ = client.delete(&ours, None).await;
                return Ok(None);
            }
            Err(e) => return Err(context(e, &format!("cannot read {}", paths.params()))),
        }
        tracing::info!(
            identity = %ours,
            not_before,
            pool_size = neg.cfg.pool_size,
            "recorded the pool's identity; every claim under it starts above the highest mark in the pool"
        );
        // Another instance may have recorded the same identity at once: the lowest record is
        // the one every instance checks (the loop joins it).
    }
    Err(Fault::Fatal(format!(
        "{} keeps changing",
        paths.identities()
    )))
}

/// Before recording identity `id` (its records are named `prefix` and a number): a record of another identity
/// that a newer idcar wrote comes back (the pool is not recorded over, nor its marks read; the
/// agreement refuses it, naming its format); otherwise the other identities' records go (the
/// pool's parameters were recorded anew).
async fn newer_or_clear(
    client: &zk::Client,
    paths: &Paths,
    records: &[String],
    prefix: &str,
    id: &str,
) -> Result<Option<(String, Record)>, Fault> {
    for other in records.iter().filter(|o| !o.starts_with(prefix)) {
        let key = paths.identity(other);
        match client.get_data(&key).await {
            Ok((data, _)) => {
                if let Some(rec) = Record::parse(&data).filter(|r| !identity::reads(r.format)) {
                    return Ok(Some((key, rec)));
                }
            }
            Err(zk::Error::NoNode) => {}
            Err(e) => return Err(context(e, &format!("cannot read {key}"))),
        }
    }
    for other in records.iter().filter(|o| !o.starts_with(prefix)) {
        match client.delete(&paths.identity(other), None).await {
            Ok(()) | Err(zk::Error::NoNode) => tracing::warn!(
                old = %other,
                new = %id,
                "the pool's parameters were recorded anew: the holders of its old identity stop (at once: they watch the record)"
            ),
            Err(e) => {
                return Err(context(
                    e,
                    &format!("cannot delete {}", paths.identity(other)),
                ))
            }
        }
    }
    Ok(None)
}

/// The children of `dir` (none if it is missing).
async fn list(client: &zk::Client, dir: &str) -> Result<Vec<String>, Fault> {
    match client.list_children(dir).await {
        Ok(c) => Ok(c),
        Err(zk::Error::NoNode) => Ok(Vec::new()),
        Err(e) => Err(context(e, &format!("cannot list {dir}"))),
    }
}

/// Whether the pool holds any mark, and the highest of the marks and their witnesses (an
/// unreadable one counts as 0: its slot is never taken).
async fn highest_mark(client: &zk::Client, paths: &Paths) -> Result<(bool, u64), Fault> {
    let mut used = false;
    let mut highest = 0;
    for dir in [paths.marks(), paths.witnesses()] {
        let marks = list(client, &dir).await?;
        used |= !marks.is_empty();
        for m in &marks {
            let path = format!("{dir}/{m}");
            match client.get_data(&path).await {
                Ok((data, _)) => highest = highest.max(parse_mark(&data).unwrap_or(0)),
                Err(zk::Error::NoNode) => {}
                Err(e) => return Err(context(e, &format!("cannot read {path}"))),
            }
        }
    }
    Ok((used, highest))
}
