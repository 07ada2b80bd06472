//! What a lease's generator has issued, as the service tells it — the one thing a lease learns
//! back from the service while it runs, so that a holder that lost its store session can take
//! its own slot back at once (see `crate::lease::protocol::again`).
//!
//! The service's follower of a lease installs each window in its generator through
//! [`Issuance::installing`]: under the generator's lock and this record's, it is told whether
//! the window's generation may still be installed, installs, and says which window is
//! installed now and the highest tick the generator issued for its slot. The lease, about to
//! claim its own slot again, first *revokes* the old claim's generation ([`Issuance::settle`],
//! under this record's lock): either the install came first (and settle sees it installed and
//! waits for its removal) or the revocation did (and the window is never installed). Once no
//! window of it is installed, the highest tick said is final — no ID can be issued under that
//! claim any more.
//!
//! One `Issuance` per lease ([`super::Part`]); the follower and the lease share it. A lease
//! nobody follows (tests, tools) is told nothing, and [`Issuance::settle`] says so: the caller
//! then falls back to the window it last published.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Notify;

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
    /// The generator's slot and the highest tick issued for it (`None`: none yet), as of the
    /// last install.
    highest: Option<(u32, Option<u64>)>,
    /// Windows of this generation or older are never installed again.
    revoked: Option<u64>,
}

impl Issuance {
    fn state(&self) -> MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How the follower installs a window of `generation` (`None`: no window), holding the
    /// generator's lock: `install` is told whether that generation may still be installed (it
    /// was not revoked) and returns the window installed now (slot, generation) and the
    /// generator's slot with the highest tick issued for it — all under this record's lock, so
    /// that a revocation either comes first or sees the window installed.
    pub fn installing(
        &self,
        generation: Option<u64>,
        install: impl FnOnce(bool) -> (Option<(u32, u64)>, Option<(u32, Option<u64>)>),
    ) {
        let mut s = self.state();
        let allowed = generation.is_none_or(|g| s.revoked.is_none_or(|r| g > r));
        let (installed, highest) = install(allowed);
        s.followed = true;
        s.installed = installed;
        s.highest = highest;
        drop(s);
        self.0.changed.notify_waiters();
    }

    /// Revokes the windows of `generation` (and older) and waits, at most `max`, until none is
    /// installed: then the highest tick issued for `slot` under them, final (`Some(None)`:
    /// none issued). `None` if the wait ran out, no follower installs this lease's windows, or
    /// the generator has moved to another slot since (nothing here can then be trusted).
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
                    return match s.highest {
                        None => Some(None),
                        Some((s, highest)) if s == slot => Some(highest),
                        Some(_) => None,
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

    /// Installs a window of `generation` (if allowed), as the follower does: what it installed.
    fn install(i: &Issuance, window: Option<(u32, u64)>, highest: (u32, Option<u64>)) -> bool {
        let mut done = false;
        i.installing(window.map(|(_, g)| g), |allowed| {
            done = allowed && window.is_some();
            (window.filter(|_| allowed), Some(highest))
        });
        done
    }

    #[tokio::test]
    async fn a_revoked_generation_is_never_installed_and_settles_with_its_highest_tick() {
        let i = Issuance::default();
        let max = Duration::from_millis(50);
        assert_eq!(i.settle(3, 7, max).await, None, "nobody follows");
        assert!(install(&i, Some((3, 7)), (3, Some(100))));
        // Removed, with more issued meanwhile: settled at the last word.
        let j = i.clone();
        let removed = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            install(&j, None, (3, Some(120)));
        });
        assert_eq!(
            i.settle(3, 7, Duration::from_secs(5)).await,
            Some(Some(120))
        );
        removed.await.unwrap();
        // Revoked: never installed again, nor older ones; newer ones are.
        assert!(!install(&i, Some((3, 7)), (3, Some(120))));
        assert!(!install(&i, Some((3, 6)), (3, Some(120))));
        assert_eq!(i.settle(3, 7, max).await, Some(Some(120)));
        assert!(install(&i, Some((3, 9)), (3, Some(200))));
        // Installed and not removed: the wait runs out.
        assert_eq!(i.settle(3, 9, max).await, None);
        // Nothing issued for the slot; the generator moved to another slot: not to be trusted.
        install(&i, None, (3, None));
        assert_eq!(i.settle(3, 9, max).await, Some(None));
        install(&i, None, (4, Some(900)));
        assert_eq!(i.settle(3, 9, max).await, None);
        // A newer generation installed does not hold the older one's settling up.
        assert!(install(&i, Some((3, 10)), (3, Some(950))));
        assert_eq!(i.settle(3, 9, max).await, Some(Some(950)));
    }
}
