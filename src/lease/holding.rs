//! Holding slots within one store session, for every store that negotiates its slot
//! (ZooKeeper, etcd): claim a slot the store's own way ([`Slots::claim`]), run the one lease
//! protocol over it ([`protocol::hold`]), and after a loss claim again — until the session
//! ends, the release is asked for, or a fatal error ([`End`]).

use super::protocol::{self, Claim, MarkStore, Outcome, Protocol, Stored};
use super::stop::{Interrupted, Stop};
use super::LeaseError;
use crate::retry::Backoff;
use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

/// How one session ended.
pub(crate) enum End {
    Released,
    /// The session is gone; `holding`: a lease was in force when it went.
    SessionGone {
        reason: String,
        holding: bool,
    },
    /// The store refused our identity (an ACL, a credential, a permission): not ready, a new
    /// session after a pause — the credential may be rotated or the permissions fixed
    /// without a restart.
    Refused(String),
    Fatal(LeaseError),
}

impl End {
    pub(crate) fn gone(reason: impl Into<String>) -> End {
        End::SessionGone {
            reason: reason.into(),
            holding: false,
        }
    }

    /// How an interrupted wait ends the session (nothing held).
    pub(crate) fn interrupted(i: Interrupted, during: &str) -> End {
        match i {
            Interrupted::Release(_) => End::Released,
            Interrupted::SessionEnded => End::gone(format!("session ended {during}")),
        }
    }
}

/// Why a claim failed.
pub(crate) enum ClaimFailed {
    /// A passing fault (a connection lost, a leader election): tried again after a backoff.
    Retry(String),
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
    /// The highest mark this process wrote per slot whose lease was lost to a foreign
    /// write: a new claim of that slot starts above it.
    pub written: BTreeMap<u32, u64>,
}

/// A slot just claimed and its mark as read.
pub(crate) type Taken<S> = (u32, Stored<<S as MarkStore>::Version>);

/// How a store hands out slots within one session.
pub(crate) trait Slots: Send {
    type Store: MarkStore;

    fn proto(&self) -> &Protocol;

    fn store(&self) -> &Self::Store;

    /// Claims a slot (`prefer` first if it is free): the slot and its mark as read.
    fn claim(
        &mut self,
        prefer: Option<u32>,
    ) -> impl Future<Output = Result<Taken<Self::Store>, ClaimFailed>> + Send;

    /// The clock is too far behind `slot`'s mark: whether another slot may be tried instead
    /// (a probed slot of a large pool is a random pick; its last holder's clock ran ahead of
    /// ours). If so the slot is let go and never taken again by this process.
    fn leave_far_ahead(&mut self, slot: u32) -> impl Future<Output = bool> + Send;
}

/// Claims and holds slots until the session ends, the release is asked for, or a fatal error.
pub(crate) async fn serve<S: Slots>(slots: &mut S, stop: &mut Stop, across: &mut Across) -> End {
    loop {
        let claim = match take(slots, stop, across).await {
            Ok(c) => c,
            Err(end) => return end,
        };
        across.prefer = Some(claim.slot);
        let outcome = {
            let (p, store) = (slots.proto(), slots.store());
            protocol::hold(p, store, claim, stop, &mut across.generation).await
        };
        match outcome {
            Outcome::Released | Outcome::ReleaseFailed(_) => return End::Released,
            Outcome::Stolen { slot, mark } => {
                let w = across.written.entry(slot).or_default();
                *w = (*w).max(mark);
            }
            Outcome::SessionGone { reason, holding } => {
                return End::SessionGone { reason, holding }
            }
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
                let p = slots.proto();
                let e = LeaseError::ClockBehind {
                    key: slots.store().key(claim.slot),
                    ahead,
                    max: p.timing.max_clock_wait,
                };
                let _ = protocol::release(p, slots.store(), &claim, None, &[]).await;
                return End::Fatal(e);
            }
        }
        // The lease was lost (or the slot given back): claim again in the same session.
    }
}

/// Claims a slot, retrying passing faults: the claim, its mark read.
async fn take<S: Slots>(
    slots: &mut S,
    stop: &mut Stop,
    across: &Across,
) -> Result<Claim<<S::Store as MarkStore>::Version>, End> {
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
    loop {
        slots.proto().pending("claiming a slot");
        let started = Instant::now();
        let (slot, stored) = match stop.or(slots.claim(across.prefer)).await {
            Ok(Ok(c)) => c,
            Ok(Err(ClaimFailed::Retry(e))) => {
                tracing::warn!(error = %e, "claim failed; retrying");
                slots.proto().pending(format!("claiming a slot: {e}"));
                if let Err(i) = stop.sleep(backoff.next_wait()).await {
                    return Err(End::interrupted(i, "while claiming"));
                }
                continue;
            }
            Ok(Err(ClaimFailed::End(end))) => return Err(end),
            Err(i) => return Err(End::interrupted(i, "while claiming")),
        };
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
        let mut claim = Claim::new(p, slot, stored);
        if let Some(&w) = across.written.get(&slot) {
            claim.raise_floor(w);
        }
        return Ok(claim);
    }
}

/// Says that every slot of a pool of `pool` is held: the metric and the lease state always,
/// the log once a claim (`reported`).
pub(crate) fn exhausted(p: &Protocol, pool: u32, reported: &mut bool) {
    p.metrics.pool_exhausted.set(1);
    if !std::mem::replace(reported, true) {
        tracing::warn!(pool, "pool exhausted; waiting for a slot to free");
    }
    p.pending(format!(
        "pool exhausted: all {pool} slots are held; waiting for one to free"
    ));
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
