//! The prefetch buffer: IDs fetched ahead by one background thread, handed out at most once,
//! dropped once older than the maximum age.

use crate::client::{Shared, MAX_REQUEST};
use crate::layout::Id;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// After a failed refill, the refill thread waits this long before it tries again (callers
/// meanwhile fetch directly and see the error themselves).
const AFTER_FAILURE: Duration = Duration::from_millis(100);

#[derive(Debug)]
struct State {
    /// IDs with the moment their request was sent, oldest first.
    ids: VecDeque<(Instant, Id)>,
    refill: bool,
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
                stop: false,
            }),
            wake: Condvar::new(),
            size,
            low_water,
            max_age,
        });
        let b = Arc::clone(&buffer);
        // Without the thread (the system refused one), callers fetch directly.
        let _ = std::thread::Builder::new()
            .name("idcar-prefetch".into())
            .spawn(move || refill_loop(&shared, &b));
        Prefetch { buffer }
    }

    /// A buffered ID that is not too old, if there is one; starts a refill at the low-water
    /// mark.
    pub(crate) fn take(&self) -> Option<Id> {
        let mut out = Vec::with_capacity(1);
        self.take_into(1, &mut out);
        out.pop()
    }

    /// Moves up to `n` fresh buffered IDs to `out`.
    pub(crate) fn take_into(&self, n: usize, out: &mut Vec<Id>) {
        let b = &self.buffer;
        let mut s = b.lock();
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

fn refill_loop(shared: &Shared, b: &Buffer) {
    loop {
        let want = {
            let mut s = b.lock();
            while !s.refill && !s.stop {
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
