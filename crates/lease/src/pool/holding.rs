//! Holding slots within one store session, for every store that negotiates its slot
//! (ZooKeeper, etcd): claim a slot ([`Claimant::claim`]), run the one lease protocol over it
//! ([`protocol::hold`]), and after a loss claim again — until the session ends, the release is
//! asked for, or a fatal error ([`End`]).

use super::claim::Claimant;
use super::end::{ClaimFailed, End};
use super::Session;
use crate::protocol::{self, Claim, MarkStore, Outcome};
use crate::repeated::Repeated;
use crate::retry::Backoff;
use crate::stop::{Interrupted, Stop};
use std::time::{Duration, Instant};

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
    pub(crate) fn new(prefer: Option<u32>, part: &crate::part::Part) -> Across {
        Across {
            prefer,
            generation: part.first_generation(),
        }
    }
}

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
        let m = &p.metrics;
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

/// How long a spare part waits before it tries again for a slot of an exhausted pool (ms).
const SPARE_PAUSE_MS: std::ops::Range<u64> = 1_000..3_000;
