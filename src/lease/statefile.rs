//! The local state file: time marks per `layout/cluster/slot`, replaced atomically.
//!
//! Format (JSON): `{"version":1,"marks":{"lable64/0/3":1732250000123},"tokens":{"lable64/0/3":
//! "5be1c0ffee5be1c0"}}`, marks in the layout's time unit; `tokens` (optional, ignored by
//! older versions) names the claim that wrote each mark (see `lease::protocol`). A write goes to a temporary file in the same directory, is fsynced, renamed over
//! the old file, and the directory is fsynced, so a crash leaves the old or the new file whole.
//! An advisory lock on `<file>.lock` keeps two processes off the same state file.
//!
//! The state file, its lock and its temporary files are `0600` whatever the umask (they are
//! this process's business alone), and none of them may be a symbolic link: a write renames a
//! new file over the path, which would silently replace a link instead of writing where it
//! points, so a link is refused with a clear error instead.

use super::LeaseError;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Contents {
    version: u32,
    marks: BTreeMap<String, u64>,
    /// The token of the claim that wrote each mark, 16 hex digits (absent: written without).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    tokens: BTreeMap<String, String>,
}

/// An open, locked state file.
#[derive(Debug)]
pub struct StateFile {
    path: PathBuf,
    /// Held for as long as this value lives; the kernel drops the lock if the process dies.
    _lock: File,
}

fn err(path: &Path, why: impl std::fmt::Display) -> LeaseError {
    LeaseError::StateFile {
        path: path.display().to_string(),
        why: why.to_string(),
    }
}

/// Refuses `p` when it is a symbolic link.
fn not_a_link(p: &Path, state: &Path) -> Result<(), LeaseError> {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.file_type().is_symlink() => Err(err(
            state,
            format!(
                "{} is a symbolic link; refusing to follow it (idcar replaces the file on every \
                 write, which would replace the link): give the real path",
                p.display()
            ),
        )),
        _ => Ok(()),
    }
}

/// Opens (creating) `p` for writing, owner-only, never through a symbolic link.
fn open_private(p: &Path, truncate: bool) -> std::io::Result<File> {
    let f = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(truncate)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(p)?;
    // The mode above passes through the umask; set it exactly.
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    Ok(f)
}

impl StateFile {
    /// Locks the state file at `path` (creating its lock file), failing if another process
    /// holds it, or if the file or its lock is a symbolic link.
    pub fn open(path: &Path) -> Result<StateFile, LeaseError> {
        let mut lock_path = path.as_os_str().to_owned();
        lock_path.push(".lock");
        let lock_path = PathBuf::from(lock_path);
        not_a_link(path, path)?;
        not_a_link(&lock_path, path)?;
        let lock = open_private(&lock_path, false)
            .map_err(|e| err(path, format!("cannot create lock file: {e}")))?;
        lock.try_lock().map_err(|e| match e {
            std::fs::TryLockError::WouldBlock => err(
                path,
                "locked by another process (is another idcar running with this state file?)",
            ),
            std::fs::TryLockError::Error(e) => err(path, format!("cannot lock: {e}")),
        })?;
        // Holding the lock, no one else writes: temporary files beside ours are leftovers of
        // a write cut short (a crash, a second signal).
        if let (Some(dir), Some(name)) = (path.parent(), path.file_name()) {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            let prefix = format!("{}.tmp.", name.to_string_lossy());
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                if e.file_name().to_string_lossy().starts_with(&prefix) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        // A state file written by an older idcar (or under another umask) becomes owner-only.
        if std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o077 != 0) {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| err(path, format!("cannot make it owner-only: {e}")))?;
        }
        Ok(StateFile {
            path: path.to_owned(),
            _lock: lock,
        })
    }

    fn read_all(&self) -> Result<Contents, LeaseError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Contents::default()),
            Err(e) => return Err(err(&self.path, e)),
        };
        let c: Contents = serde_json::from_str(&text).map_err(|e| {
            err(
                &self.path,
                format!(
                    "unreadable ({e}); it holds the time marks that keep IDs unique across \
                     restarts: repair it, or delete it only if this host's clock is known good"
                ),
            )
        })?;
        if c.version != 1 {
            return Err(err(&self.path, format!("unknown version {}", c.version)));
        }
        Ok(c)
    }

    /// The stored mark for `key`, if any.
    #[cfg(test)]
    pub fn read(&self, key: &str) -> Result<Option<u64>, LeaseError> {
        Ok(self.read_with_token(key)?.map(|(m, _)| m))
    }

    /// The stored mark for `key` and the token that wrote it, if any.
    pub fn read_with_token(&self, key: &str) -> Result<Option<(u64, Option<u64>)>, LeaseError> {
        let c = self.read_all()?;
        let token = c
            .tokens
            .get(key)
            .and_then(|t| u64::from_str_radix(t, 16).ok());
        Ok(c.marks.get(key).map(|m| (*m, token)))
    }

    /// Stores `mark` for `key` (no token), keeping other keys, durably.
    #[cfg(test)]
    pub fn write(&self, key: &str, mark: u64) -> Result<(), LeaseError> {
        self.write_with_token(key, mark, None)
    }

    /// Stores `mark` and the writing claim's `token` for `key`, keeping other keys, durably.
    pub fn write_with_token(
        &self,
        key: &str,
        mark: u64,
        token: Option<u64>,
    ) -> Result<(), LeaseError> {
        not_a_link(&self.path, &self.path)?;
        let mut c = self.read_all()?;
        c.version = 1;
        c.marks.insert(key.to_owned(), mark);
        match token {
            Some(t) => c.tokens.insert(key.to_owned(), format!("{t:016x}")),
            None => c.tokens.remove(key),
        };
        let text = serde_json::to_vec(&c).expect("state serialises");
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
            _ => PathBuf::from("."),
        };
        let mut tmp_name = self.path.file_name().unwrap_or_default().to_owned();
        tmp_name.push(format!(".tmp.{}", std::process::id()));
        let tmp = dir.join(tmp_name);
        let result = (|| -> std::io::Result<()> {
            let mut f = open_private(&tmp, true)?;
            f.write_all(&text)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.path)?;
            File::open(&dir)?.sync_all()
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result.map_err(|e| err(&self.path, format!("cannot write: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_read_keeps_other_keys() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.json");
        let f = StateFile::open(&p).unwrap();
        assert_eq!(f.read("a").unwrap(), None);
        f.write("a", 5).unwrap();
        f.write("b", 7).unwrap();
        f.write("a", 9).unwrap();
        assert_eq!(f.read("a").unwrap(), Some(9));
        assert_eq!(f.read("b").unwrap(), Some(7));
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.contains(".tmp."))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn second_opener_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.json");
        let _f = StateFile::open(&p).unwrap();
        let e = StateFile::open(&p).unwrap_err().to_string();
        assert!(e.contains("locked by another process"), "{e}");
    }

    #[test]
    fn files_are_owner_only_whatever_the_umask() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.json");
        std::fs::write(&p, r#"{"version":1,"marks":{}}"#).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let f = StateFile::open(&p).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&p), 0o600, "an existing file is made owner-only");
        f.write("a", 1).unwrap();
        assert_eq!(mode(&p), 0o600);
        assert_eq!(mode(&dir.path().join("s.json.lock")), 0o600);
    }

    #[test]
    fn symbolic_links_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.json");
        std::fs::write(&real, r#"{"version":1,"marks":{"a":5}}"#).unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let e = StateFile::open(&link).unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        // A link for the lock file is refused too.
        let p = dir.path().join("s.json");
        std::os::unix::fs::symlink(&real, dir.path().join("s.json.lock")).unwrap();
        let e = StateFile::open(&p).unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
    }

    #[test]
    fn corrupt_file_is_an_error_not_a_reset() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.json");
        std::fs::write(&p, "{not json").unwrap();
        let f = StateFile::open(&p).unwrap();
        let e = f.read("a").unwrap_err().to_string();
        assert!(e.contains("unreadable"), "{e}");
    }
}
