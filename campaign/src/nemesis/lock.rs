//! The lock fault: a static instance beside the pool, its lock file deleted by an operator,
//! a second instance started on the same state file, which must be refused while the first
//! serves on.

use super::started::{secs, Heal, Started, StaticPair};
use super::{Fault, Nemesis};
use crate::procs::SidecarSpec;
use anyhow::Result;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

impl Nemesis {
    /// Starts the lock fault: a pair of static instances on a new state file.
    pub(super) fn start_lock(&mut self, spec: &SidecarSpec, fault: &mut Fault) -> Result<Started> {
        self.locks += 1;
        let Some(pair) = lock_fault(spec, self.locks, &mut self.violations)? else {
            return Ok(None);
        };
        fault.did = format!(
            "static instance {} started, its lock file deleted, a second one started",
            self.locks
        );
        Ok(Some((secs(&mut self.rng, 2.0, 4.0), Heal::Lock(pair))))
    }
}

/// The lock fault's end: the second instance must have been refused, the first must still
/// serve (else a violation each); both stopped.
pub(super) fn judge_and_stop(pair: &mut StaticPair, violations: &mut Vec<(&'static str, String)>) {
    // Refused at once, normally; a busy neighbour may slow it (bounded).
    let until = Instant::now() + Duration::from_secs(5);
    while matches!(pair.second.try_wait(), Ok(None)) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    let second = pair.second.try_wait();
    let said = std::fs::read_to_string(&pair.second_log).unwrap_or_default();
    let refused = matches!(&second, Ok(Some(st)) if !st.success())
        && said.contains("locked by another process");
    if !refused {
        violations.push((
            "static slot: a second instance on a state file is refused",
            format!(
                "its lock file deleted, a second instance on it {}: {}",
                match second {
                    Ok(Some(st)) => format!("exited ({st})"),
                    _ => "still runs".into(),
                },
                said.lines().last().unwrap_or_default()
            ),
        ));
    }
    let first_serves = std::os::unix::net::UnixStream::connect(&pair.socket)
        .and_then(|mut c| {
            c.set_read_timeout(Some(Duration::from_secs(2)))?;
            crate::load::exchange(&mut c, 1)
        })
        .is_ok_and(|r| r.is_ok());
    if !first_serves {
        violations.push((
            "static slot: the first instance serves on",
            "after a second instance was started on its state file".into(),
        ));
    }
    for c in [&mut pair.first, &mut pair.second] {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// Starts a static instance on a new state file (generator = the pool's size + 1: outside it),
/// waits (bounded) until it serves, deletes its lock file and starts a second one on the same
/// state file. `None` (and a violation) if the first never served.
fn lock_fault(
    spec: &SidecarSpec,
    n: u32,
    violations: &mut Vec<(&'static str, String)>,
) -> Result<Option<StaticPair>> {
    // Outside the pool, and outside the one a reconfigure fault may make one larger.
    let generator = spec.pool_size + 1;
    if generator >= spec.scheme.slots {
        return Ok(None);
    }
    let dir = spec.dir.join(format!("static{n}"));
    std::fs::create_dir_all(&dir)?;
    let state = dir.join("state");
    let start = |i: u32| -> Result<(Child, std::path::PathBuf, std::path::PathBuf)> {
        let socket = dir.join(format!("{i}.sock"));
        let log = dir.join(format!("{i}.log"));
        let out = std::fs::File::create(&log)?;
        let child = Command::new(&spec.idcar)
            .arg("serve")
            .arg("--state-file")
            .arg(&state)
            .arg("--socket")
            .arg(&socket)
            .args(["--admin-addr", "none", "--log-format", "json"])
            .args(["--layout", &spec.layout])
            .args(["--cluster-id", &spec.cluster.to_string()])
            .args(["--generator-id", &generator.to_string()])
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()?;
        Ok((child, socket, log))
    };
    let (mut first, socket, _) = start(1)?;
    let until = Instant::now() + Duration::from_secs(10);
    let serves = loop {
        let ok = std::os::unix::net::UnixStream::connect(&socket)
            .and_then(|mut c| {
                c.set_read_timeout(Some(Duration::from_secs(1)))?;
                crate::load::exchange(&mut c, 1)
            })
            .is_ok_and(|r| r.is_ok());
        if ok || Instant::now() > until {
            break ok;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    if !serves {
        let _ = first.kill();
        let _ = first.wait();
        violations.push((
            "static slot: a static instance serves",
            format!("static instance {n} did not serve within 10 s"),
        ));
        return Ok(None);
    }
    let mut lock = state.clone().into_os_string();
    lock.push(".lock");
    let second = std::fs::remove_file(&lock)
        .map_err(anyhow::Error::from)
        .and_then(|()| start(2));
    let (second, _, second_log) = match second {
        Ok(s) => s,
        Err(e) => {
            let _ = first.kill();
            let _ = first.wait();
            return Err(e);
        }
    };
    Ok(Some(StaticPair {
        first,
        second,
        socket,
        second_log,
    }))
}
