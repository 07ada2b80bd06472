//! The `Fixture` a store implements to be checked, and the state file's.

use super::*;

/// A store under test: how to become a holder of `SLOT`, and how others touch its mark.
pub(crate) trait Fixture: Send + Sync + Sized + 'static {
    type S: MarkStore + 'static;
    async fn new() -> Self;
    /// A holder of the slot, claimed the way this store claims (retrying while a previous
    /// holder still has it).
    async fn holder(&self) -> Self::S;
    /// Someone else (an operator, another holder) writes `mark` with another token.
    async fn foreign_write(&self, mark: u64);
    /// The slot's mark as stored.
    async fn stored(&self) -> u64;
    /// Someone else (an operator, a script) deletes the slot's mark.
    async fn delete_mark(&self);
    /// An operator deletes the pool's recorded parameters and records them anew (a store
    /// without pools: nothing).
    async fn replace_pool(&self) {}
    /// Someone deletes the slot's witness (ZooKeeper: the whole `witness/` directory; a store
    /// without witnesses: nothing).
    async fn delete_witness(&self) {}
    /// The slot's witness as stored (0: none).
    async fn witness(&self) -> u64 {
        0
    }
}

pub(crate) struct FileFixture {
    pub(crate) dir: tempfile::TempDir,
}

impl FileFixture {
    pub(crate) fn path(&self) -> std::path::PathBuf {
        self.dir.path().join("state.json")
    }
}

pub(crate) const KEY: &str = "lable64/0/3";

impl Fixture for FileFixture {
    type S = FileMarks;
    async fn new() -> Self {
        FileFixture {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    async fn holder(&self) -> FileMarks {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match FileMarks::open(&self.path(), KEY) {
                Ok(s) => return s,
                Err(e) if Instant::now() > deadline => panic!("{e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }
    async fn foreign_write(&self, mark: u64) {
        // An operator's edit, past the holder's lock (which only keeps idcar processes out).
        let text = format!(
            r#"{{"version":1,"marks":{{"{KEY}":{mark}}},"tokens":{{"{KEY}":"00000000000000ff"}}}}"#
        );
        std::fs::write(self.path(), text).unwrap();
    }
    async fn stored(&self) -> u64 {
        let text = std::fs::read_to_string(self.path()).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["marks"][KEY].as_u64().unwrap_or(0)
    }
    async fn delete_mark(&self) {
        std::fs::write(self.path(), r#"{"version":1,"marks":{}}"#).unwrap();
    }
}
