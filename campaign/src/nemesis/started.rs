//! What a fault just started leaves to heal ([`Heal`], [`Started`]), shared by the code that
//! starts each kind of fault and the code that heals it.

use rand::rngs::StdRng;
use rand::Rng;
use std::process::Child;
use std::time::{Duration, Instant};

/// What healing a fault takes.
pub(super) enum Heal {
    Cut(Vec<usize>, Vec<usize>),
    Restart {
        s: usize,
        skew: i64,
    },
    Cont {
        s: usize,
    },
    Launch(Vec<usize>),
    /// Every node started again after an outage; then `Probe`.
    Relaunch(Vec<usize>),
    /// The store's frozen nodes continued (SIGCONT); then `Probe`.
    Thaw(Vec<usize>),
    /// A probe of the store (`store-op probe`) saying when it answered again; the fault
    /// healed at `healed_ns`.
    Probe {
        child: Child,
        healed_ns: u64,
    },
    /// Wait (bounded) for a sidecar to exit (`how`: what ends it — a SIGTERM, a planted
    /// panic), then start it with `skew`.
    AfterExit {
        s: usize,
        skew: i64,
        since: Instant,
        how: &'static str,
    },
    /// A clock fault's end: SIGTERM the skewed incarnation, then restart it true.
    Unskew {
        s: usize,
    },
    Busy(Child),
    /// Nothing to undo (an operator's fault on the store).
    Nothing,
    /// A release cut off from the store: heal the cut, then wait for the exit and restart.
    CutRelease {
        s: usize,
        cut: (Vec<usize>, Vec<usize>),
        since: Instant,
    },
    /// The reconfigure fault's end: the reconfigured sidecar stopped, `params` deleted again
    /// (the others record theirs), the sidecar restarted plain.
    Reconfigured {
        s: usize,
    },
    /// The lock fault's end: the second static instance must have been refused, the first
    /// must still serve; both stopped.
    Lock(StaticPair),
}

/// A fault just injected: after how long it is healed, and what healing it takes. `None`:
/// it could not be injected after all (nothing to heal, nothing recorded).
pub(super) type Started = Option<(Duration, Heal)>;

/// A random time between `lo` and `hi` seconds.
pub(super) fn secs(rng: &mut StdRng, lo: f64, hi: f64) -> Duration {
    Duration::from_secs_f64(rng.random_range(lo..hi))
}

/// The lock fault's two static instances on one state file.
pub(super) struct StaticPair {
    pub(super) first: Child,
    pub(super) second: Child,
    pub(super) socket: std::path::PathBuf,
    pub(super) second_log: std::path::PathBuf,
}
