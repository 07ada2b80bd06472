//! A rolling upgrade and rollback under faults (`--previous-idcar`): which version each
//! sidecar runs at each moment of the run, and the graceful restarts that move it.

use crate::{nemesis, procs};
use anyhow::Result;
use std::time::Duration;

/// Whether sidecar `s` of `n` runs the previous version at `at` of a run of `d`: all of them
/// until 15 % of the run, then upgraded one after another until 30 %, all on this version
/// until 60 %, rolled back one after another until 75 %, all on the previous version after
/// (the rest of the run leaves the nemesis room for solo faults).
fn on_previous(s: usize, n: usize, at: Duration, d: Duration) -> bool {
    let f = at.as_secs_f64() / d.as_secs_f64().max(1e-3);
    let step = 0.15 * s as f64 / n.max(1) as f64;
    !(f >= 0.15 + step && f < 0.6 + step)
}

/// Moves every sidecar that is due, and that no fault touches, to the version the schedule
/// says (`on_previous`): a graceful restart, as a rolling upgrade or rollback does it. How
/// many it moved.
pub(crate) fn upgrade_step(
    at: Duration,
    d: Duration,
    nem: &mut nemesis::Nemesis,
    cl: &mut procs::Cluster,
    spec: &procs::SidecarSpec,
) -> Result<usize> {
    let n = cl.sidecars.len();
    let mut moved = 0;
    for s in 0..n {
        let want = on_previous(s, n, at, d);
        if cl.sidecars[s].on_previous == want || nem.busy_sidecar(s) {
            continue;
        }
        cl.sidecars[s].on_previous = want;
        let how = if want { "rollback" } else { "upgrade" };
        if cl.sidecars[s].running() {
            let start_ns = procs::now_ns();
            let exited =
                cl.sidecars[s].term_and_wait(&format!("SIGTERM ({how})"), Duration::from_secs(10));
            cl.sidecars[s].spawn(spec, 0)?;
            // Judged as a graceful hand-over: it touches this sidecar, and its slot's
            // successor must serve in time.
            nem.record(nemesis::Fault {
                kind: nemesis::Kind::Upgrade,
                sidecar: Some(s),
                zk: None,
                minority: Vec::new(),
                did: if exited {
                    how.to_string()
                } else {
                    format!("{how}: killed, not exited in 10 s")
                },
                skew_s: 0,
                start_ns,
                in_force_ns: start_ns,
                end_ns: procs::now_ns(),
                answered_ns: None,
            });
            moved += 1;
            println!(
                "campaign: {:5.1} s: sidecar {s} restarted on the {} version ({how})",
                at.as_secs_f64(),
                if want { "previous" } else { "new" }
            );
        }
    }
    Ok(moved)
}
