//! The pool's parameters: what shapes its ID space (the layout, si53's base clock and MID
//! bits, sno80's sequence range, muid128's medallion base, ...), recorded in
//! `<root>/<layout>/<cluster>/params` by the first instance and checked by every other. Two
//! instances of one pool with different parameters could issue the same IDs (si53 with
//! different MID bits maps two slots onto overlapping ID ranges), so a mismatch refuses to
//! start, naming each parameter and both values. Then the instance joins the pool's identity
//! (or records it, see [`crate::identity`]): every claim and every mark write of the
//! session is fenced by it, so the agreement holds for as long as a lease does, even if
//! `params` is deleted and recreated.

use super::end::{end_for, End};
use super::{Fault, Negotiation, Session};
use crate::handle::LeaseError;
use crate::identity;
#[cfg(feature = "fault-injection")]
use crate::planted::PlantedBug;
use crate::repeated::Repeated;
use crate::retry::Backoff;
use crate::stop::Stop;
use std::collections::BTreeMap;
use std::time::Duration;

/// Records the pool's parameters if it has none yet, or checks ours against them; then joins
/// the pool's identity, or records it, fencing the session with it: the floor of every claim
/// under it. `first`: the instance's first agreement, where a disagreement refuses to start;
/// later (the pool replaced under it) it is not ready instead, saying why. Passing faults are
/// tried again (bounded by the session's end and the release).
pub(crate) async fn agree<S: Session>(
    neg: &Negotiation,
    session: &mut S,
    stop: &mut Stop,
    first: bool,
) -> Result<u64, End> {
    let key = neg.paths.params();
    let ours: BTreeMap<String, String> = neg.cfg.pool_params.iter().cloned().collect();
    let data = serde_json::to_vec(&ours).expect("parameters serialise");
    let disagree = |why: String| End::disagreeing(first, identity::disagrees(&key, &why));
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
    // Each pass either agrees, or finds `params` changed meanwhile, or waits out a passing
    // fault. Passing faults are waited out for as long as they last (the release and the
    // session's end interrupt the wait); a pool whose `params` keeps changing under us is an
    // error, not a wait.
    let mut changes = 0;
    let mut failing = Repeated::new("cannot record the pool's parameters and identity yet");
    while changes < 100 {
        let recorded = match stop.or(session.params(neg, &data)).await {
            Err(i) => return Err(End::interrupted(i, "agreeing the pool's parameters")),
            Ok(Ok(Some(r))) => r,
            Ok(Ok(None)) => {
                changes += 1;
                continue;
            }
            Ok(Err(Fault::Unavailable(e))) => {
                retry(stop, &mut backoff, &mut failing, &e).await?;
                continue;
            }
            Ok(Err(f)) => return Err(end_for(f, "agreeing the pool's parameters")),
        };
        if let Some(why) = identity::newer_params(&recorded.data, &key) {
            return Err(End::disagreeing(first, why));
        }
        if let Some(why) = mismatch(&ours, &recorded.data) {
            return Err(disagree(why));
        }
        #[cfg(feature = "fault-injection")]
        if neg.proto.planted() == PlantedBug::IgnorePoolIdentity {
            session.unfenced(&recorded);
            return Ok(0);
        }
        let rec = match stop.or(session.join(neg, &recorded)).await {
            Err(i) => return Err(End::interrupted(i, "agreeing the pool's identity")),
            Ok(Ok(Some(rec))) => rec,
            // `params` was recreated or rewritten meanwhile: agree on the new one.
            Ok(Ok(None)) => {
                changes += 1;
                continue;
            }
            Ok(Err(Fault::Unavailable(e))) => {
                retry(stop, &mut backoff, &mut failing, &e).await?;
                continue;
            }
            Ok(Err(f)) => return Err(end_for(f, "agreeing the pool's identity")),
        };
        if let Some(why) = identity::newer_format(&rec, &key) {
            return Err(End::disagreeing(first, why));
        }
        if let Some(why) = identity::pool_size_mismatch(&rec, neg.cfg.pool_size) {
            return Err(disagree(why));
        }
        failing.ended();
        return Ok(rec.not_before);
    }
    Err(End::Fatal(LeaseError::Task(format!(
        "{key} keeps appearing and vanishing"
    ))))
}

/// After a passing fault while agreeing: logs it and waits the next backoff.
async fn retry(
    stop: &mut Stop,
    backoff: &mut Backoff,
    failing: &mut Repeated,
    e: &str,
) -> Result<(), End> {
    failing.failed(&e);
    stop.sleep(backoff.next_wait())
        .await
        .map_err(|i| End::interrupted(i, "agreeing the pool's parameters"))
}

/// What differs between our parameters and the recorded ones, if anything.
pub(crate) fn mismatch(ours: &BTreeMap<String, String>, theirs: &[u8]) -> Option<String> {
    let theirs: BTreeMap<String, String> = match serde_json::from_slice(theirs) {
        Ok(t) => t,
        Err(e) => return Some(format!("the recorded parameters are unreadable ({e})")),
    };
    // `format` is the record's format, not a parameter (`identity::newer_params` checks it).
    let keys: std::collections::BTreeSet<&String> = ours
        .keys()
        .chain(theirs.keys())
        .filter(|k| k.as_str() != "format")
        .collect();
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
        // A format-1 record may say so.
        assert_eq!(
            mismatch(&ours, br#"{"layout":"si53","mid-bits":"7","format":"1"}"#),
            None
        );
    }
}
