//! The clocks: the [`Clock`] seam and its implementations come from the core crate
//! (`idcar_core::clock`); here the testing aid [`SkewedClock`], and the watch of the clocks.
//! Only the service and the leases read a clock; layouts and the generator are given the time.
//!
//! Waits are timed on [`kernel_monotonic_ns`], read past libc, and [`watch_clocks`] checks the
//! wall clock and std's monotonic clock against it: a frozen or stalled clock (a hypervisor
//! bug, an LD_PRELOAD shim such as libfaketime) turns readiness false with the reason, rather
//! than leaving a sidecar that says "ready" and issues nothing.

pub use idcar_core::clock::{os_random, Clock, ManualClock, SystemClock};
use prometheus::IntGaugeVec;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The host's clock shifted by a fixed offset: simulates a host whose clock is off (a testing
/// aid behind the hidden `--clock-skew` flag; never useful in production).
#[derive(Debug, Clone, Copy)]
pub struct SkewedClock {
    pub skew_ns: i64,
}

impl Clock for SkewedClock {
    fn now_unix_ns(&self) -> u64 {
        let now = SystemClock.now_unix_ns();
        now.saturating_add_signed(self.skew_ns)
    }
}

/// The kernel's monotonic clock in nanoseconds, read through the vDSO or a system call by
/// rustix rather than through libc's `clock_gettime`, so no preloaded shim can fake it.
pub fn kernel_monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    u64::try_from(t.tv_sec)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(t.tv_nsec).unwrap_or(0))
}

/// How often [`watch_clocks`] samples the clocks.
const SAMPLE: Duration = Duration::from_millis(500);
/// Samples in a row that find a clock stalled before it is reported (a single step of the wall
/// clock, as NTP makes, is not a stall).
const STRIKES: u8 = 2;

const WALL: u8 = 1;
const MONOTONIC: u8 = 2;

/// The clocks found stalled by [`watch_clocks`] (none until it says otherwise).
#[derive(Debug, Default)]
pub struct ClockFaults(AtomicU8);

impl ClockFaults {
    /// Why IDs cannot be timed, if a clock is stalled.
    pub fn fault(&self) -> Option<&'static str> {
        match self.0.load(Ordering::Relaxed) {
            0 => None,
            WALL => Some(
                "the wall clock is not advancing (checked against the kernel's monotonic clock)",
            ),
            MONOTONIC => Some(
                "the monotonic clock is not advancing (checked against the kernel's): \
                 timeouts cannot fire",
            ),
            _ => Some("neither the wall clock nor the monotonic clock is advancing"),
        }
    }
}

/// Tracks, per clock, how many samples in a row found it stalled.
#[derive(Debug, Default)]
struct Strikes {
    wall: u8,
    monotonic: u8,
}

impl Strikes {
    /// Takes one sample: how far the kernel's clock, the wall clock and std's monotonic clock
    /// moved since the last one. A clock that moved less than a quarter of the kernel's time
    /// has stalled (backwards counts as stalled). Returns the fault bits to report.
    fn sample(&mut self, kernel_ns: u64, wall_ns: i128, monotonic_ns: u64) -> u8 {
        let slow = |moved: i128| moved < i128::from(kernel_ns / 4);
        let bump = |n: &mut u8, stalled: bool| *n = if stalled { n.saturating_add(1) } else { 0 };
        bump(&mut self.wall, slow(wall_ns));
        bump(&mut self.monotonic, slow(i128::from(monotonic_ns)));
        let mut bits = 0;
        if self.wall >= STRIKES {
            bits |= WALL;
        }
        if self.monotonic >= STRIKES {
            bits |= MONOTONIC;
        }
        bits
    }
}

/// Starts a thread that cross-checks `clock` and std's monotonic clock against the kernel's
/// twice a second, publishing stalls in `faults` and in `gauge` (`clock` label: `wall`,
/// `monotonic`), and logging each change. It ends when `faults` has no other owner.
pub fn watch_clocks(
    faults: Arc<ClockFaults>,
    clock: Arc<dyn Clock>,
    gauge: IntGaugeVec,
) -> std::io::Result<()> {
    let reading = move || {
        let k = kernel_monotonic_ns();
        (k, clock.now_unix_ns(), Instant::now())
    };
    std::thread::Builder::new()
        .name("idcar-clocks".into())
        .spawn(move || {
            let mut strikes = Strikes::default();
            let mut last = reading();
            let mut reported = 0;
            while Arc::strong_count(&faults) > 1 {
                // A relative sleep: it ends on time even if the clocks it checks are frozen.
                std::thread::sleep(SAMPLE);
                let now = reading();
                let kernel = now.0.saturating_sub(last.0);
                let wall = i128::from(now.1) - i128::from(last.1);
                let mono = u64::try_from(now.2.saturating_duration_since(last.2).as_nanos())
                    .unwrap_or(u64::MAX);
                last = now;
                if kernel < SAMPLE.as_nanos() as u64 / 2 {
                    // The kernel's own clock stood still (a suspended VM): nothing to compare.
                    continue;
                }
                let bits = strikes.sample(kernel, wall, mono);
                if bits == reported {
                    continue;
                }
                faults.0.store(bits, Ordering::Relaxed);
                gauge
                    .with_label_values(&["wall"])
                    .set(i64::from(bits & WALL != 0));
                gauge
                    .with_label_values(&["monotonic"])
                    .set(i64::from(bits & MONOTONIC != 0));
                match faults.fault() {
                    Some(why) => tracing::error!("clock fault: {why}; not ready"),
                    None => tracing::info!("clocks advance again"),
                }
                reported = bits;
            }
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 500_000_000;

    #[test]
    fn a_stall_is_reported_after_two_samples_and_cleared_after_one() {
        let mut s = Strikes::default();
        assert_eq!(s.sample(S, S as i128, S), 0);
        assert_eq!(s.sample(S, 0, S), 0, "one sample is a step, not a stall");
        assert_eq!(s.sample(S, 0, S), WALL);
        assert_eq!(s.sample(S, 0, 0), WALL);
        assert_eq!(s.sample(S, 0, 0), WALL | MONOTONIC);
        assert_eq!(s.sample(S, S as i128, S), 0);
    }

    #[test]
    fn steps_and_slow_clocks() {
        let mut s = Strikes::default();
        // A backward step of the wall clock, then normal: never reported.
        assert_eq!(s.sample(S, -3_000_000_000, S), 0);
        assert_eq!(s.sample(S, S as i128, S), 0);
        // A wall clock slewed 10 % slow is fine; one at a fifth of the speed is not.
        for _ in 0..3 {
            assert_eq!(s.sample(S, (S * 9 / 10) as i128, S), 0);
        }
        s.sample(S, (S / 5) as i128, S);
        assert_eq!(s.sample(S, (S / 5) as i128, S), WALL);
    }

    #[test]
    fn faults_name_the_clock() {
        let f = ClockFaults::default();
        assert_eq!(f.fault(), None);
        f.0.store(MONOTONIC, Ordering::Relaxed);
        assert!(f
            .fault()
            .unwrap()
            .contains("monotonic clock is not advancing"));
        f.0.store(WALL | MONOTONIC, Ordering::Relaxed);
        assert!(f.fault().unwrap().contains("neither"));
    }

    #[test]
    fn the_kernel_clock_advances() {
        let a = kernel_monotonic_ns();
        std::thread::sleep(Duration::from_millis(2));
        let b = kernel_monotonic_ns();
        assert!(b >= a + 2_000_000, "{a} -> {b}");
    }
}
