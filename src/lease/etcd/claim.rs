//! Claiming a slot in etcd: queue up in create-revision order (etcd's own lock recipe), then,
//! at the head of the queue, take a free slot in one transaction.
//!
//! - Put `queue/<lease>` (attached to our lease); its `create_revision` is our place. Wait
//!   until no queue key has a lower one, watching only the key just ahead (no herd).
//! - As head: list `slots/` (keys only). A slot key carrying our own lease is a leftover of
//!   this lease (a lease of it lost to a foreign write, a reply lost): deleted, counts as free.
//! - Prefer the slot held before; else the free slot with the lowest mark (no mark key means
//!   mark 0, so unused slots go first, lowest number first).
//! - With every slot held, stay at the head, report the exhaustion, and wait for `slots/` to
//!   change.
//! - Take slot N in one transaction: if the pool's `params` is still at the revision agreed
//!   and `slots/N` does not exist, put `slots/N` (owner JSON, our lease) and read `marks/N`
//!   (its `mod_revision` is the compare-and-set base of the first mark write). Then delete
//!   our queue key.
//!
//! Pools larger than [`PROBE_ABOVE`] slots are claimed without the queue and without listing:
//! probe a random slot (the one held before first) with the same transaction; after
//! [`PROBES`] misses in a row list `slots/` (keys only: as many as there are holders).

use super::client::{prefix_end, EtcdError};
use super::marks::{absent, cmp, delete, get, put, range_kvs, stored, witness, EtcdMarks};
use super::pb::etcdserverpb as rpc;
use super::pb::etcdserverpb::compare::{CompareTarget, TargetUnion};
use super::pb::etcdserverpb::range_request::{SortOrder, SortTarget};
use super::Negotiator;
use crate::lease::holding::{
    exhausted, queued_as_spare, random_slot, spare_may_take, wait_exhausted, ClaimError, Exhausted,
};
use crate::lease::protocol::Stored;
use crate::lease::zk::tree::{parse_owner, Owner};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// A slot just taken and its mark as read.
pub(crate) type Taken = (u32, Stored<i64>);

/// Pools above this size are claimed by random probes instead of queue and listing.
pub const PROBE_ABOVE: u32 = 1024;
/// Probes that find a taken slot before `slots/` is listed to look for a free one.
const PROBES: u32 = 8;
/// How long a watch is trusted before the state is read again.
const RECHECK: Duration = Duration::from_secs(2);

/// What claims remember between attempts.
#[derive(Debug, Default)]
pub(crate) struct ClaimHistory {
    /// Slots whose mark is unreadable, or (probed pools) too far ahead of our clock: never
    /// taken by this process.
    pub skip: BTreeSet<u32>,
    /// Probed slots given back because their mark was beyond `--max-clock-wait`.
    pub far_ahead: u32,
    /// The `mod_revision` of the pool's `params` as agreed under this lease.
    pub params_revision: i64,
    /// Its `create_revision`: the pool's identity, compared by every claim (0: not compared,
    /// a planted bug for the campaign).
    pub params_created: i64,
    /// Every claim under the identity agreed starts above this.
    pub not_before: u64,
}

fn prefix(dir: &str) -> String {
    format!("{dir}/")
}

fn slot_of(key: &[u8], dir: &str) -> Option<u32> {
    std::str::from_utf8(key)
        .ok()?
        .strip_prefix(&prefix(dir))?
        .parse()
        .ok()
}

/// Claims a slot: queue, then take one (probes for large pools).
pub(crate) async fn claim(
    neg: &Negotiator,
    store: &EtcdMarks,
    prefer: Option<u32>,
    history: &mut ClaimHistory,
) -> Result<Taken, ClaimError<EtcdError>> {
    let owner = neg.owner(store.lease);
    if neg.cfg.pool_size > PROBE_ABOVE {
        let r = probe_slot(neg, store, prefer, &owner, history).await;
        neg.proto
            .metrics
            .set_pool_exhausted(neg.proto.part.index, false);
        return r;
    }
    let me = format!("{}/{:016x}", neg.paths.queue(), store.lease);
    let result = async {
        let place = enqueue(store, &me, &owner).await?;
        wait_for_turn(neg, store, &me, place).await?;
        take_slot(neg, store, prefer, &owner, place, history).await
    }
    .await;
    neg.proto
        .metrics
        .set_pool_exhausted(neg.proto.part.index, false);
    if result.is_ok() {
        // Before the next of our parts can reach the head: it is a spare from now on.
        neg.proto.part.set_holding(true);
    }
    // Leave the queue whatever happened; a key left by a failed delete goes with the lease,
    // or is reused (keeping its place) by the next claim under it.
    let req = rpc::TxnRequest {
        compare: vec![],
        success: vec![delete(&me)],
        failure: vec![],
    };
    let _ = store.etcd.txn("leaving the queue", req).await;
    result
}

/// Puts our queue key (keeping it if it is there already): its create revision.
async fn enqueue(store: &EtcdMarks, me: &str, owner: &[u8]) -> Result<i64, EtcdError> {
    let req = rpc::TxnRequest {
        compare: vec![absent(me)],
        success: vec![put(me, owner.to_vec(), store.lease)],
        failure: vec![get(me)],
    };
    let r = store.etcd.txn("queueing", req).await?;
    if r.succeeded {
        return r
            .header
            .map(|h| h.revision)
            .ok_or_else(|| EtcdError::Unavailable("etcd's answer has no header".into()));
    }
    range_kvs(&r, 0)
        .first()
        .map(|kv| kv.create_revision)
        .ok_or_else(|| EtcdError::Unavailable(format!("queue key {me} vanished")))
}

async fn wait_for_turn(
    neg: &Negotiator,
    store: &EtcdMarks,
    me: &str,
    place: i64,
) -> Result<(), EtcdError> {
    let q = prefix(&neg.paths.queue());
    loop {
        let req = rpc::RangeRequest {
            key: q.as_bytes().to_vec(),
            range_end: prefix_end(q.as_bytes()),
            limit: 1,
            sort_order: SortOrder::Descend as i32,
            sort_target: SortTarget::Create as i32,
            max_create_revision: place - 1,
            keys_only: true,
            ..Default::default()
        };
        let r = store.etcd.range("reading the queue", req).await?;
        let Some(ahead) = r.kvs.first() else {
            return Ok(());
        };
        let ahead_key = String::from_utf8_lossy(&ahead.key).to_string();
        neg.proto.pending(format!(
            "waiting in the slot queue (behind {ahead_key}, {me} is ours)"
        ));
        let rev = r.header.map_or(0, |h| h.revision);
        store.etcd.wait_change(&ahead.key, &[], rev, RECHECK).await;
    }
}

/// The owner records of the queue keys created after ours (at `place`).
async fn queued_behind(
    neg: &Negotiator,
    store: &EtcdMarks,
    place: i64,
) -> Result<Vec<Option<Owner>>, EtcdError> {
    let q = prefix(&neg.paths.queue());
    let req = rpc::RangeRequest {
        key: q.as_bytes().to_vec(),
        range_end: prefix_end(q.as_bytes()),
        min_create_revision: place + 1,
        ..Default::default()
    };
    let r = store.etcd.range("reading the queue", req).await?;
    Ok(r.kvs.iter().map(|kv| parse_owner(&kv.value)).collect())
}

/// The slots held now (keys under `slots/`), after deleting our own leftovers; the revision
/// read at.
async fn held(neg: &Negotiator, store: &EtcdMarks) -> Result<(BTreeSet<u32>, i64), EtcdError> {
    let s = prefix(&neg.paths.slots());
    let req = rpc::RangeRequest {
        key: s.as_bytes().to_vec(),
        range_end: prefix_end(s.as_bytes()),
        keys_only: true,
        ..Default::default()
    };
    let r = store.etcd.range("listing the slots", req).await?;
    let mut held = BTreeSet::new();
    for kv in &r.kvs {
        let Some(n) = slot_of(&kv.key, &neg.paths.slots()) else {
            continue;
        };
        if n >= neg.cfg.pool_size {
            continue;
        }
        // Ours, left from a lost lease of it or a reply lost: free again for us.
        if kv.lease == store.lease && store.delete_if_ours(n).await {
            continue;
        }
        held.insert(n);
    }
    Ok((held, r.header.map_or(0, |h| h.revision)))
}

async fn take_slot(
    neg: &Negotiator,
    store: &EtcdMarks,
    prefer: Option<u32>,
    owner: &[u8],
    place: i64,
    history: &mut ClaimHistory,
) -> Result<Taken, ClaimError<EtcdError>> {
    let pool = neg.cfg.pool_size;
    let mut reported = false;
    loop {
        let (held, rev) = held(neg, store).await?;
        let free: Vec<u32> = (0..pool)
            .filter(|n| !held.contains(n) && !history.skip.contains(n))
            .collect();
        if free.is_empty() {
            if let Exhausted::GiveWay =
                exhausted(&neg.proto, pool, &mut reported, queued_as_spare(owner))
            {
                return Err(ClaimError::GaveWay);
            }
            let s = prefix(&neg.paths.slots());
            let end = prefix_end(s.as_bytes());
            let change = store.etcd.wait_change(s.as_bytes(), &end, rev, RECHECK);
            wait_exhausted(&neg.proto, change).await;
            continue;
        }
        neg.proto
            .metrics
            .set_pool_exhausted(neg.proto.part.index, false);
        if neg.proto.part.is_spare() {
            let behind = queued_behind(neg, store, place).await?;
            if !spare_may_take(&neg.proto.part, free.len(), &behind) {
                return Err(ClaimError::GaveWay);
            }
        }
        let slot = match prefer.filter(|p| free.contains(p)) {
            Some(p) => p,
            None => lowest_mark(neg, store, &free).await?,
        };
        if let Tried::Claimed(c) = try_slot(neg, store, slot, owner, history).await? {
            return Ok(c);
        }
    }
}

/// The outcome of trying one slot.
enum Tried {
    Claimed(Taken),
    /// Someone else holds it.
    Taken,
    /// Its mark is unreadable: never taken by this process (added to `history.skip`).
    Skipped,
}

/// Puts `slots/N` and reads `marks/N` and `witness/N` in one transaction, while the pool's
/// parameters are still the ones agreed. The floor is the higher of the two.
async fn try_slot(
    neg: &Negotiator,
    store: &EtcdMarks,
    slot: u32,
    owner: &[u8],
    history: &mut ClaimHistory,
) -> Result<Tried, EtcdError> {
    let params = neg.paths.params();
    let (slot_key, mark_key) = (neg.paths.slot(slot), neg.paths.mark(slot));
    let req = rpc::TxnRequest {
        compare: [
            cmp(
                &params,
                CompareTarget::Mod,
                TargetUnion::ModRevision(history.params_revision),
            ),
            absent(&slot_key),
        ]
        .into_iter()
        .chain((history.params_created != 0).then(|| {
            cmp(
                &params,
                CompareTarget::Create,
                TargetUnion::CreateRevision(history.params_created),
            )
        }))
        .collect(),
        success: vec![
            put(&slot_key, owner.to_vec(), store.lease),
            get(&mark_key),
            get(&neg.paths.witness(slot)),
        ],
        failure: vec![get(&params)],
    };
    let r = store.etcd.txn("claiming a slot", req).await?;
    if !r.succeeded {
        let now = range_kvs(&r, 0)
            .first()
            .map_or((0, 0), |kv| (kv.mod_revision, kv.create_revision));
        if now.0 != history.params_revision
            || (history.params_created != 0 && now.1 != history.params_created)
        {
            // Agreed again under a new lease (and refused if they differ now).
            return Err(EtcdError::LeaseGone(format!(
                "the pool's parameters changed under us ({params}); agreeing again"
            )));
        }
        return Ok(Tried::Taken);
    }
    match stored(range_kvs(&r, 1).first(), &mark_key) {
        Ok(mut s) => {
            if store.witness {
                s.mark = s.mark.max(witness(range_kvs(&r, 2).first()));
            }
            Ok(Tried::Claimed((slot, s)))
        }
        Err(why) => {
            tracing::error!(slot, reason = %why, "slot's time mark is unreadable; never taking this slot");
            history.skip.insert(slot);
            store.delete_if_ours(slot).await;
            Ok(Tried::Skipped)
        }
    }
}

/// Claims a slot of a large pool by random probes (see the module documentation).
async fn probe_slot(
    neg: &Negotiator,
    store: &EtcdMarks,
    prefer: Option<u32>,
    owner: &[u8],
    history: &mut ClaimHistory,
) -> Result<Taken, ClaimError<EtcdError>> {
    use rand::Rng;
    let pool = neg.cfg.pool_size;
    if let Some(p) = prefer {
        store.delete_if_ours(p).await;
    }
    let mut next = prefer.filter(|p| *p < pool && !history.skip.contains(p));
    let mut misses = 0;
    let mut reported = false;
    for _ in 0..100_000 {
        let slot = match next.take() {
            Some(s) => s,
            None if misses < PROBES => random_slot(pool, &history.skip),
            None => {
                misses = 0;
                let (held, rev) = held(neg, store).await?;
                let start = rand::rng().random_range(0..pool);
                let free = (start..pool)
                    .chain(0..start)
                    .find(|n| !held.contains(n) && !history.skip.contains(n));
                match free {
                    Some(s) => s,
                    None => {
                        if let Exhausted::GiveWay =
                            exhausted(&neg.proto, pool, &mut reported, queued_as_spare(owner))
                        {
                            return Err(ClaimError::GaveWay);
                        }
                        let s = prefix(&neg.paths.slots());
                        let end = prefix_end(s.as_bytes());
                        let change = store.etcd.wait_change(s.as_bytes(), &end, rev, RECHECK);
                        wait_exhausted(&neg.proto, change).await;
                        continue;
                    }
                }
            }
        };
        match try_slot(neg, store, slot, owner, history).await? {
            Tried::Claimed(c) => return Ok(c),
            Tried::Taken => misses += 1,
            Tried::Skipped => {}
        }
    }
    Err(EtcdError::Unavailable(format!("no free slot found in {}", neg.paths.slots())).into())
}

/// The free slot whose mark is lowest (a missing mark counts as 0); ties go to the lower slot.
async fn lowest_mark(neg: &Negotiator, store: &EtcdMarks, free: &[u32]) -> Result<u32, EtcdError> {
    let m = prefix(&neg.paths.marks());
    let req = rpc::RangeRequest {
        key: m.as_bytes().to_vec(),
        range_end: prefix_end(m.as_bytes()),
        ..Default::default()
    };
    let r = store.etcd.range("reading the marks", req).await?;
    let marks: BTreeMap<u32, u64> = r
        .kvs
        .iter()
        .filter_map(|kv| {
            let n = slot_of(&kv.key, &neg.paths.marks())?;
            let mark = crate::lease::zk::tree::parse_mark(&kv.value).unwrap_or(u64::MAX);
            Some((n, mark))
        })
        .collect();
    let best = free
        .iter()
        .map(|&n| (marks.get(&n).copied().unwrap_or(0), n))
        .min();
    Ok(best.map_or(free[0], |(_, n)| n))
}
