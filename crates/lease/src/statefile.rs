//! The local state file: time marks per `layout/cluster/slot`, replaced atomically.
//!
//! Format (JSON): `{"version":1,"marks":{"lable64/0/3":1732250000123},"tokens":{"lable64/0/3":
//! "5be1c0ffee5be1c0"}}`, marks in the layout's time unit; `tokens` (optional, ignored by
//! older versions) names the claim that wrote each mark (see `lease::protocol`); `check`
//! (optional, ignored by older versions) is a checksum of the rest (FNV-1a 64 of the document
//! without it): a document that does not match it is refused as unreadable, so even a disk
//! that tore a sector could not pass off a mix of an old and a new mark as a lower mark.
//! Remove `check` after editing the file by hand.
//!
//! **Writes.** The file is kept exactly one disk sector long (512 bytes, the JSON padded
//! with spaces) while its contents fit, and then a write — every renewal — overwrites it in
//! place: one `pwrite` of the whole sector and one `fdatasync`. A disk writes a sector whole
//! or not at all, even on power loss (the assumption PostgreSQL makes of its `pg_control`,
//! which it also checksums, as `check` does here), and an overwrite of allocated blocks without a size change needs no journal commit, so
//! the write waits for one I/O and nothing else. Under CPU pressure that matters: the old
//! way (a temporary file, fsync, rename, fsync of the directory) waits for the file system's
//! journal thread twice, and on a node saturated by a neighbour took seconds.
//! When the file is not one sector yet (new, from an older version, edited by hand) or its
//! contents outgrow one (many keys), or is not this process's alone (not a regular file, more
//! than one hard link, readable by others), it is replaced the old way: a temporary file in
//! the same directory, fsynced, renamed over the old file, and the directory fsynced. Either
//! way a crash leaves the old or the new contents whole.
//! An advisory lock on the state file itself keeps two processes off it: deleting the lock
//! file admits no second process. If the state file itself is deleted or replaced from outside
//! while idcar runs (its marks with it), the holder re-takes the lock on whatever file is at
//! the path before its next write and stops issuing at once if another process holds it
//! (`lease::local`) — a second process that got in meanwhile read whatever marks that file
//! held: never delete the state file while idcar runs. A write that replaces the file locks the new one
//! before renaming it into place, so the lock never lapses. `<file>.lock` is locked too, as
//! older versions of idcar lock only that: an old and a new idcar never share a state file
//! during an upgrade.
//!
//! The state file, its lock and its temporary files are `0600` whatever the umask (they are
//! this process's business alone), and none of them may be a symbolic link: a write may rename
//! a new file over the path, which would silently replace a link instead of writing where it
//! points, so a link is refused with a clear error instead.

use crate::handle::LeaseError;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A file this long is overwritten in place (see the module documentation).
const SECTOR: usize = 512;

#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Contents {
    version: u32,
    marks: BTreeMap<String, u64>,
    /// FNV-1a 64 (16 hex digits) of the document without this field; absent: not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    check: Option<String>,
    /// The token of the claim that wrote each mark, 16 hex digits (absent: written without).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    tokens: BTreeMap<String, String>,
}

/// An open, locked state file.
#[derive(Debug)]
pub struct StateFile {
    path: PathBuf,
    /// `<file>.lock`, locked as older versions lock it. Held for as long as this value lives;
    /// the kernel drops the lock if the process dies.
    _lock: File,
    /// The state file itself, open and locked: the file at `path` as long as no one outside
    /// deletes or replaces it (checked before each write, see [`StateFile::hold`]).
    held: std::sync::Mutex<File>,
}

/// The error of a state file that another process holds.
pub(crate) const LOCKED: &str =
    "locked by another process (is another idcar running with this state file?)";

/// Opens the file at `path` and locks it, making sure the lock is on the file that is at
/// `path` now (another process may replace it between the open and the lock). A missing file
/// is created holding no marks — written whole to a temporary file, locked, then renamed into
/// place — so the path never shows an empty file (an empty or truncated state file is an
/// error, never "no marks").
fn lock_own(path: &Path) -> Result<File, LeaseError> {
    use std::os::unix::fs::MetadataExt;
    for _ in 0..10 {
        let f = match OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                create_locked(path)?;
                continue;
            }
            Err(e) => return Err(err(path, format!("cannot open: {e}"))),
        };
        f.try_lock().map_err(|e| match e {
            std::fs::TryLockError::WouldBlock => err(path, LOCKED),
            std::fs::TryLockError::Error(e) => err(path, format!("cannot lock: {e}")),
        })?;
        let ours = f.metadata().map_err(|e| err(path, e))?;
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.dev() == ours.dev() && m.ino() == ours.ino() => return Ok(f),
            _ => continue,
        }
    }
    Err(err(path, "keeps being replaced while idcar locks it"))
}

/// Creates a state file holding no marks at `path` unless one appeared meanwhile.
fn create_locked(path: &Path) -> Result<(), LeaseError> {
    let text = br#"{"version":1,"marks":{}}"#;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp.{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let made = (|| -> std::io::Result<()> {
        let mut f = open_private(&tmp, true)?;
        f.write_all(text)?;
        f.sync_all()?;
        // Never over a file that appeared meanwhile: a hard link fails if the path exists.
        match std::fs::hard_link(&tmp, path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        std::fs::remove_file(&tmp)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            File::open(dir)?.sync_all()?;
        }
        Ok(())
    })();
    if made.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    made.map_err(|e| err(path, format!("cannot create: {e}")))
}

/// FNV-1a 64 of `c` as serialised, 16 hex digits; `c.check` must be `None` (the sum is of
/// the document without it).
fn checksum(c: &Contents) -> String {
    debug_assert!(c.check.is_none());
    let text = serde_json::to_vec(c).expect("state serialises");
    let hash = text.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{hash:016x}")
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
            std::fs::TryLockError::WouldBlock => err(path, LOCKED),
            std::fs::TryLockError::Error(e) => err(path, format!("cannot lock: {e}")),
        })?;
        let held = lock_own(path)?;
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
            held: std::sync::Mutex::new(held),
        })
    }

    fn held(&self) -> std::sync::MutexGuard<'_, File> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes sure the file at the path is the one this process holds locked: if someone
    /// outside deleted or replaced it, the file now there is locked instead (created empty if
    /// missing) — or, if another process holds it, this is an error and nothing is written.
    pub(crate) fn hold(&self) -> Result<(), LeaseError> {
        use std::os::unix::fs::MetadataExt;
        let mut held = self.held();
        let ours = held.metadata().map_err(|e| err(&self.path, e))?;
        match std::fs::symlink_metadata(&self.path) {
            Ok(m) if m.dev() == ours.dev() && m.ino() == ours.ino() => return Ok(()),
            _ => {}
        }
        tracing::warn!(
            path = %self.path.display(),
            "the state file was deleted or replaced by another program while idcar held it; locking the file now there"
        );
        *held = lock_own(&self.path)?;
        Ok(())
    }
    fn read_all(&self) -> Result<Contents, LeaseError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Contents::default()),
            Err(e) => return Err(err(&self.path, e)),
        };
        // The version first: a later format may hold anything past it.
        #[derive(serde::Deserialize)]
        struct Head {
            version: Option<u64>,
        }
        if let Ok(Head {
            version: Some(v @ 2..),
        }) = serde_json::from_str::<Head>(&text)
        {
            return Err(err(
                &self.path,
                format!(
                    "is in state-file format {v}, written by a newer idcar; this idcar ({}) \
                     reads format 1 and refuses it rather than misread its time marks: run a \
                     version that reads format {v} (see the operations guide, \"Upgrading and \
                     rolling back\")",
                    env!("CARGO_PKG_VERSION")
                ),
            ));
        }
        let mut c: Contents = serde_json::from_str(&text).map_err(|e| {
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
        if let Some(check) = c.check.take() {
            if check != checksum(&c) {
                return Err(err(
                    &self.path,
                    "does not match its checksum (\"check\"): a write torn by a power loss, or an \
                     edit by hand (remove \"check\" after editing); it holds the time marks that \
                     keep IDs unique across restarts: repair it, or delete it only if this \
                     host's clock is known good",
                ));
            }
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
        self.hold()?;
        let mut c = self.read_all()?;
        c.version = 1;
        c.marks.insert(key.to_owned(), mark);
        match token {
            Some(t) => c.tokens.insert(key.to_owned(), format!("{t:016x}")),
            None => c.tokens.remove(key),
        };
        c.check = Some(checksum(&c));
        let mut text = serde_json::to_vec(&c).expect("state serialises");
        if text.len() < SECTOR {
            text.resize(SECTOR - 1, b' ');
            text.push(b'\n');
            match self.overwrite(&text) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(e) => return Err(err(&self.path, format!("cannot write: {e}"))),
            }
        }
        self.replace(&text)
    }

    /// Overwrites the file in place with `text` (one sector) if it is one sector long now:
    /// one write, one `fdatasync`. `Ok(false)` when it is not (the caller replaces it).
    fn overwrite(&self, text: &[u8]) -> std::io::Result<bool> {
        // The file this process holds locked (`hold` checked it is the one at the path).
        let f = self.held();
        // Only a file that is this process's alone and already one sector long.
        use std::os::unix::fs::MetadataExt;
        let m = f.metadata()?;
        if !m.is_file() || m.nlink() != 1 || m.mode() & 0o077 != 0 || m.len() != text.len() as u64 {
            return Ok(false);
        }
        f.write_all_at(text, 0)?;
        f.sync_data()?;
        Ok(true)
    }

    /// Replaces the file with `text`: a temporary file, fsynced, renamed over it, and the
    /// directory fsynced.
    fn replace(&self, text: &[u8]) -> Result<(), LeaseError> {
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
            _ => PathBuf::from("."),
        };
        let mut tmp_name = self.path.file_name().unwrap_or_default().to_owned();
        tmp_name.push(format!(".tmp.{}", std::process::id()));
        let tmp = dir.join(tmp_name);
        let mut held = self.held();
        let result = (|| -> std::io::Result<File> {
            let mut f = open_private(&tmp, true)?;
            // Locked before it takes the path: the lock never lapses.
            f.try_lock().map_err(std::io::Error::other)?;
            f.write_all(text)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.path)?;
            File::open(&dir)?.sync_all()?;
            Ok(f)
        })();
        match result {
            Ok(f) => {
                *held = f;
                Ok(())
            }
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                Err(err(&self.path, format!("cannot write: {e}")))
            }
        }
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

    /// A state file of a later format is refused, naming both formats, whatever it holds
    /// past its version; it is left as it was.
    #[test]
    fn a_newer_format_is_refused_unread_and_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.json");
        let newer = r#"{"version":2,"marks":{"a":"at 5 past"}}"#;
        std::fs::write(&p, newer).unwrap();
        let f = StateFile::open(&p).unwrap();
        let e = f.read("a").unwrap_err().to_string();
        assert!(e.contains("state-file format 2"), "{e}");
        assert!(e.contains("reads format 1"), "{e}");
        assert!(f.write_with_token("a", 9, None).is_err());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), newer);
    }

    /// Once one sector long, the file is overwritten in place (same inode, one sector, still
    /// JSON); contents that outgrow a sector are written whole by a replacement.
    #[test]
    fn renewals_overwrite_one_sector_in_place() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.json");
        std::fs::write(&p, r#"{"version":1,"marks":{"a":1}}"#).unwrap();
        let f = StateFile::open(&p).unwrap();
        f.write_with_token("a", 5, Some(7)).unwrap();
        let meta = std::fs::metadata(&p).unwrap();
        assert_eq!(meta.len(), SECTOR as u64, "padded to one sector");
        for mark in 6..20 {
            f.write_with_token("a", mark, Some(7)).unwrap();
        }
        let after = std::fs::metadata(&p).unwrap();
        assert_eq!(after.ino(), meta.ino(), "written in place, not replaced");
        assert_eq!(f.read_with_token("a").unwrap(), Some((19, Some(7))));
        let text = std::fs::read_to_string(&p).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v["marks"]["a"], 19,
            "plain JSON with trailing spaces: {text}"
        );
        // Many keys: more than a sector, replaced whole; every key kept.
        for k in 0..20 {
            f.write(&format!("layout{k}/cluster/slot"), 1_000_000_000_000 + k)
                .unwrap();
        }
        assert!(std::fs::metadata(&p).unwrap().len() > SECTOR as u64);
        assert_eq!(
            f.read("layout7/cluster/slot").unwrap(),
            Some(1_000_000_000_007)
        );
        assert_eq!(f.read("a").unwrap(), Some(19));
    }

    /// A document that does not match its checksum (a torn sector that still parses, a hand
    /// edit that kept `check`) is refused, never read as a lower mark; one without `check`
    /// (older versions, hand-written) is read.
    #[test]
    fn a_mark_that_does_not_match_its_checksum_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.json");
        let f = StateFile::open(&p).unwrap();
        f.write_with_token("a", 1_999, Some(7)).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.contains("\"check\""), "{text}");
        std::fs::write(&p, text.replace("1999", "1900")).unwrap();
        let e = f.read("a").unwrap_err().to_string();
        assert!(e.contains("checksum"), "{e}");
        std::fs::write(&p, r#"{"version":1,"marks":{"a":1900}}"#).unwrap();
        assert_eq!(f.read("a").unwrap(), Some(1_900));
    }

    /// A state file with a second hard link is not written through it: replaced instead.
    #[test]
    fn a_hard_linked_file_is_replaced_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.json");
        let f = StateFile::open(&p).unwrap();
        f.write("a", 5).unwrap();
        f.write("a", 6).unwrap();
        let other = dir.path().join("elsewhere");
        std::fs::hard_link(&p, &other).unwrap();
        f.write("a", 7).unwrap();
        assert_eq!(f.read("a").unwrap(), Some(7));
        let theirs: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&other).unwrap()).unwrap();
        assert_eq!(theirs["marks"]["a"], 6, "the other link keeps its contents");
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
    fn a_truncated_state_file_is_an_error_and_a_new_one_is_never_empty() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.json");
        let f = StateFile::open(&p).unwrap();
        assert!(std::fs::metadata(&p).unwrap().len() > 0, "created whole");
        assert_eq!(f.read("k").unwrap(), None);
        drop(f);
        std::fs::write(&p, b"").unwrap();
        let f = StateFile::open(&p).unwrap();
        let e = f.read("k").unwrap_err().to_string();
        assert!(e.contains("unreadable"), "{e}");
    }

    #[test]
    fn a_deleted_lock_file_admits_no_second_process() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.json");
        let f = StateFile::open(&p).unwrap();
        f.write("k", 7).unwrap();
        std::fs::remove_file(dir.path().join("s.json.lock")).unwrap();
        let e = StateFile::open(&p).unwrap_err().to_string();
        assert!(e.contains("locked by another process"), "{e}");
        // Its writes, in place or replacing the file, keep the state file locked.
        f.write("k", 8).unwrap();
        f.write(&"x".repeat(600), 1).unwrap();
        f.write("k", 9).unwrap();
        let e = StateFile::open(&p).unwrap_err().to_string();
        assert!(e.contains("locked by another process"), "{e}");
        assert_eq!(f.read("k").unwrap(), Some(9));
    }

    #[test]
    fn a_state_file_replaced_from_outside_is_locked_again_before_a_write() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.json");
        let f = StateFile::open(&p).unwrap();
        f.write("k", 7).unwrap();
        // An editor's save: a new file renamed over the old one.
        let edited = dir.path().join("edited");
        std::fs::write(&edited, r#"{"version":1,"marks":{"k":5}}"#).unwrap();
        std::fs::rename(&edited, &p).unwrap();
        f.write("k", 8).unwrap();
        let e = StateFile::open(&p).unwrap_err().to_string();
        assert!(e.contains("locked by another process"), "{e}");
        // Deleted: recreated, and locked, by the next write.
        std::fs::remove_file(&p).unwrap();
        f.write("k", 9).unwrap();
        assert_eq!(f.read("k").unwrap(), Some(9));
        assert!(StateFile::open(&p).is_err());
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
