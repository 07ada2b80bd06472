//! Sub-millisecond sleeps for tick waits, without blocking the async runtime.
//!
//! tokio's timer has millisecond granularity and rounds up, so a task that waits for the next
//! millisecond tick with `tokio::time::sleep` often wakes a whole tick late — which halves the
//! throughput of a 1 ms layout under load. [`Timer`] sleeps the long part of a wait on tokio's
//! timer and the last stretch on one dedicated thread that waits on a channel with a timeout
//! (tens of microseconds late at most), then wakes the task through a oneshot.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// Waits shorter than this go to the precise thread entirely.
const PRECISE_SPAN: Duration = Duration::from_millis(2);

/// A handle to the timer thread; the thread ends when the last handle is dropped.
#[derive(Debug, Clone)]
pub struct Timer {
    tx: mpsc::Sender<(Instant, oneshot::Sender<()>)>,
}

impl Timer {
    pub fn new() -> std::io::Result<Timer> {
        let (tx, rx) = mpsc::channel::<(Instant, oneshot::Sender<()>)>();
        std::thread::Builder::new()
            .name("idcar-timer".into())
            .spawn(move || run(rx))?;
        Ok(Timer { tx })
    }

    /// Completes at `deadline` (or at once if it has passed).
    pub async fn sleep_until(&self, deadline: Instant) {
        let now = Instant::now();
        if deadline <= now {
            return;
        }
        if deadline - now > PRECISE_SPAN {
            tokio::time::sleep_until((deadline - PRECISE_SPAN / 2).into()).await;
        }
        let (tx, rx) = oneshot::channel();
        if self.tx.send((deadline, tx)).is_err() {
            // The thread is gone (it never exits while handles live): fall back to tokio.
            tokio::time::sleep_until(deadline.into()).await;
            return;
        }
        let _ = rx.await;
    }
}

fn run(rx: mpsc::Receiver<(Instant, oneshot::Sender<()>)>) {
    // Keyed by deadline, then by arrival so equal deadlines do not collide.
    let mut waits: BTreeMap<(Instant, u64), oneshot::Sender<()>> = BTreeMap::new();
    let mut n = 0u64;
    loop {
        let next = waits.first_key_value().map(|(&(at, _), _)| at);
        let msg = match next {
            None => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
            Some(at) => rx.recv_timeout(at.saturating_duration_since(Instant::now())),
        };
        match msg {
            Ok((at, tx)) => {
                n += 1;
                waits.insert((at, n), tx);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => match next {
                None => return,
                Some(at) => std::thread::sleep(at.saturating_duration_since(Instant::now())),
            },
        }
        let now = Instant::now();
        while waits
            .first_key_value()
            .is_some_and(|(&(at, _), _)| at <= now)
        {
            if let Some((_, tx)) = waits.pop_first() {
                let _ = tx.send(());
            }
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn wakes_after_deadline_and_soon_after() {
        let t = Timer::new().unwrap();
        for us in [0u64, 300, 900, 2_500] {
            let start = Instant::now();
            let deadline = start + Duration::from_micros(us);
            t.sleep_until(deadline).await;
            let woke = Instant::now();
            assert!(woke >= deadline, "woke before the deadline");
            // Generous bound: only catches a timer that is broken, not one that is slow.
            assert!(woke - deadline < Duration::from_millis(500));
        }
    }
}
