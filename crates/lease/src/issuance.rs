//! What a lease's generator has issued, as the service tells it — the one thing a lease learns
//! back from the service while it runs, so that a holder that lost its store session can take
//! its own slot back at once (see `crate::protocol::again`).
//!
//! The service's follower of a lease installs each window in its generator through
//! [`Issuance::installing`]: under the generator's lock and this record's, it is told whether
//! the window's generation may still be installed, installs, and says which window is
//! installed now and the highest tick the generator issued for its slot, before the install
//! and after (kept per slot: a slot the generator left keeps its last figure). The lease, about to
//! claim its own slot again, first *revokes* the old claim's generation ([`Issuance::settle`],
//! under this record's lock): either the install came first (and settle sees it installed and
//! waits for its removal) or the revocation did (and the window is never installed). Once no
//! window of it is installed, the highest tick said is final — no ID can be issued under that
//! claim any more.
//!
//! One `Issuance` per lease ([`super::Part`]); the follower and the lease share it. A lease
//! nobody follows (tests, tools) is told nothing, and [`Issuance::settle`] says so: the caller
//! then falls back to the window it last published.
//!
//! What each hold left when its session ended ([`Left`]) is kept per instance
//! ([`LeftBehind`], shared by its leases, with the `Issuance` of the lease that left it): any
//! of the instance's leases may claim a slot back that another of them left, since the old
//! claim's windows are revoked through that lease's `Issuance` before the new one issues.

use crate::store::Stored;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Notify;

/// What a hold left behind, once it had published a window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Left {
    pub slot: u32,
    /// The claim's token, written beside every mark it wrote.
    pub token: u64,
    /// Every value its writes may have left in the store: the last one confirmed and those sent
    /// with no reply.
    pub marks: Vec<u64>,
    /// The claim's floor: above every tick earlier holders of the slot issued.
    pub floor: u64,
    /// The highest window it published: no tick it issued is above it.
    pub window: u64,
    /// The generation its windows were published under.
    pub generation: u64,
}

impl Left {
    /// Whether a mark `mark` written by the claim of token `by` (as a claim or a look at the
    /// pool read it) is still one this hold wrote.
    pub fn wrote(&self, mark: u64, by: Option<u64>) -> bool {
        by == Some(self.token) && self.marks.contains(&mark)
    }

    /// Whether the mark a new claim of `slot` read is still one this hold wrote.
    pub fn is_ours<V>(&self, slot: u32, stored: &Stored<V>) -> bool {
        self.slot == slot && self.wrote(stored.mark, stored.by)
    }
}

/// What the instance's holds left behind, the last of each lease (by its index), with the
/// [`Issuance`] of the lease that left it; shared by the instance's leases.
#[derive(Clone, Debug, Default)]
pub struct LeftBehind(Arc<Mutex<BTreeMap<u32, (Left, Issuance)>>>);

impl LeftBehind {
    fn map(&self) -> MutexGuard<'_, BTreeMap<u32, (Left, Issuance)>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remembers what lease `part`'s hold left (replacing what its earlier hold left).
    pub fn leave(&self, part: u32, left: Left, issuance: Issuance) {
        self.map().insert(part, (left, issuance));
    }

    /// Whether no hold of the instance left anything to claim back.
    pub fn is_empty(&self) -> bool {
        self.map().is_empty()
    }

    /// Whether the free slot `slot`, its mark read as `mark` written by `by`, is one a hold of
    /// this instance left with its mark still its own (a hint for which slot to claim: the
    /// claim itself reads the mark and its witness again).
    pub fn mark_is_ours(&self, slot: u32, mark: u64, by: Option<u64>) -> bool {
        self.map()
            .values()
            .any(|(l, _)| l.slot == slot && l.wrote(mark, by))
    }

    /// What a hold of `slot` left, if the mark a new claim of it read (`stored`) is still that
    /// hold's own write: it is claimed back. Kept until the new claim's hold publishes a
    /// window ([`LeftBehind::forget`]): a claim back whose first write never lands leaves the
    /// mark still that hold's, for the next claim to take back.
    pub fn ours<V>(&self, slot: u32, stored: &Stored<V>) -> Option<(Left, Issuance)> {
        self.map()
            .values()
            .find(|(l, _)| l.is_ours(slot, stored))
            .cloned()
    }

    /// Forgets what holds left of `slot` (a new claim of it wrote its mark).
    pub fn forget(&self, slot: u32) {
        self.map().retain(|_, (l, _)| l.slot != slot);
    }

    /// Forgets what holds left whose every mark the clock (`now`, in ticks) is past: a claim
    /// of such a slot waits for nothing anyway.
    pub fn forget_past(&self, now: u64) {
        self.map()
            .retain(|_, (l, _)| l.marks.iter().any(|m| *m >= now));
    }
}

/// Shared by one lease and the service's follower of it.
#[derive(Clone, Debug, Default)]
pub struct Issuance(Arc<Shared>);

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    changed: Notify,
}

#[derive(Debug, Default)]
struct State {
    /// A follower installs this lease's windows and has said so at least once.
    followed: bool,
    /// The window installed now: its slot and generation.
    installed: Option<(u32, u64)>,
    /// The highest tick issued for each slot the generator issued for lately (`None`: none),
    /// as the installs said — before each install and after it, so that a slot the generator
    /// left for another keeps what it said last (final: no window of it is installed since).
    issued: Vec<(u32, Option<u64>)>,
    /// The generator has had a slot at some install.
    had_slot: bool,
    /// Windows of this generation or older are never installed again.
    revoked: Option<u64>,
}

/// How many slots' figures [`State::issued`] keeps (the oldest goes first; a slot whose
/// figure went is settled as unknown).
const SLOTS_KEPT: usize = 16;

impl State {
    /// Remembers that `highest` was issued for `slot` (never lowering what is remembered).
    fn said(&mut self, (slot, highest): (u32, Option<u64>)) {
        self.had_slot = true;
        match self.issued.iter().position(|(s, _)| *s == slot) {
            Some(i) => {
                let (_, was) = self.issued.remove(i);
                self.issued.push((slot, was.max(highest)));
            }
            None => {
                if self.issued.len() == SLOTS_KEPT {
                    self.issued.remove(0);
                }
                self.issued.push((slot, highest));
            }
        }
    }
}

/// What an install says: the window installed now (slot, generation), and the generator's
/// slot with the highest tick issued for it just before the install and just after.
pub type Installed = (
    Option<(u32, u64)>,
    Option<(u32, Option<u64>)>,
    Option<(u32, Option<u64>)>,
);

impl Issuance {
    fn state(&self) -> MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How the follower installs a window of `generation` (`None`: no window), holding the
    /// generator's lock: `install` is told whether that generation may still be installed (it
    /// was not revoked) and returns what is installed now and what was issued ([`Installed`])
    /// — all under this record's lock, so that a revocation either comes first or sees the
    /// window installed.
    pub fn installing(&self, generation: Option<u64>, install: impl FnOnce(bool) -> Installed) {
        let mut s = self.state();
        let allowed = generation.is_none_or(|g| s.revoked.is_none_or(|r| g > r));
        let (installed, before, after) = install(allowed);
        s.followed = true;
        s.installed = installed;
        for said in [before, after].into_iter().flatten() {
            s.said(said);
        }
        drop(s);
        self.0.changed.notify_waiters();
    }

    /// Revokes the windows of `generation` (and older) and waits, at most `max`, until none is
    /// installed: then the highest tick issued for `slot` under them, final (`Some(None)`:
    /// none issued). `None` if the wait ran out, no follower installs this lease's windows, or
    /// the generator's figure for `slot` is no longer kept (nothing here can then be trusted).
    pub async fn settle(&self, slot: u32, generation: u64, max: Duration) -> Option<Option<u64>> {
        let deadline = tokio::time::Instant::now() + max;
        // Bounded by the deadline: each pass waits for a change or for it.
        loop {
            let changed = self.0.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let mut s = self.state();
                if !s.followed {
                    return None;
                }
                s.revoked = Some(s.revoked.map_or(generation, |r| r.max(generation)));
                if s.installed.is_none_or(|(_, g)| g > generation) {
                    return match s.issued.iter().find(|(n, _)| *n == slot) {
                        Some((_, highest)) => Some(*highest),
                        None if !s.had_slot => Some(None),
                        None => None,
                    };
                }
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Said = Option<(u32, Option<u64>)>;

    /// Installs a window of `generation` (if allowed), as the follower does, saying what was
    /// issued before and after: whether it installed it.
    fn install(i: &Issuance, window: Option<(u32, u64)>, before: Said, after: Said) -> bool {
        let mut done = false;
        i.installing(window.map(|(_, g)| g), |allowed| {
            done = allowed && window.is_some();
            (window.filter(|_| allowed), before, after)
        });
        done
    }

    #[tokio::test]
    async fn a_revoked_generation_is_never_installed_and_settles_with_its_highest_tick() {
        let i = Issuance::default();
        let max = Duration::from_millis(50);
        assert_eq!(i.settle(3, 7, max).await, None, "nobody follows");
        assert!(install(&i, Some((3, 7)), None, Some((3, Some(100)))));
        // Removed, with more issued meanwhile: settled at the last word.
        let j = i.clone();
        let removed = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            install(&j, None, Some((3, Some(120))), Some((3, Some(120))));
        });
        assert_eq!(
            i.settle(3, 7, Duration::from_secs(5)).await,
            Some(Some(120))
        );
        removed.await.unwrap();
        // Revoked: never installed again, nor older ones; newer ones are.
        let at_120 = Some((3, Some(120)));
        assert!(!install(&i, Some((3, 7)), at_120, at_120));
        assert!(!install(&i, Some((3, 6)), at_120, at_120));
        assert_eq!(i.settle(3, 7, max).await, Some(Some(120)));
        assert!(install(&i, Some((3, 9)), at_120, Some((3, Some(200)))));
        // Installed and not removed: the wait runs out.
        assert_eq!(i.settle(3, 9, max).await, None);
        // The generator moved to another slot: what it said last of slot 3 is final.
        assert!(install(
            &i,
            Some((4, 10)),
            Some((3, Some(210))),
            Some((4, None))
        ));
        assert_eq!(i.settle(3, 9, max).await, Some(Some(210)));
        // A newer generation installed does not hold the older one's settling up; a slot the
        // generator never said anything of, while it had slots, is unknown.
        assert_eq!(i.settle(4, 8, max).await, Some(None));
        assert_eq!(i.settle(5, 8, max).await, None);
        // The oldest slots' figures go: unknown again.
        for n in 0..SLOTS_KEPT as u32 {
            install(&i, None, None, Some((100 + n, Some(1))));
        }
        assert_eq!(i.settle(3, 9, max).await, None);
        // Followed, the generator never had a slot: nothing issued.
        let fresh = Issuance::default();
        install(&fresh, None, None, None);
        assert_eq!(fresh.settle(3, 1, max).await, Some(None));
    }

    #[test]
    fn any_lease_of_the_instance_takes_back_what_another_left_once() {
        let left = LeftBehind::default();
        assert!(left.is_empty());
        let held = Left {
            slot: 5,
            token: 0xfeed,
            marks: vec![700, 760],
            floor: 10,
            window: 600,
            generation: (1 << 40) | 2,
        };
        let other = Issuance::default();
        left.leave(1, held.clone(), other.clone());
        let stored = |mark, by| Stored {
            mark,
            version: 3,
            by,
        };
        assert!(left.mark_is_ours(5, 760, Some(0xfeed)));
        assert!(!left.mark_is_ours(5, 761, Some(0xfeed)), "another value");
        assert!(!left.mark_is_ours(4, 760, Some(0xfeed)), "another slot");
        assert!(left.ours(5, &stored(760, None)).is_none(), "witness above");
        assert!(left.ours(5, &stored(760, Some(0xbeef))).is_none());
        // Part 0 claims the slot part 1 left: it gets part 1's record and Issuance, kept
        // until its own hold of the slot publishes.
        let (l, i) = left.ours(5, &stored(700, Some(0xfeed))).expect("ours");
        assert_eq!(l, held);
        assert!(Arc::ptr_eq(&i.0, &other.0));
        assert!(left.ours(5, &stored(700, Some(0xfeed))).is_some());
        left.forget(4);
        assert!(!left.is_empty());
        left.forget(5);
        assert!(left.is_empty());
        // Once the clock is past every mark it may have left, a record is of no use.
        left.leave(1, held.clone(), other.clone());
        left.forget_past(760);
        assert!(!left.is_empty());
        left.forget_past(761);
        assert!(left.is_empty());
    }
}
