//! Whether the sidecars serve: a probe of one socket, the wait until enough serve after the
//! start, and the liveness check after every fault is healed.

use crate::nemesis::Nemesis;
use crate::probe::{probe, Probe};
use crate::procs::{Cluster, SidecarSpec};
use serde::Serialize;
use std::time::{Duration, Instant};

/// Waits (bounded) until `want` sidecars serve: how many did, and when.
pub fn wait_until_served(cl: &Cluster, want: usize, limit: Duration) -> (usize, Duration) {
    let t = Instant::now();
    loop {
        let n = cl
            .sidecars
            .iter()
            .filter(|s| probe(&s.socket) == Probe::Serves)
            .count();
        if n >= want || t.elapsed() > limit {
            return (n, t.elapsed());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Liveness once everything is healed.
#[derive(Debug, Serialize)]
pub struct Liveness {
    pub passed: bool,
    /// Seconds from the last heal until every sidecar that can hold a slot served and the
    /// others reported exhaustion (or the last state seen).
    pub seconds: f64,
    pub limit_seconds: f64,
    pub serving: usize,
    pub exhausted: usize,
    pub other: Vec<String>,
}

/// After healing: within `settle` (what a successor may need by the docs) + 5 s, in every
/// pool the holders (`min(pool, sidecars)`) serve and the others report exhaustion.
pub fn liveness(
    cl: &mut Cluster,
    nem: &mut Nemesis,
    spec: &SidecarSpec,
    settle: Duration,
) -> Liveness {
    let t = Instant::now();
    let limit = settle + Duration::from_secs(5);
    loop {
        let _ = nem.step(cl, spec, false);
        let probes: Vec<Probe> = cl.sidecars.iter().map(|s| probe(&s.socket)).collect();
        let serving = probes.iter().filter(|p| **p == Probe::Serves).count();
        let exhausted = probes.iter().filter(|p| **p == Probe::Exhausted).count();
        let passed = spec.pools.iter().all(|pool| {
            let mine = &probes[pool.sidecars.clone()];
            let serve = mine.iter().filter(|p| **p == Probe::Serves).count();
            let exhaust = mine.iter().filter(|p| **p == Probe::Exhausted).count();
            serve == pool.holders() && exhaust == mine.len() - pool.holders()
        });
        if passed || t.elapsed() > limit {
            return Liveness {
                passed,
                seconds: t.elapsed().as_secs_f64(),
                limit_seconds: limit.as_secs_f64(),
                serving,
                exhausted,
                other: probes
                    .into_iter()
                    .enumerate()
                    .filter_map(|(i, p)| match p {
                        Probe::Other(why) => Some(format!("sidecar {i}: {why}")),
                        _ => None,
                    })
                    .collect(),
            };
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}
