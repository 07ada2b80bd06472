//! Taking a slot in etcd: one transaction that claims `slots/N` and reads its mark — or the
//! first free of several candidates, each tried in the failure branch of the one before (a
//! nested transaction), so a contender whose first choice was taken a moment earlier by
//! another gets the next in the same round trip.
//!
//! Each level: if the pool's `params` is still at the revisions agreed and `slots/N` does not
//! exist, put `slots/N` (owner JSON, our lease), read `marks/N` and `witness/N`, and delete
//! our queue key if we queued. The last failure branch reads `params`: changed, the session
//! agrees again; unchanged, every candidate was taken.

use super::handle::EtcdSession;
use super::marks::{stored, witness, EtcdMarks};
use super::ops::{absent, cmp, delete, get, put, range_kvs};
use crate::pool::{Fault, Took};
use idcar_etcd_api::etcdserverpb as rpc;
use idcar_etcd_api::etcdserverpb::compare::{CompareTarget, TargetUnion};

impl EtcdSession {
    /// Takes the first free slot of `slots` (in that order) and reads its mark, in one
    /// transaction: the slot and what was found; [`Took::Taken`] if every one was held.
    pub(crate) async fn take_one_of(
        &self,
        marks: &EtcdMarks,
        slots: &[u32],
        owner: &[u8],
        queued: Option<&str>,
    ) -> Result<(u32, Took<i64>), Fault> {
        let Some(&last) = slots.last() else {
            return Ok((0, Took::Taken));
        };
        let req = self.nested(slots, owner, queued);
        let mut r = self.etcd.txn("claiming a slot", req).await?;
        for &slot in slots {
            if r.succeeded {
                return Ok((slot, self.took(marks, slot, &r)));
            }
            match r.responses.first().and_then(|o| o.response.as_ref()) {
                Some(rpc::response_op::Response::ResponseTxn(inner)) => r = inner.clone(),
                _ => return self.all_taken(&r).map(|t| (last, t)),
            }
        }
        self.all_taken(&r).map(|t| (last, t))
    }

    /// The transaction that takes the first free of `slots`.
    fn nested(&self, slots: &[u32], owner: &[u8], queued: Option<&str>) -> rpc::TxnRequest {
        let params = self.paths.params();
        let mut txn: Option<rpc::TxnRequest> = None;
        for &slot in slots.iter().rev() {
            let failure = match txn.take() {
                Some(inner) => vec![rpc::RequestOp {
                    request: Some(rpc::request_op::Request::RequestTxn(inner)),
                }],
                None => vec![get(&params)],
            };
            let slot_key = self.paths.slot(slot);
            let fence = [
                cmp(
                    &params,
                    CompareTarget::Mod,
                    TargetUnion::ModRevision(self.params_revision),
                ),
                absent(&slot_key),
            ];
            let identity = (self.params_created != 0).then(|| {
                cmp(
                    &params,
                    CompareTarget::Create,
                    TargetUnion::CreateRevision(self.params_created),
                )
            });
            txn = Some(rpc::TxnRequest {
                compare: fence.into_iter().chain(identity).collect(),
                // The queue is left in the same step (after the reads: their indices stay).
                success: [
                    put(&slot_key, owner.to_vec(), self.lease),
                    get(&self.paths.mark(slot)),
                    get(&self.paths.witness(slot)),
                ]
                .into_iter()
                .chain(queued.map(delete))
                .collect(),
                failure,
            });
        }
        txn.unwrap_or_default()
    }

    /// What a level that took `slot` read: its mark (the higher of mark and witness).
    fn took(&self, marks: &EtcdMarks, slot: u32, r: &rpc::TxnResponse) -> Took<i64> {
        match stored(range_kvs(r, 1).first(), &self.paths.mark(slot)) {
            Ok(mut s) => {
                if marks.witness {
                    s.raise_to_witness(witness(range_kvs(r, 2).first()));
                }
                Took::Claimed(s)
            }
            Err(why) => Took::Unreadable(why),
        }
    }

    /// The last failure branch: every candidate held, or the pool's `params` changed.
    fn all_taken(&self, r: &rpc::TxnResponse) -> Result<Took<i64>, Fault> {
        let now = range_kvs(r, 0)
            .first()
            .map_or((0, 0), |kv| (kv.mod_revision, kv.create_revision));
        if now.0 != self.params_revision
            || (self.params_created != 0 && now.1 != self.params_created)
        {
            // Agreed again under a new lease (and refused if they differ now).
            return Err(Fault::SessionGone(format!(
                "the pool's parameters changed under us ({}); agreeing again",
                self.paths.params()
            )));
        }
        Ok(Took::Taken)
    }
}
