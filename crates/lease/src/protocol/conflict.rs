//! What a hold does when its mark is not as it wrote it: a write refused by its compare-and-set,
//! a watch that fired, a session gone under a write — the slot looked at again, a lowered mark
//! written back, or how the hold ends (see [`super::holder`]).

use super::{
    lapse, replaced, restore, stolen, Claim, MarkStore, Outcome, Protocol, Recheck, StoreError,
};
use crate::planted::PlantedBug;
use std::time::Duration;

/// The slot's mark may have been written by someone else (its watch fired): looked at again.
/// `None`: it is as we wrote it (`in_store`, at our version); a wait before the write-back; or
/// how the hold ends.
pub(super) async fn look_again<S: MarkStore>(
    p: &Protocol,
    store: &S,
    claim: &mut Claim<S::Version>,
    in_store: u64,
    holding: bool,
    lapsed: &mut bool,
) -> Result<Option<Duration>, Outcome> {
    match store.recheck(claim).await {
        Ok(Recheck::Ours(now)) if now.version == claim.version && now.mark == in_store => Ok(None),
        // Cannot look now: the next write (or watch) tells.
        Err(StoreError::Unavailable(_)) => Ok(None),
        found => {
            let why = "the slot's mark was written by someone else";
            after_conflict(p, store, claim, found, why, holding, lapsed)
                .await
                .map(Some)
        }
    }
}

/// The store's session ended (or it refused us) while `during`: how the hold ends.
pub(super) fn session_gone(e: &StoreError, during: &str, holding: bool) -> Outcome {
    Outcome::SessionGone {
        reason: format!("{during}: {e}"),
        holding,
        refused: matches!(e, StoreError::Refused(_)),
    }
}

/// How soon a failed write is tried again.
pub(super) fn retry_wait(p: &Protocol) -> Duration {
    (p.timing.renew_every / 4).max(Duration::from_millis(50))
}

/// A write failed on its compare-and-set (`e`), or the mark's watch fired: whether the slot is
/// still ours, and what its mark is now (`found`, by [`MarkStore::recheck`]), decide. The wait
/// before the next write, or how the hold ends. `holding`: a window is in force.
pub(super) async fn after_conflict<S: MarkStore>(
    p: &Protocol,
    store: &S,
    claim: &mut Claim<S::Version>,
    found: Result<Recheck<S::Version>, StoreError>,
    e: &str,
    holding: bool,
    lapsed: &mut bool,
) -> Result<Duration, Outcome> {
    match found {
        Ok(Recheck::Ours(now))
            if now.mark <= claim.mark && p.planted() != PlantedBug::NoWriteBack =>
        {
            // The slot is still ours and its mark was lowered or deleted by someone else:
            // write it back up before anything else, so that no successor ever reads it as
            // its floor. The window in force stays (it is below it). Someone who keeps
            // lowering it is answered at most every 50 ms.
            restore(p, store, claim, now.mark);
            claim.version = now.version;
            Ok(Duration::from_millis(50))
        }
        Ok(Recheck::PoolReplaced(why)) => Err(replaced(p, store, claim, &why)),
        Err(gone @ (StoreError::SessionGone(_) | StoreError::Refused(_))) => {
            Err(session_gone(&gone, "rechecking the slot", holding))
        }
        Err(why) => {
            // Cannot tell whose the slot is now: keep it (giving it back could hand a lowered
            // mark on), stop at the mark in force, and look again soon.
            p.metrics.renewals.with_label_values(&["error"]).inc();
            tracing::warn!(error = %why, mark = claim.mark, "a mark write failed and the slot could not be rechecked");
            if holding && p.now_tick() > claim.window {
                lapse(p, store, claim, lapsed);
            }
            Ok(retry_wait(p))
        }
        Ok(Recheck::Gone | Recheck::Ours(_)) => {
            stolen(p, store, claim, e).await;
            Err(Outcome::Stolen {
                slot: claim.slot,
                mark: claim.window,
            })
        }
    }
}

/// The testing aid `--starve-renewals` (fault-injection builds): holds a mark write back
/// after the mark to write was chosen, as a starved renewal path would. The rest of the
/// lease's thread (the store's connection, its pings) runs on meanwhile.
pub(super) async fn starve(p: &Protocol) {
    let d = p.starve();
    if !d.is_zero() {
        tokio::time::sleep(d).await;
    }
}
