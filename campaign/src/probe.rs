//! Whether a sidecar serves: one request on its socket, bounded in time.

use crate::load::exchange;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// What one probe of a sidecar found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Probe {
    Serves,
    Exhausted,
    Other(String),
}

pub(crate) fn probe(socket: &Path) -> Probe {
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
