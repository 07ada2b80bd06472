//! File descriptors: the budget that keeps client load from starving the lease.
//!
//! Every client connection holds a descriptor; so do the admin listener's connections, the
//! ZooKeeper session (and its reconnects), and each state-file write (lock, temporary file,
//! directory fsync). If clients could take them all, a renewal would fail with "Too many open
//! files" and the lease would run out. So at start idcar raises its soft `RLIMIT_NOFILE` to
//! the hard limit and checks that `--max-connections` + `--admin-max-connections` + a fixed
//! [`RESERVE`] fit under it; when they do not, `--max-connections` is lowered (with a warning
//! naming the flag). The socket listener never accepts past `--max-connections` and the admin
//! listener never holds more than its cap, so the reserve is always there for the lease.

/// Descriptors kept for everything that is not a client connection: standard streams, the
/// runtime's epoll and wakers, signal pipes, the listeners, the timer thread, ZooKeeper
/// connections (old and new during a reconnect) and state-file writes, with room to spare.
pub const RESERVE: u64 = 64;

/// The soft limit before and after raising it to the hard limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Raised {
    pub before: u64,
    pub after: u64,
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (best effort: a failure keeps the soft
/// limit, which is then what the budget is checked against).
pub fn raise_limit() -> std::io::Result<Raised> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    if hard > soft && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        return Ok(Raised {
            before: soft,
            after: hard,
        });
    }
    Ok(Raised {
        before: soft,
        after: soft,
    })
}

/// How many socket connections fit under `limit` descriptors: `Ok(None)` when
/// `max_connections` fits as asked, `Ok(Some(n))` when it must be lowered to `n`, and an
/// error when not even one client connection fits.
pub fn fit(max_connections: usize, admin_max: usize, limit: u64) -> Result<Option<usize>, String> {
    let others = admin_max as u64 + RESERVE;
    if limit >= max_connections as u64 + others {
        return Ok(None);
    }
    match limit.checked_sub(others) {
        Some(n) if n >= 1 => Ok(Some(n as usize)),
        _ => Err(format!(
            "the file-descriptor limit ({limit}) leaves no room for client connections after \
             --admin-max-connections ({admin_max}) and the {RESERVE} kept for the lease: raise \
             the limit (ulimit -n) or lower --admin-max-connections"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_lowers_or_refuses() {
        assert_eq!(fit(1024, 64, 1_048_576), Ok(None));
        assert_eq!(fit(1024, 64, 1024 + 64 + RESERVE), Ok(None));
        assert_eq!(fit(1024, 64, 1024), Ok(Some(1024 - 64 - RESERVE as usize)));
        assert!(fit(1024, 64, 100)
            .unwrap_err()
            .contains("--admin-max-connections"));
    }

    #[test]
    fn raising_keeps_a_usable_limit() {
        let r = raise_limit().unwrap();
        assert!(r.after >= r.before);
    }
}
