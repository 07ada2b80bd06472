//! Letting a slot go: the mark written down to the highest tick issued (never below the
//! floor) and the claim let go in one write where the store can; after an interrupted wait;
//! and when the owner went away without saying what it issued.

use super::{recovered, restore, Claim, MarkStore, Outcome, Protocol, Recheck, StoreError};
use crate::planted::PlantedBug;
use crate::stop::Interrupted;
use idcar_core::generator::Issued;
use std::time::Duration;

/// The mark to write on release: the highest tick issued for `slot`, never below `floor`.
pub fn mark_down(slot: u32, floor: u64, highest: Option<Issued>) -> u64 {
    match highest {
        Some(h) if h.slot == slot => h.tick.max(floor),
        _ => floor,
    }
}

/// What an interrupted wait means: the release (written down first), or the session's end.
pub(super) async fn interrupted<S: MarkStore>(
    p: &Protocol,
    store: &S,
    claim: &Claim<S::Version>,
    i: Interrupted,
    holding: bool,
    unconfirmed: &[u64],
) -> Outcome {
    match i {
        Interrupted::Release(highest) => match release(p, store, claim, highest, unconfirmed).await
        {
            Ok(_) => Outcome::Released,
            Err(e) => Outcome::ReleaseFailed(e),
        },
        Interrupted::Abandoned => abandon(p, store, claim, unconfirmed).await,
        Interrupted::SessionEnded => Outcome::SessionGone {
            reason: "session ended while holding the lease".into(),
            holding,
            refused: false,
        },
    }
}

/// The owner is gone without saying what it issued: the highest tick issued is unknown, so
/// the mark is written down to no less than the mark last written (the floor would lower it
/// below ticks that may have been issued) and the slot let go; a successor waits past it.
async fn abandon<S: MarkStore>(
    p: &Protocol,
    store: &S,
    claim: &Claim<S::Version>,
    unconfirmed: &[u64],
) -> Outcome {
    tracing::warn!(
        slot = claim.slot,
        mark = claim.window,
        "released without the highest tick issued: the mark is written down to the window in force"
    );
    if p.planted() == PlantedBug::AbandonToFloor {
        p.released();
        let _ = store.write_down(claim, claim.floor).await;
        return Outcome::Abandoned;
    }
    // The window last published bounds every tick issued: written down to it, which lowers
    // nothing issued and raises a mark someone else lowered.
    let highest = Issued {
        slot: claim.slot,
        tick: claim.window,
    };
    let _ = release(p, store, claim, Some(highest), unconfirmed).await;
    Outcome::Abandoned
}

/// Releases the claim: the mark written down to the highest tick issued (never below the
/// floor), the slot let go. `unconfirmed`: marks written with no reply since the last
/// confirmed write — one of ours found in the store is written down from. The mark written,
/// or why not (the slot then frees as the store frees it: the session's end, the next start).
pub async fn release<S: MarkStore>(
    p: &Protocol,
    store: &S,
    claim: &Claim<S::Version>,
    highest: Option<Issued>,
    unconfirmed: &[u64],
) -> Result<u64, StoreError> {
    p.released();
    let down = mark_down(claim.slot, claim.floor, highest);
    let mut written = store.write_down(claim, down).await;
    if matches!(written, Err(StoreError::Conflict(_))) && !unconfirmed.is_empty() {
        if let Ok(Some((version, value))) = store.own_write(claim, unconfirmed).await {
            written = store
                .write_down(&recovered(claim, version, value), down)
                .await;
        }
    }
    // The slot still ours and its mark lowered or deleted by someone else: the mark must not
    // stay lowered for the next holder. Written down over it, to what was issued (a few
    // tries: a passing fault must not leave it lowered).
    for _ in 0..3 {
        if !matches!(written, Err(StoreError::Conflict(_)))
            || p.planted() == PlantedBug::NoWriteBack
        {
            break;
        }
        match store.recheck(claim).await {
            Ok(Recheck::Ours(now)) if now.mark <= claim.mark => {
                restore(p, store, claim, now.mark);
                let claim = Claim {
                    version: now.version,
                    ..*claim
                };
                written = store.write_down(&claim, down).await;
            }
            Err(StoreError::Unavailable(_)) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            _ => break,
        }
    }
    match written {
        Ok(()) => {
            tracing::info!(
                slot = claim.slot,
                mark = down,
                "slot released; mark written down to the highest issued time"
            );
            Ok(down)
        }
        Err(e) => {
            tracing::warn!(slot = claim.slot, error = %e, "could not release the slot cleanly");
            Err(e)
        }
    }
}
