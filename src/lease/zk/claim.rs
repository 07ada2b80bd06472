//! Claiming a slot: queue up (no herd), then, at the head of the queue, take a free slot.
//!
//! - Create `queue/claim-<seq>` (ephemeral sequential) and wait until it is the lowest,
//!   watching only the next-lower node.
//! - As head: list `slots/` with a watch. A slot node created by this very session (left from
//!   a lost lease) is deleted and counts as free. A node left by this lease's own *expired*
//!   session (same instance ID — each of an instance's `--slots` leases has its own — other
//!   session) is not taken over: it vanishes when ZooKeeper
//!   expires that session, and until then another slot is taken or, with none free, we wait.
//! - Prefer the slot held before; else the free slot with the lowest mark (no mark node means
//!   mark 0, so unused slots go first, lowest number first).
//! - With every slot held, stay at the head, report the exhaustion, and wait for `slots/` to
//!   change — unless another lease of this instance holds a slot (`--slots`): that spare
//!   gives its place up and tries again later, so instances holding none go first.
//! - Create `slots/N` (ephemeral, owner JSON), delete the queue node, read `marks/N` (creating
//!   it at 0 if missing) with its version: the compare-and-set base for the first mark write.
//!
//! Pools larger than [`PROBE_ABOVE`] slots (sno80's 65,536 partitions, muid128's 2^32 − 1
//! medallions) are claimed without the queue and without listing or reading the pool: probe a
//! random slot (the one held before first) by creating `slots/N`; `NodeExists` means taken, so
//! probe another. Only after [`PROBES`] misses in a row is `slots/` listed — its children are
//! the *held* slots, as many as there are holders, never the pool — to find a free slot or
//! see that the pool is exhausted and wait for a change. A claim costs one create and one mark
//! read whatever the pool size; slots are spread at random instead of lowest mark first (a
//! successor still waits past the mark of the slot it took).

use super::marks::{Unreadable, ZkMarks};
use super::pool::data_or_none;
use super::tree::{acls, parse_mark, parse_owner, Owner};
use super::Negotiator;
use crate::lease::holding::{
    exhausted, queued_as_spare, random_slot, spare_may_take, wait_exhausted, ClaimError, Exhausted,
};
use crate::lease::protocol::Stored;
use std::collections::BTreeSet;
use zookeeper_client as zk;

/// A slot just taken (`slots/N` created by this session) and its mark as read.
type Taken = (u32, Stored<i32>);

/// What claims remember between attempts, and across sessions.
#[derive(Debug, Default)]
pub struct ClaimHistory {
    /// Slots whose node this session may have created in a failed claim (ambiguous create,
    /// error after create): freed at the next claim if this session owns them (cleared with
    /// each new session).
    pub suspects: BTreeSet<u32>,
    /// Slots whose mark is unreadable, or (probed pools) too far ahead of our clock: never
    /// taken by this process.
    pub skip: BTreeSet<u32>,
    /// Probed slots given back because their mark was beyond `--max-clock-wait`.
    pub far_ahead: u32,
    /// The version of the pool's `params` node as agreed in this session (set with each new
    /// session): every slot is created in a `multi` that checks it.
    pub params_version: i32,
    /// The node of the pool's identity agreed in this session (`identity/<id>`): every slot
    /// is created, and every mark written, in a `multi` that checks it. `None`: not checked
    /// (a planted bug, for the campaign).
    pub identity: Option<String>,
    /// Every claim under the identity agreed starts above this (see
    /// [`crate::lease::identity`]).
    pub not_before: u64,
}

/// How many far-ahead probed slots are given back before that is a fatal error (our clock is
/// then behind the cluster's, not one odd slot ahead of it).
pub const FAR_AHEAD_SKIPS: u32 = 16;

/// Pools above this size are claimed by random probes instead of queue and listing.
pub const PROBE_ABOVE: u32 = 1024;
/// Probes that find a taken slot before `slots/` is listed to look for a free one.
const PROBES: u32 = 8;

pub async fn claim(
    neg: &Negotiator,
    store: &ZkMarks,
    prefer: Option<u32>,
    history: &mut ClaimHistory,
) -> Result<Taken, ClaimError<zk::Error>> {
    // Leftovers of this session's earlier attempts would block the queue or a slot forever.
    drop_own_queue_nodes(neg, &store.client).await?;
    for slot in std::mem::take(&mut history.suspects) {
        store.delete_if_ours(slot).await;
    }
    let owner = neg.owner(&store.client);
    if neg.cfg.pool_size > PROBE_ABOVE {
        let result = probe_slot(neg, store, prefer, &owner, history).await;
        neg.proto
            .metrics
            .set_pool_exhausted(neg.proto.part.index, false);
        return result;
    }
    let eph_seq = zk::CreateMode::EphemeralSequential.with_acls(acls(neg.cfg.access.restricted()));
    let prefix = format!("{}/claim-", neg.paths.queue());
    let (_, seq) = store.client.create(&prefix, &owner, &eph_seq).await?;
    let me = format!("claim-{seq}");
    let result = async {
        wait_for_turn(neg, store, &me).await?;
        take_slot(neg, store, prefer, &owner, &me, history).await
    }
    .await;
    neg.proto
        .metrics
        .set_pool_exhausted(neg.proto.part.index, false);
    if result.is_ok() {
        // Before the next of our parts can reach the head: it is a spare from now on.
        neg.proto.part.set_holding(true);
    }
    // Leave the queue whatever happened; a node left behind by a failed delete is removed at
    // the next claim, and an expired session has removed it already.
    let _ = store
        .client
        .delete(&format!("{}/{me}", neg.paths.queue()), None)
        .await;
    result
}

/// Deletes queue nodes this session created earlier (e.g. a create whose reply was lost).
async fn drop_own_queue_nodes(neg: &Negotiator, client: &zk::Client) -> Result<(), zk::Error> {
    let queue = neg.paths.queue();
    for child in client.list_children(&queue).await? {
        let path = format!("{queue}/{child}");
        if let Ok((_, stat)) = client.get_data(&path).await {
            if stat.ephemeral_owner == client.session_id().0 {
                tracing::info!(node = %child, "removing a queue node left by an earlier attempt");
                let _ = client.delete(&path, None).await;
            }
        }
    }
    Ok(())
}

fn queue_order(children: &mut [String]) {
    // Sequence suffixes are zero-padded to ten digits, so names sort like their numbers.
    children.sort();
}

async fn wait_for_turn(neg: &Negotiator, store: &ZkMarks, me: &str) -> Result<(), zk::Error> {
    let queue = neg.paths.queue();
    loop {
        let mut children = store.client.list_children(&queue).await?;
        children.retain(|c| c.starts_with("claim-"));
        queue_order(&mut children);
        let pos = children
            .iter()
            .position(|c| c == me)
            .ok_or_else(|| zk::Error::UnexpectedError(format!("queue node {me} vanished")))?;
        if pos == 0 {
            return Ok(());
        }
        neg.proto
            .pending(format!("waiting in the slot queue ({pos} ahead)"));
        let prev = format!("{queue}/{}", children[pos - 1]);
        if let (Some(_), watcher) = store.client.check_and_watch_stat(&prev).await? {
            watcher.changed().await;
        }
    }
}

async fn take_slot(
    neg: &Negotiator,
    store: &ZkMarks,
    prefer: Option<u32>,
    owner: &[u8],
    me: &str,
    history: &mut ClaimHistory,
) -> Result<Taken, ClaimError<zk::Error>> {
    let pool = neg.cfg.pool_size;
    let mut reported = false;
    loop {
        let (children, watcher) = store
            .client
            .list_and_watch_children(&neg.paths.slots())
            .await?;
        let mut held: BTreeSet<u32> = children
            .iter()
            .filter_map(|c| c.parse::<u32>().ok())
            .filter(|n| *n < pool)
            .collect();
        // Nodes this session created earlier (a lease lost to a version mismatch) are ours.
        if let Some(p) = prefer.filter(|p| held.contains(p)) {
            if store.delete_if_ours(p).await {
                held.remove(&p);
            }
        }
        let free: Vec<u32> = (0..pool)
            .filter(|n| !held.contains(n) && !history.skip.contains(n))
            .collect();
        if free.is_empty() {
            let queued_as_spare = queued_as_spare(owner);
            let pool = neg.cfg.pool_size;
            if let Exhausted::GiveWay = exhausted(&neg.proto, pool, &mut reported, queued_as_spare)
            {
                return Err(ClaimError::GaveWay);
            }
            wait_exhausted(&neg.proto, async {
                watcher.changed().await;
            })
            .await;
            continue;
        }
        neg.proto
            .metrics
            .set_pool_exhausted(neg.proto.part.index, false);
        if neg.proto.part.is_spare() {
            let behind = queued_behind(neg, store, me).await?;
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

/// The owner records of the queue nodes after `me`.
async fn queued_behind(
    neg: &Negotiator,
    store: &ZkMarks,
    me: &str,
) -> Result<Vec<Option<Owner>>, zk::Error> {
    let queue = neg.paths.queue();
    let mut children = store.client.list_children(&queue).await?;
    children.retain(|c| c.starts_with("claim-") && c.as_str() > me);
    queue_order(&mut children);
    let mut owners = Vec::with_capacity(children.len());
    for c in children {
        // A node gone meanwhile has left the queue.
        if let Some((data, _)) = data_or_none(&store.client, &format!("{queue}/{c}")).await? {
            owners.push(parse_owner(&data));
        }
    }
    Ok(owners)
}

/// The outcome of trying one slot.
enum Tried {
    Claimed(Taken),
    /// Someone else holds it.
    Taken,
    /// Its mark is unreadable: never taken by this process (added to `history.skip`).
    Skipped,
}

/// Creates `slots/N` and reads `marks/N`.
async fn try_slot(
    neg: &Negotiator,
    store: &ZkMarks,
    slot: u32,
    owner: &[u8],
    history: &mut ClaimHistory,
) -> Result<Tried, zk::Error> {
    let eph = zk::CreateMode::Ephemeral.with_acls(acls(neg.cfg.access.restricted()));
    // From here on a failure may leave our node behind: remember the slot as suspect.
    history.suspects.insert(slot);
    // Created only while the pool's parameters are still the ones this session agreed to.
    let mut w = store.client.new_multi_writer();
    w.add_check_version(&neg.paths.params(), history.params_version)?;
    if let Some(id) = &history.identity {
        w.add_check_version(id, 0)?;
    }
    let create = 1 + usize::from(history.identity.is_some());
    w.add_create(&neg.paths.slot(slot), owner, &eph)?;
    match w.commit().await {
        Ok(_) => {}
        Err(zk::MultiWriteError::OperationFailed {
            index,
            source: zk::Error::NodeExists,
        }) if index == create => {
            history.suspects.remove(&slot);
            return Ok(Tried::Taken);
        }
        Err(zk::MultiWriteError::OperationFailed { index, source }) if index < create => {
            history.suspects.remove(&slot);
            // A new session agrees on the pool again (refused if the parameters now differ).
            return Err(zk::Error::SessionExpired).inspect_err(|_| {
                tracing::warn!(
                    error = %source,
                    "the pool's parameters or identity changed under us ({}); agreeing again",
                    neg.paths.params()
                )
            });
        }
        Err(e) => return Err(e.into()),
    }
    match store.read_mark(slot).await {
        Ok(stored) => {
            history.suspects.remove(&slot);
            Ok(Tried::Claimed((slot, stored)))
        }
        Err(Unreadable::Corrupt(why)) => {
            tracing::error!(slot, reason = %why, "slot's time mark is unreadable; never taking this slot");
            history.skip.insert(slot);
            store.delete_if_ours(slot).await;
            history.suspects.remove(&slot);
            Ok(Tried::Skipped)
        }
        Err(Unreadable::Zk(e)) => Err(e),
    }
}

/// Claims a slot of a large pool by random probes (see the module documentation).
async fn probe_slot(
    neg: &Negotiator,
    store: &ZkMarks,
    prefer: Option<u32>,
    owner: &[u8],
    history: &mut ClaimHistory,
) -> Result<Taken, ClaimError<zk::Error>> {
    use rand::Rng;
    let pool = neg.cfg.pool_size;
    if let Some(p) = prefer {
        // Our own node from a lease lost to a version mismatch frees the slot for us again.
        store.delete_if_ours(p).await;
    }
    let mut next = prefer.filter(|p| *p < pool && !history.skip.contains(p));
    let mut misses = 0;
    let mut reported = false;
    // Each pass either claims, or sees a taken slot, or (after PROBES misses) lists the held
    // slots once; an exhausted pool waits for a change. The bound only guards against a
    // server that keeps answering NodeExists for slots it does not list.
    for _ in 0..100_000 {
        let slot = match next.take() {
            Some(s) => s,
            None if misses < PROBES => random_slot(pool, &history.skip),
            None => {
                misses = 0;
                let (children, watcher) = store
                    .client
                    .list_and_watch_children(&neg.paths.slots())
                    .await?;
                let held: BTreeSet<u32> = children
                    .iter()
                    .filter_map(|c| c.parse::<u32>().ok())
                    .filter(|n| *n < pool)
                    .collect();
                // At most |held ∪ skip| misses before a free slot, scanning from a random start.
                let start = rand::rng().random_range(0..pool);
                let free = (start..pool)
                    .chain(0..start)
                    .find(|n| !held.contains(n) && !history.skip.contains(n));
                match free {
                    Some(s) => s,
                    None => {
                        let pool = neg.cfg.pool_size;
                        let spare = queued_as_spare(owner);
                        if let Exhausted::GiveWay =
                            exhausted(&neg.proto, pool, &mut reported, spare)
                        {
                            return Err(ClaimError::GaveWay);
                        }
                        wait_exhausted(&neg.proto, async {
                            watcher.changed().await;
                        })
                        .await;
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
    Err(zk::Error::UnexpectedError(format!("no free slot found in {}", neg.paths.slots())).into())
}

/// The free slot whose mark is lowest (a missing mark counts as 0); ties go to the lower slot.
async fn lowest_mark(neg: &Negotiator, store: &ZkMarks, free: &[u32]) -> Result<u32, zk::Error> {
    let marked: BTreeSet<u32> = store
        .client
        .list_children(&neg.paths.marks())
        .await?
        .iter()
        .filter_map(|c| c.parse().ok())
        .collect();
    if let Some(&n) = free.iter().find(|n| !marked.contains(n)) {
        return Ok(n);
    }
    let mut reader = store.client.new_multi_reader();
    for &n in free {
        reader.add_get_data(&neg.paths.mark(n))?;
    }
    let results = reader.commit().await?;
    let best = free
        .iter()
        .zip(results)
        .map(|(&n, r)| match r {
            zk::MultiReadResult::Data { data, .. } => (parse_mark(&data).unwrap_or(u64::MAX), n),
            _ => (0, n),
        })
        .min();
    Ok(best.map_or(free[0], |(_, n)| n))
}
