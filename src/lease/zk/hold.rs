//! Holding a slot within one ZooKeeper session: claim, wait for the clock to pass the slot's
//! mark, write the first mark and publish, renew until the lease is lost or released. The
//! mark writes themselves, and why they keep IDs unique, are in [`super::fence`].

use super::claim;
use super::fence::{self, Held};
use super::stop::{Interrupted, Stop};
use super::{session_gone, Negotiator};
use crate::lease::{Issued, LeaseError, LeaseState, Window};
use std::time::{Duration, Instant};
use zookeeper_client as zk;

/// What carries over from one session to the next.
#[derive(Default)]
pub(crate) struct Carry {
    /// The slot to try first: the one held last.
    pub prefer: Option<u32>,
    /// Bumped at each lease published, so the generator tells one lease from the next.
    pub generation: u64,
    pub memo: claim::Memo,
}

/// How one session ended.
pub(crate) enum End {
    Released,
    /// The session is gone; `bool`: a lease was held when it went.
    SessionGone(String, bool),
    Fatal(LeaseError),
}

/// Maps a ZooKeeper error to how the session ends: a dead session, or a fatal fault.
pub(crate) fn classify(e: zk::Error, what: &str) -> End {
    if session_gone(&e) {
        End::SessionGone(format!("{what}: {e}"), false)
    } else if matches!(e, zk::Error::NoAuth | zk::Error::InvalidAcl) {
        End::Fatal(LeaseError::Task(format!(
            "{what}: {e} (check --zk-auth and the ACLs under --zk-root)"
        )))
    } else {
        End::Fatal(LeaseError::Task(format!("{what}: {e}")))
    }
}

/// Claims and holds slots until the session ends, the release is asked for, or a fatal error.
pub(crate) async fn serve(
    neg: &Negotiator,
    client: &zk::Client,
    stop: &mut Stop,
    carry: &mut Carry,
) -> End {
    loop {
        let held = match take(neg, client, stop, carry).await {
            Ok(held) => held,
            Err(end) => return end,
        };
        if let Err(end) = renew(neg, client, stop, carry, held).await {
            return end;
        }
        // The lease was lost: claim again in the same session.
    }
}

/// What an interrupted wait means, releasing `held` first when the owner asked for it.
async fn interrupted(
    neg: &Negotiator,
    client: &zk::Client,
    held: Option<&Held>,
    i: Interrupted,
    during: &str,
    published: bool,
) -> End {
    match i {
        Interrupted::Release(highest) => {
            if let Some(held) = held {
                release(neg, client, held, highest).await;
            }
            End::Released
        }
        Interrupted::SessionEnded => End::SessionGone(format!("session ended {during}"), published),
    }
}

/// Claims a slot (retrying passing faults) and waits for the clock to pass its mark.
async fn take(
    neg: &Negotiator,
    client: &zk::Client,
    stop: &mut Stop,
    carry: &mut Carry,
) -> Result<Held, End> {
    let mut retry = Duration::from_millis(100);
    loop {
        neg.pending("claiming a slot");
        let started = Instant::now();
        let claimed = match stop
            .or(claim::claim(neg, client, carry.prefer, &mut carry.memo))
            .await
        {
            Ok(r) => r,
            Err(i) => return Err(interrupted(neg, client, None, i, "while claiming", false).await),
        };
        let c = match claimed {
            Ok(c) => c,
            Err(e) if session_gone(&e) => {
                return Err(End::SessionGone(format!("claiming: {e}"), false))
            }
            Err(e @ (zk::Error::NoAuth | zk::Error::InvalidAcl)) => {
                return Err(classify(e, "claiming"))
            }
            Err(e) => {
                tracing::warn!(error = %e, "claim failed; retrying");
                if let Err(i) = stop.sleep(retry).await {
                    return Err(interrupted(neg, client, None, i, "while claiming", false).await);
                }
                retry = (retry * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        retry = Duration::from_millis(100);
        neg.metrics.lease.claims.inc();
        neg.metrics
            .lease
            .claim_seconds
            .observe(started.elapsed().as_secs_f64());
        tracing::info!(
            slot = c.slot,
            mark = c.mark,
            claim_ms = started.elapsed().as_millis() as u64,
            "slot claimed"
        );
        let held = Held {
            slot: c.slot,
            slot_version: c.slot_version,
            floor: fence::claimed_floor(neg, c.mark),
            mark: fence::claimed_floor(neg, c.mark),
            mark_version: c.mark_version,
            token: rand::random(),
        };
        carry.prefer = Some(c.slot);
        match wait_for_clock(neg, client, stop, carry, &held).await? {
            true => return Ok(held),
            false => continue,
        }
    }
}

/// Waits until the clock is past the slot's mark: `Ok(true)` when it is, `Ok(false)` when the
/// slot was given back for another (a probed slot whose mark is too far ahead).
async fn wait_for_clock(
    neg: &Negotiator,
    client: &zk::Client,
    stop: &mut Stop,
    carry: &mut Carry,
    held: &Held,
) -> Result<bool, End> {
    let waited = Instant::now();
    let wait = match fence::clock_wait(neg, held) {
        Ok(wait) => wait,
        Err(ahead)
            if neg.cfg.pool_size > claim::PROBE_ABOVE
                && carry.memo.far_ahead < claim::FAR_AHEAD_SKIPS =>
        {
            // A probed slot is a random pick, not the lowest mark: leave this one (its last
            // holder's clock ran far ahead of ours) and probe another. Nothing was issued
            // and the mark is untouched, so deleting our slot node is all there is to undo.
            tracing::warn!(
                slot = held.slot,
                ?ahead,
                "slot's mark is further ahead of our clock than --max-clock-wait; trying another slot"
            );
            carry.memo.far_ahead += 1;
            carry.memo.skip.insert(held.slot);
            if !claim::delete_if_ours(neg, client, held.slot).await {
                // Not given back (a passing fault): freed at the next claim, not left held
                // until the session ends.
                carry.memo.suspects.insert(held.slot);
            }
            carry.prefer = None;
            return Ok(false);
        }
        Err(ahead) => {
            let e = LeaseError::ClockBehind {
                key: neg.paths.mark(held.slot),
                ahead,
                max: neg.cfg.max_clock_wait,
            };
            release(neg, client, held, None).await;
            return Err(End::Fatal(e));
        }
    };
    if !wait.is_zero() {
        neg.pending(format!(
            "waiting {wait:?} for the clock to pass slot {}'s mark",
            held.slot
        ));
        if let Err(i) = stop.sleep(wait).await {
            let during = "while waiting for the mark";
            return Err(interrupted(neg, client, Some(held), i, during, false).await);
        }
    }
    neg.metrics
        .lease
        .mark_wait_seconds
        .observe(waited.elapsed().as_secs_f64());
    Ok(true)
}

/// Writes the first mark, publishes the lease, and renews it: `Ok(())` when the lease was
/// lost (claim again), `Err` when the session is over.
async fn renew(
    neg: &Negotiator,
    client: &zk::Client,
    stop: &mut Stop,
    carry: &mut Carry,
    mut held: Held,
) -> Result<(), End> {
    let horizon = neg.scheme.ticks_in(neg.cfg.horizon);
    let mut next = Duration::ZERO;
    let mut published = false;
    // Set once the mark ran out unrenewed (counted as an `unreachable` loss, once).
    let mut lapsed = false;
    // Marks written with no reply (the write may have been applied): our own if seen.
    let mut unconfirmed: Vec<u64> = Vec::new();
    loop {
        if let Err(i) = stop.sleep(next).await {
            let during = "while holding the lease";
            let holding = published && !lapsed;
            return Err(interrupted(neg, client, Some(&held), i, during, holding).await);
        }
        let mut want = fence::next_mark(&held, neg.now_tick(), horizon);
        let t = Instant::now();
        let mut written = write_or_lapse(neg, client, &held, want, published, &mut lapsed).await;
        if matches!(written, Err(zk::Error::BadVersion | zk::Error::NoNode))
            && !unconfirmed.is_empty()
        {
            // An earlier write whose reply was lost may have gone through: if it carries this
            // claim's token, carry on from there (never below it).
            if let Some((version, value)) = fence::own_write(neg, client, &held, &unconfirmed).await
            {
                tracing::info!(mark = value, "an earlier mark write had gone through");
                (held, want) = fence::recovered(&held, version, value, want);
                written = fence::write_mark(neg, client, &held, want).await;
            }
        }
        match written {
            Ok(version) => {
                neg.metrics
                    .lease
                    .renewal_seconds
                    .observe(t.elapsed().as_secs_f64());
                held.mark = want;
                held.mark_version = version;
                publish(neg, carry, &held, &mut published);
                lapsed = false;
                unconfirmed.clear();
                next = neg.cfg.renew_every;
            }
            Err(e) if session_gone(&e) => {
                let holding = published && !lapsed;
                return Err(End::SessionGone(format!("renewing: {e}"), holding));
            }
            Err(e @ (zk::Error::BadVersion | zk::Error::NoNode)) => {
                lost(neg, client, &held, e).await;
                return Ok(());
            }
            Err(e) => {
                // Unreachable or slow: the mark already written stays in force. The write
                // may still have been applied.
                unconfirmed.push(want);
                neg.metrics
                    .lease
                    .renewals
                    .with_label_values(&["error"])
                    .inc();
                tracing::warn!(
                    error = %e,
                    mark = held.mark,
                    attempted = want,
                    "could not renew the time mark"
                );
                if published && !lapsed && neg.now_tick() > held.mark {
                    lapse(neg, &held, &mut lapsed);
                }
                next = (neg.cfg.renew_every / 4).max(Duration::from_millis(50));
            }
        }
    }
}

/// Writes the mark; if the current mark runs out while the write is still pending (ZooKeeper
/// unreachable), says so at that moment rather than when the write finally fails.
async fn write_or_lapse(
    neg: &Negotiator,
    client: &zk::Client,
    held: &Held,
    want: u64,
    published: bool,
    lapsed: &mut bool,
) -> Result<i32, zk::Error> {
    let horizon = neg.scheme.ticks_in(neg.cfg.horizon);
    let write = fence::write_mark(neg, client, held, fence::stored_mark(neg, want, horizon));
    if !published || *lapsed {
        return write.await;
    }
    let runs_out = neg.wait_past(held.mark);
    or_lapse(write, runs_out, || lapse(neg, held, lapsed)).await
}

/// Awaits `write`; if `runs_out` passes first, calls `on_lapse` at that moment (once) and goes
/// on waiting for the write.
async fn or_lapse<F: std::future::Future>(
    write: F,
    runs_out: Duration,
    on_lapse: impl FnOnce(),
) -> F::Output {
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
fn lapse(neg: &Negotiator, held: &Held, lapsed: &mut bool) {
    *lapsed = true;
    neg.metrics
        .lease
        .losses
        .with_label_values(&["unreachable"])
        .inc();
    tracing::warn!(
        slot = held.slot,
        mark = held.mark,
        "lease lost: the time mark ran out while ZooKeeper could not be written"
    );
    neg.tx.send_replace(LeaseState::Lost {
        reason: format!(
            "slot {}'s time mark ran out: ZooKeeper cannot be written",
            held.slot
        ),
    });
}

/// Publishes the lease after a successful mark write (a new generation the first time).
fn publish(neg: &Negotiator, carry: &mut Carry, held: &Held, published: &mut bool) {
    neg.metrics.lease.renewals.with_label_values(&["ok"]).inc();
    if !*published {
        carry.generation += 1;
        *published = true;
        tracing::info!(
            slot = held.slot,
            floor = held.floor,
            mark = held.mark,
            "lease held"
        );
    }
    neg.tx.send_replace(LeaseState::Held(Window {
        slot: held.slot,
        floor: held.floor,
        mark: held.mark,
        generation: carry.generation,
    }));
}

/// Someone else wrote the mark or removed our slot node: stop issuing at once, count it, and
/// free our slot node (if still ours) for a clean claim.
async fn lost(neg: &Negotiator, client: &zk::Client, held: &Held, e: zk::Error) {
    neg.metrics
        .lease
        .renewals
        .with_label_values(&["error"])
        .inc();
    neg.metrics
        .lease
        .losses
        .with_label_values(&["stolen"])
        .inc();
    let why = format!("slot {} lost: {e}", held.slot);
    tracing::warn!(reason = %why, "lease lost; claiming again");
    neg.tx.send_replace(LeaseState::Lost { reason: why });
    claim::delete_if_ours(neg, client, held.slot).await;
}

/// Releases the slot: the mark written down to the highest tick issued, the slot node gone.
pub(crate) async fn release(
    neg: &Negotiator,
    client: &zk::Client,
    held: &Held,
    highest: Option<Issued>,
) {
    neg.tx.send_replace(LeaseState::Released);
    match fence::write_down(neg, client, held, highest).await {
        Ok(down) => tracing::info!(
            slot = held.slot,
            mark = down,
            "slot released; mark written down to the highest issued time"
        ),
        Err(e) => tracing::warn!(
            slot = held.slot,
            error = %e,
            "could not release the slot cleanly; it frees when the session ends"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::Instant;

    /// A write still pending when the mark runs out: the lapse is declared at that moment,
    /// not when the write finally fails; a write that answers in time declares nothing.
    #[tokio::test(start_paused = true)]
    async fn a_lapse_is_declared_when_the_mark_runs_out_not_when_the_write_ends() {
        let start = Instant::now();
        let mut lapsed_at = None;
        let slow = async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            7
        };
        let r = or_lapse(slow, Duration::from_secs(2), || {
            lapsed_at = Some(start.elapsed())
        })
        .await;
        assert_eq!(r, 7);
        assert_eq!(lapsed_at, Some(Duration::from_secs(2)));
        assert_eq!(start.elapsed(), Duration::from_secs(5));

        let mut lapsed = false;
        let quick = async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            8
        };
        assert_eq!(
            or_lapse(quick, Duration::from_secs(2), || lapsed = true).await,
            8
        );
        assert!(!lapsed);
    }
}
