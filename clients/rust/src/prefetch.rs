//! The prefetch buffer: IDs fetched ahead by one background thread, handed out at most once,
//! dropped once older than the maximum age, and in the order the server issued them: one
//! fetch into it at a time — the refill, or a caller that found it empty fetching for itself
//! — so nothing is fetched past it.

use crate::error::{Error, Result};
use crate::layout::Id;
use crate::shared::{Shared, MAX_REQUEST};
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// After a failed refill, the refill thread waits this long before it tries again (a caller
/// that finds the buffer empty meanwhile fetches for itself and sees the error).
const AFTER_FAILURE: Duration = Duration::from_millis(100);

#[derive(Debug)]
struct State {
    /// IDs with the moment their request was sent, oldest first.
    ids: VecDeque<(Instant, Id)>,
    /// A refill is asked for or running.
    refill: bool,
    /// A caller that found the buffer empty is fetching for itself.
    fetching: bool,
    stop: bool,
}

#[derive(Debug)]
struct Buffer {
    state: Mutex<State>,
    wake: Condvar,
    size: usize,
    low_water: usize,
    max_age: Duration,
}

impl Buffer {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The buffer, and one refill thread that ends on its own once stopped (after the request it
/// may be waiting for, bounded by the client's timeout): stopping never blocks.
#[derive(Debug)]
pub(crate) struct Prefetch {
    buffer: Arc<Buffer>,
}

impl Prefetch {
    pub(crate) fn start(
        shared: Arc<Shared>,
        size: usize,
        low_water: usize,
        max_age: Duration,
    ) -> Prefetch {
        let buffer = Arc::new(Buffer {
            state: Mutex::new(State {
                ids: VecDeque::with_capacity(size),
                refill: true,
                fetching: false,
                stop: false,
            }),
            wake: Condvar::new(),
            size,
            low_water,
            max_age,
        });
        let b = Arc::clone(&buffer);
        let spawned = std::thread::Builder::new()
            .name("idcar-prefetch".into())
            .spawn(move || refill_loop(&shared, &b));
        if spawned.is_err() {
            // Without the thread (the system refused one), callers fetch for themselves.
            buffer.lock().stop = true;
        }
        Prefetch { buffer }
    }

    /// `n` IDs, buffered ones first, in the order the server issued them. Found empty, the
    /// buffer is waited for while a refill is in flight (up to `wait`), else this caller
    /// fetches what it lacks itself while no refill may start. Starts a refill at the
    /// low-water mark.
    pub(crate) fn take(&self, n: usize, shared: &Shared, wait: Duration) -> Result<Vec<Id>> {
        let b = &self.buffer;
        let mut out = Vec::with_capacity(n);
        let end = Instant::now() + wait;
        let mut s = b.lock();
        loop {
            take_locked(b, &mut s, n - out.len(), &mut out);
            if out.len() == n {
                return Ok(out);
            }
            if s.stop {
                drop(s);
                out.extend(shared.fetch(n - out.len())?);
                return Ok(out);
            }
            if !s.refill && !s.fetching {
                s.fetching = true;
                break;
            }
            let left = end
                .checked_duration_since(Instant::now())
                .filter(|d| !d.is_zero())
                .ok_or(Error::Timeout)?;
            s = b
                .wake
                .wait_timeout(s, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        drop(s);
        let got = shared.fetch(n - out.len());
        let mut s = b.lock();
        s.fetching = false;
        take_locked(b, &mut s, 0, &mut out);
        b.wake.notify_all();
        drop(s);
        out.extend(got?);
        Ok(out)
    }

    /// Stops the refill thread and drops the buffer.
    pub(crate) fn stop(&self) {
        {
            let mut s = self.buffer.lock();
            s.stop = true;
            s.ids.clear();
        }
        self.buffer.wake.notify_all();
    }
}

/// Moves up to `n` fresh buffered IDs to `out`; asks for a refill at the low-water mark.
fn take_locked(b: &Buffer, s: &mut State, n: usize, out: &mut Vec<Id>) {
    {
        let now = Instant::now();
        while s
            .ids
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) > b.max_age)
        {
            s.ids.pop_front();
        }
        let k = n.min(s.ids.len());
        out.extend(s.ids.drain(..k).map(|(_, id)| id));
        if s.ids.len() <= b.low_water && !s.refill {
            s.refill = true;
            b.wake.notify_all();
        }
    }
}

fn refill_loop(shared: &Shared, b: &Buffer) {
    loop {
        let want = {
            let mut s = b.lock();
            // Asked for, and no caller fetching for itself (its IDs go out before ours).
            while (!s.refill || s.fetching) && !s.stop {
                s = b.wake.wait(s).unwrap_or_else(|e| e.into_inner());
            }
            if s.stop {
                return;
            }
            b.size.saturating_sub(s.ids.len())
        };
        let mut failed = false;
        let mut left = want;
        // Chunk by chunk, each stamped when it was asked for: a chunk that took longer than
        // the maximum age to arrive is dropped on arrival.
        while left > 0 {
            let k = left.min(MAX_REQUEST);
            let asked = Instant::now();
            match shared.fetch(k) {
                Ok(ids) => {
                    let mut s = b.lock();
                    if s.stop {
                        return;
                    }
                    if asked.elapsed() > b.max_age {
                        // Too old on arrival: pause as after a failure rather than ask again
                        // at once (on a slow layout every refill would be thrown away).
                        failed = true;
                        break;
                    }
                    s.ids.extend(ids.into_iter().map(|id| (asked, id)));
                    b.wake.notify_all();
                    left -= k;
                }
                Err(_) => {
                    failed = true;
                    break;
                }
            }
        }
        let mut s = b.lock();
        s.refill = false;
        b.wake.notify_all();
        if failed {
            // A pause that callers asking for a refill do not cut short; only a stop does.
            let until = Instant::now() + AFTER_FAILURE;
            while !s.stop {
                let Some(left) = until
                    .checked_duration_since(Instant::now())
                    .filter(|d| !d.is_zero())
                else {
                    break;
                };
                s = b
                    .wake
                    .wait_timeout(s, left)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        }
    }
}
