//! With `--slots`: what a spare part (another lease of its instance holds a slot) does at the
//! head of the queue, and how a surplus part gives a slot back to an instance holding none.

use super::end::End;
use super::tree::Owner;
use crate::part::Part;
use crate::protocol::Protocol;
use std::future::Future;
use std::time::Duration;

/// Waits at the head of the queue of an exhausted pool for `change` (the store's word that
/// the held slots changed) — or until another part of the instance takes a slot: this one is
/// then a spare and must give way (the caller looks again and [`exhausted`] says so).
pub(crate) async fn wait_exhausted(p: &Protocol, change: impl Future<Output = ()>) {
    tokio::select! {
        () = change => {}
        () = p.part.became_spare() => {}
    }
}

/// Whether this part, at the head of the queue with `free` slots free, takes one: always,
/// unless it is a spare (another part of its instance holds a slot) and the instances queued
/// behind it that hold none (`behind`: the queue's owner records; spares say so, and an
/// instance's several records count once) would be left without one — then it gives way
/// ([`ClaimFailed::GaveWay`]). Other spares, its own instance's included, do not count: hot
/// instances never yield to each other while slots are free.
pub(crate) fn spare_may_take(part: &Part, free: usize, behind: &[Option<Owner>]) -> bool {
    if !part.is_spare() {
        return true;
    }
    let mut hungry: Vec<Option<&str>> = Vec::new();
    let ours = Some(&*part.process);
    for o in behind {
        match o {
            Some(o) if o.spare == Some(true) || o.process.as_deref() == ours => {}
            Some(o) if o.process.is_some() => {
                let p = o.process.as_deref();
                if !hungry.contains(&p) {
                    hungry.push(p);
                }
            }
            // One slot each: an instance of one slot, or a record we cannot read.
            _ => hungry.push(None),
        }
    }
    free > hungry.len()
}

/// Whether the owner record a part queued with says it is a spare.
pub(crate) fn queued_as_spare(owner: &[u8]) -> bool {
    super::tree::parse_owner(owner).is_some_and(|o| o.spare == Some(true))
}

/// Whether a surplus part ([`Part::is_surplus`]) gives its slot back to the contender at the
/// head of the queue of an exhausted pool: when that one holds none (it is not a spare) and
/// is another instance (`head`: its owner record, `None` if unreadable).
pub(crate) fn gives_back(part: &Part, head: Option<&Owner>) -> bool {
    let hungry =
        head.is_none_or(|o| o.spare != Some(true) && o.process.as_deref() != Some(&*part.process));
    part.is_surplus() && hungry
}

/// How often a surplus part looks for an instance holding none at the head of the queue
/// (ms, drawn from this range at each look, so that two hot instances seldom look at once).
pub(crate) const GIVE_BACK_CHECK_MS: std::ops::Range<u64> = 1_500..2_500;

/// What a surplus part's look at the pool found: whether every slot is held, and the head
/// of the queue (its key or node name, its owner record) if anyone queues.
pub(crate) type Looked = (bool, Option<(String, Option<Owner>)>);

/// With `--slots`: while `part` is surplus, looks at the pool every 1.5-2.5 s (`look`, the
/// store's own reads; `None` when the store did not answer) for an instance holding none at
/// the head of an exhausted pool's queue (see [`give_back_now`]); then cancels `gave` (the
/// session loop ends the ZooKeeper session or revokes the etcd lease, so the slot goes at
/// once and the waiter takes it past its mark) and `ended` (stopping the session's waits),
/// and returns.
pub(crate) async fn give_back_when_asked<F>(
    part: Part,
    gave: tokio_util::sync::CancellationToken,
    ended: tokio_util::sync::CancellationToken,
    mut look: impl FnMut() -> F,
) where
    F: Future<Output = Option<Looked>>,
{
    let mut seen = None;
    loop {
        let pause = rand::random_range(GIVE_BACK_CHECK_MS);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        if !part.is_surplus() {
            seen = None;
            continue;
        }
        let Some((exhausted, head)) = look().await else {
            continue;
        };
        if give_back_now(&part, exhausted, head, &mut seen) {
            gave.cancel();
            ended.cancel();
            return;
        }
    }
}

/// Whether the session ended because this part gave its slot back (`gave`, see
/// [`give_back_when_asked`]): then it stops issuing now, and the caller ends the session or
/// etcd lease at once (the slot goes, the waiter takes it past its mark) and starts a new
/// one. Not a loss.
pub(crate) fn gave_back(
    p: &Protocol,
    gave: &tokio_util::sync::CancellationToken,
    end: &End,
) -> bool {
    if !gave.is_cancelled() || !matches!(end, End::SessionGone { .. }) {
        return false;
    }
    p.pending(crate::handle::GAVE_BACK);
    tracing::info!("gave a slot back: an instance holding none waits for one (--slots)");
    true
}

/// Whether a surplus part gives its slot back now, given what it looked at: the head of the
/// queue (its key or node name) when the pool is exhausted and that head holds none; a slot is given back only when
/// the same head is found on two looks in a row (one hungry waiter, one slot).
pub(crate) fn give_back_now(
    part: &Part,
    exhausted: bool,
    head: Option<(String, Option<Owner>)>,
    seen: &mut Option<String>,
) -> bool {
    let hungry = match head {
        Some((key, owner)) if exhausted && gives_back(part, owner.as_ref()) => Some(key),
        _ => None,
    };
    let again = hungry.is_some() && hungry == *seen;
    *seen = hungry;
    // Looked at again just before: a sibling may have lost its slot meanwhile.
    again && part.is_surplus()
}

/// Every slot of the pool is held: what the claimant does.
#[must_use]
pub(crate) enum Exhausted {
    /// Wait at the head of the queue for a slot to free.
    Wait,
    /// Give the place up ([`ClaimFailed::GaveWay`]): this part is a spare.
    GiveWay,
}

/// Says that every slot of a pool of `pool` is held: the metric and the lease state always,
/// the log once a claim (`reported`). A spare part (another part of its instance holds a
/// slot) gives way instead: an instance holding none must not queue behind an instance that
/// wants more (a rolling restart in a full pool would stall): a spare never waits at the
/// head of an exhausted pool's queue (and see [`spare_may_take`] for free slots).
///
/// A part whose queue record says otherwise than it is now (`queued_as_spare`: it queued as a
/// spare and its sibling has lost its slot since) gives way too, to queue again with a record
/// that says what it is: instances holding several slots give one back to a waiter that holds
/// none, and read that from the record.
pub(crate) fn exhausted(
    p: &Protocol,
    pool: u32,
    reported: &mut bool,
    queued_as_spare: bool,
) -> Exhausted {
    if p.part.is_spare() || queued_as_spare {
        return Exhausted::GiveWay;
    }
    p.metrics.set_pool_exhausted(p.part.index, true);
    if !std::mem::replace(reported, true) {
        tracing::warn!(pool, "pool exhausted; waiting for a slot to free");
    }
    p.pending(format!(
        "pool exhausted: all {pool} slots are held; waiting for one to free"
    ));
    Exhausted::Wait
}
