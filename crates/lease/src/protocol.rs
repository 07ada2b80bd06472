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
//!    ([`MarkStore::read`]; a missing mark reads 0, a corrupt one is never guessed) — or, for
//!    a holder claiming back the slot it held when its store session ended, with the mark
//!    still its own last write, the highest tick it issued ([`again`]: nobody wrote or issued
//!    under the slot since).
//! 2. **Wait** ([`clock_wait`]): nothing is published until this host's clock is past the
//!    floor, a wait bounded by `--max-clock-wait` (a far-behind clock is an error, not a wait).
//! 3. **First write, then publish**: every write is [`MarkStore::write`], a compare-and-set on
//!    the version last seen that also checks the claim is still ours. The writers of one
//!    slot's mark so form a single order: a new holder's first write succeeds only if no older
//!    holder wrote in between, and every later write of the older holder fails — it stops at
//!    once ([`Outcome::Stolen`]). A window `(floor, mark]` is published on the `watch` channel
//!    only after a write of `mark` succeeded; a store error never publishes one.
//! 4. **Renew, never below the window** ([`horizon`]): the generator's window moves
//!    `--lease-horizon` past the clock each interval, never back (the clock may step back), and
//!    never past the mark stored nor any mark write still unanswered; the mark is written ahead
//!    of it — far ahead while no one waits for a slot (few writes), down to the window when
//!    someone does (a compare-and-set like any other: every value written is at or above every
//!    tick issued). Passes are timed by [`Pace`] from what is left of the window and how long
//!    they take lately, so a starved node renews earlier instead of lapsing.
//! 5. **A lost reply** may have been applied: [`MarkStore::own_write`] recognises it only when
//!    the mark holds a value we tried *with this claim's token* (random per claim, written
//!    beside the ticks); a foreign write never carries it. Carrying on never lowers the mark
//!    ([`recovered`]).
//! 6. **A lowered mark**: a write that fails, or a watch of the mark that fires
//!    ([`MarkStore::changed`]), while the slot is still ours, with the stored mark below ours (lowered or deleted by someone else: an operator, a script, a store
//!    restored from a snapshot), writes the mark back up before anything else
//!    ([`MarkStore::recheck`], [`restore`]), so no successor reads it as its floor. A claim
//!    made in a pool whose identity is gone (its parameters deleted or recreated) stops at
//!    once ([`Outcome::PoolReplaced`]); every write is conditional on that identity.
//! 7. **Lapse**: with the mark unrenewed, the window stops at it and so does the generator;
//!    when it runs out the lease says so at that moment ([`or_lapse`]), counted once.
//! 8. **Release** ([`release`]): the mark is written down to the highest tick issued, never
//!    below the floor ([`mark_down`]), and the claim let go — one atomic write where the
//!    store can — so a successor waits almost nothing. A release that does not know the
//!    highest tick issued (the owner's handle dropped: [`Interrupted::Abandoned`]) writes the
//!    window last published, never the floor, and lets the slot go ([`abandon`]).
//!
//! Facts kept elsewhere that the invariant relies on:
//!
//! - the generator (`idcar_core::generator`) refuses ticks above the window's mark and at or below
//!   its floor, and a new generation of window never reuses a tick of the old one;
//! - ticks are the layout's time unit from its epoch (`Scheme::tick_at`, `idcar_core::layout`),
//!   the same for every holder of a pool — which the pool's recorded parameters check
//!   (`crate::pool::params`: a claim is made only while they are the ones agreed);
//! - a store's compare-and-set is linearizable (ZooKeeper's `multi`, etcd's transactions; the
//!   state file is written only under its exclusive lock, by one process);
//! - only the holder of a claim writes a slot's mark (a claim is made before its mark is read,
//!   or with it: `crate::pool::Session::take` — ZooKeeper creates `slots/N`, then
//!   reads `marks/N`; etcd puts `slots/N` and reads `marks/N` in one transaction).

pub use super::store::{Claim, MarkStore, Recheck, StoreError, Stored};
pub use crate::timing::Timing;

use super::planted::PlantedBug;
use super::stop::Stop;
use idcar_core::generator::Window;
use std::future::Future;
use std::time::Duration;

impl<V: Copy> Claim<V> {
    /// A claim on `slot` whose mark was read as `stored`.
    pub fn new(p: &Protocol, slot: u32, stored: Stored<V>) -> Claim<V> {
        let floor = claimed_floor(p, stored.mark);
        Claim {
            slot,
            floor,
            mark: floor,
            window: floor,
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
    /// starts above `mark`, the highest tick this holder may have issued (its window,
    /// [`Claim::raise_floor`]), whatever the other writer left in the store.
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

/// Carrying on after [`MarkStore::own_write`] found our earlier write of `value` at
/// `version`: the claim as the store holds it now (the caller decides what to write next, never
/// below the window).
pub fn recovered<V: Copy>(claim: &Claim<V>, version: V, value: u64) -> Claim<V> {
    Claim {
        mark: value,
        version,
        ..*claim
    }
}

/// Holds `claim`: waits for the clock to pass its floor, writes the first mark, publishes the
/// window, keeps it moving and the mark above it (see [`horizon`]) until the lease is lost, the
/// store's session ends or the release is asked for. `generation` is bumped at each window
/// published for a new claim; `demand` says whether anyone waits for a slot of the pool.
pub async fn hold<S: MarkStore>(
    p: &Protocol,
    store: &S,
    claim: Claim<S::Version>,
    stop: &mut Stop,
    generation: &mut u64,
    demand: &mut Demand,
) -> Outcome {
    if let Some(end) = wait_past_floor(p, store, &claim, stop).await {
        return end;
    }
    holder::Holder::new(p, store, claim, generation)
        .run(stop, demand)
        .await
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
    p.metrics.losses.with_label_values(&["unreachable"]).inc();
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

/// Publishes the claim's window (a new generation the first time, after its first write).
fn publish<V>(
    p: &Protocol,
    claim: &Claim<V>,
    published: &mut bool,
    lapsed: &mut bool,
    generation: &mut u64,
) {
    if !*published || *lapsed {
        if !*published {
            *generation += 1;
            // Its first write is in: what an earlier hold left of the slot can no longer be
            // claimed back (the mark carries this claim's token now).
            p.part.left.forget(claim.slot);
        }
        *published = true;
        *lapsed = false;
        tracing::info!(
            slot = claim.slot,
            floor = claim.floor,
            mark = claim.mark,
            window = claim.window,
            "lease held"
        );
    }
    p.held(Window {
        slot: claim.slot,
        floor: claim.floor,
        mark: claim.window,
        generation: *generation,
    });
}

/// The slot is still ours but its mark was lowered (or deleted) by someone else: said where an
/// operator sees it (a warning, `idcar_lease_marks_restored_total`) before it is written back.
fn restore<S: MarkStore>(p: &Protocol, store: &S, claim: &Claim<S::Version>, found: u64) {
    p.metrics.marks_restored.inc();
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
    p.metrics.renewals.with_label_values(&["error"]).inc();
    p.metrics.losses.with_label_values(&["replaced"]).inc();
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
    p.metrics.renewals.with_label_values(&["error"]).inc();
    p.metrics.losses.with_label_values(&["stolen"]).inc();
    let why = format!("slot {} lost: {e}", claim.slot);
    tracing::warn!(reason = %why, "lease lost; claiming again");
    p.lost(why);
    store.give_back(claim.slot).await;
}

pub mod again;
mod conflict;
mod context;
mod holder;
pub mod horizon;
mod release;
mod wait;

pub use context::Protocol;
pub use horizon::{Demand, Horizons, Reach};
use release::interrupted;
pub use release::{mark_down, release};
use wait::wait_past_floor;
pub use wait::{clock_wait, wait_far_ahead};

#[cfg(test)]
mod tests;
