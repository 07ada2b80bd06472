//! Binding the Unix socket: a stale file is replaced only when nothing listens on it, the
//! mode is set before any client can connect, and [`SocketFile`] removes it again.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use tokio::net::UnixListener;

#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("{0}: another process is listening on this socket")]
    InUse(String),
    #[error("{0}: exists and is not a socket; refusing to replace it")]
    NotASocket(String),
    /// The socket's directory is missing (idcar does not create it: its owner and mode are
    /// the deployment's to choose).
    #[error("{path}: the directory {dir} {what}")]
    NoDirectory {
        path: String,
        dir: String,
        what: &'static str,
    },
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

impl BindError {
    /// Whether the path given is what is wrong (a usage error), not the moment.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            BindError::NotASocket(_) | BindError::NoDirectory { .. }
        )
    }
}

/// The socket file of a bound listener; [`SocketFile::remove`] deletes it.
#[derive(Debug)]
pub struct SocketFile(PathBuf);

impl SocketFile {
    pub fn remove(&self) {
        if let Err(e) = std::fs::remove_file(&self.0) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(path = %self.0.display(), error = %e, "could not remove the socket file");
            }
        }
    }
}

/// Binds `path` with permissions `mode`, replacing a stale socket file left by a dead process.
pub fn bind(path: &Path, mode: u32) -> Result<(UnixListener, SocketFile), BindError> {
    let shown = path.display().to_string();
    let io = |source| BindError::Io {
        path: shown.clone(),
        source,
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(BindError::NoDirectory {
            path: shown,
            dir: dir.display().to_string(),
            what: if dir.exists() {
                "is not a directory"
            } else {
                "does not exist"
            },
        });
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            match std::os::unix::net::UnixStream::connect(path) {
                Ok(_) => return Err(BindError::InUse(shown)),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    tracing::info!(path = %shown, "replacing a stale socket file");
                    std::fs::remove_file(path).map_err(io)?;
                }
                Err(e) => return Err(io(e)),
            }
        }
        Ok(_) => return Err(BindError::NotASocket(shown)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    // Bind under a temporary name, set the mode, then rename into place: no client can reach
    // the socket before its permissions are final.
    let mut tmp_name = path.file_name().unwrap_or_default().to_owned();
    tmp_name.push(format!(".{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let _ = std::fs::remove_file(&tmp);
    let listener = UnixListener::bind(&tmp).map_err(io)?;
    let placed = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(e));
    }
    let file = SocketFile(path.to_owned());
    Ok((listener, file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn replaces_stale_refuses_live_and_non_sockets() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.sock");
        let (l, f) = bind(&p, 0o660).unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o660);
        assert!(matches!(bind(&p, 0o660), Err(BindError::InUse(_))));
        drop(l); // the file stays: now it is stale
        assert!(p.exists());
        let (_l, f2) = bind(&p, 0o600).unwrap();
        f2.remove();
        f.remove();
        assert!(!p.exists());
        std::fs::write(&p, "x").unwrap();
        assert!(matches!(bind(&p, 0o660), Err(BindError::NotASocket(_))));
    }
}
