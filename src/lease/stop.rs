//! "Wait for X, or stop": every wait of a lease ends early when the owner asks for the
//! release or when the store's session ends (ZooKeeper's; a state file has none). One helper,
//! so no wait can forget either.

use super::Issued;
use std::future::Future;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// Why a wait ended before what it waited for.
#[derive(Debug)]
pub enum Interrupted {
    /// The owner asked for the release, handing over the highest tick issued.
    Release(Option<Issued>),
    /// The store's session is over.
    SessionEnded,
}

/// The two things that end any wait: the release request (for the whole negotiator) and the
/// end of the current session (replaced with each new session).
#[derive(Debug)]
pub struct Stop {
    release: oneshot::Receiver<Option<Issued>>,
    /// The release request once received (a oneshot is polled to completion only once).
    released: Option<Option<Issued>>,
    session: CancellationToken,
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
            return Err(Interrupted::Release(h));
        }
        tokio::select! {
            r = f => Ok(r),
            h = &mut self.release => {
                // A dropped sender means the owner is gone: release with nothing issued.
                let h = h.ok().flatten();
                self.released = Some(h);
                Err(Interrupted::Release(h))
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
}
