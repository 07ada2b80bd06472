//! Precise sleeps for tick waits, without blocking the async runtime and without trusting one
//! clock.
//!
//! tokio's timer has millisecond granularity and rounds up, so a task that waits for the next
//! millisecond tick with `tokio::time::sleep` often wakes a whole tick late — which halves the
//! throughput of a 1 ms layout under load. It also reads std's monotonic clock, which a frozen
//! clock (libfaketime, a hypervisor bug) stops for good. [`Timer`] hands each wait to one
//! dedicated thread that keeps deadlines on the kernel's monotonic clock
//! ([`kernel_monotonic_ns`]) and sleeps relatively (tens of microseconds late at most), then
//! wakes the task through a oneshot.

use crate::clock::kernel_monotonic_ns;
use std::collections::BTreeMap;
use std::sync::mpsc::{self, TryRecvError};
use std::time::Duration;
use tokio::sync::oneshot;

/// The longest the thread sleeps before looking for new waits (which may end sooner).
const SLICE: Duration = Duration::from_millis(1);

type Wait = (u64, oneshot::Sender<()>);

/// A handle to the timer thread; the thread ends when the last handle is dropped.
#[derive(Debug, Clone)]
pub struct Timer {
    tx: mpsc::Sender<Wait>,
}

impl Timer {
    pub fn new() -> std::io::Result<Timer> {
        let (tx, rx) = mpsc::channel::<Wait>();
        std::thread::Builder::new()
            .name("idcar-timer".into())
            .spawn(move || run(rx))?;
        Ok(Timer { tx })
    }

    /// Completes after `d` has passed on the kernel's monotonic clock.
    pub async fn sleep(&self, d: Duration) {
        if d.is_zero() {
            return;
        }
        let at =
            kernel_monotonic_ns().saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let (tx, rx) = oneshot::channel();
        if self.tx.send((at, tx)).is_err() {
            // The thread is gone (it never exits while handles live): fall back to tokio.
            tokio::time::sleep(d).await;
            return;
        }
        let _ = rx.await;
    }
}

fn run(rx: mpsc::Receiver<Wait>) {
    // Keyed by deadline, then by arrival so equal deadlines do not collide.
    let mut waits: BTreeMap<(u64, u64), oneshot::Sender<()>> = BTreeMap::new();
    let mut n = 0u64;
    let mut open = true;
    loop {
        if waits.is_empty() {
            if !open {
                return;
            }
            // Nothing to time: block without a timeout (no clock involved, no polling).
            match rx.recv() {
                Ok((at, tx)) => {
                    n += 1;
                    waits.insert((at, n), tx);
                }
                Err(_) => return,
            }
        }
        while open {
            match rx.try_recv() {
                Ok((at, tx)) => {
                    n += 1;
                    waits.insert((at, n), tx);
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => open = false,
            }
        }
        let now = kernel_monotonic_ns();
        while waits
            .first_key_value()
            .is_some_and(|(&(at, _), _)| at <= now)
        {
            if let Some((_, tx)) = waits.pop_first() {
                let _ = tx.send(());
            }
        }
        if let Some((&(at, _), _)) = waits.first_key_value() {
            // A relative sleep: on time whatever std's clocks say.
            std::thread::sleep(Duration::from_nanos(at - now).min(SLICE));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn wakes_after_the_wait_and_soon_after() {
        let t = Timer::new().unwrap();
        for us in [0u64, 300, 900, 2_500] {
            let start = kernel_monotonic_ns();
            t.sleep(Duration::from_micros(us)).await;
            let slept = kernel_monotonic_ns() - start;
            assert!(slept >= us * 1_000, "woke after {slept} ns of {us} µs");
            // Generous bound: only catches a timer that is broken, not one that is slow.
            assert!(slept < us * 1_000 + 500_000_000);
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_waits_each_wake() {
        let t = Timer::new().unwrap();
        let mut set = tokio::task::JoinSet::new();
        for i in 0..200u64 {
            let t = t.clone();
            set.spawn(async move { t.sleep(Duration::from_micros((i * 37) % 3_000)).await });
        }
        let all = async { while set.join_next().await.is_some() {} };
        tokio::time::timeout(Duration::from_secs(10), all)
            .await
            .expect("every wait ends");
    }
}
