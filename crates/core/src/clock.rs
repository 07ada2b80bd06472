//! The seams to the outside world that the pure core is given, never reaches for: wall-clock
//! time as nanoseconds since the Unix epoch ([`Clock`]), and random bits ([`os_random`]).
//! Production uses [`SystemClock`]; tests use [`ManualClock`] to step time forwards and
//! backwards. Layouts and the generator are given the time, never read a clock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Random bits from the operating system's generator (through `rand`'s thread-local CSPRNG),
/// injected into layouts that put randomness in IDs (ugd60).
#[cfg(feature = "os-random")]
pub fn os_random() -> u64 {
    rand::random()
}

/// Random bits from std's randomly keyed hasher (keys from the operating system, a fresh key
/// each call): the default of [`crate::layout::LayoutParams`] in builds without `os-random`,
/// which format and decode IDs and never issue them.
#[cfg(not(feature = "os-random"))]
pub fn os_random() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Nanoseconds since the Unix epoch (0 for a clock set before 1970).
    fn now_unix_ns(&self) -> u64;
}

/// The host's real-time clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_unix_ns(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
            .unwrap_or(0)
    }
}

/// A clock that only moves when told to.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    pub fn new(unix_ns: u64) -> ManualClock {
        ManualClock(AtomicU64::new(unix_ns))
    }

    pub fn set(&self, unix_ns: u64) {
        self.0.store(unix_ns, Ordering::SeqCst);
    }

    pub fn advance(&self, ns: u64) {
        self.0.fetch_add(ns, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_unix_ns(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}
