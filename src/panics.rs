//! What a panic does: idcar aborts at once. A panic is a bug whose state nobody knows, and
//! the one thing that must not follow it is a write to the store: unwinding would run
//! destructors, drop the lease's release handle and could let the lease thread write a mark
//! chosen from half-updated state. So the hook logs the panic (where the logs go, JSON
//! included), then aborts: no code of ours runs after it, the mark last written stays in
//! force, the slot frees when the store's session or lease expires (ZooKeeper, etcd) or the
//! process's lock goes (state file), and the successor — this process restarted, or another
//! instance — waits past that mark. This holds wherever the panic happens: a connection's
//! handler, the lease thread, start-up or shutdown.
//!
//! Testing aid (cargo feature `fault-injection`, `serve --plant-panic`): a deliberate panic in
//! a connection's handler (`request:N`, at the N-th HTTP request) or on the lease thread
//! (`lease:DURATION` after start), so tests and the campaign can show what follows; and, for
//! the lease's own defence, `abandon:DURATION`: the process stops issuing and drops its
//! leases' release handles without a release, as an unwinding panic would (idcar never
//! unwinds), then lingers for the shutdown grace and exits 1 — the lease thread must leave
//! the mark it last wrote in force.

use std::time::Duration;

/// Installs the hook: the standard report (message, location, backtrace if asked for), a log
/// line, then abort.
pub fn abort_on_panic() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        let thread = std::thread::current();
        tracing::error!(
            panic = %info,
            thread = thread.name().unwrap_or("unnamed"),
            "panic: aborting at once; nothing more is issued or written, the time mark in force stays"
        );
        std::process::abort();
    }));
}

/// A deliberate panic (testing aid).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PlantedPanic {
    #[default]
    None,
    /// In the handler of the N-th HTTP request (counted from 1).
    Request(u64),
    /// On the lease thread, this long after start.
    Lease(Duration),
    /// Not a panic: this long after start, the release handles are dropped without a release
    /// (what an unwinding panic of the main task would do), the process living on.
    Abandon(Duration),
}

impl std::str::FromStr for PlantedPanic {
    type Err = String;

    fn from_str(s: &str) -> Result<PlantedPanic, String> {
        let bad = || format!("{s:?}: expected none, request:N, lease:DURATION or abandon:DURATION");
        match s.split_once(':') {
            None if s == "none" => Ok(PlantedPanic::None),
            Some(("request", n)) => n
                .parse::<u64>()
                .ok()
                .filter(|n| *n > 0)
                .map(PlantedPanic::Request)
                .ok_or_else(bad),
            Some(("lease", d)) => humantime::parse_duration(d)
                .map(PlantedPanic::Lease)
                .map_err(|_| bad()),
            Some(("abandon", d)) => humantime::parse_duration(d)
                .map(PlantedPanic::Abandon)
                .map_err(|_| bad()),
            _ => Err(bad()),
        }
    }
}

#[cfg(feature = "fault-injection")]
mod planted {
    use super::PlantedPanic;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// The HTTP request to panic at (0: none), and how many have been seen.
    static AT_REQUEST: AtomicU64 = AtomicU64::new(0);
    static REQUESTS: AtomicU64 = AtomicU64::new(0);

    /// Arms the planted panic: a lease panic is a task on the current runtime (call it with
    /// the lease thread's runtime entered).
    pub fn arm(p: PlantedPanic) {
        match p {
            PlantedPanic::None | PlantedPanic::Abandon(_) => {}
            PlantedPanic::Request(n) => {
                tracing::warn!(n, "testing aid: a panic is planted in a request handler");
                AT_REQUEST.store(n, Ordering::SeqCst);
            }
            PlantedPanic::Lease(after) => {
                tracing::warn!(
                    ?after,
                    "testing aid: a panic is planted on the lease thread"
                );
                tokio::spawn(async move {
                    tokio::time::sleep(after).await;
                    panic!("planted panic on the lease thread (--plant-panic)");
                });
            }
        }
    }

    /// Resolves when the leases are to be abandoned (never, unless planted).
    pub async fn abandon(p: PlantedPanic) {
        match p {
            PlantedPanic::Abandon(after) => {
                tracing::warn!(
                    ?after,
                    "testing aid: the leases' release handles are dropped without a release"
                );
                tokio::time::sleep(after).await;
            }
            _ => std::future::pending().await,
        }
    }

    /// Called by each HTTP request's handler.
    pub fn request() {
        let at = AT_REQUEST.load(Ordering::Relaxed);
        if at != 0 && REQUESTS.fetch_add(1, Ordering::SeqCst) + 1 == at {
            panic!("planted panic in a connection handler (--plant-panic)");
        }
    }
}

#[cfg(not(feature = "fault-injection"))]
mod planted {
    pub fn arm(_: super::PlantedPanic) {}
    pub async fn abandon(_: super::PlantedPanic) {
        std::future::pending().await
    }
    #[inline(always)]
    pub fn request() {}
}

pub use planted::{abandon, arm, request};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_where_to_panic() {
        assert_eq!("none".parse(), Ok(PlantedPanic::None));
        assert_eq!("request:3".parse(), Ok(PlantedPanic::Request(3)));
        assert_eq!(
            "lease:2s".parse(),
            Ok(PlantedPanic::Lease(Duration::from_secs(2)))
        );
        assert_eq!(
            "abandon:1500ms".parse(),
            Ok(PlantedPanic::Abandon(Duration::from_millis(1500)))
        );
        for bad in [
            "",
            "request:0",
            "request:x",
            "lease:soon",
            "thread:1",
            "abandon:",
        ] {
            assert!(bad.parse::<PlantedPanic>().is_err(), "{bad}");
        }
    }
}
