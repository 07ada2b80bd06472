//! How etcd does each step of the one negotiation ([`crate::pool`]) under one etcd
//! lease (etcd's lock recipe):
//!
//! - the queue is `queue/<lease>` (attached to our lease): its `create_revision` is our place;
//!   the one ahead is the queue key with the next-lower one, watched alone (no herd);
//! - the held slots are the keys under `slots/` (keys only: as many as there are holders). A
//!   slot key carrying our own lease is a leftover of this lease (a lease of it lost to a
//!   foreign write, a reply lost): deleted, it counts as free;
//! - a slot is taken in one transaction: if the pool's `params` is still at the revisions
//!   agreed and `slots/N` does not exist, put `slots/N` (owner JSON, our lease) and read
//!   `marks/N` and `witness/N` (the mark's `mod_revision` is the compare-and-set base of the
//!   first write).

use super::client::prefix_end;
use super::handle::EtcdSession;
use super::marks::EtcdMarks;
use super::ops::{absent, delete, get, prefix, put, range, range_kvs, slot_of};
use super::{session, EtcdError};
use crate::identity::Record;
use crate::pool::tree::{parse_owner, Marked, Owner};
use crate::pool::{Change, Fault, Look, Negotiation, Recorded, Session, Took};
use idcar_etcd_api::etcdserverpb as rpc;
use idcar_etcd_api::etcdserverpb::range_request::{SortOrder, SortTarget};
use std::collections::{BTreeMap, BTreeSet};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The marks of the `free` slots among the mark keys `kvs` under `dir` (a slot with none: 0).
fn marked(kvs: &[idcar_etcd_api::mvccpb::KeyValue], dir: &str, free: &[u32]) -> Vec<Marked> {
    let found: BTreeMap<u32, Marked> = kvs
        .iter()
        .filter_map(|kv| {
            let n = slot_of(&kv.key, dir)?;
            Some((n, Marked::read(n, &kv.value)))
        })
        .collect();
    free.iter()
        .map(|&n| found.get(&n).copied().unwrap_or(Marked::missing(n)))
        .collect()
}

impl Session for EtcdSession {
    type Marks = EtcdMarks;
    /// Our queue key and its create revision.
    type Place = (String, i64);

    fn owner_id(&self) -> String {
        format!("{:#x}", self.lease)
    }

    fn follow(&self, _neg: &Negotiation, ended: CancellationToken) -> JoinHandle<()> {
        tokio::spawn(session::keep_alive(
            self.etcd.clone(),
            self.lease,
            self.ttl,
            ended,
        ))
    }

    fn gauges(&self, neg: &Negotiation) -> JoinHandle<()> {
        super::pool::spawn_gauges(
            self.etcd.clone(),
            self.paths.clone(),
            neg.cfg.pool_size,
            neg.proto.metrics.clone(),
            neg.proto.part.full.clone(),
        )
    }

    fn demand(&self, _neg: &Negotiation, tx: tokio::sync::watch::Sender<bool>) -> JoinHandle<()> {
        let (etcd, paths) = (self.etcd.clone(), self.paths.clone());
        tokio::spawn(super::demand::follow_demand(etcd, paths, tx))
    }

    async fn want(&self, _neg: &Negotiation, wanted: bool) {
        match wanted {
            true => self.want_slot().await,
            false => self.unwant_slot().await,
        }
    }

    fn looker(&self, neg: &Negotiation) -> Box<dyn FnMut() -> Look + Send> {
        let (etcd, paths, pool) = (self.etcd.clone(), self.paths.clone(), neg.cfg.pool_size);
        Box::new(move || Box::pin(super::pool::look(etcd.clone(), paths.clone(), pool)))
    }

    async fn params(&self, _neg: &Negotiation, data: &[u8]) -> Result<Option<Recorded>, Fault> {
        let key = self.paths.params();
        let req = rpc::TxnRequest {
            compare: vec![absent(&key)],
            success: vec![put(&key, data.to_vec(), 0), get(&key)],
            failure: vec![get(&key)],
        };
        let r = self
            .etcd
            .txn("recording the pool's parameters", req)
            .await?;
        let read = usize::from(r.succeeded);
        Ok(range_kvs(&r, read).into_iter().next().map(|kv| Recorded {
            data: kv.value,
            creation: kv.create_revision,
            version: kv.mod_revision,
        }))
    }

    async fn join(
        &mut self,
        neg: &Negotiation,
        recorded: &Recorded,
    ) -> Result<Option<Record>, Fault> {
        let rec = session::join_or_record(neg, self, recorded).await?;
        if rec.is_some() {
            self.params_revision = recorded.version;
            self.params_created = recorded.creation;
        }
        Ok(rec)
    }

    #[cfg(feature = "fault-injection")]
    fn unfenced(&mut self, recorded: &Recorded) {
        self.params_revision = recorded.version;
        self.params_created = 0;
    }

    fn marks(&self, neg: &Negotiation) -> EtcdMarks {
        EtcdMarks {
            etcd: self.etcd.clone(),
            paths: self.paths.clone(),
            lease: self.lease,
            pool: (self.params_created != 0).then(|| {
                (
                    self.paths.params(),
                    self.params_created,
                    self.params_revision,
                )
            }),
            witness: neg.proto.keeps_witness(),
        }
    }

    async fn tidy(&self, _neg: &Negotiation, _marks: &EtcdMarks) -> Result<(), Fault> {
        // A queue key left by an earlier attempt is reused (keeping its place) by
        // `enqueue`, and slot keys of ours are freed by `held`.
        Ok(())
    }

    /// A read-only transaction (served as a read, not through the log): the queue counted,
    /// the slot keys, the marks — serializable, answered by the member at hand without a
    /// round of the quorum. A stale look costs at most a lost take (the take is the fence and
    /// reads the mark afresh) or a claim past a contender who queued just now.
    async fn glance(
        &self,
        neg: &Negotiation,
        _prefer: Option<u32>,
    ) -> Result<Option<Vec<Marked>>, Fault> {
        let read = |r: rpc::RangeRequest| rpc::RequestOp {
            request: Some(rpc::request_op::Request::RequestRange(r)),
        };
        let (slots, marks) = (self.paths.slots(), self.paths.marks());
        let req = rpc::TxnRequest {
            compare: vec![],
            success: vec![
                read(rpc::RangeRequest {
                    count_only: true,
                    serializable: true,
                    ..range(&self.paths.queue())
                }),
                read(rpc::RangeRequest {
                    keys_only: true,
                    serializable: true,
                    ..range(&slots)
                }),
                read(rpc::RangeRequest {
                    serializable: true,
                    ..range(&marks)
                }),
            ],
            failure: vec![],
        };
        let r = self.etcd.txn("looking at the pool", req).await?;
        let queued = match r.responses.first().and_then(|o| o.response.as_ref()) {
            Some(rpc::response_op::Response::ResponseRange(q)) => q.count,
            _ => return Ok(None),
        };
        let mut held = BTreeSet::new();
        for kv in range_kvs(&r, 1) {
            // Ours (a lost lease of it, a reply lost): the queue's path frees it for us.
            if kv.lease == self.lease {
                return Ok(None);
            }
            held.extend(slot_of(&kv.key, &slots));
        }
        if queued > 0 {
            return Ok(None);
        }
        let free: Vec<u32> = (0..neg.cfg.pool_size)
            .filter(|n| !held.contains(n))
            .collect();
        Ok(Some(marked(&range_kvs(&r, 2), &marks, &free)))
    }

    /// Puts our queue key (keeping it if it is there already).
    async fn enqueue(&self, neg: &Negotiation, owner: &[u8]) -> Result<(String, i64), Fault> {
        let me = self.queue_key();
        let req = rpc::TxnRequest {
            compare: vec![absent(&me)],
            success: vec![put(&me, owner.to_vec(), self.lease)],
            failure: vec![get(&me)],
        };
        let r = match self.etcd.txn("queueing", req).await {
            Ok(r) => r,
            Err(e) => {
                // The put may have gone through: leave the queue as any claim does.
                self.leave(neg, &(me, 0)).await;
                return Err(e.into());
            }
        };
        let place = if r.succeeded {
            r.header
                .map(|h| h.revision)
                .ok_or_else(|| Fault::Unavailable("etcd's answer has no header".into()))?
        } else {
            range_kvs(&r, 0)
                .first()
                .map(|kv| kv.create_revision)
                .ok_or_else(|| Fault::Unavailable(format!("queue key {me} vanished")))?
        };
        Ok((me, place))
    }

    async fn ahead(
        &self,
        neg: &Negotiation,
        (me, place): &(String, i64),
    ) -> Result<Option<(usize, String, Change)>, Fault> {
        // The keys ahead (keys only), the nearest first: their number is our place, counted up
        // to the pool's size (a place beyond it takes nothing by rank). A range's count is
        // taken before its revision filter, so it cannot say; its limit, after.
        let req = rpc::RangeRequest {
            limit: i64::from(neg.cfg.pool_size),
            sort_order: SortOrder::Descend as i32,
            sort_target: SortTarget::Create as i32,
            max_create_revision: place - 1,
            keys_only: true,
            ..range(&self.paths.queue())
        };
        let r = self.etcd.range("reading the queue", req).await?;
        let Some(ahead) = r.kvs.first() else {
            return Ok(None);
        };
        let who = String::from_utf8_lossy(&ahead.key).to_string();
        let rev = r.header.map_or(0, |h| h.revision);
        let change = self.change(ahead.key.clone(), Vec::new(), rev);
        let n = r.kvs.len();
        Ok(Some((n, format!("behind {who}, {me} is ours"), change)))
    }

    async fn behind(
        &self,
        _neg: &Negotiation,
        (_, place): &(String, i64),
    ) -> Result<Vec<Option<Owner>>, Fault> {
        let req = rpc::RangeRequest {
            min_create_revision: place + 1,
            ..range(&self.paths.queue())
        };
        let r = self.etcd.range("reading the queue", req).await?;
        Ok(r.kvs.iter().map(|kv| parse_owner(&kv.value)).collect())
    }

    async fn leave(&self, _neg: &Negotiation, (me, _): &(String, i64)) {
        let req = rpc::TxnRequest {
            compare: vec![],
            success: vec![delete(me)],
            failure: vec![],
        };
        let _ = self.etcd.txn("leaving the queue", req).await;
    }

    async fn held(
        &self,
        neg: &Negotiation,
        marks: &EtcdMarks,
        _prefer: Option<u32>,
    ) -> Result<(BTreeSet<u32>, Change), Fault> {
        let dir = self.paths.slots();
        let req = rpc::RangeRequest {
            keys_only: true,
            ..range(&dir)
        };
        let r = self.etcd.range("listing the slots", req).await?;
        let mut held = BTreeSet::new();
        for kv in &r.kvs {
            let Some(n) = slot_of(&kv.key, &dir).filter(|n| *n < neg.cfg.pool_size) else {
                continue;
            };
            // Ours, left from a lost lease of it or a reply lost: free again for us.
            if kv.lease == self.lease && marks.delete_if_ours(n).await {
                continue;
            }
            held.insert(n);
        }
        let p = prefix(&dir);
        let end = prefix_end(p.as_bytes());
        let change = self.change(p.into_bytes(), end, r.header.map_or(0, |h| h.revision));
        Ok((held, change))
    }

    async fn marks_of(&self, _neg: &Negotiation, free: &[u32]) -> Result<Vec<Marked>, Fault> {
        // Serializable (the member at hand answers): only the order in which free slots are
        // tried; the take reads the mark it fences on afresh.
        let dir = self.paths.marks();
        let req = rpc::RangeRequest {
            serializable: true,
            ..range(&dir)
        };
        let r = self.etcd.range("reading the marks", req).await?;
        Ok(marked(&r.kvs, &dir, free))
    }

    /// Puts `slots/N` and reads `marks/N` and `witness/N` in one transaction, while the pool's
    /// parameters are still the ones agreed (see [`super::take`]). The floor is the higher of
    /// the two.
    async fn take(
        &self,
        _neg: &Negotiation,
        marks: &EtcdMarks,
        slot: u32,
        owner: &[u8],
        place: Option<&(String, i64)>,
    ) -> Result<Took<i64>, Fault> {
        let queued = place.map(|(me, _)| me.as_str());
        let (_, took) = self.take_one_of(marks, &[slot], owner, queued).await?;
        Ok(took)
    }

    async fn take_first(
        &self,
        _neg: &Negotiation,
        marks: &EtcdMarks,
        slots: &[u32],
        owner: &[u8],
    ) -> Result<(u32, Took<i64>), Fault> {
        self.take_one_of(marks, slots, owner, None).await
    }

    async fn let_go(&self, marks: &EtcdMarks, slot: u32) -> bool {
        // A key not deleted now goes with the lease, or is deleted by the next listing.
        marks.delete_if_ours(slot).await
    }

    fn lost(self) -> Option<EtcdSession> {
        // etcd may still keep the lease (we gave up on it): revoked once the next is granted.
        Some(self)
    }

    async fn close(self) {
        let _ = self.etcd.revoke(self.lease).await;
    }
}

impl From<EtcdError> for Fault {
    fn from(e: EtcdError) -> Fault {
        match e {
            EtcdError::Unavailable(why) => Fault::Unavailable(why),
            EtcdError::LeaseGone(why) => Fault::SessionGone(why),
            EtcdError::Refused(why) => Fault::Refused(why),
            EtcdError::Fatal(why) => Fault::Fatal(why),
        }
    }
}
