//! etcd as a [`MarkStore`]: `marks/N` holds the mark (decimal ticks and the claim's token),
//! its `mod_revision` is the compare-and-set base (0 while the key does not exist), and the
//! claim is `slots/N`, a key attached to this instance's etcd lease. Why these operations keep
//! IDs unique is `crate::protocol`'s business; this file only maps them onto keys:
//!
//! - a write is a transaction comparing the pool's `params` `create_revision` with the one
//!   agreed (the pool's identity, see `crate::identity`), `slots/N`'s lease with ours (the slot is still ours:
//!   the key vanishes with the lease, and no one else's key carries our lease) and
//!   `marks/N`'s `mod_revision` with the one last seen, then putting `marks/N`; its new
//!   `mod_revision` is the transaction's revision;
//! - our own write is recognised when `slots/N` still carries our lease and `marks/N` holds
//!   one of our attempts with our token, at a revision after the one we last saw;
//! - the write-down and the delete of `slots/N` are one transaction;
//! - every write also puts `witness/N` in the same transaction (one revision), and a claim's
//!   floor is the higher of `marks/N` and `witness/N`: a mark lowered or deleted while no
//!   holder can write it back does not lower a successor's floor;
//! - a holder watches its own mark (and the pool's `params`), to write it back at once if
//!   someone else lowers it.

use super::client::{Etcd, EtcdError};
use super::ops::{cmp, delete, get, put, range_kvs};
use super::WATCH_TRUSTED;
use crate::pool::tree::{mark_data, parse_mark_and_token, token_of, Paths};
use crate::protocol::{Claim, MarkStore, Recheck, StoreError, Stored};
use idcar_etcd_api::etcdserverpb as rpc;
use idcar_etcd_api::etcdserverpb::compare::{CompareTarget, TargetUnion};

/// One etcd lease's view of a pool's marks.
pub struct EtcdMarks {
    pub etcd: Etcd,
    pub paths: Paths,
    /// The etcd lease this instance's slot keys are attached to.
    pub lease: i64,
    /// The pool's identity: its `params` key and the `create_revision` and `mod_revision`
    /// agreed. Every mark write compares them. `None`: not compared (a planted bug).
    pub pool: Option<(String, i64, i64)>,
    /// Whether marks are also written to, and floors read from, `witness/N` (`false` only
    /// under a planted bug).
    pub witness: bool,
}

/// How an etcd error bears on a claim.
///
/// etcd refusing us mid-lease (a password rotated to one we do not have yet, a permission
/// revoked) ends the etcd lease's round as its expiry does: the next round reads the files
/// again and, while still refused, stays not ready saying why.
pub(crate) fn store_error(e: EtcdError) -> StoreError {
    match e {
        EtcdError::LeaseGone(why) => StoreError::SessionGone(why),
        EtcdError::Refused(why) => StoreError::Refused(format!("etcd refused us: {why}")),
        EtcdError::Unavailable(why) | EtcdError::Fatal(why) => StoreError::Unavailable(why),
    }
}

/// A mark key's value as stored: ticks and version (a missing key reads 0 at version 0).
pub(crate) fn stored(
    kv: Option<&idcar_etcd_api::mvccpb::KeyValue>,
    key: &str,
) -> Result<Stored<i64>, String> {
    match kv {
        None => Ok(Stored {
            mark: 0,
            version: 0,
            by: None,
        }),
        Some(kv) => parse_mark_and_token(&kv.value)
            .map(|(mark, by)| Stored {
                mark,
                version: kv.mod_revision,
                by: token_of(by),
            })
            .ok_or_else(|| {
                format!(
                    "{key} holds {:?}, not a decimal time mark",
                    String::from_utf8_lossy(&kv.value)
                )
            }),
    }
}

/// A witness key's mark (missing: 0; unreadable: 0, said — the mark still stands).
pub(crate) fn witness(kv: Option<&idcar_etcd_api::mvccpb::KeyValue>) -> u64 {
    let Some(kv) = kv else { return 0 };
    parse_mark_and_token(&kv.value).map_or_else(
        || {
            let key = String::from_utf8_lossy(&kv.key);
            tracing::warn!(%key, "the slot's witness is unreadable; the mark alone floors the claim");
            0
        },
        |(m, _)| m,
    )
}

impl EtcdMarks {
    /// The puts of a mark write: `marks/N`, and its witness.
    fn puts(&self, claim: &Claim<i64>, mark: u64) -> Vec<rpc::RequestOp> {
        let data = mark_data(mark, &claim.token_hex());
        let mut ops = vec![put(&self.paths.mark(claim.slot), data.clone(), 0)];
        if self.witness {
            ops.push(put(&self.paths.witness(claim.slot), data, 0));
        }
        ops
    }

    /// The pool's `params` still the one agreed, `slots/N` still carries our lease, and
    /// `marks/N` is at `version`.
    fn fence(&self, claim: &Claim<i64>) -> Vec<rpc::Compare> {
        let pool = self.pool.iter().flat_map(|(key, created, modified)| {
            [
                cmp(
                    key,
                    CompareTarget::Create,
                    TargetUnion::CreateRevision(*created),
                ),
                cmp(key, CompareTarget::Mod, TargetUnion::ModRevision(*modified)),
            ]
        });
        pool.chain([
            cmp(
                &self.paths.slot(claim.slot),
                CompareTarget::Lease,
                TargetUnion::Lease(self.lease),
            ),
            cmp(
                &self.paths.mark(claim.slot),
                CompareTarget::Mod,
                TargetUnion::ModRevision(claim.version),
            ),
        ])
        .collect()
    }

    /// Deletes `slots/N` if it carries our lease: whether it did.
    pub async fn delete_if_ours(&self, slot: u32) -> bool {
        let key = self.paths.slot(slot);
        let req = rpc::TxnRequest {
            compare: vec![cmp(
                &key,
                CompareTarget::Lease,
                TargetUnion::Lease(self.lease),
            )],
            success: vec![delete(&key)],
            failure: vec![],
        };
        matches!(self.etcd.txn("giving a slot back", req).await, Ok(r) if r.succeeded)
    }
}

impl MarkStore for EtcdMarks {
    type Version = i64;

    fn name(&self) -> &'static str {
        "etcd"
    }

    fn key(&self, slot: u32) -> String {
        self.paths.mark(slot)
    }

    async fn read(&self, slot: u32) -> Result<Stored<i64>, StoreError> {
        let key = self.paths.mark(slot);
        let req = rpc::TxnRequest {
            compare: vec![],
            success: vec![get(&key), get(&self.paths.witness(slot))],
            failure: vec![],
        };
        let r = self
            .etcd
            .txn("reading a mark", req)
            .await
            .map_err(store_error)?;
        let mut s = stored(range_kvs(&r, 0).first(), &key).map_err(StoreError::Unavailable)?;
        if self.witness {
            s.raise_to_witness(witness(range_kvs(&r, 1).first()));
        }
        Ok(s)
    }

    async fn write(&self, claim: &Claim<i64>, mark: u64) -> Result<i64, StoreError> {
        let req = rpc::TxnRequest {
            compare: self.fence(claim),
            success: self.puts(claim, mark),
            failure: vec![],
        };
        let r = self
            .etcd
            .txn("writing the mark", req)
            .await
            .map_err(store_error)?;
        if !r.succeeded {
            return Err(StoreError::Conflict(format!(
                "{} or {} changed under us",
                self.paths.slot(claim.slot),
                self.paths.mark(claim.slot)
            )));
        }
        // One transaction, one revision: the key's mod_revision is the transaction's.
        r.header
            .map(|h| h.revision)
            .ok_or_else(|| StoreError::Unavailable("etcd's answer has no header".into()))
    }

    async fn own_write(
        &self,
        claim: &Claim<i64>,
        attempts: &[u64],
    ) -> Result<Option<(i64, u64)>, StoreError> {
        let req = rpc::TxnRequest {
            compare: vec![],
            success: vec![
                get(&self.paths.slot(claim.slot)),
                get(&self.paths.mark(claim.slot)),
            ],
            failure: vec![],
        };
        let r = self
            .etcd
            .txn("reading our mark", req)
            .await
            .map_err(store_error)?;
        if range_kvs(&r, 0).first().map(|kv| kv.lease) != Some(self.lease) {
            return Ok(None);
        }
        let marks = range_kvs(&r, 1);
        let Some(kv) = marks.first() else {
            return Ok(None);
        };
        let Some((value, token)) = parse_mark_and_token(&kv.value) else {
            return Ok(None);
        };
        let ours = token == Some(claim.token_hex().as_str());
        Ok(
            (ours && kv.mod_revision > claim.version && attempts.contains(&value))
                .then_some((kv.mod_revision, value)),
        )
    }

    async fn write_down(&self, claim: &Claim<i64>, mark: u64) -> Result<(), StoreError> {
        let req = rpc::TxnRequest {
            compare: self.fence(claim),
            success: self
                .puts(claim, mark)
                .into_iter()
                .chain([delete(&self.paths.slot(claim.slot))])
                .collect(),
            failure: vec![],
        };
        let r = self
            .etcd
            .txn("writing the mark down", req)
            .await
            .map_err(store_error)?;
        if r.succeeded {
            Ok(())
        } else {
            Err(StoreError::Conflict(
                "the slot key is no longer ours, or the mark changed".into(),
            ))
        }
    }

    fn changed(
        &self,
        slot: u32,
        version: i64,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut others = vec![(self.paths.slot(slot), version)];
        others.extend(
            self.pool
                .as_ref()
                .map(|(key, _, modified)| (key.clone(), *modified)),
        );
        mark_changed(self.etcd.clone(), self.paths.mark(slot), version, others)
    }

    async fn give_back(&self, slot: u32) {
        self.delete_if_ours(slot).await;
    }

    async fn recheck(&self, claim: &Claim<i64>) -> Result<Recheck<i64>, StoreError> {
        let mut success = vec![
            get(&self.paths.slot(claim.slot)),
            get(&self.paths.mark(claim.slot)),
        ];
        if let Some((key, _, _)) = &self.pool {
            success.push(get(key));
        }
        let req = rpc::TxnRequest {
            compare: vec![],
            success,
            failure: vec![],
        };
        let r = self
            .etcd
            .txn("reading our slot", req)
            .await
            .map_err(store_error)?;
        if let Some((key, created, modified)) = &self.pool {
            let now = range_kvs(&r, 2)
                .first()
                .map_or((0, 0), |kv| (kv.create_revision, kv.mod_revision));
            if now != (*created, *modified) {
                return Ok(Recheck::PoolReplaced(if now.0 == 0 {
                    format!("{key} was deleted")
                } else {
                    format!("{key} was recreated or rewritten")
                }));
            }
        }
        if range_kvs(&r, 0).first().map(|kv| kv.lease) != Some(self.lease) {
            return Ok(Recheck::Gone);
        }
        let marks = range_kvs(&r, 1);
        Ok(Recheck::Ours(match marks.first() {
            // Missing: a put compared at mod_revision 0 recreates it.
            None => Stored {
                mark: 0,
                version: 0,
                by: None,
            },
            // An unreadable mark is overwritten as a lowered one would be.
            Some(kv) => Stored {
                mark: parse_mark_and_token(&kv.value).map_or(0, |(m, _)| m),
                version: kv.mod_revision,
                by: None,
            },
        }))
    }
}

/// Resolves when `key` (a mark) is no longer at `version` (its `mod_revision`) — changed or
/// deleted — or when any of `others` changes or goes after its revision (the slot's key after
/// our last mark write; the pool's `params` after the revision agreed, where fenced; see
/// `crate::store::MarkStore::changed`). Each is read after a wake and watched again from
/// that read (see [`Etcd::wait_until`]): a compaction costs a read, never a poll.
async fn mark_changed(etcd: Etcd, key: String, version: i64, others: Vec<(String, i64)>) {
    let mark = etcd.wait_until(&key, version, WATCH_TRUSTED, |now| {
        now.unwrap_or(0) == version
    });
    // Any change after the revision (the key rewritten, or gone): the recheck tells whether it
    // matters.
    let other = |o: Option<(String, i64)>| {
        let etcd = etcd.clone();
        async move {
            let Some((other, revision)) = o else {
                return std::future::pending().await;
            };
            let still = |now: Option<i64>| now.is_some_and(|m| m <= revision);
            etcd.wait_until(&other, revision, WATCH_TRUSTED, still)
                .await;
        }
    };
    let mut others = others.into_iter();
    tokio::select! {
        () = mark => {}
        () = other(others.next()) => {}
        () = other(others.next()) => {}
    }
}
