//! Holding slots within one store session, for every store that negotiates its slot
//! (ZooKeeper, etcd): claim a slot ([`Claimant::claim`]), run the one lease protocol over it
//! ([`protocol::hold`]), and after a loss claim again — until the session ends, the release is
//! asked for, or a fatal error ([`End`]).

use super::claim::Claimant;
use super::tree::Owner;
use super::Session;
use crate::lease::protocol::{self, Claim, MarkStore, Outcome, Protocol, Stored};
use crate::lease::stop::{Interrupted, Stop};
use crate::lease::{LeaseError, Part};
use crate::repeated::Repeated;
use crate::retry::Backoff;
use std::future::Future;
use std::time::{Duration, Instant};

/// How one session ended.
pub(crate) enum End {
    Released,
    /// The session is gone; `holding`: a lease was in force when it went; `refused`: the
    /// store refused us mid-session (a password rotated, a permission revoked), so the next
    /// session waits a pause as a refusal at the start does.
    SessionGone {
        reason: String,
        holding: bool,
        refused: bool,
    },
    /// The store refused our identity (an ACL, a credential, a permission): not ready, a new
    /// session after a pause — the credential may be rotated or the permissions fixed
    /// without a restart.
    Refused(String),
    /// The pool's identity under this session's claims is gone (`params` deleted or
    /// recreated): a new session agrees on the pool again.
    Replaced(String),
    /// This instance's parameters differ from the pool's, found when agreeing again after the
    /// pool was replaced: not ready saying why, tried again after a pause (at start it is
    /// fatal instead: refused, naming the flag).
    Disagrees(String),
    Fatal(LeaseError),
}

impl End {
    /// This instance's parameters differ from the pool's (`why`, naming the flag): refused at
    /// its first agreement, not ready afterwards (the pool was replaced under it).
    pub(crate) fn disagreeing(first: bool, why: String) -> End {
        if first {
            End::Fatal(LeaseError::Task(why))
        } else {
            End::Disagrees(why)
        }
    }

    pub(crate) fn gone(reason: impl Into<String>) -> End {
        End::SessionGone {
            reason: reason.into(),
            holding: false,
            refused: false,
        }
    }

    /// How an interrupted wait ends the session (nothing held).
    pub(crate) fn interrupted(i: Interrupted, during: &str) -> End {
        match i {
            Interrupted::Release(_) | Interrupted::Abandoned => End::Released,
            Interrupted::SessionEnded => End::gone(format!("session ended {during}")),
        }
    }
}

/// Why a claim failed.
pub(crate) enum ClaimFailed {
    /// A passing fault (a connection lost, a leader election): tried again after a backoff.
    Retry(String),
    /// Every slot is held and another part of the instance holds one: this spare part gave
    /// its place in the queue up (see [`exhausted`]) and tries again after a pause.
    GaveWay,
    /// The session is over, or the store refused us, or nothing can mend it.
    End(End),
}

/// What crosses from one session to the next.
#[derive(Default)]
pub(crate) struct Across {
    /// The slot to try first: the one held last.
    pub prefer: Option<u32>,
    /// Bumped at each lease published, so the generator tells one lease from the next.
    pub generation: u64,
}

impl Across {
    /// Before the first session: `prefer` first, generations counted from the part's own.
    pub(crate) fn new(prefer: Option<u32>, part: &super::Part) -> Across {
        Across {
            prefer,
            generation: part.first_generation(),
        }
    }
}

/// A slot just claimed and its mark as read.
pub(crate) type Taken<M> = (u32, Stored<<M as MarkStore>::Version>);

/// Claims and holds slots until the session ends, the release is asked for, or a fatal error.
pub(crate) async fn serve<S: Session>(
    slots: &mut Claimant<'_, S>,
    stop: &mut Stop,
    across: &mut Across,
) -> End {
    // A claim kept while the clock passes a mark further ahead than --max-clock-wait.
    let mut kept = None;
    loop {
        let claim = match kept.take() {
            Some(c) => c,
            None => match take(slots, stop, across).await {
                Ok(c) => c,
                Err(end) => {
                    // A claim dropped after it took a slot (the session ended) holds nothing now.
                    slots.proto().part.set_holding(false);
                    return end;
                }
            },
        };
        across.prefer = Some(claim.slot);
        let outcome = {
            let (p, store) = (&slots.neg.proto, &slots.marks);
            p.part.set_holding(true);
            let demand = &mut slots.demand;
            let outcome =
                protocol::hold(p, store, claim, stop, &mut across.generation, demand).await;
            p.part.set_holding(false);
            outcome
        };
        match outcome {
            Outcome::Released | Outcome::ReleaseFailed(_) | Outcome::Abandoned => {
                return End::Released
            }
            Outcome::Stolen { slot, mark } => slots.proto().part.written.raise(slot, mark),
            Outcome::SessionGone {
                reason,
                holding,
                refused,
            } => {
                return End::SessionGone {
                    reason,
                    holding,
                    refused,
                }
            }
            Outcome::PoolReplaced { reason } => return End::Replaced(reason),
            Outcome::ClockBehind(ahead) => {
                if slots.leave_far_ahead(claim.slot).await {
                    tracing::warn!(
                        slot = claim.slot,
                        ?ahead,
                        "slot's mark is further ahead of our clock than --max-clock-wait; trying another slot"
                    );
                    across.prefer = None;
                    continue;
                }
                // No other slot to try: wait for the mark, holding the claim (never a crash
                // loop); then hold it as usual.
                let (p, store) = (slots.proto(), &slots.marks);
                let key = store.key(claim.slot);
                match protocol::wait_far_ahead(p, &key, claim.floor, stop).await {
                    Ok(()) => kept = Some(claim),
                    Err(i) => {
                        if matches!(i, Interrupted::Release(_) | Interrupted::Abandoned) {
                            // Nothing issued under this claim: the mark read stays.
                            let _ = protocol::release(p, store, &claim, None, &[]).await;
                        }
                        return End::interrupted(i, "while waiting for a mark far ahead");
                    }
                }
            }
        }
        // The lease was lost (or the slot given back): claim again in the same session.
    }
}

/// Claims a slot, retrying passing faults: the claim, its mark read.
async fn take<S: Session>(
    slots: &mut Claimant<'_, S>,
    stop: &mut Stop,
    across: &Across,
) -> Result<Claim<<S::Marks as MarkStore>::Version>, End> {
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
    let mut failing = Repeated::new("claim failed");
    loop {
        slots.proto().pending("claiming a slot");
        let started = Instant::now();
        let (slot, stored) = match stop.or(slots.claim(across.prefer)).await {
            Ok(Ok(c)) => c,
            Ok(Err(ClaimFailed::Retry(e))) => {
                failing.failed(&e);
                slots.proto().pending(format!("claiming a slot: {e}"));
                if let Err(i) = stop.sleep(backoff.next_wait()).await {
                    return Err(End::interrupted(i, "while claiming"));
                }
                continue;
            }
            Ok(Err(ClaimFailed::GaveWay)) => {
                let p = slots.proto();
                p.pending(format!(
                    "{} of {} slots held; the pool's slots go to instances holding none first",
                    p.part.holding_count(),
                    p.part.of
                ));
                let pause = rand::random_range(SPARE_PAUSE_MS);
                if let Err(i) = stop.sleep(Duration::from_millis(pause)).await {
                    return Err(End::interrupted(i, "while claiming"));
                }
                continue;
            }
            Ok(Err(ClaimFailed::End(end))) => return Err(end),
            Err(i) => return Err(End::interrupted(i, "while claiming")),
        };
        failing.ended();
        let p = slots.proto();
        let m = &p.metrics.lease;
        m.claims.inc();
        m.claim_seconds.observe(started.elapsed().as_secs_f64());
        tracing::info!(
            slot,
            mark = stored.mark,
            claim_ms = started.elapsed().as_millis() as u64,
            "slot claimed"
        );
        // A slot a hold of this instance left (this lease's or another's), its mark still that
        // hold's own write: no one issued under it since, and what this process issued under
        // it the service says (which covers what `written` remembers of its own loss of it).
        let mut claim = match p.part.left.ours(slot, &stored) {
            Some((left, issuance)) => {
                protocol::again::claim_back(p, &left, &issuance, stored).await
            }
            None => {
                let mut claim = Claim::new(p, slot, stored);
                if let Some(w) = p.part.written.get(slot) {
                    claim.raise_floor(w);
                }
                claim
            }
        };
        claim.raise_floor(slots.history.not_before);
        return Ok(claim);
    }
}

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
    p.pending(crate::lease::GAVE_BACK);
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

/// How long a spare part waits before it tries again for a slot of an exhausted pool (ms).
const SPARE_PAUSE_MS: std::ops::Range<u64> = 1_000..3_000;

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

/// A random slot of a pool of `pool` to probe, avoiding `skip` (a few tries).
pub(crate) fn random_slot(pool: u32, skip: &std::collections::BTreeSet<u32>) -> u32 {
    use rand::Rng;
    let mut rng = rand::rng();
    let mut s = rng.random_range(0..pool);
    for _ in 0..64 {
        if !skip.contains(&s) {
            break;
        }
        s = rng.random_range(0..pool);
    }
    s
}
