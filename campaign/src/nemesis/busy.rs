//! The busy neighbour: a CPU-saturating process beside the sidecars (the fault), and that
//! process itself (`idcar-campaign busy`).

use super::started::{secs, Heal, Started};
use super::Nemesis;
use anyhow::Result;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

impl Nemesis {
    /// Busy: a busy neighbour started for 10 to 25 s (at most `busy_max`).
    pub(super) fn start_busy(&mut self) -> Result<Started> {
        let d = secs(&mut self.rng, 10.0, 25.0).min(self.timing.busy_max);
        let child = Command::new(std::env::current_exe()?)
            .args(["busy", "--threads", "16", "--seconds"])
            .arg(format!("{:.1}", d.as_secs_f64()))
            .stdin(Stdio::null())
            .spawn()?;
        Ok(Some((d, Heal::Busy(child))))
    }
}

/// The busy neighbour itself: `threads` threads spinning for `seconds` (bounded), then exit.
pub fn busy(threads: usize, seconds: f64) {
    let until = Instant::now() + Duration::from_secs_f64(seconds.clamp(0.0, 600.0));
    let workers: Vec<_> = (0..threads.clamp(1, 256))
        .map(|_| {
            std::thread::spawn(move || {
                let mut x = 0u64;
                while Instant::now() < until {
                    for _ in 0..10_000 {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                }
            })
        })
        .collect();
    for w in workers {
        let _ = w.join();
    }
}
