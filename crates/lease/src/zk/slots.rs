//! How ZooKeeper does each step of the one negotiation ([`crate::pool`]) within one
//! session:
//!
//! - the queue is `queue/claim-<seq>` (ephemeral sequential): a place is its node name, the
//!   one ahead is the next-lower node, watched alone (no herd);
//! - the held slots are the children of `slots/`, listed with a watch. A slot node created by
//!   this very session (left from a lost lease) is deleted and counts as free. A node left by
//!   this lease's own *expired* session is not taken over: it vanishes when ZooKeeper expires
//!   that session, and until then another slot is taken or, with none free, we wait;
//! - a slot is taken by creating `slots/N` (ephemeral, owner JSON) in a `multi` that checks
//!   the pool's `params` version and identity node agreed, then reading `marks/N` and
//!   `witness/N` (created at 0 if missing): the claim is made before the read. `NodeExists`
//!   means taken. A failure after the create may leave our node: the slot is a *suspect*,
//!   freed at the next claim of this session.

use super::handle::ZkSession;
use super::marks::{PoolFence, Unreadable, ZkMarks};
use super::pool::data_or_none;
use super::tree::{parse_owner, Marked, Owner};
use super::{acls, params, session, Fault};
use crate::identity::Record;
use crate::pool::{Change, Look, Negotiation, Recorded, Session, Took};
use crate::stop::Stop;
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use zookeeper_client as zk;

/// Slot `slot`'s mark as a multi read answered it.
fn mark_read(slot: u32, r: zk::MultiReadResult) -> Marked {
    match r {
        zk::MultiReadResult::Data { data, .. } => Marked::read(slot, &data),
        zk::MultiReadResult::Error {
            err: zk::Error::NoNode,
        } => Marked::missing(slot),
        _ => Marked::unreadable(slot),
    }
}

impl Session for ZkSession {
    type Marks = ZkMarks;
    type Place = String;

    fn owner_id(&self) -> String {
        self.client.session_id().to_string()
    }

    fn follow(&self, neg: &Negotiation, ended: CancellationToken) -> JoinHandle<()> {
        tokio::spawn(session::track_states(
            self.client.state_watcher(),
            neg.proto.metrics.clone(),
            neg.proto.part.index,
            ended,
        ))
    }

    fn gauges(&self, neg: &Negotiation) -> JoinHandle<()> {
        super::pool::spawn_gauges(
            self.client.clone(),
            self.paths.clone(),
            neg.cfg.pool_size,
            neg.proto.metrics.clone(),
            neg.proto.part.full.clone(),
        )
    }

    fn demand(&self, _neg: &Negotiation, tx: tokio::sync::watch::Sender<bool>) -> JoinHandle<()> {
        let (client, paths) = (self.client.clone(), self.paths.clone());
        tokio::spawn(super::demand::follow_demand(client, paths, tx))
    }

    async fn want(&self, _neg: &Negotiation, wanted: bool) {
        match wanted {
            true => self.want_slot().await,
            false => self.unwant_slot().await,
        }
    }

    fn looker(&self, neg: &Negotiation) -> Box<dyn FnMut() -> Look + Send> {
        let (client, paths, pool) = (self.client.clone(), self.paths.clone(), neg.cfg.pool_size);
        Box::new(move || Box::pin(super::pool::look(client.clone(), paths.clone(), pool)))
    }

    async fn prepare(
        &mut self,
        _neg: &Negotiation,
        stop: &mut Stop,
    ) -> Result<(), crate::pool::end::End> {
        session::make_namespace(&self.client, &self.paths, self.restricted, stop).await
    }

    async fn params(&self, _neg: &Negotiation, data: &[u8]) -> Result<Option<Recorded>, Fault> {
        params::record(self, data).await
    }

    async fn join(
        &mut self,
        neg: &Negotiation,
        recorded: &Recorded,
    ) -> Result<Option<Record>, Fault> {
        let Some((node, rec)) = params::join_or_record(neg, self, recorded).await? else {
            return Ok(None);
        };
        self.params_version = i32::try_from(recorded.version).unwrap_or(i32::MAX);
        self.params_creation = recorded.creation;
        self.identity = Some(node);
        Ok(Some(rec))
    }

    #[cfg(feature = "fault-injection")]
    fn unfenced(&mut self, recorded: &Recorded) {
        self.params_version = i32::try_from(recorded.version).unwrap_or(i32::MAX);
        self.identity = None;
    }

    fn marks(&self, neg: &Negotiation) -> ZkMarks {
        ZkMarks {
            client: self.client.clone(),
            paths: self.paths.clone(),
            auth: self.restricted,
            pool: self.identity.clone().map(|identity| PoolFence {
                params: self.paths.params(),
                params_version: self.params_version,
                params_creation: self.params_creation,
                identity,
            }),
            witness: neg.proto.keeps_witness(),
        }
    }

    async fn tidy(&self, _neg: &Negotiation, marks: &ZkMarks) -> Result<(), Fault> {
        // Queue nodes this session created earlier (a create whose reply was lost): none may
        // be left before the claim goes on (it would stand at the head of the queue, never
        // moving, until the session ends), so a failure here fails the claim (retried).
        if self.queued.load(Ordering::SeqCst) {
            let queue = self.paths.queue();
            // A create whose reply was lost may not be on a server that lags yet.
            self.client.sync(&queue).await?;
            for child in self.client.list_children(&queue).await? {
                let path = format!("{queue}/{child}");
                // `exists` needs no permission to read the node.
                let Some(stat) = self.client.check_stat(&path).await? else {
                    continue;
                };
                if stat.ephemeral_owner == self.client.session_id().0 {
                    tracing::info!(node = %child, "removing a queue node left by an earlier attempt");
                    match self.client.delete(&path, None).await {
                        Ok(()) | Err(zk::Error::NoNode) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
            }
            self.queued.store(false, Ordering::SeqCst);
        }
        let suspects = std::mem::take(&mut *self.suspects());
        for slot in suspects {
            marks.delete_if_ours(slot).await;
        }
        Ok(())
    }

    async fn glance(
        &self,
        neg: &Negotiation,
        prefer: Option<u32>,
    ) -> Result<Option<Vec<Marked>>, Fault> {
        let pool = neg.cfg.pool_size;
        let mut reader = self.client.new_multi_reader();
        reader.add_get_children(&self.paths.queue())?;
        reader.add_get_children(&self.paths.slots())?;
        for n in 0..pool {
            reader.add_get_data(&self.paths.mark(n))?;
        }
        let mut results = reader.commit().await?.into_iter();
        let mut children = || match results.next() {
            Some(zk::MultiReadResult::Children { children }) => Some(children),
            _ => None,
        };
        let (Some(queue), Some(slots)) = (children(), children()) else {
            return Ok(None);
        };
        let held = Self::held_of(&slots, pool);
        if queue.iter().any(|c| c.starts_with("claim-"))
            || prefer.is_some_and(|p| held.contains(&p))
        {
            return Ok(None);
        }
        let free = (0..pool).zip(results).filter(|(n, _)| !held.contains(n));
        Ok(Some(free.map(|(n, r)| mark_read(n, r)).collect()))
    }

    async fn enqueue(&self, _neg: &Negotiation, owner: &[u8]) -> Result<String, Fault> {
        let mode = zk::CreateMode::EphemeralSequential.with_acls(acls(self.restricted));
        let prefix = format!("{}/claim-", self.paths.queue());
        self.queued.store(true, Ordering::SeqCst);
        let (_, seq) = self.client.create(&prefix, owner, &mode).await?;
        Ok(format!("claim-{seq}"))
    }

    async fn ahead(
        &self,
        _neg: &Negotiation,
        me: &String,
    ) -> Result<Option<(usize, String, Change)>, Fault> {
        let children = self.queue().await?;
        let pos = children
            .iter()
            .position(|c| c == me)
            .ok_or_else(|| Fault::Unavailable(format!("queue node {me} vanished")))?;
        if pos == 0 {
            return Ok(None);
        }
        let prev = format!("{}/{}", self.paths.queue(), children[pos - 1]);
        let change: Change = match self.client.check_and_watch_stat(&prev).await? {
            (Some(_), watcher) => Box::pin(async move {
                watcher.changed().await;
            }),
            // Gone already: look again at once.
            (None, _) => Box::pin(async {}),
        };
        Ok(Some((pos, format!("{pos} ahead"), change)))
    }

    async fn behind(&self, _neg: &Negotiation, me: &String) -> Result<Vec<Option<Owner>>, Fault> {
        let queue = self.paths.queue();
        let mut owners = Vec::new();
        for c in self.queue().await?.into_iter().filter(|c| c > me) {
            // A node gone meanwhile has left the queue.
            if let Some((data, _)) = data_or_none(&self.client, &format!("{queue}/{c}")).await? {
                owners.push(parse_owner(&data));
            }
        }
        Ok(owners)
    }

    async fn leave(&self, _neg: &Negotiation, me: &String) {
        let gone = self
            .client
            .delete(&format!("{}/{me}", self.paths.queue()), None)
            .await;
        if matches!(gone, Ok(()) | Err(zk::Error::NoNode)) {
            self.queued.store(false, Ordering::SeqCst);
        }
    }

    async fn held(
        &self,
        neg: &Negotiation,
        marks: &ZkMarks,
        prefer: Option<u32>,
    ) -> Result<(BTreeSet<u32>, Change), Fault> {
        let (children, watcher) = self
            .client
            .list_and_watch_children(&self.paths.slots())
            .await?;
        let mut held = Self::held_of(&children, neg.cfg.pool_size);
        // Nodes this session created earlier (a lease lost to a version mismatch) are ours.
        if let Some(p) = prefer.filter(|p| held.contains(p)) {
            if marks.delete_if_ours(p).await {
                held.remove(&p);
            }
        }
        let change: Change = Box::pin(async move {
            watcher.changed().await;
        });
        Ok((held, change))
    }

    async fn marks_of(&self, _neg: &Negotiation, free: &[u32]) -> Result<Vec<Marked>, Fault> {
        // One round trip: a missing mark answers with an error of its own.
        let mut reader = self.client.new_multi_reader();
        for &n in free {
            reader.add_get_data(&self.paths.mark(n))?;
        }
        let results = reader.commit().await?;
        let mut marks: Vec<Marked> = free
            .iter()
            .zip(results)
            .map(|(&n, r)| mark_read(n, r))
            .collect();
        marks.sort_unstable_by_key(|m| m.slot);
        Ok(marks)
    }

    async fn take(
        &self,
        _neg: &Negotiation,
        marks: &ZkMarks,
        slot: u32,
        owner: &[u8],
        place: Option<&String>,
    ) -> Result<Took<i32>, Fault> {
        let eph = zk::CreateMode::Ephemeral.with_acls(acls(self.restricted));
        // From here on a failure may leave our node behind: remember the slot as suspect.
        self.suspects().insert(slot);
        // Created only while the pool's parameters are still the ones this session agreed to.
        let mut w = self.client.new_multi_writer();
        w.add_check_version(&self.paths.params(), self.params_version)?;
        if let Some(id) = &self.identity {
            w.add_check_version(id, 0)?;
        }
        let create = 1 + usize::from(self.identity.is_some());
        w.add_create(&self.paths.slot(slot), owner, &eph)?;
        if let Some(me) = place {
            w.add_delete(&format!("{}/{me}", self.paths.queue()), None)?;
        }
        // Sent now, and the mark's reads right behind it: ZooKeeper answers a session's
        // requests in order, so they read what follows the create (one round trip in all).
        let commit = w.commit();
        let early = marks.read_sent(slot);
        match commit.await {
            // The queue node went with the take.
            Ok(_) if place.is_some() => self.queued.store(false, Ordering::SeqCst),
            Ok(_) => {}
            Err(zk::MultiWriteError::OperationFailed {
                index,
                source: zk::Error::NodeExists,
            }) if index == create => {
                self.suspects().remove(&slot);
                return Ok(Took::Taken);
            }
            Err(zk::MultiWriteError::OperationFailed { index, source }) if index < create => {
                self.suspects().remove(&slot);
                // A new session agrees on the pool again (refused if the parameters now differ).
                return Err(Fault::SessionGone(format!(
                    "the pool's parameters or identity changed under us ({}: {source}); agreeing again",
                    self.paths.params()
                )));
            }
            Err(e) => return Err(zk::Error::from(e).into()),
        }
        let read = match early.await {
            Some(stored) => Ok(stored),
            // Missing or unreadable: read again, creating what is missing.
            None => marks.read_mark(slot).await,
        };
        if !matches!(read, Err(Unreadable::Zk(_))) {
            self.suspects().remove(&slot);
        }
        match read {
            Ok(stored) => Ok(Took::Claimed(stored)),
            Err(Unreadable::Corrupt(why)) => Ok(Took::Unreadable(why)),
            Err(Unreadable::Zk(e)) => Err(e.into()),
        }
    }

    async fn let_go(&self, marks: &ZkMarks, slot: u32) -> bool {
        let gone = marks.delete_if_ours(slot).await;
        if !gone {
            // Not given back (a passing fault): freed at the next claim, not left held until
            // the session ends.
            self.suspects().insert(slot);
        }
        gone
    }

    fn lost(self) -> Option<ZkSession> {
        // Dropping the last handle sends CloseSession: nothing is left to end.
        None
    }

    fn close(self) -> impl std::future::Future<Output = ()> + Send + 'static {
        session::close(self.client)
    }
}
