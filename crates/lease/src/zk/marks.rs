//! ZooKeeper as a [`MarkStore`]: `marks/N` holds the mark (decimal ticks and the claim's
//! token), its znode version is the compare-and-set base, and the claim is `slots/N`, an
//! ephemeral node of this session. Why these operations keep IDs unique is
//! `crate::protocol`'s business; this file only maps them onto znodes:
//!
//! - a write is a `multi` checking the pool (`params` at the version agreed and its identity
//!   node `identity/<id>`, see `crate::identity`), `slots/N` at the version created (0: an ephemeral node's
//!   data is never set) and setting `marks/N` at the version last seen. The check alone does
//!   not prove the node ours (any holder's node has version 0); the compare-and-set on the
//!   mark is what fences holders;
//! - our own write is recognised when `slots/N` is still this session's and `marks/N` holds
//!   one of our attempts with our token, one version on;
//! - the write-down and the delete of `slots/N` are one `multi`;
//! - every write also sets `witness/N` (any version) in the same `multi`, and a claim's floor
//!   is the higher of `marks/N` and `witness/N`: a mark lowered or deleted while no holder can
//!   write it back does not lower a successor's floor. A missing witness is created at the
//!   claim, or by the recheck after the write that found it missing;
//! - a holder watches its own mark (and the pool's identity), to write it back at once if
//!   someone else lowers it.

use super::tree::{mark_data, parse_mark, parse_mark_and_token, token_of, Paths};
use super::watch::mark_changed;
use super::{acls, session_gone};
use crate::protocol::{Claim, MarkStore, Recheck, StoreError, Stored};
use zookeeper_client as zk;

/// The version of `slots/N` as this session created it: ephemeral, its data never set.
const SLOT_VERSION: i32 = 0;

/// One session's view of a pool's marks.
pub struct ZkMarks {
    pub client: zk::Client,
    pub paths: Paths,
    /// Digest auth in use: nodes are created creator-only.
    pub auth: bool,
    /// The pool agreed: every mark write checks it. `None`: not checked (a planted bug).
    pub pool: Option<PoolFence>,
    /// Whether marks are also written to, and floors read from, `witness/N` (`false` only
    /// under a planted bug).
    pub witness: bool,
}

/// What every mark write checks of the pool: its `params` node at the version agreed (deleted
/// or rewritten, the pool is replaced) and its identity node (deleted by whoever records a new
/// identity, so that `params` deleted and recreated at the same version is caught too).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolFence {
    pub params: String,
    pub params_version: i32,
    /// The `params` node's creation (czxid) as agreed.
    pub params_creation: i64,
    pub identity: String,
}

/// The version a recreated mark is written at: the node is missing (deleted by someone else).
const MISSING: i32 = -1;

/// How a ZooKeeper error bears on a claim.
pub(crate) fn store_error(e: zk::Error) -> StoreError {
    match e {
        // NodeExists: a mark recreated after someone deleted it was created meanwhile (by our
        // own write whose reply was lost, or by someone else): compare-and-set lost.
        zk::Error::BadVersion | zk::Error::NoNode | zk::Error::NodeExists => {
            StoreError::Conflict(e.to_string())
        }
        e if session_gone(&e) => StoreError::SessionGone(e.to_string()),
        e => StoreError::Unavailable(e.to_string()),
    }
}

/// Why a mark could not be read: a corrupt mark is never guessed (the slot is skipped).
pub enum Unreadable {
    Corrupt(String),
    Zk(zk::Error),
}

impl ZkMarks {
    /// The floor of a claim on `slot`: `marks/N` and its version, the mark raised to
    /// `witness/N` if that is higher (each created at 0 when missing).
    pub async fn read_mark(&self, slot: u32) -> Result<Stored<i32>, Unreadable> {
        let mut stored = self.read_mark_only(slot).await?;
        if self.witness {
            stored.raise_to_witness(self.read_witness(slot).await?);
        }
        Ok(stored)
    }

    /// Sends the reads of `marks/N` and `witness/N` now (behind whatever this session sent
    /// before): the floor as [`ZkMarks::read_mark`] reads it, or `None` when either is missing
    /// or unreadable (read again with [`ZkMarks::read_mark`], which creates and says).
    pub fn read_sent(
        &self,
        slot: u32,
    ) -> impl std::future::Future<Output = Option<Stored<i32>>> + Send + 'static {
        let mark = self.client.get_data(&self.paths.mark(slot));
        let witness = self
            .witness
            .then(|| self.client.get_data(&self.paths.witness(slot)));
        async move {
            let (data, stat) = mark.await.ok()?;
            let (mark, by) = parse_mark_and_token(&data)?;
            let mut stored = Stored {
                mark,
                version: stat.version,
                by: token_of(by),
            };
            if let Some(w) = witness {
                stored.raise_to_witness(parse_mark(&w.await.ok()?.0)?);
            }
            Some(stored)
        }
    }

    /// Reads `witness/N`, creating it at 0 when missing (an unreadable one counts as 0, said:
    /// the mark still stands).
    async fn read_witness(&self, slot: u32) -> Result<u64, Unreadable> {
        let path = self.paths.witness(slot);
        for _ in 0..3 {
            match self.client.get_data(&path).await {
                Ok((data, _)) => {
                    return Ok(parse_mark(&data).unwrap_or_else(|| {
                        tracing::warn!(%path, "the slot's witness is unreadable; the mark alone floors the claim");
                        0
                    }))
                }
                Err(zk::Error::NoNode) => match self.create_witness(slot, b"0").await {
                    Ok(()) => return Ok(0),
                    Err(zk::Error::NodeExists) => continue,
                    Err(e) => return Err(Unreadable::Zk(e)),
                },
                Err(e) => return Err(Unreadable::Zk(e)),
            }
        }
        Err(Unreadable::Zk(zk::Error::UnexpectedError(format!(
            "{path} keeps changing"
        ))))
    }

    /// Creates `witness/N` holding `data`, and `witness/` first if someone deleted it.
    async fn create_witness(&self, slot: u32, data: &[u8]) -> Result<(), zk::Error> {
        let persistent = zk::CreateMode::Persistent.with_acls(acls(self.auth));
        let path = self.paths.witness(slot);
        match self.client.create(&path, data, &persistent).await {
            Err(zk::Error::NoNode) => {
                self.client
                    .mkdir(&self.paths.witnesses(), &persistent)
                    .await?;
                self.client
                    .create(&path, data, &persistent)
                    .await
                    .map(|_| ())
            }
            r => r.map(|_| ()),
        }
    }

    /// Reads `marks/N` and its version, creating it at 0 when missing (a slot never used;
    /// marks are never deleted while anyone holds the slot).
    async fn read_mark_only(&self, slot: u32) -> Result<Stored<i32>, Unreadable> {
        let path = self.paths.mark(slot);
        let persistent = zk::CreateMode::Persistent.with_acls(acls(self.auth));
        for _ in 0..3 {
            match self.client.get_data(&path).await {
                Ok((data, stat)) => {
                    let (mark, by) = parse_mark_and_token(&data).ok_or_else(|| {
                        Unreadable::Corrupt(format!(
                            "{path} holds {:?}, not a decimal time mark",
                            String::from_utf8_lossy(&data)
                        ))
                    })?;
                    return Ok(Stored {
                        mark,
                        version: stat.version,
                        by: token_of(by),
                    });
                }
                Err(zk::Error::NoNode) => {
                    match self.client.create(&path, b"0", &persistent).await {
                        Ok((stat, _)) => {
                            return Ok(Stored {
                                mark: 0,
                                version: stat.version,
                                by: None,
                            })
                        }
                        Err(zk::Error::NodeExists) => continue,
                        Err(e) => return Err(Unreadable::Zk(e)),
                    }
                }
                Err(e) => return Err(Unreadable::Zk(e)),
            }
        }
        Err(Unreadable::Zk(zk::Error::UnexpectedError(format!(
            "{path} keeps changing"
        ))))
    }

    /// Whether `slots/N` exists and this session created it.
    async fn ours(&self, slot: u32) -> Result<bool, zk::Error> {
        let (_, stat) = self.client.get_data(&self.paths.slot(slot)).await?;
        Ok(stat.ephemeral_owner == self.client.session_id().0 && stat.version == SLOT_VERSION)
    }

    /// The `multi` of a mark write: the pool's identity still the one agreed, `slots/N` still
    /// ours, `marks/N` at the version last seen (or created, when it was found missing). The
    /// index of the mark's operation.
    fn mark_write(
        &self,
        claim: &Claim<i32>,
        mark: u64,
    ) -> Result<(zk::MultiWriter<'_>, usize), zk::Error> {
        let mut w = self.client.new_multi_writer();
        if let Some(f) = &self.pool {
            w.add_check_version(&f.params, f.params_version)?;
            w.add_check_version(&f.identity, 0)?;
        }
        w.add_check_version(&self.paths.slot(claim.slot), SLOT_VERSION)?;
        let data = mark_data(mark, &claim.token_hex());
        let path = self.paths.mark(claim.slot);
        if claim.version == MISSING {
            let persistent = zk::CreateMode::Persistent.with_acls(acls(self.auth));
            w.add_create(&path, &data, &persistent)?;
        } else {
            w.add_set_data(&path, &data, Some(claim.version))?;
        }
        if self.witness {
            w.add_set_data(&self.paths.witness(claim.slot), &data, None)?;
        }
        Ok((w, 1 + 2 * usize::from(self.pool.is_some())))
    }

    /// Deletes `slots/N` if this session created it: whether it did.
    pub async fn delete_if_ours(&self, slot: u32) -> bool {
        let path = self.paths.slot(slot);
        match self.client.get_data(&path).await {
            Ok((_, stat)) if stat.ephemeral_owner == self.client.session_id().0 => {
                self.client.delete(&path, Some(stat.version)).await.is_ok()
            }
            _ => false,
        }
    }
}

impl MarkStore for ZkMarks {
    type Version = i32;

    fn name(&self) -> &'static str {
        "ZooKeeper"
    }

    fn key(&self, slot: u32) -> String {
        self.paths.mark(slot)
    }

    async fn read(&self, slot: u32) -> Result<Stored<i32>, StoreError> {
        self.read_mark(slot).await.map_err(|e| match e {
            Unreadable::Corrupt(why) => StoreError::Unavailable(why),
            Unreadable::Zk(e) => store_error(e),
        })
    }

    async fn write(&self, claim: &Claim<i32>, mark: u64) -> Result<i32, StoreError> {
        let (mut w, at) = self.mark_write(claim, mark).map_err(store_error)?;
        let results = w.commit().await.map_err(|e| store_error(e.into()))?;
        match results.into_iter().nth(at) {
            Some(zk::MultiWriteResult::SetData { stat }) => Ok(stat.version),
            Some(zk::MultiWriteResult::Create { stat, .. }) => Ok(stat.version),
            other => Err(StoreError::Unavailable(format!(
                "unexpected multi result {other:?}"
            ))),
        }
    }

    async fn own_write(
        &self,
        claim: &Claim<i32>,
        attempts: &[u64],
    ) -> Result<Option<(i32, u64)>, StoreError> {
        match self.ours(claim.slot).await {
            Ok(true) => {}
            Ok(false) | Err(zk::Error::NoNode) => return Ok(None),
            Err(e) => return Err(store_error(e)),
        }
        let (data, stat) = match self.client.get_data(&self.paths.mark(claim.slot)).await {
            Ok(found) => found,
            Err(zk::Error::NoNode) => return Ok(None),
            Err(e) => return Err(store_error(e)),
        };
        let Some((value, token)) = parse_mark_and_token(&data) else {
            return Ok(None);
        };
        let ours = token == Some(claim.token_hex().as_str());
        Ok(
            (ours && stat.version == claim.version + 1 && attempts.contains(&value))
                .then_some((stat.version, value)),
        )
    }

    async fn write_down(&self, claim: &Claim<i32>, mark: u64) -> Result<(), StoreError> {
        if !self.ours(claim.slot).await.map_err(store_error)? {
            return Err(StoreError::Conflict(
                "the slot node is no longer ours".into(),
            ));
        }
        let (mut w, _) = self.mark_write(claim, mark).map_err(store_error)?;
        w.add_delete(&self.paths.slot(claim.slot), Some(SLOT_VERSION))
            .map_err(store_error)?;
        w.commit().await.map_err(|e| store_error(e.into()))?;
        Ok(())
    }

    async fn give_back(&self, slot: u32) {
        self.delete_if_ours(slot).await;
    }

    fn changed(
        &self,
        slot: u32,
        version: i32,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut others = vec![self.paths.slot(slot)];
        if let Some(f) = &self.pool {
            others.extend([f.params.clone(), f.identity.clone()]);
        }
        mark_changed(self.client.clone(), self.paths.mark(slot), version, others)
    }

    async fn recheck(&self, claim: &Claim<i32>) -> Result<Recheck<i32>, StoreError> {
        if let Some(f) = &self.pool {
            let params = self.client.check_stat(&f.params).await;
            let identity = self.client.check_stat(&f.identity).await;
            let why = match (params.map_err(store_error)?, identity.map_err(store_error)?) {
                (None, _) => Some(format!("{} was deleted", f.params)),
                (Some(p), _) if p.czxid != f.params_creation => {
                    Some(format!("{} was recreated", f.params))
                }
                (Some(p), _) if p.version != f.params_version => {
                    Some(format!("{} was rewritten", f.params))
                }
                (_, None) => Some(format!(
                    "{} is gone: {} was recorded anew",
                    f.identity, f.params
                )),
                _ => None,
            };
            if let Some(why) = why {
                return Ok(Recheck::PoolReplaced(why));
            }
        }
        match self.ours(claim.slot).await {
            Ok(true) => {}
            Ok(false) | Err(zk::Error::NoNode) => return Ok(Recheck::Gone),
            Err(e) => return Err(store_error(e)),
        }
        if self.witness {
            // Deleted by someone else: recreated holding the mark last written, so that the
            // write that found it missing can be made again (as a lowered mark's write-back).
            let data = mark_data(claim.mark, &claim.token_hex());
            let path = self.paths.witness(claim.slot);
            match self.create_witness(claim.slot, &data).await {
                Ok(()) => {
                    tracing::warn!(%path, "the slot's witness was deleted by someone else; recreated");
                }
                Err(zk::Error::NodeExists) => {}
                Err(e) => return Err(store_error(e)),
            }
        }
        match self.client.get_data(&self.paths.mark(claim.slot)).await {
            Ok((data, stat)) => Ok(Recheck::Ours(Stored {
                // An unreadable mark is overwritten as a lowered one would be.
                mark: parse_mark(&data).unwrap_or(0),
                version: stat.version,
                by: None,
            })),
            Err(zk::Error::NoNode) => Ok(Recheck::Ours(Stored {
                mark: 0,
                version: MISSING,
                by: None,
            })),
            Err(e) => Err(store_error(e)),
        }
    }
}
