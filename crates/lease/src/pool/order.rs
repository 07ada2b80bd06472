//! Which free slot a claim tries: one this instance can claim back first, then the preferred
//! one, then by mark (see [`super::claim`]'s module documentation).

use super::{Fault, Marked, Negotiation, Session};
use crate::issuance::LeftBehind;
use std::collections::BTreeSet;

/// What claims remember between attempts, and across sessions.
#[derive(Debug, Default)]
pub(crate) struct ClaimHistory {
    /// Slots whose mark is unreadable, or (probed pools) too far ahead of our clock: never
    /// taken by this process.
    pub skip: BTreeSet<u32>,
    /// Probed slots given back because their mark was beyond `--max-clock-wait`.
    pub far_ahead: u32,
    /// Every claim under the identity agreed starts above this (see
    /// [`crate::identity`]).
    pub not_before: u64,
}

/// Whether `prefer` is the slot the configuration prefers (`--prefer-ordinal`: the pod's own),
/// tried first whatever its mark; the slot held last is preferred only once the clock is past
/// its mark (written by another since, that one may still take it back at once).
pub(super) fn fixed(neg: &Negotiation, prefer: Option<u32>) -> bool {
    prefer.is_some() && prefer == neg.cfg.prefer
}

/// Of `marked` free slots, one this instance can claim back (`left`), else `prefer` if it may
/// be taken whatever the rank (see [`fixed`]).
fn first_choice(
    marked: &[Marked],
    prefer: Option<u32>,
    fixed: bool,
    now: u64,
    left: &LeftBehind,
) -> Option<u32> {
    let ours = marked
        .iter()
        .find(|m| left.mark_is_ours(m.slot, m.mark, m.by));
    ours.or_else(|| {
        marked
            .iter()
            .find(|m| Some(m.slot) == prefer && (fixed || m.mark < now))
    })
    .map(|m| m.slot)
}

/// The order in which free slots are tried (`free`: their marks): those this instance can
/// claim back first (`left`: a mark still the write of a hold of ours, lowest slot first),
/// then `prefer` if it is free (whatever its mark if `fixed`, else once the clock is past
/// it), then those whose mark the clock is past, lowest mark first (ties to the lower slot).
/// Slots this process never takes are left out.
pub(super) fn by_mark(
    free: impl IntoIterator<Item = Marked>,
    prefer: Option<u32>,
    fixed: bool,
    now: u64,
    history: &ClaimHistory,
    left: &LeftBehind,
) -> Vec<u32> {
    let mut ours = Vec::new();
    let mut preferred = None;
    let mut past: Vec<(u64, u32)> = Vec::new();
    for m in free {
        let n = m.slot;
        if history.skip.contains(&n) {
            continue;
        }
        if left.mark_is_ours(n, m.mark, m.by) {
            ours.push(n);
        } else if Some(n) == prefer && (fixed || m.mark < now) {
            preferred = Some(n);
        } else if m.mark < now {
            past.push((m.mark, n));
        }
    }
    ours.sort_unstable();
    past.sort_unstable();
    ours.into_iter()
        .chain(preferred)
        .chain(past.into_iter().map(|(_, n)| n))
        .collect()
}

/// A free slot to claim back, whatever the rank; else, with a `rank`, `prefer` if it is free,
/// or the free slot of that rank in [`by_mark`]'s order. `None` if there is none (the head
/// takes what is left, waiting past a mark if it must).
pub(super) async fn ranked_slot<S: Session>(
    neg: &Negotiation,
    session: &S,
    marks: &S::Marks,
    prefer: Option<u32>,
    rank: Option<usize>,
    history: &ClaimHistory,
) -> Result<Option<u32>, Fault> {
    let (held, _) = session.held(neg, marks, prefer).await?;
    let free: Vec<u32> = (0..neg.cfg.pool_size)
        .filter(|n| !held.contains(n) && !history.skip.contains(n))
        .collect();
    let p = &neg.proto;
    let left = &p.part.left;
    let fixed = fixed(neg, prefer);
    if left.is_empty() && fixed {
        // Nothing to claim back: no need to read the marks for the preferred slot.
        if let Some(p) = prefer.filter(|p| rank.is_some() && free.contains(p)) {
            return Ok(Some(p));
        }
    }
    if free.is_empty() || (rank.is_none_or(|r| r >= free.len()) && left.is_empty()) {
        return Ok(None);
    }
    let marked = session.marks_of(neg, &free).await?;
    let now = p.now_tick();
    if let Some(ours) = first_choice(&marked, None, false, now, left) {
        return Ok(Some(ours));
    }
    let Some(rank) = rank else {
        return Ok(None);
    };
    if let Some(preferred) = first_choice(&marked, prefer, fixed, now, left) {
        return Ok(Some(preferred));
    }
    let order = by_mark(marked, None, false, now, history, left);
    Ok(order.get(rank).copied())
}

/// The slot the head of the queue takes of the `free` ones: one to claim back, else `prefer`
/// (see [`fixed`]), else the one whose mark is lowest (a missing mark counts as 0; ties go to the lower slot) —
/// with how long until the clock is past that one's mark, if it is ahead (within
/// `--max-clock-wait`; a mark further ahead is taken, and handled as the lease's wait does).
pub(super) async fn head_pick<S: Session>(
    neg: &Negotiation,
    session: &S,
    free: &[u32],
    prefer: Option<u32>,
) -> Result<(u32, Option<std::time::Duration>), Fault> {
    let p = &neg.proto;
    let left = &p.part.left;
    let fixed = fixed(neg, prefer);
    if left.is_empty() && fixed {
        if let Some(p) = prefer.filter(|p| free.contains(p)) {
            return Ok((p, None));
        }
    }
    let marked = session.marks_of(neg, free).await?;
    let now = p.now_tick();
    if let Some(first) = first_choice(&marked, prefer, fixed, now, left) {
        return Ok((first, None));
    }
    let Some((mark, slot)) = marked.into_iter().map(|m| (m.mark, m.slot)).min() else {
        return Ok((free[0], None));
    };
    // The planted bug that skips the mark's wait skips this one too (campaign only).
    let planted = p.planted() == crate::planted::PlantedBug::SkipMarkWait;
    let ahead = (!planted && mark != u64::MAX && mark >= now)
        .then(|| p.wait_past(mark))
        .filter(|w| !w.is_zero() && *w <= p.timing.max_clock_wait);
    Ok((slot, ahead))
}

/// A random slot of a pool of `pool` to probe, avoiding `skip` (a few tries).
pub(crate) fn random_slot(pool: u32, skip: &BTreeSet<u32>) -> u32 {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_slots_are_tried_ours_first_then_preferred_then_by_past_mark() {
        let mut history = ClaimHistory::default();
        history.skip.insert(4);
        let mark = |slot, mark| Marked {
            slot,
            mark,
            by: Some(0x70 + u64::from(slot)),
        };
        // The clock is at 100.
        let free = [
            mark(0, 50),
            mark(1, 10),
            mark(2, 10),
            mark(3, 200),
            mark(4, 0),
            mark(5, 99),
            mark(6, 100),
            mark(7, 300),
        ];
        let none = LeftBehind::default();
        assert_eq!(
            by_mark(free, None, false, 100, &history, &none),
            [1, 2, 0, 5]
        );
        assert_eq!(
            by_mark(free, Some(3), true, 100, &history, &none),
            [3, 1, 2, 0, 5]
        );
        assert_eq!(
            by_mark(free, Some(4), true, 100, &history, &none),
            [1, 2, 0, 5]
        );
        // The slot held last, not the configured one: first only once its mark has passed.
        assert_eq!(
            by_mark(free, Some(3), false, 100, &history, &none),
            [1, 2, 0, 5]
        );
        assert_eq!(
            by_mark(free, Some(5), false, 100, &history, &none),
            [5, 1, 2, 0]
        );
        // Slot 7 left by a hold of this instance, its mark (ahead of the clock) still its
        // write: first, before the preferred slot.
        let left = LeftBehind::default();
        let held = |slot, token, marks: Vec<u64>| crate::issuance::Left {
            slot,
            token,
            marks,
            floor: 0,
            window: 0,
            generation: 1,
        };
        left.leave(1, held(7, 0x77, vec![250, 300]), Default::default());
        assert_eq!(
            by_mark(free, Some(3), true, 100, &history, &left),
            [7, 3, 1, 2, 0, 5]
        );
        // Written since by another claim (another token), or to another value: not ours.
        left.leave(1, held(7, 0x78, vec![300]), Default::default());
        assert_eq!(
            by_mark(free, None, false, 100, &history, &left),
            [1, 2, 0, 5]
        );
        left.leave(1, held(7, 0x77, vec![250]), Default::default());
        assert_eq!(
            by_mark(free, None, false, 100, &history, &left),
            [1, 2, 0, 5]
        );
    }
}
