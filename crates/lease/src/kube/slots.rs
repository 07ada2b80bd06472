//! How Kubernetes does each step of the one negotiation ([`crate::pool`]) under one session:
//!
//! - a look at the pool is the copy of this process's follower ([`super::view`]) once it has
//!   seen this session's own reads and writes, the sessions judged by [`super::liveness`]; a
//!   session seen unrenewed for its duration is deleted on the way (a compare-and-set on the
//!   version seen), which frees its slots;
//! - a slot is free when no session holds it, or its holder's session is gone; it is taken in
//!   one compare-and-set of the slot object on the version read (holder, owner record), whose
//!   answer holds the mark it fences on; a slot stamped with another identity is never taken;
//! - the queue: a place is the version of our session object's write that names its owner
//!   for the queue, written on it again as its place; it goes with the session when it ends;
//!   the one ahead is the live session with the next-lower place.

use super::api::KubeError;
use super::marks::KubeMarks;
use super::objects::{self, holder, OWNER, QUEUED, WANTS};
use super::session::{self, KubeSession};
use crate::identity::Record;
use crate::pool::tree::{Marked, Owner};
use crate::pool::{Change, Fault, Look, Negotiation, Recorded, Session, Took};
use std::collections::BTreeSet;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

impl Session for KubeSession {
    type Marks = KubeMarks;
    /// Our ticket.
    type Place = u64;

    fn owner_id(&self) -> String {
        self.name
            .rsplit_once(".session-")
            .map_or(self.name.clone(), |(_, id)| id.to_string())
    }

    fn follow(&self, _neg: &Negotiation, ended: CancellationToken) -> JoinHandle<()> {
        tokio::spawn(session::renew(
            self.kube.clone(),
            self.name.clone(),
            self.ttl,
            self.busy.subscribe(),
            self.wrote.clone(),
            ended,
        ))
    }

    /// The gauges are set by the first lease's follower of the pool ([`Session::demand`]).
    fn gauges(&self, _neg: &Negotiation) -> JoinHandle<()> {
        tokio::spawn(std::future::pending())
    }

    /// Follows the process's copy of the pool ([`super::pool::demand`]): who waits; whether
    /// the session is busy (what its renewals declare); the gauges for the instance's first
    /// lease.
    fn demand(&self, neg: &Negotiation, tx: tokio::sync::watch::Sender<bool>) -> JoinHandle<()> {
        let gauges = (neg.proto.part.index == 0)
            .then(|| (neg.proto.metrics.clone(), neg.proto.part.full.clone()));
        tokio::spawn(super::pool::demand(
            self.watcher(),
            neg.cfg.pool_size,
            tx,
            gauges,
        ))
    }

    async fn want(&self, _neg: &Negotiation, wanted: bool) {
        let value = wanted.then(|| "true".to_string());
        for _ in 0..5 {
            match self
                .note("saying whether a slot is wanted", &[(WANTS, value.clone())])
                .await
            {
                Ok(_) => return,
                Err(e) if wanted => {
                    tracing::warn!(error = %e, "cannot say in Kubernetes that a slot is wanted");
                    return;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }

    fn looker(&self, neg: &Negotiation) -> Box<dyn FnMut() -> Look + Send> {
        let (me, pool) = (std::sync::Arc::new(self.watcher()), neg.cfg.pool_size);
        Box::new(move || {
            let me = me.clone();
            Box::pin(async move { super::pool::look(&me, pool).await })
        })
    }

    async fn params(&self, _neg: &Negotiation, data: &[u8]) -> Result<Option<Recorded>, Fault> {
        Ok(KubeSession::params(self, data).await?)
    }

    async fn join(
        &mut self,
        neg: &Negotiation,
        recorded: &Recorded,
    ) -> Result<Option<Record>, Fault> {
        Ok(match self.join_or_record(neg, recorded).await? {
            Some((rec, uid)) => {
                self.identity = Some(uid);
                Some(rec)
            }
            None => None,
        })
    }

    #[cfg(feature = "fault-injection")]
    fn unfenced(&mut self, _recorded: &Recorded) {
        self.identity = None;
    }

    fn marks(&self, neg: &Negotiation) -> KubeMarks {
        KubeMarks {
            witness: neg.proto.keeps_witness(),
            wrote: self.wrote.clone(),
            ..KubeMarks::new(
                self.kube.clone(),
                self.view.clone(),
                self.name.clone(),
                self.identity.clone(),
            )
        }
    }

    async fn tidy(&self, _neg: &Negotiation, _marks: &KubeMarks) -> Result<(), Fault> {
        // A place left by an earlier attempt is overwritten by `enqueue`; slots of ours are
        // freed by `held`.
        Ok(())
    }

    async fn glance(
        &self,
        neg: &Negotiation,
        _prefer: Option<u32>,
    ) -> Result<Option<Vec<Marked>>, Fault> {
        let snap = self.snapshot().await?;
        if !self.queue(&snap).is_empty()
            || snap
                .slots
                .values()
                .any(|l| holder(l) == Some(self.name.as_str()))
        {
            return Ok(None);
        }
        Ok(Some(
            (0..neg.cfg.pool_size)
                .filter_map(|n| {
                    let l = snap.slots.get(&n)?;
                    (self.usable(l) && !self.held_by_other(&snap, l)).then(|| objects::marked(n, l))
                })
                .collect(),
        ))
    }

    async fn enqueue(&self, _neg: &Negotiation, owner: &[u8]) -> Result<u64, Fault> {
        let owner = String::from_utf8_lossy(owner).into_owned();
        let t = self.ticket(owner).await?;
        self.note("queueing", &[(QUEUED, Some(t.to_string()))])
            .await?;
        Ok(t)
    }

    async fn ahead(
        &self,
        _neg: &Negotiation,
        place: &u64,
    ) -> Result<Option<(usize, String, Change)>, Fault> {
        // A copy that has seen our place (a contender that drew a lower one and has not
        // written it yet is queued behind us: fairness only, the take is the fence).
        let snap = self.snapshot_from(*place).await?;
        let ahead: Vec<_> = self
            .queue(&snap)
            .into_iter()
            .filter(|(t, _, _)| t < place)
            .collect();
        let Some((_, who, _)) = ahead.last() else {
            return Ok(None);
        };
        let says = format!("behind {who}, {} is ours", self.name);
        Ok(Some((ahead.len(), says, self.change(&snap))))
    }

    async fn behind(&self, _neg: &Negotiation, place: &u64) -> Result<Vec<Option<Owner>>, Fault> {
        let snap = self.snapshot_from(*place).await?;
        Ok(self
            .queue(&snap)
            .into_iter()
            .filter(|(t, _, _)| t > place)
            .map(|(_, _, o)| o)
            .collect())
    }

    /// Clears our place, tried a few times (a place left behind is not waited for by others
    /// once we hold a slot, and goes with the session).
    async fn leave(&self, _neg: &Negotiation, _place: &u64) {
        for _ in 0..5 {
            let left = self
                .note("leaving the queue", &[(QUEUED, None), (OWNER, None)])
                .await;
            match left {
                Ok(_) | Err(KubeError::NotFound(_)) | Err(KubeError::Refused(_)) => return,
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    async fn held(
        &self,
        neg: &Negotiation,
        marks: &KubeMarks,
        _prefer: Option<u32>,
    ) -> Result<(BTreeSet<u32>, Change), Fault> {
        let snap = self.snapshot().await?;
        let mut held = BTreeSet::new();
        for n in 0..neg.cfg.pool_size {
            let Some(l) = snap.slots.get(&n) else {
                // Deleted by hand: not taken until the pool is recorded anew.
                held.insert(n);
                continue;
            };
            if !self.usable(l) || self.held_by_other(&snap, l) {
                held.insert(n);
            } else if holder(l) == Some(self.name.as_str()) && !marks.let_go(n).await {
                // Ours, left from a lost lease of it or a reply lost: free again if it went.
                held.insert(n);
            }
        }
        Ok((held, self.change(&snap)))
    }

    /// The marks as the process's copy has them: an order to try free slots in (each take
    /// reads the slot it takes, and its mark with it).
    async fn marks_of(&self, _neg: &Negotiation, free: &[u32]) -> Result<Vec<Marked>, Fault> {
        let snap = self.snapshot().await?;
        Ok(free
            .iter()
            .map(|&n| {
                snap.slots
                    .get(&n)
                    .map_or(Marked::unreadable(n), |l| objects::marked(n, l))
            })
            .collect())
    }

    async fn take(
        &self,
        neg: &Negotiation,
        marks: &KubeMarks,
        slot: u32,
        owner: &[u8],
        place: Option<&u64>,
    ) -> Result<Took<u64>, Fault> {
        // No claim under a pool whose params object is gone (deleted by the restore procedure,
        // or to change parameters): agreed again, it is recorded anew and waits past its marks.
        if let Some(uid) = &self.identity {
            if super::record::still_recorded(&self.kube, &self.names, uid)
                .await?
                .is_none()
            {
                return Err(Fault::SessionGone(format!(
                    "{} was deleted or replaced: agreeing on the pool again",
                    self.names.params()
                )));
            }
        }
        let Some(l) = self
            .kube
            .get("reading a slot", &self.names.slot(slot))
            .await?
        else {
            return Ok(Took::Taken);
        };
        let took = self.take_read(l, owner, marks.witness).await?;
        if let (Some(place), Took::Claimed(_) | Took::Unreadable(_)) = (place, &took) {
            self.leave(neg, place).await;
        }
        Ok(took)
    }

    async fn let_go(&self, marks: &KubeMarks, slot: u32) -> bool {
        marks.let_go(slot).await
    }

    fn lost(self) -> Option<KubeSession> {
        // Deleted already if our renewals found it gone; else (the pool replaced under it)
        // deleted once the next session is open.
        Some(self)
    }

    async fn close(self) {
        self.delete().await;
    }
}

impl KubeSession {
    /// A handle for a follower task: the same client, session and view.
    fn watcher(&self) -> KubeSession {
        KubeSession {
            kube: self.kube.clone(),
            name: self.name.clone(),
            ttl: self.ttl,
            names: self.names.clone(),
            view: self.view.clone(),
            identity: self.identity.clone(),
            busy: self.busy.clone(),
            wrote: self.wrote.clone(),
        }
    }
}

impl From<KubeError> for Fault {
    fn from(e: KubeError) -> Fault {
        match e {
            KubeError::Unavailable(why) | KubeError::Conflict(why) => Fault::Unavailable(why),
            KubeError::NotFound(why) => Fault::SessionGone(why),
            KubeError::Refused(why) => Fault::Refused(why),
            KubeError::Fatal(why) => Fault::Fatal(why),
        }
    }
}
