use std::fmt;
use std::io;
use std::path::PathBuf;

/// What can go wrong talking to idcar, or reading an ID.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The socket could not be reached (missing, refused, permission denied), past the retry
    /// deadline where the cause is one a restarting server clears.
    Connect {
        /// The socket's path.
        socket: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The socket's directory does not exist (or is not a directory): never retried, as the
    /// server does not create directories.
    NoDirectory {
        /// The socket's path.
        socket: PathBuf,
        /// Its directory.
        dir: PathBuf,
    },
    /// Reading or writing an open connection failed (reset, closed by the server).
    Io(io::Error),
    /// The server did not answer within the client's timeout.
    Timeout,
    /// The server cannot issue IDs now (no lease yet, its mark reached, …), past the retry
    /// deadline: the server's reason.
    Unavailable(String),
    /// The server refused the request (never retried): the server's reason.
    BadRequest(String),
    /// The server sent something that is not idcar's protocol; the connection was dropped.
    Protocol(String),
    /// An ID or a description that does not fit its layout (decoding, parsing text, asking a
    /// 16-byte layout for a `u64`), or a bad argument.
    Invalid(String),
    /// The client was closed.
    Closed,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Connect { socket, source } => {
                write!(
                    f,
                    "cannot connect to idcar at {}: {source}",
                    socket.display()
                )
            }
            Error::NoDirectory { socket, dir } => write!(
                f,
                "cannot connect to idcar at {}: the directory {} does not exist or is not a \
                 directory",
                socket.display(),
                dir.display()
            ),
            Error::Io(e) => write!(f, "idcar connection: {e}"),
            Error::Timeout => f.write_str("idcar did not answer in time"),
            Error::Unavailable(r) => write!(f, "idcar is unavailable: {r}"),
            Error::BadRequest(r) => write!(f, "idcar refused the request: {r}"),
            Error::Protocol(r) => write!(f, "not idcar's protocol: {r}"),
            Error::Invalid(r) => f.write_str(r),
            Error::Closed => f.write_str("the idcar client is closed"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Connect { source, .. } => Some(source),
            Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Error::Timeout,
            _ => Error::Io(e),
        }
    }
}

impl Error {
    /// Why connecting to `socket` failed: [`Error::NoDirectory`] if its directory is missing
    /// (the server starting cannot create it), else [`Error::Connect`].
    pub(crate) fn connecting(socket: &std::path::Path, source: io::Error) -> Error {
        // ENOTDIR: a component of the path is a file.
        let missing = source.kind() == io::ErrorKind::NotFound || source.raw_os_error() == Some(20);
        match socket.parent().filter(|d| !d.as_os_str().is_empty()) {
            Some(dir) if missing && !dir.is_dir() => Error::NoDirectory {
                socket: socket.to_owned(),
                dir: dir.to_owned(),
            },
            _ => Error::Connect {
                socket: socket.to_owned(),
                source,
            },
        }
    }

    /// Whether a new connection may succeed where this one failed: the server restarting or
    /// not issuing yet. Refusals, protocol errors, timeouts and permission problems are final.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Unavailable(_) => true,
            // The server went away (a restart): a new connection may work.
            Error::Io(e) => matches!(
                e.kind(),
                io::ErrorKind::BrokenPipe
                    | io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted
                    | io::ErrorKind::UnexpectedEof
                    | io::ErrorKind::NotConnected
            ),
            Error::Connect { source, .. } => matches!(
                source.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
            ),
            _ => false,
        }
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
