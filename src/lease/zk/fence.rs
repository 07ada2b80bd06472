//! The fence: why IDs stay unique across holders of one slot, whatever the clocks say.
//!
//! **Invariant.** Every ID a holder issues carries a tick `<=` the slot's mark as last written
//! by that holder, and a new holder issues only ticks `>` the mark it read when it claimed.
//!
//! How this file keeps it:
//!
//! 1. A claim reads `marks/N` and its version ([`read_mark`]: [`Held::floor`],
//!    [`Held::mark_version`]; a missing mark is created at 0, a corrupt one is never guessed).
//!    [`clock_wait`] makes the new holder wait until its clock is past that floor (bounded by
//!    `--max-clock-wait`: a far-behind clock is an error, not a wait).
//! 2. Every write of `marks/N` is [`write_mark`]: a compare-and-set on the version last seen,
//!    in a `multi` that also checks `slots/N` at the version created. The writers of one
//!    slot's mark therefore form a single order: a new holder's first write succeeds only if
//!    no older holder wrote in between, and every later write of the older holder fails
//!    (`BadVersion`) — it stops at once. Nothing is published before the first write succeeds.
//! 3. A renewal never lowers the mark ([`next_mark`]: `max(mark, now + horizon)`), since the
//!    local clock may have stepped back.
//! 4. A write whose reply was lost may have been applied: [`own_write`] recognises it only when
//!    the mark holds a value we tried *with this claim's token* (written beside the ticks, a
//!    random number per claim), one version on, and the slot node is still this session's; a
//!    foreign write (another holder, an operator) never carries our token. Carrying on after
//!    it never lowers the mark ([`recovered`]).
//! 5. On release, [`write_down`] writes the mark down to the highest tick issued (never below
//!    the floor) and deletes `slots/N` in the same `multi`, so a successor waits almost
//!    nothing.
//!
//! The generator refuses ticks above the published mark and at or below the floor; the lease
//! publishes a window only after step 2 succeeded.

use super::tree::{acls, mark_data, parse_mark, parse_mark_and_token};
use super::Negotiator;
use crate::lease::planted::PlantedBug;
use crate::lease::Issued;
use std::time::Duration;
use zookeeper_client as zk;

/// A slot held in the current session, with the versions to compare-and-set against.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Held {
    pub slot: u32,
    /// The version of `slots/N` as created by this session.
    pub slot_version: i32,
    /// The mark read when the slot was claimed: this holder issues only ticks above it.
    pub floor: u64,
    /// The mark last written by this holder (the floor until the first write).
    pub mark: u64,
    /// The version of `marks/N` after this holder's last write (or as read at the claim).
    pub mark_version: i32,
    /// Random per claim, written with every mark: how [`own_write`] knows our writes.
    pub token: u64,
}

impl Held {
    fn token(&self) -> String {
        format!("{:016x}", self.token)
    }
}

/// Why a mark could not be read.
pub(crate) enum Unreadable {
    Corrupt(String),
    Zk(zk::Error),
}

/// Reads `marks/N` and its version, creating it at 0 when missing (a slot never used; marks
/// must never be deleted while anyone holds the slot).
pub(crate) async fn read_mark(
    neg: &Negotiator,
    client: &zk::Client,
    slot: u32,
) -> Result<(u64, i32), Unreadable> {
    let path = neg.paths.mark(slot);
    let persistent = zk::CreateMode::Persistent.with_acls(acls(neg.cfg.auth.is_some()));
    for _ in 0..3 {
        match client.get_data(&path).await {
            Ok((data, stat)) => {
                let mark = parse_mark(&data).ok_or_else(|| {
                    Unreadable::Corrupt(format!(
                        "{path} holds {:?}, not a decimal time mark",
                        String::from_utf8_lossy(&data)
                    ))
                })?;
                return Ok((mark, stat.version));
            }
            Err(zk::Error::NoNode) => match client.create(&path, b"0", &persistent).await {
                Ok((stat, _)) => return Ok((0, stat.version)),
                Err(zk::Error::NodeExists) => continue,
                Err(e) => return Err(Unreadable::Zk(e)),
            },
            Err(e) => return Err(Unreadable::Zk(e)),
        }
    }
    Err(Unreadable::Zk(zk::Error::UnexpectedError(format!(
        "{path} keeps changing"
    ))))
}

/// How long the clock still needs to pass the floor; `Err` with that wait when it exceeds
/// `--max-clock-wait`. A mark written `horizon` ahead is passed up to two ticks after the
/// horizon (the rest of the tick it was written in, and the mark's own tick), so those two
/// ticks are allowed on top: `--max-clock-wait` equal to the horizon always waits out a crash.
pub(crate) fn clock_wait(neg: &Negotiator, held: &Held) -> Result<Duration, Duration> {
    if planted(neg) == PlantedBug::SkipMarkWait {
        return Ok(Duration::ZERO);
    }
    let wait = neg.wait_past(held.floor);
    if wait > neg.cfg.max_clock_wait + neg.scheme.rounding_slack() {
        Err(wait)
    } else {
        Ok(wait)
    }
}

/// The floor of a claim: the mark its slot's last holder wrote (this holder issues only ticks
/// above it), except under the planted bug [`PlantedBug::SkipMarkWait`] (campaign only),
/// which ignores the mark and starts just below the clock.
pub(crate) fn claimed_floor(neg: &Negotiator, mark: u64) -> u64 {
    match planted(neg) {
        PlantedBug::SkipMarkWait => mark.min(neg.now_tick().saturating_sub(1)),
        _ => mark,
    }
}

/// The next mark to write: never below the one written, `horizon` ticks past now.
pub(crate) fn next_mark(held: &Held, now_tick: u64, horizon: u64) -> u64 {
    held.mark.max(now_tick.saturating_add(horizon))
}

/// What [`write_mark`] stores for a window reaching `mark`: `mark` itself, except under the
/// planted bug [`PlantedBug::LowerMark`] (campaign only), which stores one horizon less.
pub(crate) fn stored_mark(neg: &Negotiator, mark: u64, horizon: u64) -> u64 {
    match planted(neg) {
        PlantedBug::LowerMark => mark.saturating_sub(horizon),
        _ => mark,
    }
}

/// The planted bug in force: always [`PlantedBug::None`] unless built with the cargo feature
/// `fault-injection` (the campaign's testing aid).
fn planted(neg: &Negotiator) -> PlantedBug {
    #[cfg(feature = "fault-injection")]
    return neg.cfg.planted;
    #[cfg(not(feature = "fault-injection"))]
    {
        let _ = neg;
        PlantedBug::None
    }
}

/// Carrying on after [`own_write`] found our earlier write of `value` at `version`: the state
/// to write from, and the mark to write now — never below `value` (that write may have been
/// for a later time than `want`, computed before, if the clock stepped back in between).
pub(crate) fn recovered(held: &Held, version: i32, value: u64, want: u64) -> (Held, u64) {
    let held = Held {
        mark: held.mark.max(value),
        mark_version: version,
        ..*held
    };
    (held, want.max(held.mark))
}

/// Writes `mark` with a compare-and-set on the mark's version, in a `multi` that also checks
/// the slot node still exists at the version we created it with. That check alone does not
/// prove the node is ours (any holder's node has version 0); the compare-and-set on the mark
/// is what fences holders. Returns the mark node's new version.
pub(crate) async fn write_mark(
    neg: &Negotiator,
    client: &zk::Client,
    held: &Held,
    mark: u64,
) -> Result<i32, zk::Error> {
    let mut w = client.new_multi_writer();
    w.add_check_version(&neg.paths.slot(held.slot), held.slot_version)?;
    w.add_set_data(
        &neg.paths.mark(held.slot),
        &mark_data(mark, &held.token()),
        Some(held.mark_version),
    )?;
    let results = w.commit().await.map_err(zk::Error::from)?;
    match results.into_iter().nth(1) {
        Some(zk::MultiWriteResult::SetData { stat }) => Ok(stat.version),
        other => Err(zk::Error::UnexpectedError(format!(
            "unexpected multi result {other:?}"
        ))),
    }
}

/// If the slot node is still this session's and `marks/N` holds one of `attempts` at the
/// version after ours, that write was ours: its version and value.
pub(crate) async fn own_write(
    neg: &Negotiator,
    client: &zk::Client,
    held: &Held,
    attempts: &[u64],
) -> Option<(i32, u64)> {
    let (_, slot) = client.get_data(&neg.paths.slot(held.slot)).await.ok()?;
    if slot.ephemeral_owner != client.session_id().0 || slot.version != held.slot_version {
        return None;
    }
    let (data, mark) = client.get_data(&neg.paths.mark(held.slot)).await.ok()?;
    let (value, token) = parse_mark_and_token(&data)?;
    let ours = token == Some(held.token().as_str());
    (ours && mark.version == held.mark_version + 1 && attempts.contains(&value))
        .then_some((mark.version, value))
}

/// Writes the mark down to the highest tick issued (never below the floor) and deletes the
/// slot node, in one `multi`; only while the slot node is still this session's. Returns the
/// mark written.
pub(crate) async fn write_down(
    neg: &Negotiator,
    client: &zk::Client,
    held: &Held,
    highest: Option<Issued>,
) -> Result<u64, zk::Error> {
    let down = crate::lease::mark_down(held.slot, held.floor, highest);
    let (_, stat) = client.get_data(&neg.paths.slot(held.slot)).await?;
    if stat.ephemeral_owner != client.session_id().0 {
        return Err(zk::Error::UnexpectedError(
            "the slot node is no longer ours".into(),
        ));
    }
    let mut w = client.new_multi_writer();
    w.add_check_version(&neg.paths.slot(held.slot), held.slot_version)?;
    w.add_set_data(
        &neg.paths.mark(held.slot),
        &mark_data(down, &held.token()),
        Some(held.mark_version),
    )?;
    w.add_delete(&neg.paths.slot(held.slot), Some(held.slot_version))?;
    w.commit().await.map_err(zk::Error::from)?;
    Ok(down)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovery_never_lowers_the_mark() {
        let held = Held {
            slot: 1,
            slot_version: 0,
            floor: 100,
            mark: 1_000,
            mark_version: 3,
            token: 7,
        };
        // The lost write was for 9,000 (before the clock stepped back); now we want 4,000.
        let (after, want) = recovered(&held, 4, 9_000, 4_000);
        assert_eq!((after.mark, after.mark_version, want), (9_000, 4, 9_000));
        let (_, want) = recovered(&held, 4, 2_000, 4_000);
        assert_eq!(want, 4_000);
    }

    #[test]
    fn a_renewal_never_lowers_the_mark() {
        let held = Held {
            slot: 1,
            slot_version: 0,
            floor: 100,
            mark: 5_000,
            mark_version: 3,
            token: 7,
        };
        assert_eq!(next_mark(&held, 1_000, 3_000), 5_000, "clock stepped back");
        assert_eq!(next_mark(&held, 4_000, 3_000), 7_000);
        assert_eq!(next_mark(&held, u64::MAX, 3_000), u64::MAX);
    }
}
