//! **The lease protocol** — one hold loop for every store, and why IDs stay unique across the
//! holders of one slot whatever the clocks say. This file alone states and keeps the
//! invariant; a store ([`MarkStore`]) only says how its marks are read and written.
//!
//! **Invariant.** Every ID a holder issues carries a tick `<=` the slot's mark as last written
//! by that holder, and a holder issues only ticks `>` the mark it read when it claimed the
//! slot (its *floor*). So no two holders of a slot, one after the other, share a tick.
//!
//! How [`hold`] keeps it, step by step:
//!
//! 1. **Claim** ([`Claim::new`]): the floor is the mark read with its version
//!    ([`MarkStore::read`]; a missing mark reads 0, a corrupt one is never guessed).
//! 2. **Wait** ([`clock_wait`]): nothing is published until this host's clock is past the
//!    floor, a wait bounded by `--max-clock-wait` (a far-behind clock is an error, not a wait).
//! 3. **First write, then publish**: every write is [`MarkStore::write`], a compare-and-set on
//!    the version last seen that also checks the claim is still ours. The writers of one
//!    slot's mark so form a single order: a new holder's first write succeeds only if no older
//!    holder wrote in between, and every later write of the older holder fails — it stops at
//!    once ([`Outcome::Stolen`]). A window `(floor, mark]` is published on the `watch` channel
//!    only after a write of `mark` succeeded; a store error never publishes one.
//! 4. **Renew, never lower** ([`next_mark`]: `max(mark, now + horizon)`), since the clock may
//!    have stepped back; renewals are timed by [`Pace`] from what is left of the mark and how
//!    long renewals take lately, so a starved node renews earlier instead of lapsing.
//! 5. **A lost reply** may have been applied: [`MarkStore::own_write`] recognises it only when
//!    the mark holds a value we tried *with this claim's token* (random per claim, written
//!    beside the ticks); a foreign write never carries it. Carrying on never lowers the mark
//!    ([`recovered`]).
//! 6. **A lowered mark**: a write that fails while the slot is still ours, with the stored
//!    mark below ours (lowered or deleted by someone else: an operator, a script, a store
//!    restored from a snapshot), writes the mark back up before anything else
//!    ([`MarkStore::recheck`], [`restore`]), so no successor reads it as its floor. A claim
//!    made in a pool whose identity is gone (its parameters deleted or recreated) stops at
//!    once ([`Outcome::PoolReplaced`]); every write is conditional on that identity.
//! 7. **Lapse**: unrenewed, the published mark stays in force and the generator stops at it;
//!    when it runs out the lease says so at that moment ([`or_lapse`]), counted once.
//! 8. **Release** ([`release`]): the mark is written down to the highest tick issued, never
//!    below the floor ([`mark_down`]), and the claim let go — one atomic write where the
//!    store can — so a successor waits almost nothing. A release that does not know the
//!    highest tick issued (the owner's handle dropped: [`Interrupted::Abandoned`]) writes the
//!    mark last written again, never the floor, and lets the slot go ([`abandon`]).
//!
//! Facts kept elsewhere that the invariant relies on:
//!
//! - the generator (`crate::generator`) refuses ticks above the window's mark and at or below
//!   its floor, and a new generation of window never reuses a tick of the old one;
//! - ticks are the layout's time unit from its epoch (`Scheme::tick_at`, `crate::layout`),
//!   the same for every holder of a pool — which the pool's recorded parameters check
//!   (`crate::lease::pool::params`: a claim is made only while they are the ones agreed);
//! - a store's compare-and-set is linearizable (ZooKeeper's `multi`, etcd's transactions; the
//!   state file is written only under its exclusive lock, by one process);
//! - only the holder of a claim writes a slot's mark (a claim is made before its mark is read,
//!   or with it: `crate::lease::pool::Session::take` — ZooKeeper creates `slots/N`, then
//!   reads `marks/N`; etcd puts `slots/N` and reads `marks/N` in one transaction).

pub use super::store::{Claim, MarkStore, Recheck, StoreError, Stored};
pub use super::Timing;

use super::pace::Pace;
use super::planted::PlantedBug;
use super::stop::Stop;
use super::Window;
use std::future::Future;
use std::time::{Duration, Instant};

impl<V: Copy> Claim<V> {
    /// A claim on `slot` whose mark was read as `stored`.
    pub fn new(p: &Protocol, slot: u32, stored: Stored<V>) -> Claim<V> {
        let floor = claimed_floor(p, stored.mark);
        Claim {
            slot,
            floor,
            mark: floor,
            version: stored.version,
            token: rand::random(),
        }
    }
}

/// How a [`hold`] ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Released on the owner's request, the mark written down.
    Released,
    /// Released on the owner's request, but the mark could not be written down (the slot
    /// frees as the store frees it: the session's end, the next start).
    ReleaseFailed(StoreError),
    /// The owner went away without saying what it issued ([`Interrupted::Abandoned`]): the
    /// mark last written is written again (never the floor) and the slot let go.
    Abandoned,
    /// Another writer changed the mark or the claim vanished: issuing stopped at once, the
    /// loss is counted and the slot given back; claim again — a new claim of this `slot`
    /// starts above `mark`, the highest mark this holder wrote ([`Claim::raise_floor`]),
    /// whatever the other writer left in the store.
    Stolen { slot: u32, mark: u64 },
    /// The store's session ended. `holding`: a window was in force when it went; `refused`:
    /// the store refused us ([`StoreError::Refused`]).
    SessionGone {
        reason: String,
        holding: bool,
        refused: bool,
    },
    /// The pool's recorded parameters were deleted or recreated under this holder (its
    /// identity is gone): issuing stopped at once; agree on the pool again.
    PoolReplaced { reason: String },
    /// The clock is further behind the floor than `--max-clock-wait` allows (by this much):
    /// nothing written, nothing published, the claim still held — the caller tries another
    /// slot where it can, or waits ([`wait_far_ahead`]) and holds the claim again.
    ClockBehind(Duration),
}

/// The floor of a claim: the mark its slot's last holder wrote, except under the planted bug
/// [`PlantedBug::SkipMarkWait`] (campaign only), which starts just below the clock.
fn claimed_floor(p: &Protocol, mark: u64) -> u64 {
    match p.planted() {
        PlantedBug::SkipMarkWait => mark.min(p.now_tick().saturating_sub(1)),
        _ => mark,
    }
}

/// What is written for a window reaching `mark`: `mark` itself, except under the planted bug
/// [`PlantedBug::LowerMark`] (campaign only), which stores one horizon less.
fn stored_mark(p: &Protocol, mark: u64, horizon: u64) -> u64 {
    match p.planted() {
        PlantedBug::LowerMark => mark.saturating_sub(horizon),
        _ => mark,
    }
}

/// The next mark to write: never below the one written, `horizon` ticks past now.
pub fn next_mark<V>(claim: &Claim<V>, now_tick: u64, horizon: u64) -> u64 {
    claim.mark.max(now_tick.saturating_add(horizon))
}

/// Carrying on after [`MarkStore::own_write`] found our earlier write of `value` at
/// `version`: the claim to write from, and the mark to write now — never below `value` (that
/// write may have been for a later time than `want` if the clock stepped back in between).
pub fn recovered<V: Copy>(claim: &Claim<V>, version: V, value: u64, want: u64) -> (Claim<V>, u64) {
    let claim = Claim {
        mark: claim.mark.max(value),
        version,
        ..*claim
    };
    (claim, want.max(claim.mark))
}

/// Holds `claim`: waits for the clock to pass its floor, writes the first mark, publishes the
/// window, renews it until the lease is lost, the store's session ends or the release is
/// asked for. `generation` is bumped at each window published for a new claim.
pub async fn hold<S: MarkStore>(
    p: &Protocol,
    store: &S,
    mut claim: Claim<S::Version>,
    stop: &mut Stop,
    generation: &mut u64,
) -> Outcome {
    if let Some(end) = wait_past_floor(p, store, &claim, stop).await {
        return end;
    }
    let horizon = p.scheme.ticks_in(p.timing.horizon);
    let mut next = Duration::ZERO;
    let mut pace = Pace::new(p.timing);
    let mut published = false;
    // Set once the mark ran out unrenewed (counted as an `unreachable` loss, once).
    let mut lapsed = false;
    // Marks written with no reply (the write may have been applied): our own if seen.
    let mut unconfirmed: Vec<u64> = Vec::new();
    loop {
        let due = Instant::now() + next;
        if let Err(i) = stop.sleep(next).await {
            let holding = published && !lapsed;
            return interrupted(p, store, &claim, i, holding, &unconfirmed).await;
        }
        let mut want = next_mark(&claim, p.now_tick(), horizon);
        let t = Instant::now();
        let mut stored = stored_mark(p, want, horizon);
        starve(p).await;
        let runs_out = (published && !lapsed).then(|| p.wait_past(claim.mark));
        let mut written = or_lapse(store.write(&claim, stored), runs_out, || {
            lapse(p, store, &claim, &mut lapsed)
        })
        .await;
        if matches!(written, Err(StoreError::Conflict(_))) && !unconfirmed.is_empty() {
            // An earlier write whose reply was lost may have gone through: if it carries this
            // claim's token, carry on from there (never below it).
            if let Some((version, value)) = store.own_write(&claim, &unconfirmed).await {
                tracing::info!(mark = value, "an earlier mark write had gone through");
                (claim, want) = recovered(&claim, version, value, want);
                stored = stored_mark(p, want, horizon);
                written = store.write(&claim, stored).await;
            }
        }
        let holding = published && !lapsed;
        next = match written {
            Ok(version) => {
                p.metrics
                    .lease
                    .renewal_seconds
                    .observe(t.elapsed().as_secs_f64());
                let took = due.elapsed();
                if holding {
                    if p.now_tick() > claim.mark {
                        // The write outlived the mark without `or_lapse` seeing it (a store
                        // that completes on its first poll, such as the state file).
                        lapse(p, store, &claim, &mut lapsed);
                    } else {
                        pace.record(&p.metrics, p.wait_past(claim.mark), took);
                    }
                }
                claim.mark = want;
                claim.version = version;
                publish(p, &claim, &mut published, &mut lapsed, generation);
                unconfirmed.clear();
                pace.next(took, p.wait_past(claim.mark))
            }
            Err(e @ (StoreError::SessionGone(_) | StoreError::Refused(_))) => {
                return session_gone(&e, "renewing", holding);
            }
            Err(StoreError::Conflict(e)) => {
                match after_conflict(p, store, &mut claim, &e, holding, &mut lapsed).await {
                    Ok(wait) => wait,
                    Err(end) => return end,
                }
            }
            Err(StoreError::Unavailable(e)) => {
                // Unreachable or slow: the mark already written stays in force. The write
                // may still have been applied.
                unconfirmed.push(stored);
                p.metrics.lease.renewals.with_label_values(&["error"]).inc();
                tracing::warn!(
                    error = %e,
                    mark = claim.mark,
                    attempted = want,
                    "could not renew the time mark"
                );
                if holding && p.now_tick() > claim.mark {
                    lapse(p, store, &claim, &mut lapsed);
                }
                retry_wait(p)
            }
        };
    }
}

/// The store's session ended (or it refused us) while `during`: how the hold ends.
fn session_gone(e: &StoreError, during: &str, holding: bool) -> Outcome {
    Outcome::SessionGone {
        reason: format!("{during}: {e}"),
        holding,
        refused: matches!(e, StoreError::Refused(_)),
    }
}

/// How soon a failed write is tried again.
fn retry_wait(p: &Protocol) -> Duration {
    (p.timing.renew_every / 4).max(Duration::from_millis(50))
}

/// A write failed on its compare-and-set (`e`): whether the slot is still ours, and what its
/// mark is now, decide. The wait before the next write, or how the hold ends. `holding`: a
/// window is in force.
async fn after_conflict<S: MarkStore>(
    p: &Protocol,
    store: &S,
    claim: &mut Claim<S::Version>,
    e: &str,
    holding: bool,
    lapsed: &mut bool,
) -> Result<Duration, Outcome> {
    match store.recheck(claim).await {
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
            p.metrics.lease.renewals.with_label_values(&["error"]).inc();
            tracing::warn!(error = %why, mark = claim.mark, "a mark write failed and the slot could not be rechecked");
            if holding && p.now_tick() > claim.mark {
                lapse(p, store, claim, lapsed);
            }
            Ok(retry_wait(p))
        }
        Ok(Recheck::Gone | Recheck::Ours(_)) => {
            stolen(p, store, claim, e).await;
            Err(Outcome::Stolen {
                slot: claim.slot,
                mark: claim.mark,
            })
        }
    }
}

/// The testing aid `--starve-renewals` (fault-injection builds): holds a mark write back
/// after the mark to write was chosen, as a starved renewal path would. The rest of the
/// lease's thread (the store's connection, its pings) runs on meanwhile.
async fn starve(p: &Protocol) {
    let d = p.starve();
    if !d.is_zero() {
        tokio::time::sleep(d).await;
    }
}

/// Awaits `write`; if `runs_out` (when given) passes first, calls `on_lapse` at that moment
/// and goes on waiting for the write: a lapse is said when the mark runs out, not when a
/// pending write finally fails.
pub async fn or_lapse<F: Future>(
    write: F,
    runs_out: Option<Duration>,
    on_lapse: impl FnOnce(),
) -> F::Output {
    let Some(runs_out) = runs_out else {
        return write.await;
    };
    tokio::pin!(write);
    tokio::select! {
        r = &mut write => r,
        _ = tokio::time::sleep(runs_out) => {
            on_lapse();
            write.await
        }
    }
}

/// The mark ran out unrenewed: the generator has stopped at it. Counted once as a loss
/// (`unreachable`), and readiness says why until a write gets through.
fn lapse<S: MarkStore>(p: &Protocol, store: &S, claim: &Claim<S::Version>, lapsed: &mut bool) {
    *lapsed = true;
    p.metrics
        .lease
        .losses
        .with_label_values(&["unreachable"])
        .inc();
    tracing::warn!(
        slot = claim.slot,
        mark = claim.mark,
        "lease lost: the time mark ran out while {} could not be written",
        store.name()
    );
    p.lost(format!(
        "slot {}'s time mark ran out: {} cannot be written",
        claim.slot,
        store.name()
    ));
}

/// Publishes the window after a successful mark write (a new generation the first time).
fn publish<V>(
    p: &Protocol,
    claim: &Claim<V>,
    published: &mut bool,
    lapsed: &mut bool,
    generation: &mut u64,
) {
    p.metrics.lease.renewals.with_label_values(&["ok"]).inc();
    if !*published || *lapsed {
        if !*published {
            *generation += 1;
        }
        *published = true;
        *lapsed = false;
        tracing::info!(
            slot = claim.slot,
            floor = claim.floor,
            mark = claim.mark,
            "lease held"
        );
    }
    p.held(Window {
        slot: claim.slot,
        floor: claim.floor,
        mark: claim.mark,
        generation: *generation,
    });
}

/// The slot is still ours but its mark was lowered (or deleted) by someone else: said where an
/// operator sees it (a warning, `idcar_lease_marks_restored_total`) before it is written back.
fn restore<S: MarkStore>(p: &Protocol, store: &S, claim: &Claim<S::Version>, found: u64) {
    p.metrics.lease.marks_restored.inc();
    tracing::warn!(
        slot = claim.slot,
        key = %store.key(claim.slot),
        found,
        mark = claim.mark,
        "the slot's time mark was lowered or deleted by someone else while the slot is ours; \
         writing it back up (never edit or delete marks, or restore the store from a snapshot, \
         while idcar runs: see the operations guide)"
    );
}

/// The pool's recorded parameters are gone or recreated: stop issuing at once, count it, say
/// why; the caller agrees on the pool again (and is refused if its flags now differ).
fn replaced<S: MarkStore>(
    p: &Protocol,
    store: &S,
    claim: &Claim<S::Version>,
    why: &str,
) -> Outcome {
    p.metrics.lease.renewals.with_label_values(&["error"]).inc();
    p.metrics
        .lease
        .losses
        .with_label_values(&["replaced"])
        .inc();
    let reason = format!(
        "slot {} lost: the pool was replaced ({why}); agreeing on the pool again",
        claim.slot
    );
    tracing::warn!(key = %store.key(claim.slot), reason = %reason, "lease lost");
    p.lost(reason.clone());
    Outcome::PoolReplaced { reason }
}

/// Someone else wrote the mark or took the claim: stop issuing at once, count it, give the
/// slot back (if still ours) for a clean claim.
async fn stolen<S: MarkStore>(p: &Protocol, store: &S, claim: &Claim<S::Version>, e: &str) {
    p.metrics.lease.renewals.with_label_values(&["error"]).inc();
    p.metrics.lease.losses.with_label_values(&["stolen"]).inc();
    let why = format!("slot {} lost: {e}", claim.slot);
    tracing::warn!(reason = %why, "lease lost; claiming again");
    p.lost(why);
    store.give_back(claim.slot).await;
}

mod context;
mod release;
mod wait;

pub use context::Protocol;
use release::interrupted;
pub use release::{mark_down, release};
use wait::wait_past_floor;
pub use wait::{clock_wait, wait_far_ahead};

#[cfg(test)]
mod tests;
