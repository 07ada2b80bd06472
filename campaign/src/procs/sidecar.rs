//! The idcar sidecars: each in its own network namespace, started (with its clock skewed,
//! with extra flags, with the pool's other parameters), signalled, killed, every incarnation
//! recorded.

use super::{now_ns, Pool, Reconfig, Store};
use crate::net::Host;
use anyhow::{Context, Result};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// libfaketime's preload library (Debian package `faketime`).
pub const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// How a sidecar's incarnation ended.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Incarnation {
    pub sidecar: usize,
    pub number: u32,
    /// libfaketime offset of its clock, seconds (0: the true clock).
    pub skew_s: i64,
    pub started_ns: u64,
    pub ended_ns: Option<u64>,
    pub ended_by: Option<String>,
    pub log: PathBuf,
    /// Started with the pool's other parameters (the reconfigure fault): its IDs decode with
    /// them.
    pub reconfigured: bool,
    /// Which idcar it ran: `this` (`--idcar`) or `previous` (`--previous-idcar`).
    pub version: &'static str,
}

/// One sidecar: its namespace, socket, and current process.
pub struct Sidecar {
    pub index: usize,
    /// The pool it competes in (an index into `SidecarSpec::pools`).
    pub pool: usize,
    pub host: Host,
    pub socket: PathBuf,
    /// The incarnation a new connection to `socket` reaches (0: none started yet).
    pub incarnation: Arc<AtomicU32>,
    pub skew_s: i64,
    /// Its next incarnation runs the previous version (`SidecarSpec::previous`).
    pub on_previous: bool,
    child: Option<Child>,
    pub history: Vec<Incarnation>,
}

/// What every sidecar is started with.
pub struct SidecarSpec {
    pub idcar: PathBuf,
    /// The previous version's idcar, run by sidecars whose `on_previous` is set (a rolling
    /// upgrade and its rollback).
    pub previous: Option<PathBuf>,
    pub dir: PathBuf,
    /// The flags every sidecar is served with; each pool adds its own (`Pool::args`).
    pub args: Vec<String>,
    pub store: Store,
    /// The pools: the main one first, where the operator's faults act.
    pub pools: Vec<Pool>,
    /// The pool's layout and cluster (for the operator faults on the store).
    pub layout: String,
    pub cluster: u8,
    pub scheme: idcar_core::layout::Scheme,
    /// What an operator changes the pool's parameters to (the reconfigure fault).
    pub other: Reconfig,
    /// The main pool's size (a static instance beside it takes the generator just outside).
    pub pool_size: u32,
}

impl Sidecar {
    pub fn new(index: usize, pool: usize, host: Host, dir: &Path) -> Sidecar {
        Sidecar {
            index,
            pool,
            host,
            socket: dir.join(format!("sc{index}.sock")),
            incarnation: Arc::new(AtomicU32::new(0)),
            skew_s: 0,
            on_previous: false,
            child: None,
            history: Vec::new(),
        }
    }

    pub fn running(&self) -> bool {
        self.child.is_some()
    }

    pub fn pid(&self) -> Option<Pid> {
        self.child.as_ref().map(|c| Pid::from_raw(c.id() as i32))
    }

    /// Starts a new incarnation, its clock `skew_s` seconds off (libfaketime) when non-zero.
    pub fn spawn(&mut self, spec: &SidecarSpec, skew_s: i64) -> Result<()> {
        self.spawn_with(spec, skew_s, &[])
    }

    /// [`Sidecar::spawn`] with `extra` flags after the common ones (a later flag wins).
    pub fn spawn_with(&mut self, spec: &SidecarSpec, skew_s: i64, extra: &[String]) -> Result<()> {
        assert!(self.child.is_none(), "sidecar {} still runs", self.index);
        let number = self.incarnation.load(Ordering::SeqCst) + 1;
        let log = spec.dir.join(format!("sc{}.{number}.log", self.index));
        let out = std::fs::File::create(&log)?;
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.host.ns, "env"]);
        if skew_s != 0 {
            cmd.arg(format!("LD_PRELOAD={FAKETIME}"))
                .arg(format!("FAKETIME={skew_s:+}s"))
                .arg("FAKETIME_DONT_FAKE_MONOTONIC=1");
        }
        let (binary, version) = match (&spec.previous, self.on_previous) {
            (Some(p), true) => (p, "previous"),
            _ => (&spec.idcar, "this"),
        };
        cmd.arg(binary)
            .arg("serve")
            .arg("--socket")
            .arg(&self.socket)
            .arg("--pod-name")
            .arg(format!("sc{}", self.index))
            .args(&spec.args)
            .args(spec.pools[self.pool].args(spec.store))
            .args(extra)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        // New connections reach the new process from here on (the old one is gone).
        self.incarnation.store(number, Ordering::SeqCst);
        self.child = Some(cmd.spawn().context("cannot start idcar")?);
        self.skew_s = skew_s;
        self.history.push(Incarnation {
            sidecar: self.index,
            number,
            skew_s,
            started_ns: now_ns(),
            ended_ns: None,
            ended_by: None,
            log,
            reconfigured: false,
            version,
        });
        Ok(())
    }

    /// [`Sidecar::spawn`] with the pool's other parameters (`spec.other`).
    pub fn spawn_reconfigured(&mut self, spec: &SidecarSpec) -> Result<()> {
        self.spawn_with(spec, 0, &spec.other.flags)?;
        if let Some(h) = self.history.last_mut() {
            h.reconfigured = true;
        }
        Ok(())
    }

    /// Sends `sig` to the current process.
    pub fn signal(&self, sig: Signal) {
        if let Some(pid) = self.pid() {
            let _ = kill(pid, sig);
        }
    }

    /// Whether the process has exited (reaping it, and recording how).
    pub fn reap(&mut self, how: &str) -> bool {
        let Some(c) = self.child.as_mut() else {
            return true;
        };
        match c.try_wait() {
            Ok(Some(status)) => {
                self.child = None;
                if let Some(h) = self.history.last_mut() {
                    h.ended_ns = Some(now_ns());
                    h.ended_by = Some(format!("{how} ({status})"));
                }
                true
            }
            _ => false,
        }
    }

    /// SIGTERMs the process (a graceful hand-over) and waits for it, at most `limit` (then
    /// SIGKILLs it): whether it exited by itself.
    pub fn term_and_wait(&mut self, how: &str, limit: std::time::Duration) -> bool {
        self.signal(Signal::SIGCONT);
        self.signal(Signal::SIGTERM);
        let until = std::time::Instant::now() + limit;
        while std::time::Instant::now() < until {
            if self.reap(how) {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        self.kill9(&format!("{how}, not exited in {limit:?}"));
        false
    }

    /// SIGKILLs the process and waits for it.
    pub fn kill9(&mut self, how: &str) {
        self.signal(Signal::SIGCONT);
        self.signal(Signal::SIGKILL);
        if let Some(c) = self.child.as_mut() {
            let _ = c.wait();
        }
        self.reap(how);
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        self.kill9("campaign ended");
    }
}
