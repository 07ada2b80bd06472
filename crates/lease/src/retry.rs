//! Exponential backoff for retrying passing faults: one helper instead of a doubling written
//! out at every retry loop.

use std::time::Duration;

/// Waits that start at `first` and double up to `max`.
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    pub fn new(first: Duration, max: Duration) -> Backoff {
        Backoff {
            first,
            max,
            next: first.min(max),
        }
    }

    /// The wait before the next attempt (and doubles the one after, up to the maximum).
    pub fn next_wait(&mut self) -> Duration {
        let now = self.next;
        self.next = (now * 2).min(self.max);
        now
    }

    /// After a success: the next failure waits `first` again.
    pub fn reset(&mut self) {
        self.next = self.first.min(self.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_maximum_and_resets() {
        let ms = Duration::from_millis;
        let mut b = Backoff::new(ms(100), ms(1_000));
        let waits: Vec<_> = (0..6).map(|_| b.next_wait()).collect();
        assert_eq!(
            waits,
            [ms(100), ms(200), ms(400), ms(800), ms(1_000), ms(1_000)]
        );
        b.reset();
        assert_eq!(b.next_wait(), ms(100));
    }
}
