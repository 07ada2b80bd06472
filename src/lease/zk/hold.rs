//! Holding slots within one ZooKeeper session: claim a slot ([`super::claim`]), then run the
//! one lease protocol over it ([`crate::lease::protocol::hold`], with [`ZkMarks`] as the
//! store); after a loss claim again, until the session ends or the release is asked for.

use super::claim::{self, ClaimHistory};
use super::marks::ZkMarks;
use super::{session_gone, Negotiator};
use crate::lease::protocol::{self, Claim, Outcome};
use crate::lease::stop::{Interrupted, Stop};
use crate::lease::LeaseError;
use crate::retry::Backoff;
use std::time::{Duration, Instant};
use zookeeper_client as zk;

/// What crosses from one session to the next.
#[derive(Default)]
pub(crate) struct AcrossSessions {
    /// The slot to try first: the one held last.
    pub prefer: Option<u32>,
    /// Bumped at each lease published, so the generator tells one lease from the next.
    pub generation: u64,
    /// What claims remember between attempts.
    pub claims: ClaimHistory,
    /// The highest mark this process wrote per slot whose lease was lost to a foreign
    /// write: a new claim of that slot starts above it.
    pub written: std::collections::BTreeMap<u32, u64>,
}

/// How one session ended.
pub(crate) enum End {
    Released,
    /// The session is gone; `holding`: a lease was in force when it went.
    SessionGone {
        reason: String,
        holding: bool,
    },
    /// ZooKeeper refused our identity (an ACL, a credential): not ready, a new session after
    /// a pause — the credential may be rotated or the ACLs fixed without a restart.
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

/// Maps a ZooKeeper error (outside the mark's writes, which the protocol retries) to how the
/// session ends: an ACL refusal is `Refused` (not ready, tried again after a pause); a fatal
/// fault only for what no retry can mend (a request ZooKeeper cannot serve); anything else — a connection lost or timed out, as the
/// fault campaign found while the pool's parameters were being recorded — ends this session
/// and the negotiator opens a new one (not ready meanwhile; nothing was published).
pub(crate) fn classify(e: zk::Error, what: &str) -> End {
    match e {
        zk::Error::NoAuth | zk::Error::InvalidAcl => End::Refused(format!("{what}: {e}")),
        zk::Error::BadArguments(_)
        | zk::Error::Unimplemented
        | zk::Error::MarshallingError
        | zk::Error::NoChildrenForEphemerals
        | zk::Error::QuotaExceeded => End::Fatal(LeaseError::Task(format!("{what}: {e}"))),
        e if session_gone(&e) => End::gone(format!("{what}: {e}")),
        e => End::gone(format!("{what}: {e} (opening a new session)")),
    }
}

/// Claims and holds slots until the session ends, the release is asked for, or a fatal error.
pub(crate) async fn serve(
    neg: &Negotiator,
    client: &zk::Client,
    stop: &mut Stop,
    across: &mut AcrossSessions,
) -> End {
    let store = ZkMarks {
        client: client.clone(),
        paths: neg.paths.clone(),
        auth: neg.cfg.access.restricted(),
    };
    loop {
        let claim = match take(neg, &store, stop, across).await {
            Ok(c) => c,
            Err(end) => return end,
        };
        across.prefer = Some(claim.slot);
        let p = &neg.proto;
        match protocol::hold(p, &store, claim, stop, &mut across.generation).await {
            Outcome::Released | Outcome::ReleaseFailed(_) => return End::Released,
            Outcome::Stolen { slot, mark } => {
                let w = across.written.entry(slot).or_default();
                *w = (*w).max(mark);
            }
            Outcome::SessionGone { reason, holding } => {
                return End::SessionGone { reason, holding }
            }
            Outcome::ClockBehind(ahead) => {
                if let Some(end) = clock_behind(neg, &store, across, &claim, ahead).await {
                    return end;
                }
            }
        }
        // The lease was lost (or the slot given back): claim again in the same session.
    }
}

/// Claims a slot, retrying passing faults: the claim, its mark read.
async fn take(
    neg: &Negotiator,
    store: &ZkMarks,
    stop: &mut Stop,
    across: &mut AcrossSessions,
) -> Result<Claim<i32>, End> {
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
    loop {
        neg.proto.pending("claiming a slot");
        let started = Instant::now();
        let claiming = claim::claim(neg, store, across.prefer, &mut across.claims);
        let (slot, stored) = match stop.or(claiming).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) if session_gone(&e) => return Err(End::gone(format!("claiming: {e}"))),
            Ok(Err(e @ (zk::Error::NoAuth | zk::Error::InvalidAcl))) => {
                return Err(classify(e, "claiming"))
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "claim failed; retrying");
                if let Err(i) = stop.sleep(backoff.next_wait()).await {
                    return Err(End::interrupted(i, "while claiming"));
                }
                continue;
            }
            Err(i) => return Err(End::interrupted(i, "while claiming")),
        };
        let m = &neg.proto.metrics.lease;
        m.claims.inc();
        m.claim_seconds.observe(started.elapsed().as_secs_f64());
        tracing::info!(
            slot,
            mark = stored.mark,
            claim_ms = started.elapsed().as_millis() as u64,
            "slot claimed"
        );
        let mut claim = Claim::new(&neg.proto, slot, stored);
        if let Some(&w) = across.written.get(&slot) {
            claim.raise_floor(w);
        }
        return Ok(claim);
    }
}

/// The clock is too far behind a claimed slot's mark. A probed slot is a random pick, not the
/// lowest mark: leave it (its last holder's clock ran far ahead of ours) and probe another —
/// nothing was issued and the mark is untouched, so deleting our slot node is all there is to
/// undo (`None`). Otherwise, or after too many such slots, it is fatal.
async fn clock_behind(
    neg: &Negotiator,
    store: &ZkMarks,
    across: &mut AcrossSessions,
    claim: &Claim<i32>,
    ahead: Duration,
) -> Option<End> {
    let h = &mut across.claims;
    if neg.cfg.pool_size > claim::PROBE_ABOVE && h.far_ahead < claim::FAR_AHEAD_SKIPS {
        tracing::warn!(
            slot = claim.slot,
            ?ahead,
            "slot's mark is further ahead of our clock than --max-clock-wait; trying another slot"
        );
        h.far_ahead += 1;
        h.skip.insert(claim.slot);
        if !store.delete_if_ours(claim.slot).await {
            // Not given back (a passing fault): freed at the next claim, not left held
            // until the session ends.
            h.suspects.insert(claim.slot);
        }
        across.prefer = None;
        return None;
    }
    let e = LeaseError::ClockBehind {
        key: neg.paths.mark(claim.slot),
        ahead,
        max: neg.cfg.timing.max_clock_wait,
    };
    let _ = protocol::release(&neg.proto, store, claim, None, &[]).await;
    Some(End::Fatal(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lost or slow connection outside the mark's writes opens a new session, an ACL
    /// refusal waits and tries again; only what no retry can mend ends idcar.
    #[test]
    fn only_unmendable_errors_are_fatal() {
        for e in [
            zk::Error::ConnectionLoss,
            zk::Error::Timeout,
            zk::Error::SessionExpired,
            zk::Error::NoNode,
            zk::Error::Throttled,
        ] {
            let shown = e.to_string();
            assert!(
                matches!(classify(e, "x"), End::SessionGone { holding: false, .. }),
                "{shown}"
            );
        }
        for e in [zk::Error::NoAuth, zk::Error::InvalidAcl] {
            let shown = e.to_string();
            assert!(matches!(classify(e, "x"), End::Refused(_)), "{shown}");
        }
        assert!(matches!(
            classify(zk::Error::Unimplemented, "x"),
            End::Fatal(_)
        ));
    }
}
