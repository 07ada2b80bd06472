//! The local state file: time marks per `layout/cluster/slot`, replaced atomically.
//!
//! Format (JSON): `{"version":1,"marks":{"lable64/0/3":1732250000123}}`, marks in the layout's
//! time unit. A write goes to a temporary file in the same directory, is fsynced, renamed over
//! the old file, and the directory is fsynced, so a crash leaves the old or the new file whole.
//! An advisory lock on `<file>.lock` keeps two processes off the same state file.

use super::LeaseError;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Contents {
    version: u32,
    marks: BTreeMap<String, u64>,
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

impl StateFile {
    /// Locks the state file at `path` (creating its lock file), failing if another process
    /// holds it.
    pub fn open(path: &Path) -> Result<StateFile, LeaseError> {
        let mut lock_path = path.as_os_str().to_owned();
        lock_path.push(".lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
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
    pub fn read(&self, key: &str) -> Result<Option<u64>, LeaseError> {
        Ok(self.read_all()?.marks.get(key).copied())
    }

    /// Stores `mark` for `key`, keeping other keys, durably.
    pub fn write(&self, key: &str, mark: u64) -> Result<(), LeaseError> {
        let mut c = self.read_all()?;
        c.version = 1;
        c.marks.insert(key.to_owned(), mark);
        let text = serde_json::to_vec(&c).expect("state serialises");
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
            _ => PathBuf::from("."),
        };
        let mut tmp_name = self.path.file_name().unwrap_or_default().to_owned();
        tmp_name.push(format!(".tmp.{}", std::process::id()));
        let tmp = dir.join(tmp_name);
        let result = (|| -> std::io::Result<()> {
            let mut f = File::create(&tmp)?;
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
    fn corrupt_file_is_an_error_not_a_reset() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.json");
        std::fs::write(&p, "{not json").unwrap();
        let f = StateFile::open(&p).unwrap();
        let e = f.read("a").unwrap_err().to_string();
        assert!(e.contains("unreadable"), "{e}");
    }
}
