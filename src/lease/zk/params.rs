//! The pool's parameters: what shapes its ID space (the layout, si53's base clock and MID
//! bits, sno80's sequence range, muid128's medallion base, ...), recorded in
//! `<root>/<layout>/<cluster>/params` by the first instance and checked by every other. Two
//! instances of one pool with different parameters could issue the same IDs (si53 with
//! different MID bits maps two slots onto overlapping ID ranges), so a mismatch refuses to
//! start, naming each parameter and both values. Every slot is then claimed in a `multi`
//! that checks this node's version and the pool's identity (`identity/<czxid of params>`, see
//! [`crate::lease::identity`]), and every mark write checks the identity too, so the
//! agreement holds for as long as a lease does, even if `params` is deleted and recreated.

use super::hold::{classify, End};
use super::tree::{acls, parse_mark};
use super::Negotiator;
use crate::lease::identity::{self, Agreed, Record};
use crate::lease::planted::PlantedBug;
use crate::lease::LeaseError;
use std::collections::BTreeMap;
use zookeeper_client as zk;

/// This instance's parameters as the JSON object recorded in the node.
pub(crate) fn record(neg: &Negotiator) -> BTreeMap<String, String> {
    neg.cfg.pool_params.iter().cloned().collect()
}

/// What a session agreed: the `params` node's version (checked at each claim) and the pool's
/// identity (checked with every mark write and claim).
pub(crate) struct Agreement {
    pub params_version: i32,
    pub agreed: Agreed,
}

/// Records the pool's parameters if it has none yet, or checks ours against them; then joins
/// the pool's identity, or records it (see [`crate::lease::identity`]). `first`: the
/// instance's first agreement, where a disagreement refuses to start; later (after the pool
/// was replaced under it) it is not ready instead, saying why.
pub(crate) async fn agree(
    neg: &Negotiator,
    client: &zk::Client,
    first: bool,
) -> Result<Agreement, End> {
    let path = neg.paths.params();
    let ours = record(neg);
    let data = serde_json::to_vec(&ours).expect("parameters serialise");
    let mode = zk::CreateMode::Persistent.with_acls(acls(neg.cfg.access.restricted()));
    let disagree =
        |why: String| End::disagreeing(first, identity::disagrees(&path, &why, "--zk-root"));
    for _ in 0..5 {
        let stat = match client.create(&path, &data, &mode).await {
            Ok((stat, _)) => stat,
            Err(zk::Error::NodeExists) => {
                let (theirs, stat) = match client.get_data(&path).await {
                    Ok(r) => r,
                    Err(zk::Error::NoNode) => continue,
                    Err(e) => return Err(classify(e, &format!("cannot read {path}"))),
                };
                if let Some(why) = mismatch(&ours, &theirs) {
                    return Err(disagree(why));
                }
                stat
            }
            Err(e) => return Err(classify(e, &format!("cannot record {path}"))),
        };
        if neg.proto.planted() == PlantedBug::IgnorePoolIdentity {
            return Ok(Agreement {
                params_version: stat.version,
                agreed: Agreed::default(),
            });
        }
        let id = identity::id_of(stat.czxid, i64::from(stat.version));
        match join_or_record(neg, client, &id, &stat).await? {
            Some((node, rec)) => {
                if let Some(why) = identity::pool_size_mismatch(&rec, neg.cfg.pool_size) {
                    return Err(disagree(why));
                }
                return Ok(Agreement {
                    params_version: stat.version,
                    agreed: Agreed {
                        id: node,
                        not_before: rec.not_before,
                    },
                });
            }
            // The parameters were recreated or rewritten meanwhile: agree on the new ones.
            None => continue,
        }
    }
    Err(End::Fatal(LeaseError::Task(format!(
        "{path} keeps appearing and vanishing"
    ))))
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
async fn join_or_record(
    neg: &Negotiator,
    client: &zk::Client,
    id: &str,
    params: &zk::Stat,
) -> Result<Option<(String, Record)>, End> {
    let paths = &neg.paths;
    let prefix = format!("{id}-");
    let mode = zk::CreateMode::PersistentSequential.with_acls(acls(neg.cfg.access.restricted()));
    let still = |now: &zk::Stat| now.czxid == params.czxid && now.version == params.version;
    for _ in 0..5 {
        let mut records = list(client, &paths.identities()).await?;
        records.sort();
        if let Some(first) = records.iter().find(|r| r.starts_with(&prefix)) {
            let key = paths.identity(first);
            match client.get_data(&key).await {
                Ok((data, _)) => {
                    let rec = Record::parse(&data)
                        .ok_or_else(|| End::Fatal(LeaseError::Task(identity::unreadable(&key))))?;
                    return Ok(Some((key, rec)));
                }
                Err(zk::Error::NoNode) => continue,
                Err(e) => return Err(classify(e, &format!("cannot read {key}"))),
            }
        }
        // Still the `params` we read? Then no one else records another identity over it.
        match client.check_stat(&paths.params()).await {
            Ok(Some(now)) if still(&now) => {}
            Ok(_) => return Ok(None),
            Err(e) => return Err(classify(e, &format!("cannot read {}", paths.params()))),
        }
        let used = !records.is_empty();
        for other in records.iter().filter(|o| !o.starts_with(&prefix)) {
            match client.delete(&paths.identity(other), None).await {
                Ok(()) | Err(zk::Error::NoNode) => tracing::warn!(
                    old = %other,
                    new = %id,
                    "the pool's parameters were recorded anew: the holders of its old identity stop at their next mark write"
                ),
                Err(e) => {
                    return Err(classify(
                        e,
                        &format!("cannot delete {}", paths.identity(other)),
                    ))
                }
            }
        }
        let (used_marks, highest) = highest_mark(client, paths).await?;
        let not_before = identity::floor_over(used || used_marks, highest, &neg.proto);
        let rec = Record {
            not_before,
            pool_size: neg.cfg.pool_size,
            recorded_ms: neg.proto.clock.now_unix_ns() / 1_000_000,
        };
        let base = paths.identity(&prefix);
        let ours = match client.create(&base, &rec.to_json(), &mode).await {
            Ok((_, seq)) => format!("{base}{seq}"),
            Err(e) => return Err(classify(e, &format!("cannot record {base}"))),
        };
        // Recorded for the `params` we read: if it changed meanwhile, take ours back.
        match client.check_stat(&paths.params()).await {
            Ok(Some(now)) if still(&now) => {}
            Ok(_) => {
                let _ = client.delete(&ours, None).await;
                return Ok(None);
            }
            Err(e) => return Err(classify(e, &format!("cannot read {}", paths.params()))),
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
    Err(End::Fatal(LeaseError::Task(format!(
        "{} keeps changing",
        paths.identities()
    ))))
}

/// The children of `dir` (none if it is missing).
async fn list(client: &zk::Client, dir: &str) -> Result<Vec<String>, End> {
    match client.list_children(dir).await {
        Ok(c) => Ok(c),
        Err(zk::Error::NoNode) => Ok(Vec::new()),
        Err(e) => Err(classify(e, &format!("cannot list {dir}"))),
    }
}

/// Whether the pool holds any mark, and the highest of the marks and their witnesses (an
/// unreadable one counts as 0: its slot is never taken).
async fn highest_mark(client: &zk::Client, paths: &super::Paths) -> Result<(bool, u64), End> {
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
                Err(e) => return Err(classify(e, &format!("cannot read {path}"))),
            }
        }
    }
    Ok((used, highest))
}

/// What differs between our parameters and the recorded ones, if anything.
pub(crate) fn mismatch(ours: &BTreeMap<String, String>, theirs: &[u8]) -> Option<String> {
    let theirs: BTreeMap<String, String> = match serde_json::from_slice(theirs) {
        Ok(t) => t,
        Err(e) => return Some(format!("the recorded parameters are unreadable ({e})")),
    };
    let keys: std::collections::BTreeSet<&String> = ours.keys().chain(theirs.keys()).collect();
    let diffs: Vec<String> = keys
        .into_iter()
        .filter(|k| ours.get(*k) != theirs.get(*k))
        .map(|k| {
            let show = |v: Option<&String>| v.map_or("(none)".to_string(), |v| v.to_string());
            format!(
                "--{k}: the pool has {}, this instance {}",
                show(theirs.get(k)),
                show(ours.get(k))
            )
        })
        .collect();
    (!diffs.is_empty()).then(|| diffs.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_each_differing_parameter_with_both_values() {
        let ours: BTreeMap<String, String> = [("layout", "si53"), ("mid-bits", "7")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(
            mismatch(&ours, br#"{"layout":"si53","mid-bits":"7"}"#),
            None
        );
        let why = mismatch(&ours, br#"{"layout":"si53","mid-bits":"5"}"#).unwrap();
        assert_eq!(why, "--mid-bits: the pool has 5, this instance 7");
        let why = mismatch(
            &ours,
            br#"{"layout":"si53","mid-bits":"7","base-clock":"1"}"#,
        );
        assert!(why
            .unwrap()
            .contains("--base-clock: the pool has 1, this instance (none)"));
        assert!(mismatch(&ours, b"junk").unwrap().contains("unreadable"));
    }
}
