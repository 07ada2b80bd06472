//! Whether the sidecars serve: a probe of one socket, the wait until enough serve after the
//! start, and the liveness check after every fault is healed.

use crate::load::exchange;
use crate::nemesis::Nemesis;
use crate::procs::{Cluster, SidecarSpec};
use serde::Serialize;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// What one probe of a sidecar found.
#[derive(Debug, PartialEq, Eq)]
enum Probe {
    Serves,
    Exhausted,
    Other(String),
}

fn probe(socket: &Path) -> Probe {
    let Ok(mut s) = UnixStream::connect(socket) else {
        return Probe::Other("no socket".into());
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
    match exchange(&mut s, 1) {
        Ok(Ok(_)) => Probe::Serves,
        // The queue's head reports the exhausted pool; the others wait behind it.
        Ok(Err((_, reason)))
            if reason.contains("pool exhausted")
                || reason.contains("waiting in the slot queue") =>
        {
            Probe::Exhausted
        }
        Ok(Err((_, reason))) => Probe::Other(reason),
        Err(e) => Probe::Other(e.to_string()),
    }
}

/// Whether the sidecar on `socket` answers a request with IDs now.
pub fn serves(socket: &Path) -> bool {
    probe(socket) == Probe::Serves
}

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
