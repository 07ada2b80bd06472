//! Taking one's own slot back after the store's session ended, without waiting out its mark.
//!
//! A hold that ends with its session (an outage past the session timeout, an etcd lease that
//! expired) leaves its slot's mark where its last write put it — with an idle pool, up to
//! `--idle-horizon` ahead of the clock. A successor must wait past that mark: it cannot know
//! what the holder issued. The holder itself can. When its next claim takes the same slot and
//! reads the mark still at one of its own writes ([`Left::is_ours`]: the same claim's token and
//! one of the values it wrote), then
//!
//! - nobody wrote the mark since that write: every write of a mark carries its claim's token
//!   (random per claim, never reused), so a foreign write would have replaced it, and the
//!   witness — raised with every write and read with the mark — would stand above it;
//! - so nobody issued under the slot since: the protocol publishes a window only after a write
//!   of its own, and a holder issues only within its window;
//! - and what this process issued under the slot is bounded by what its generator says it
//!   issued, once the old claim's windows are revoked and removed ([`crate::Issuance`]).
//!
//! So the new claim's floor is the highest tick this process issued for the slot (at least the
//! old claim's floor, which was above every earlier holder's ticks), not the mark: the clock is
//! past it already, and IDs flow again as soon as the first write of the new claim succeeds.
//! If the service cannot say (nobody follows the lease, or it does not answer in time), the
//! floor is the old claim's window — still never below a tick it issued.

use super::{Claim, Protocol, Stored};
use crate::issuance::{Issuance, Left};
use std::time::Duration;

/// How long a claim back waits for the service to say what it issued under the old claim.
const SETTLE_AT_MOST: Duration = Duration::from_secs(1);

/// A claim of `left`'s slot whose mark, read as `stored`, is still its own: floored at what
/// this process issued for the slot (see the module's comment), the mark as stored.
/// `issuance`: that of the lease whose hold left it (this one's, or another of the instance's).
pub async fn claim_back<V: Copy>(
    p: &Protocol,
    left: &Left,
    issuance: &Issuance,
    stored: Stored<V>,
) -> Claim<V> {
    let max = p.wait_past(left.window).min(SETTLE_AT_MOST);
    let settled = issuance.settle(left.slot, left.generation, max).await;
    let floor = match settled {
        Some(highest) => highest.map_or(left.floor, |h| h.max(left.floor)),
        None => left.window,
    };
    tracing::info!(
        slot = left.slot,
        floor,
        mark = stored.mark,
        "slot claimed back: its time mark is still this instance's own last write; \
         issuing above what it issued instead of waiting out the mark"
    );
    Claim {
        slot: left.slot,
        floor,
        mark: stored.mark.max(floor),
        window: floor,
        version: stored.version,
        token: rand::random(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_mark_of_the_same_claim_and_value_is_ours() {
        let left = Left {
            slot: 4,
            token: 0xabc,
            marks: vec![900, 950],
            floor: 100,
            window: 500,
            generation: 3,
        };
        let stored = |mark, by| Stored {
            mark,
            version: 1,
            by,
        };
        assert!(left.is_ours(4, &stored(900, Some(0xabc))));
        assert!(
            left.is_ours(4, &stored(950, Some(0xabc))),
            "a write with no reply"
        );
        assert!(!left.is_ours(5, &stored(900, Some(0xabc))), "another slot");
        assert!(
            !left.is_ours(4, &stored(900, Some(0xabd))),
            "another claim's write"
        );
        assert!(
            !left.is_ours(4, &stored(900, None)),
            "raised by the witness, or unknown"
        );
        assert!(
            !left.is_ours(4, &stored(800, Some(0xabc))),
            "an older value put back"
        );
    }
}
