//! Waiting for the clock to pass a claim's floor (step 2 of the protocol): bounded by
//! `--max-clock-wait`, re-checked when the clock moves back, and — for a mark further ahead
//! than that — waited for anyway, never a crash loop.

use super::{interrupted, Claim, MarkStore, Outcome, Protocol};
use crate::planted::PlantedBug;
use crate::stop::{Interrupted, Stop};
use std::time::{Duration, Instant};

/// How long the clock still needs to pass `floor`; `Err` with that wait when it exceeds
/// `--max-clock-wait`. A mark written `horizon` ahead is passed up to two ticks after the
/// horizon (the rest of the tick it was written in, and the mark's own tick), so those two
/// ticks are allowed on top: `--max-clock-wait` equal to the horizon always waits out a crash.
pub fn clock_wait(p: &Protocol, floor: u64) -> Result<Duration, Duration> {
    if p.planted() == PlantedBug::SkipMarkWait {
        return Ok(Duration::ZERO);
    }
    let wait = p.wait_past(floor);
    if wait > p.timing.max_clock_wait + p.scheme.rounding_slack() {
        Err(wait)
    } else {
        Ok(wait)
    }
}

/// The clock is further behind a claim's `floor` than `--max-clock-wait` (the mark of `key`:
/// another instance's clock or `--lease-horizon` runs ahead, or this host's clock was set
/// back): waits for it anyway — never a crash loop, which a supervisor's back-off would
/// stretch far past the mark — not ready meanwhile, saying why and how long is left (updated
/// every second), with a warning in the log. `Err` if interrupted first; the caller holds the
/// claim, and holds it again once the mark has passed.
pub async fn wait_far_ahead(
    p: &Protocol,
    key: &str,
    floor: u64,
    stop: &mut Stop,
) -> Result<(), Interrupted> {
    let max = p.timing.max_clock_wait;
    let left = p.wait_past(floor);
    tracing::warn!(
        key,
        ahead = ?left,
        ?max,
        "the stored time mark is further ahead of this host's clock than --max-clock-wait; \
         waiting for it to pass (another instance's clock or --lease-horizon may run ahead, or \
         this host's clock was set back)"
    );
    // Bounded: each pass sleeps at most a second of what the clock says is left, and the
    // whole wait at most what was left at the start plus as much again (a clock that keeps
    // moving back ends it; the caller then looks again).
    let until = Instant::now() + left * 2 + Duration::from_secs(1);
    loop {
        let left = p.wait_past(floor);
        if left.is_zero() || Instant::now() > until {
            return Ok(());
        }
        p.pending(format!(
            "the stored time mark for {key} is {:.1}s ahead of this host's clock, more than the \
             {max:?} of --max-clock-wait: waiting for it to pass (another instance's clock or \
             --lease-horizon runs ahead, or this host's clock was set back)",
            left.as_secs_f64()
        ));
        stop.sleep(left.min(Duration::from_secs(1))).await?;
    }
}

/// Waits until the clock is past the claim's floor, re-checking the bound in case the clock
/// moves back meanwhile. `Some` when the hold ends instead.
pub(super) async fn wait_past_floor<S: MarkStore>(
    p: &Protocol,
    store: &S,
    claim: &Claim<S::Version>,
    stop: &mut Stop,
) -> Option<Outcome> {
    let started = Instant::now();
    // Bounded: each pass sleeps what the clock says is left; the bound ends a clock that
    // keeps moving back.
    loop {
        let wait = match clock_wait(p, claim.floor) {
            Ok(w) => w,
            Err(ahead) => return Some(Outcome::ClockBehind(ahead)),
        };
        if wait.is_zero() {
            break;
        }
        if started.elapsed() + wait > p.timing.max_clock_wait + p.scheme.rounding_slack() {
            return Some(Outcome::ClockBehind(wait));
        }
        tracing::info!(
            slot = claim.slot,
            wait_ms = wait.as_millis() as u64,
            floor = claim.floor,
            "waiting for the clock to pass the slot's mark"
        );
        p.pending(format!(
            "waiting {wait:?} for the clock to pass slot {}'s mark",
            claim.slot
        ));
        if let Err(i) = stop.sleep(wait).await {
            return Some(interrupted(p, store, claim, i, false, &[]).await);
        }
    }
    p.metrics
        .mark_wait_seconds
        .observe(started.elapsed().as_secs_f64());
    None
}
