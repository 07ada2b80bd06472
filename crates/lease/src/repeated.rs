//! A failure that repeats (a store down, a claim retried, a file unreadable) is logged when it
//! starts, then summarised at most once a minute (how many attempts failed, for how long, the
//! last error), and once more when it ends — not once per attempt: a sidecar retrying every
//! second against a store that is down for an hour writes a few dozen lines, not thousands.
//! Every attempt is still logged at `debug`.

use std::fmt::Display;
use std::time::{Duration, Instant};

/// How often a failure that goes on is summarised.
pub const SUMMARY_EVERY: Duration = Duration::from_secs(60);

/// One kind of failure, retried (`what`: what fails, e.g. "cannot connect to ZooKeeper").
#[derive(Debug)]
pub struct Repeated {
    what: &'static str,
    run: Option<Run>,
}

#[derive(Debug)]
struct Run {
    since: Instant,
    failures: u64,
    told: Instant,
}

impl Repeated {
    pub const fn new(what: &'static str) -> Repeated {
        Repeated { what, run: None }
    }

    /// An attempt failed with `error`; it will be retried. Logged as a warning if it is the
    /// first of a run, or a minute after the last summary; else at `debug`.
    pub fn failed(&mut self, error: &dyn Display) {
        let now = Instant::now();
        let what = self.what;
        match &mut self.run {
            None => {
                self.run = Some(Run {
                    since: now,
                    failures: 1,
                    told: now,
                });
                tracing::warn!(error = %error, "{what}; retrying");
            }
            Some(r) => {
                r.failures += 1;
                if now.duration_since(r.told) >= SUMMARY_EVERY {
                    r.told = now;
                    tracing::warn!(
                        failures = r.failures,
                        for_s = r.since.elapsed().as_secs(),
                        error = %error,
                        "{what}: still failing; retrying"
                    );
                } else {
                    tracing::debug!(error = %error, "{what}; retrying");
                }
            }
        }
    }

    /// The attempt succeeded: if failures came before, says how many and for how long.
    pub fn ended(&mut self) {
        if let Some(r) = self.run.take() {
            let what = self.what;
            tracing::info!(
                failures = r.failures,
                for_s = r.since.elapsed().as_secs(),
                "{what}: recovered"
            );
        }
    }

    /// Whether a run of failures is under way.
    pub fn failing(&self) -> bool {
        self.run.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_starts_and_ends() {
        let mut r = Repeated::new("cannot reach the store");
        assert!(!r.failing());
        r.failed(&"refused");
        r.failed(&"refused");
        assert!(r.failing());
        assert_eq!(r.run.as_ref().map(|r| r.failures), Some(2));
        r.ended();
        assert!(!r.failing());
        r.failed(&"refused");
        assert_eq!(r.run.as_ref().map(|r| r.failures), Some(1), "a new run");
    }
}
