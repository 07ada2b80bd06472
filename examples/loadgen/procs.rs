//! The processes a run measures: the std echo floor, idcar, their CPU time and placement.

use super::*;

/// The floor: a blocking, thread-per-connection echo with std. An 8-byte request gets a
/// 16-byte answer, as idcar's single-ID binary frame does.
pub(crate) fn echo_server(path: &Path) -> anyhow::Result<()> {
    let _ = std::fs::remove_file(path);
    serve_echo(std::os::unix::net::UnixListener::bind(path)?)
}

/// Serves the echo on `l`, a thread per connection.
pub(crate) fn serve_echo(l: std::os::unix::net::UnixListener) -> anyhow::Result<()> {
    use std::io::{Read, Write};
    for s in l.incoming() {
        let mut s = s?;
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            let mut out = [0u8; 8192];
            loop {
                let n = match s.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                out[..n].copy_from_slice(&buf[..n]);
                out[n..2 * n].copy_from_slice(&buf[..n]);
                if s.write_all(&out[..2 * n]).is_err() {
                    return;
                }
            }
        });
    }
    Ok(())
}

/// Nanoseconds the process's threads have run on a CPU (first field of each thread's
/// `/proc/PID/task/TID/schedstat`), summed; `None` where the kernel does not say.
pub(crate) fn cpu_ns(pid: u32) -> Option<u64> {
    let mut total = 0;
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let s = std::fs::read_to_string(t.ok()?.path().join("schedstat")).ok()?;
        total += s.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(total)
}

/// Pins every thread of `pids` and the calling thread to `cpu`, or lets them run anywhere
/// again (`None`).
pub(crate) fn pin_threads(pids: &[u32], cpu: Option<usize>) -> anyhow::Result<()> {
    use nix::sched::{sched_setaffinity, CpuSet};
    use nix::unistd::Pid;
    let mut set = CpuSet::new();
    match cpu {
        Some(c) => set.set(c)?,
        None => {
            let n = std::thread::available_parallelism().map_or(1, |n| n.get());
            for c in 0..n.min(CpuSet::count()) {
                set.set(c)?;
            }
        }
    }
    sched_setaffinity(Pid::from_raw(0), &set)?;
    for pid in pids {
        for t in std::fs::read_dir(format!("/proc/{pid}/task"))? {
            if let Some(tid) = t?.file_name().to_str().and_then(|s| s.parse().ok()) {
                // A thread that ended meanwhile is fine.
                let _ = sched_setaffinity(Pid::from_raw(tid), &set);
            }
        }
    }
    Ok(())
}
