//! "Wait for X, or stop": every wait of a lease ends early when the owner asks for the
//! release or when the store's session ends (ZooKeeper's; a state file has none). One helper,
//! so no wait can forget either.

use idcar_core::generator::Issued;
use std::future::Future;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// Why a wait ended before what it waited for.
#[derive(Debug)]
pub enum Interrupted {
    /// The owner asked for the release, handing over the highest tick issued.
    Release(Option<Issued>),
    /// The owner went away without saying what it issued (its release handle was dropped:
    /// an unwinding panic, a release abandoned at its timeout). The highest tick issued is
    /// unknown, so nothing may be written below the mark last written.
    Abandoned,
    /// The store's session is over.
    SessionEnded,
}

/// The two things that end any wait: the release request (for the whole negotiator) and the
/// end of the current session (replaced with each new session).
#[derive(Debug)]
pub struct Stop {
    release: oneshot::Receiver<Option<Issued>>,
    /// The release request once received (a oneshot is polled to completion only once):
    /// `Err` when the sender was dropped without one.
    released: Option<Result<Option<Issued>, Abandoned>>,
    session: CancellationToken,
}

/// The release handle was dropped before it said what was issued.
#[derive(Clone, Copy, Debug)]
struct Abandoned;

fn released(h: Result<Option<Issued>, Abandoned>) -> Interrupted {
    match h {
        Ok(h) => Interrupted::Release(h),
        Err(Abandoned) => Interrupted::Abandoned,
    }
}

impl Stop {
    pub fn new(release: oneshot::Receiver<Option<Issued>>) -> Stop {
        Stop {
            release,
            released: None,
            session: CancellationToken::new(),
        }
    }

    /// Follows a new session: waits end when `ended` is cancelled.
    pub fn follow(&mut self, ended: CancellationToken) {
        self.session = ended;
    }

    /// Runs `f` to completion unless the release is asked for or the session ends first.
    pub async fn or<F: Future>(&mut self, f: F) -> Result<F::Output, Interrupted> {
        if let Some(h) = self.released {
            return Err(released(h));
        }
        tokio::select! {
            r = f => Ok(r),
            h = &mut self.release => {
                // A dropped sender means the owner is gone without saying what it issued:
                // never "nothing issued", which would write the mark down to the floor.
                let h = h.map_err(|_| Abandoned);
                self.released = Some(h);
                Err(released(h))
            }
            _ = self.session.cancelled() => Err(Interrupted::SessionEnded),
        }
    }

    /// Sleeps for `d` unless interrupted.
    pub async fn sleep(&mut self, d: std::time::Duration) -> Result<(), Interrupted> {
        self.or(tokio::time::sleep(d)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn release_and_session_end_interrupt_and_release_sticks() {
        let (tx, rx) = oneshot::channel();
        let mut stop = Stop::new(rx);
        let session = CancellationToken::new();
        stop.follow(session.clone());
        assert!(stop.sleep(Duration::from_millis(10)).await.is_ok());
        session.cancel();
        assert!(matches!(
            stop.sleep(Duration::from_secs(60)).await,
            Err(Interrupted::SessionEnded)
        ));
        stop.follow(CancellationToken::new());
        tx.send(None).unwrap();
        assert!(matches!(
            stop.sleep(Duration::from_secs(60)).await,
            Err(Interrupted::Release(None))
        ));
        // Asked again after the release: still released, without polling the used receiver.
        assert!(matches!(
            stop.or(std::future::ready(())).await,
            Err(Interrupted::Release(None))
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_release_handle_is_abandoned_not_nothing_issued() {
        let (tx, rx) = oneshot::channel::<Option<Issued>>();
        let mut stop = Stop::new(rx);
        drop(tx);
        assert!(matches!(
            stop.sleep(Duration::from_secs(60)).await,
            Err(Interrupted::Abandoned)
        ));
        assert!(matches!(
            stop.or(std::future::ready(())).await,
            Err(Interrupted::Abandoned)
        ));
    }
}
