//! The pool's parameters: what shapes its ID space (the layout, si53's base clock and MID
//! bits, sno80's sequence range, muid128's medallion base, ...), recorded in
//! `<root>/<layout>/<cluster>/params` by the first instance and checked by every other. Two
//! instances of one pool with different parameters could issue the same IDs (si53 with
//! different MID bits maps two slots onto overlapping ID ranges), so a mismatch refuses to
//! start, naming each parameter and both values. Every slot is then claimed in a `multi`
//! that checks this node's version, so the check holds at the moment of the claim.

use super::hold::{classify, End};
use super::tree::acls;
use super::Negotiator;
use crate::lease::LeaseError;
use std::collections::BTreeMap;
use zookeeper_client as zk;

/// This instance's parameters as the JSON object recorded in the node.
pub(crate) fn record(neg: &Negotiator) -> BTreeMap<String, String> {
    neg.cfg.pool_params.iter().cloned().collect()
}

/// Records the pool's parameters if it has none yet, or checks ours against them: the node's
/// version, to check at each claim.
pub(crate) async fn agree(neg: &Negotiator, client: &zk::Client) -> Result<i32, End> {
    let path = neg.paths.params();
    let ours = record(neg);
    let data = serde_json::to_vec(&ours).expect("parameters serialise");
    let mode = zk::CreateMode::Persistent.with_acls(acls(neg.cfg.access.restricted()));
    for _ in 0..3 {
        match client.create(&path, &data, &mode).await {
            Ok((stat, _)) => return Ok(stat.version),
            Err(zk::Error::NodeExists) => {}
            Err(e) => return Err(classify(e, &format!("cannot record {path}"))),
        }
        let (theirs, stat) = match client.get_data(&path).await {
            Ok(r) => r,
            Err(zk::Error::NoNode) => continue,
            Err(e) => return Err(classify(e, &format!("cannot read {path}"))),
        };
        return match mismatch(&ours, &theirs) {
            None => Ok(stat.version),
            Some(why) => Err(End::Fatal(LeaseError::Task(format!(
                "this instance's parameters differ from those of the pool it would join ({path}): \
                 {why}. Instances of one pool must share every parameter that shapes its IDs, \
                 or they could issue the same IDs: change this instance's flags, or use another \
                 cluster ID or --zk-root for a separate pool"
            )))),
        };
    }
    Err(End::Fatal(LeaseError::Task(format!(
        "{path} keeps appearing and vanishing"
    ))))
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
