//! Holding slots within one ZooKeeper session: [`ZkSlots`] is how ZooKeeper hands out slots
//! ([`super::claim`]) to the shared hold loop ([`crate::lease::holding::serve`], which runs
//! the one lease protocol with [`ZkMarks`] as the store and claims again after a loss).

use super::claim::{self, ClaimHistory};
use super::marks::ZkMarks;
use super::{session_gone, Negotiator};
use crate::lease::holding::{self, Across, ClaimError, ClaimFailed, Slots};
use crate::lease::protocol::{Protocol, Stored};
use crate::lease::stop::Stop;
use crate::lease::LeaseError;
use zookeeper_client as zk;

pub(crate) use crate::lease::holding::End;

/// What crosses from one session to the next.
#[derive(Default)]
pub(crate) struct AcrossSessions {
    /// The hold loop's own: the slot held last, the generation, marks written.
    pub held: Across,
    /// What claims remember between attempts.
    pub claims: ClaimHistory,
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

/// How ZooKeeper hands out slots within one session.
struct ZkSlots<'a> {
    neg: &'a Negotiator,
    store: ZkMarks,
    claims: &'a mut ClaimHistory,
}

impl Slots for ZkSlots<'_> {
    type Store = ZkMarks;

    fn proto(&self) -> &Protocol {
        &self.neg.proto
    }

    fn store(&self) -> &ZkMarks {
        &self.store
    }

    async fn claim(&mut self, prefer: Option<u32>) -> Result<(u32, Stored<i32>), ClaimFailed> {
        claim::claim(self.neg, &self.store, prefer, self.claims)
            .await
            .map_err(|e| match e {
                ClaimError::GaveWay => ClaimFailed::GaveWay,
                ClaimError::Store(e) if session_gone(&e) => {
                    ClaimFailed::End(End::gone(format!("claiming: {e}")))
                }
                ClaimError::Store(e @ (zk::Error::NoAuth | zk::Error::InvalidAcl)) => {
                    ClaimFailed::End(classify(e, "claiming"))
                }
                ClaimError::Store(e) => ClaimFailed::Retry(e.to_string()),
            })
    }

    fn not_before(&self) -> u64 {
        self.claims.not_before
    }

    /// A probed slot of a large pool is left (deleting our node is all there is to undo:
    /// nothing was issued and the mark is untouched), up to [`claim::FAR_AHEAD_SKIPS`] times.
    async fn leave_far_ahead(&mut self, slot: u32) -> bool {
        let h = &mut *self.claims;
        if self.neg.cfg.pool_size <= claim::PROBE_ABOVE || h.far_ahead >= claim::FAR_AHEAD_SKIPS {
            return false;
        }
        h.far_ahead += 1;
        h.skip.insert(slot);
        if !self.store.delete_if_ours(slot).await {
            // Not given back (a passing fault): freed at the next claim, not left held
            // until the session ends.
            h.suspects.insert(slot);
        }
        true
    }
}

/// Claims and holds slots until the session ends, the release is asked for, or a fatal error.
pub(crate) async fn serve(
    neg: &Negotiator,
    client: &zk::Client,
    stop: &mut Stop,
    across: &mut AcrossSessions,
) -> End {
    let mut slots = ZkSlots {
        neg,
        store: ZkMarks {
            client: client.clone(),
            paths: neg.paths.clone(),
            auth: neg.cfg.access.restricted(),
            pool: across
                .claims
                .identity
                .clone()
                .map(|identity| super::marks::PoolFence {
                    params: neg.paths.params(),
                    params_version: across.claims.params_version,
                    identity,
                }),
            witness: neg.proto.planted() != crate::lease::planted::PlantedBug::NoWriteBack,
        },
        claims: &mut across.claims,
    };
    holding::serve(&mut slots, stop, &mut across.held).await
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
