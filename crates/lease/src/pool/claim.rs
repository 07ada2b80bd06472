//! The one claim algorithm: queue up (no herd), then, at the head of the queue, take a free
//! slot — the same steps for every store, each done the store's way ([`Session`]).
//!
//! - Join the queue and wait until no contender is ahead, watching only the one just ahead —
//!   or, with `n` contenders ahead, take the free slot of rank `n` (by mark, as the head ranks
//!   them) at once if there is one whose mark the clock is past: contenders that arrive
//!   together claim together, not one after another. Two that rank differently (they read at
//!   different moments) try the same slot; the take is the fence, the loser looks again. A
//!   spare waits its turn (the head decides whether it gives way).
//! - Before that, with no contender queued: take a free slot at once, without queueing (one
//!   look — the queue, the held slots and the marks in one read — and the take): the preferred
//!   slot if free, else the lowest mark if the clock is past it. Taken first by another (several
//!   start together), the next in that order, up to three takes; then the claim queues as
//!   below.
//! - As head: list the held slots (our own leftovers — a slot of this session whose lease was
//!   lost — count as free). Prefer a slot this instance can claim back (its mark still the
//!   write of a hold of ours whose session ended: no wait, see `protocol::again`), then the
//!   slot held before; else the free slot with the lowest mark (no mark means 0, so unused
//!   slots go first, lowest number first) — once the clock is past that mark: the head waits
//!   before the take, not after it (the same time for it), so that the slot's last holder,
//!   whose session ended with the store's, may still take it back at once. A slot to claim
//!   back is taken at once wherever the claim stands in the queue: after the store's outage
//!   every instance takes its own back.
//! - With `--slots`, while an instance holds no slot one of its leases claims at a time (the
//!   others wait in the process, not in the queue): one instance's leases never take several
//!   slots together while others' queue behind them.
//! - With every slot held, stay at the head, report the exhaustion, and wait for the held
//!   slots to change — unless another lease of this instance holds a slot (`--slots`): that
//!   spare gives its place up and tries again later, so instances holding none go first.
//! - Take the slot and read its mark in one step ([`Session::take`]): the claim is made before
//!   (or with) the read, and only while the pool is the one agreed; then leave the queue.
//!
//! Pools larger than [`PROBE_ABOVE`] slots (sno80's 65,536 partitions, muid128's 2^32 − 1
//! medallions) are claimed without the queue and without listing or reading the pool: take a
//! random slot (the one held before first); a taken one is a miss, so probe another. Only
//! after [`PROBES`] misses in a row are the held slots listed — as many as there are holders,
//! never the pool — to find a free one or see that the pool is exhausted and wait for a
//! change. A claim so costs one take whatever the pool size; slots are spread at random
//! instead of lowest mark first (a successor still waits past the mark of the slot it took).

use super::end::{end_for, ClaimFailed, Taken};
use super::order::{by_mark, fixed, head_pick, random_slot, ranked_slot, ClaimHistory};
use super::spare::{exhausted, queued_as_spare, spare_may_take, wait_exhausted, Exhausted};
use super::{Fault, Negotiation, Session, Took};
use crate::protocol::Protocol;
use crate::store::MarkStore;

/// Pools above this size are claimed by random probes instead of queue and listing.
pub const PROBE_ABOVE: u32 = 1024;
/// Probes that find a taken slot before the held slots are listed to look for a free one.
const PROBES: u32 = 8;
/// How many far-ahead probed slots are given back before that is a fatal error (our clock is
/// then behind the cluster's, not one odd slot ahead of it).
pub const FAR_AHEAD_SKIPS: u32 = 16;

/// How a claim fails: the store's fault, or a spare part giving way.
enum Failed {
    Store(Fault),
    GaveWay,
}

impl From<Fault> for Failed {
    fn from(f: Fault) -> Failed {
        Failed::Store(f)
    }
}

/// One session's claimant: what [`super::holding::serve`] claims slots with.
pub(crate) struct Claimant<'a, S: Session> {
    pub neg: &'a Negotiation,
    pub session: &'a S,
    pub marks: S::Marks,
    pub history: &'a mut ClaimHistory,
    /// Whether anyone waits for a slot of the pool (see [`Session::demand`]).
    pub demand: crate::protocol::Demand,
}

impl<S: Session> Claimant<'_, S> {
    pub fn proto(&self) -> &Protocol {
        &self.neg.proto
    }

    /// Claims a slot (`prefer` first if it is free): the slot and its mark as read.
    pub async fn claim(&mut self, prefer: Option<u32>) -> Result<Taken<S::Marks>, ClaimFailed> {
        claim(self.neg, self.session, &self.marks, prefer, self.history)
            .await
            .map_err(|e| match e {
                Failed::GaveWay => ClaimFailed::GaveWay,
                Failed::Store(Fault::Unavailable(e)) => ClaimFailed::Retry(e),
                Failed::Store(f) => ClaimFailed::End(end_for(f, "claiming")),
            })
    }

    /// The clock is too far behind `slot`'s mark: whether another slot may be tried instead
    /// (a probed slot of a large pool is a random pick; its last holder's clock ran ahead of
    /// ours). If so the slot is let go (nothing was issued and the mark is untouched) and
    /// never taken again by this process, up to [`FAR_AHEAD_SKIPS`] times.
    pub async fn leave_far_ahead(&mut self, slot: u32) -> bool {
        let h = &mut *self.history;
        if self.neg.cfg.pool_size <= PROBE_ABOVE || h.far_ahead >= FAR_AHEAD_SKIPS {
            return false;
        }
        h.far_ahead += 1;
        h.skip.insert(slot);
        self.session.let_go(&self.marks, slot).await;
        true
    }
}

async fn claim<S: Session>(
    neg: &Negotiation,
    session: &S,
    marks: &S::Marks,
    prefer: Option<u32>,
    history: &mut ClaimHistory,
) -> Result<Taken<S::Marks>, Failed> {
    // While the instance holds no slot, one of its leases claims at a time.
    let _first = neg.proto.part.claim_first().await;
    neg.proto.part.left.forget_past(neg.proto.now_tick());
    // Leftovers of this session's earlier attempts would block the queue or a slot forever.
    session.tidy(neg, marks).await?;
    let owner = neg.owner(session.owner_id());
    let p = &neg.proto;
    // Set once this claim said in the store that it waits for a slot (the pool exhausted).
    let mut wanted = false;
    if neg.cfg.pool_size > PROBE_ABOVE {
        let result = probe_slot(neg, session, marks, prefer, &owner, history, &mut wanted).await;
        p.metrics.set_pool_exhausted(p.part.index, false);
        if wanted {
            session.want(neg, false).await;
        }
        return result;
    }
    if !p.part.is_spare() {
        if let Some(c) = unqueued(neg, session, marks, prefer, history).await? {
            p.part.set_holding(true);
            return Ok(c);
        }
    }
    let place = session.enqueue(neg, &owner).await?;
    let result = async {
        let at = (&owner[..], &place);
        if let Some(c) = wait_for_turn(neg, session, marks, prefer, &place, history).await? {
            return Ok(c);
        }
        take_slot(neg, session, marks, prefer, at, history, &mut wanted).await
    }
    .await;
    p.metrics.set_pool_exhausted(p.part.index, false);
    if wanted {
        session.want(neg, false).await;
    }
    if result.is_ok() {
        // Before the next of our parts can reach the head: it is a spare from now on.
        p.part.set_holding(true);
    } else {
        // Taking the slot left the queue; anything else leaves it now. An entry left behind
        // by a failed delete is removed at the next claim, or goes with the session.
        session.leave(neg, &place).await;
    }
    result
}

/// With no contender queued, takes a free slot without queueing (a look and the take): `prefer`
/// if it is free, else the lowest mark if the clock is past it — and, taken first by another
/// contender (several arrive together), the next of that order, up to [`RACES`] slots in all
/// ([`Session::take_first`]: one round trip in etcd).
/// `None`: queue as usual (someone is queued, no such slot, or every one tried was taken).
async fn unqueued<S: Session>(
    neg: &Negotiation,
    session: &S,
    marks: &S::Marks,
    prefer: Option<u32>,
    history: &mut ClaimHistory,
) -> Result<Option<Taken<S::Marks>>, Failed> {
    let Some(free) = session.glance(neg, prefer).await? else {
        return Ok(None);
    };
    // An empty pool is where many start together (a fleet's first start): they queue, where
    // they claim together without trying the same slot.
    if free.len() >= neg.cfg.pool_size as usize {
        return Ok(None);
    }
    let p = &neg.proto;
    let fixed = fixed(neg, prefer);
    let order: Vec<u32> = by_mark(free, prefer, fixed, p.now_tick(), history, &p.part.left)
        .into_iter()
        .take(RACES)
        .collect();
    if order.is_empty() {
        return Ok(None);
    }
    let owner = neg.owner(session.owner_id());
    let (slot, took) = session.take_first(neg, marks, &order, &owner).await?;
    match tried(session, marks, slot, took, history).await {
        Tried::Claimed(c) => Ok(Some(c)),
        Tried::Taken => Ok(None),
        Tried::Skipped => Err(unreadable()),
    }
}

/// Slots lost to other contenders before a claim waits for its turn instead (in ZooKeeper each
/// a round trip and a logged failed transaction; in etcd tried in one transaction without the
/// queue).
const RACES: usize = 3;

/// Waits until no contender is ahead (`None`), or claims a slot by rank on the way (see the
/// module documentation).
async fn wait_for_turn<S: Session>(
    neg: &Negotiation,
    session: &S,
    marks: &S::Marks,
    prefer: Option<u32>,
    place: &S::Place,
    history: &mut ClaimHistory,
) -> Result<Option<Taken<S::Marks>>, Failed> {
    // Slots lost to another contender's take: a few are looked at again at once, then the
    // contender ahead is waited for.
    let mut lost = 0;
    // Each pass claims, or waits for the contender ahead to change; the bound only guards
    // against a store that keeps answering without the queue ever moving.
    for _ in 0..1_000_000 {
        let Some((n, ahead, change)) = session.ahead(neg, place).await? else {
            return Ok(None);
        };
        // A spare (another part of this instance took a slot meanwhile) waits its turn. Past
        // the pool's size a place takes nothing by rank, only a slot to claim back.
        let part = &neg.proto.part;
        let rank = Some(n).filter(|n| *n < neg.cfg.pool_size as usize);
        if !part.is_spare() && lost < RACES && (rank.is_some() || !part.left.is_empty()) {
            if let Some(slot) = ranked_slot(neg, session, marks, prefer, rank, history).await? {
                match try_slot(neg, session, marks, slot, Some(place), history).await? {
                    Tried::Claimed(c) => return Ok(Some(c)),
                    Tried::Taken => {
                        lost += 1;
                        continue;
                    }
                    Tried::Skipped => return Err(unreadable()),
                }
            }
        }
        neg.proto
            .pending(format!("waiting in the slot queue ({ahead})"));
        change.await;
    }
    Err(Fault::Unavailable("the slot queue never moved".into()).into())
}

/// A taken slot's mark was unreadable: the take left the queue with it, so the claim queues
/// again.
fn unreadable() -> Failed {
    Fault::Unavailable("a slot's mark is unreadable; queueing again".into()).into()
}

async fn take_slot<S: Session>(
    neg: &Negotiation,
    session: &S,
    marks: &S::Marks,
    prefer: Option<u32>,
    (owner, place): (&[u8], &S::Place),
    history: &mut ClaimHistory,
    wanted: &mut bool,
) -> Result<Taken<S::Marks>, Failed> {
    let (p, pool) = (&neg.proto, neg.cfg.pool_size);
    let mut reported = false;
    // The slot whose mark this claim said it waits for.
    let mut said = None;
    loop {
        let (held, change) = session.held(neg, marks, prefer).await?;
        let free: Vec<u32> = (0..pool)
            .filter(|n| !held.contains(n) && !history.skip.contains(n))
            .collect();
        if free.is_empty() {
            if let Exhausted::GiveWay = exhausted(p, pool, &mut reported, queued_as_spare(owner)) {
                return Err(Failed::GaveWay);
            }
            want(neg, session, wanted).await;
            wait_exhausted(p, change).await;
            continue;
        }
        p.metrics.set_pool_exhausted(p.part.index, false);
        if p.part.is_spare() {
            let behind = session.behind(neg, place).await?;
            if !spare_may_take(&p.part, free.len(), &behind) {
                return Err(Failed::GaveWay);
            }
        }
        let (slot, ahead) = head_pick(neg, session, &free, prefer).await?;
        if let Some(wait) = ahead {
            // Its mark is ahead of the clock and not ours: the wait comes before the take
            // rather than after it, the same time for this claim, while the slot's last
            // holder may still take it back at once (its session ended with the store's).
            if said != Some(slot) {
                said = Some(slot);
                tracing::info!(
                    slot,
                    wait_ms = wait.as_millis() as u64,
                    "waiting for a free slot's mark to pass before taking it: its last holder may take it back"
                );
            }
            p.pending(format!(
                "waiting {} ms for slot {slot}'s mark to pass before taking it",
                wait.as_millis()
            ));
            tokio::select! {
                () = change => {}
                () = tokio::time::sleep(wait) => {}
            }
            continue;
        }
        match try_slot(neg, session, marks, slot, Some(place), history).await? {
            Tried::Claimed(c) => return Ok(c),
            Tried::Taken => {}
            Tried::Skipped => return Err(unreadable()),
        }
    }
}

/// Says in the store, once a claim, that this contender waits for a slot of the exhausted
/// pool: its holders then bring their marks down to the short horizon, so the slot that frees
/// first (a holder's crash included) is taken soon after its session ends.
async fn want<S: Session>(neg: &Negotiation, session: &S, wanted: &mut bool) {
    if !std::mem::replace(wanted, true) {
        session.want(neg, true).await;
    }
}

/// The outcome of trying one slot.
enum Tried<S: Session> {
    Claimed(Taken<S::Marks>),
    /// Someone else holds it.
    Taken,
    /// Its mark is unreadable: never taken by this process (added to `history.skip`).
    Skipped,
}

/// Takes `slot` and reads its mark in one step (leaving the queue at `place` with it).
async fn try_slot<S: Session>(
    neg: &Negotiation,
    session: &S,
    marks: &S::Marks,
    slot: u32,
    place: Option<&S::Place>,
    history: &mut ClaimHistory,
) -> Result<Tried<S>, Fault> {
    // The slot's owner record says when it was taken (not when the claim began: it may have
    // queued), as `idcar pool` shows it in every store.
    let owner = neg.owner(session.owner_id());
    let took = session.take(neg, marks, slot, &owner, place).await?;
    Ok(tried(session, marks, slot, took, history).await)
}

/// What a take of `slot` came to; an unreadable mark is let go and never taken again.
async fn tried<S: Session>(
    session: &S,
    marks: &S::Marks,
    slot: u32,
    took: Took<<S::Marks as MarkStore>::Version>,
    history: &mut ClaimHistory,
) -> Tried<S> {
    match took {
        Took::Claimed(stored) => Tried::Claimed((slot, stored)),
        Took::Taken => Tried::Taken,
        Took::Unreadable(why) => {
            tracing::error!(slot, reason = %why, "slot's time mark is unreadable; never taking this slot");
            history.skip.insert(slot);
            session.let_go(marks, slot).await;
            Tried::Skipped
        }
    }
}

/// Claims a slot of a large pool by random probes (see the module documentation).
async fn probe_slot<S: Session>(
    neg: &Negotiation,
    session: &S,
    marks: &S::Marks,
    prefer: Option<u32>,
    owner: &[u8],
    history: &mut ClaimHistory,
    wanted: &mut bool,
) -> Result<Taken<S::Marks>, Failed> {
    use rand::Rng;
    let (p, pool) = (&neg.proto, neg.cfg.pool_size);
    if let Some(s) = prefer {
        // Our own entry from a lease lost to a foreign write frees the slot for us again.
        marks.give_back(s).await;
    }
    let mut next = prefer.filter(|s| *s < pool && !history.skip.contains(s));
    let mut misses = 0;
    let mut reported = false;
    // Each pass either claims, or sees a taken slot, or (after PROBES misses) lists the held
    // slots once; an exhausted pool waits for a change. The bound only guards against a
    // store that keeps answering "taken" for slots it does not list.
    for _ in 0..100_000 {
        let slot = match next.take() {
            Some(s) => s,
            None if misses < PROBES => random_slot(pool, &history.skip),
            None => {
                misses = 0;
                let (held, change) = session.held(neg, marks, None).await?;
                // At most |held ∪ skip| misses before a free slot, scanning from a random start.
                let start = rand::rng().random_range(0..pool);
                let free = (start..pool)
                    .chain(0..start)
                    .find(|n| !held.contains(n) && !history.skip.contains(n));
                match free {
                    Some(s) => s,
                    None => {
                        let spare = queued_as_spare(owner);
                        if let Exhausted::GiveWay = exhausted(p, pool, &mut reported, spare) {
                            return Err(Failed::GaveWay);
                        }
                        want(neg, session, wanted).await;
                        wait_exhausted(p, change).await;
                        continue;
                    }
                }
            }
        };
        match try_slot(neg, session, marks, slot, None, history).await? {
            Tried::Claimed(c) => return Ok(c),
            Tried::Taken => misses += 1,
            Tried::Skipped => {}
        }
    }
    Err(Fault::Unavailable(format!("no free slot found in {}", neg.paths.slots())).into())
}
