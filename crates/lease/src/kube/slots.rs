//! How Kubernetes does each step of the one negotiation ([`crate::pool`]) under one session:
//!
//! - a look at the pool is one list of its objects (params, slots, sessions: one moment), the
//!   sessions judged by [`super::liveness`]; a session seen unrenewed for its duration is
//!   deleted on the way (a compare-and-set on the version seen), which frees its slots;
//! - a slot is free when no session holds it, or its holder's session is gone; it is taken in
//!   one compare-and-set of the slot object on the version read (holder, owner record), whose
//!   answer holds the mark it fences on; a slot stamped with another identity is never taken;
//! - the queue: a place is a ticket drawn from the params object (a compare-and-set of its
//!   counter) and written on our session object, which takes it along when it ends; the one
//!   ahead is the live session with the next-lower ticket.

use super::api::KubeError;
use super::liveness::Judged;
use super::marks::KubeMarks;
use super::objects::{
    self, annotate, annotation, holder, queued, OWNER, QUEUED, STAMP, TICKETS, WANTS,
};
use super::session::{self, KubeSession};
use crate::identity::Record;
use crate::pool::tree::{parse_owner, Marked, Owner};
use crate::pool::{Change, Fault, Look, Negotiation, Recorded, Session, Took};
use crate::protocol::Stored;
use k8s_openapi::api::coordination::v1::Lease;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A waiting claimant looks again at least this often (a watch only saves polling).
const RECHECK: Duration = Duration::from_secs(2);

/// The pool's objects at one moment.
pub(crate) struct Snapshot {
    pub slots: BTreeMap<u32, Lease>,
    pub sessions: Vec<Lease>,
    pub judged: Judged,
    /// The list's version, for a watch from it.
    pub version: String,
}

impl KubeSession {
    /// Lists the pool's objects and judges its sessions (deleting those seen unrenewed).
    pub(crate) async fn snapshot(&self, what: &str) -> Result<Snapshot, KubeError> {
        let (items, version) = self.kube.list(what, &self.names.all()).await?;
        let mut slots = BTreeMap::new();
        let mut sessions = Vec::new();
        for l in items {
            match objects::role(&l) {
                Some("slot") => {
                    if let Some(n) = self.names.slot_of(objects::name(&l)) {
                        slots.insert(n, l);
                    }
                }
                Some("session") => sessions.push(l),
                _ => {}
            }
        }
        let judged = self.observer.judge(&sessions.iter().collect::<Vec<_>>());
        for (name, version) in &judged.ended {
            tracing::info!(session = %name, "a session went unrenewed for its whole duration; deleting it, which frees its slots");
            let _ = self
                .kube
                .delete("ending a session seen unrenewed", name, Some(version))
                .await;
        }
        Ok(Snapshot {
            slots,
            sessions,
            judged,
            version,
        })
    }

    /// Whether `slot` may be taken under our identity.
    fn usable(&self, slot: &Lease) -> bool {
        self.identity
            .as_deref()
            .is_none_or(|id| annotation(slot, STAMP) == Some(id))
    }

    /// Whether `slot` is held by a live session other than ours.
    fn held_by_other(&self, snap: &Snapshot, slot: &Lease) -> bool {
        holder(slot).is_some_and(|h| h != self.name && snap.judged.alive.contains(h))
    }

    /// The next change of the pool after `snap`: a watch of its objects, bounded by the
    /// first session that may be judged ended and by [`RECHECK`].
    fn change(&self, snap: &Snapshot) -> Change {
        let wait = snap.judged.next.map_or(RECHECK, |n| n.min(RECHECK));
        let watch = self
            .kube
            .changed(Some(self.names.all()), None, snap.version.clone(), wait);
        Box::pin(watch)
    }

    /// The live sessions other than ours queued, by place.
    fn queue(&self, snap: &Snapshot) -> Vec<(u64, String, Option<Owner>)> {
        let mut q: Vec<_> = snap
            .sessions
            .iter()
            .filter(|s| objects::name(s) != self.name)
            .filter(|s| snap.judged.alive.contains(objects::name(s)))
            .filter_map(|s| {
                let owner = annotation(s, OWNER).and_then(|o| parse_owner(o.as_bytes()));
                Some((queued(s)?, objects::name(s).to_string(), owner))
            })
            .collect();
        q.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        q
    }

    /// Draws a place in the queue from the params object's counter.
    async fn ticket(&self) -> Result<u64, KubeError> {
        let name = self.names.params();
        for _ in 0..20 {
            let Some(params) = self.kube.get("reading the queue's counter", name).await? else {
                return Err(KubeError::NotFound(format!("{name} was deleted")));
            };
            let t: u64 = annotation(&params, TICKETS)
                .and_then(|t| t.parse().ok())
                .unwrap_or(0);
            let patch = annotate(
                objects::version(&params),
                &[(TICKETS, Some((t + 1).to_string()))],
            );
            match self.kube.patch("queueing", name, patch).await {
                Ok(_) => return Ok(t),
                Err(KubeError::Conflict(_)) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(KubeError::Unavailable(
            "the queue's counter keeps changing".into(),
        ))
    }

    /// Takes `slot` (read just now as `l`) in one compare-and-set: what was found.
    async fn take_read(&self, l: Lease, owner: &[u8], witness: bool) -> Result<Took<u64>, Fault> {
        let name = objects::name(&l).to_string();
        if !self.usable(&l) {
            return Err(Fault::SessionGone(format!(
                "{name} is stamped with another identity: the pool was recorded anew; agreeing again"
            )));
        }
        if let Some(h) = holder(&l).filter(|h| *h != self.name) {
            let live = match self.kube.get("reading a holder's session", h).await? {
                None => false,
                Some(s) => self.observer.live(&s),
            };
            if live {
                return Ok(Took::Taken);
            }
        }
        let now = objects::micro_time(std::time::SystemTime::now());
        let patch = serde_json::json!({
            "metadata": {
                "resourceVersion": objects::version(&l),
                "annotations": {OWNER: String::from_utf8_lossy(owner)},
            },
            "spec": {
                "holderIdentity": self.name,
                "leaseDurationSeconds": self.ttl.as_secs().clamp(1, 3600),
                "acquireTime": now,
                "renewTime": now,
            },
        });
        let taken = match self.kube.patch("claiming a slot", &name, patch).await {
            Ok(t) => t,
            Err(KubeError::Conflict(_)) | Err(KubeError::NotFound(_)) => return Ok(Took::Taken),
            Err(e) => return Err(e.into()),
        };
        let version = objects::version_number(&taken).map_err(Fault::Fatal)?;
        Ok(match objects::mark(&taken) {
            Ok((mark, by)) => {
                let mut s = Stored { mark, version, by };
                if witness {
                    s.raise_to_witness(objects::witness(&taken));
                }
                Took::Claimed(s)
            }
            Err(why) => Took::Unreadable(why),
        })
    }
}

impl Session for KubeSession {
    type Marks = KubeMarks;
    /// Our ticket.
    type Place = u64;

    fn owner_id(&self) -> String {
        self.name
            .rsplit_once(".session-")
            .map_or(self.name.clone(), |(_, id)| id.to_string())
    }

    fn follow(&self, neg: &Negotiation, ended: CancellationToken) -> JoinHandle<()> {
        tokio::spawn(session::renew(
            self.kube.clone(),
            self.name.clone(),
            self.ttl,
            (neg.proto.part.full.subscribe(), self.waiting.subscribe()),
            ended,
        ))
    }

    fn gauges(&self, neg: &Negotiation) -> JoinHandle<()> {
        super::pool::spawn_gauges(self.watcher(), neg)
    }

    fn demand(&self, _neg: &Negotiation, tx: tokio::sync::watch::Sender<bool>) -> JoinHandle<()> {
        let me = self.watcher();
        tokio::spawn(async move {
            for _ in 0..u32::MAX {
                match me.snapshot("looking for contenders waiting").await {
                    Ok(snap) => {
                        let waiting = snap.sessions.iter().any(|s| {
                            objects::name(s) != me.name
                                && snap.judged.alive.contains(objects::name(s))
                                && annotation(s, WANTS) == Some("true")
                        });
                        crate::pool::say(&tx, waiting);
                        crate::pool::say(&me.waiting, waiting);
                        me.change(&snap).await;
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
                }
            }
        })
    }

    async fn want(&self, _neg: &Negotiation, wanted: bool) {
        let value = wanted.then(|| "true".to_string());
        for _ in 0..5 {
            match self
                .note("saying whether a slot is wanted", &[(WANTS, value.clone())])
                .await
            {
                Ok(()) => return,
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
            ..KubeMarks::new(
                self.kube.clone(),
                self.names.clone(),
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
        let snap = self.snapshot("looking at the pool").await?;
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
        let t = self.ticket().await?;
        let owner = String::from_utf8_lossy(owner).into_owned();
        self.note(
            "queueing",
            &[(QUEUED, Some(t.to_string())), (OWNER, Some(owner))],
        )
        .await?;
        Ok(t)
    }

    async fn ahead(
        &self,
        _neg: &Negotiation,
        place: &u64,
    ) -> Result<Option<(usize, String, Change)>, Fault> {
        let snap = self.snapshot("reading the queue").await?;
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
        let snap = self.snapshot("reading the queue").await?;
        Ok(self
            .queue(&snap)
            .into_iter()
            .filter(|(t, _, _)| t > place)
            .map(|(_, _, o)| o)
            .collect())
    }

    async fn leave(&self, _neg: &Negotiation, _place: &u64) {
        let _ = self
            .note("leaving the queue", &[(QUEUED, None), (OWNER, None)])
            .await;
    }

    async fn held(
        &self,
        neg: &Negotiation,
        marks: &KubeMarks,
        _prefer: Option<u32>,
    ) -> Result<(BTreeSet<u32>, Change), Fault> {
        let snap = self.snapshot("listing the slots").await?;
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

    async fn marks_of(&self, _neg: &Negotiation, free: &[u32]) -> Result<Vec<Marked>, Fault> {
        let (slots, _) = self
            .kube
            .list("reading the marks", &self.names.role("slot"))
            .await?;
        let found: BTreeMap<u32, Marked> = slots
            .iter()
            .filter_map(|l| {
                let n = self.names.slot_of(objects::name(l))?;
                Some((n, objects::marked(n, l)))
            })
            .collect();
        Ok(free
            .iter()
            .map(|&n| found.get(&n).copied().unwrap_or(Marked::unreadable(n)))
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
    /// A handle for a follower task: the same client, session and observer.
    fn watcher(&self) -> KubeSession {
        KubeSession {
            kube: self.kube.clone(),
            name: self.name.clone(),
            ttl: self.ttl,
            names: self.names.clone(),
            observer: self.observer.clone(),
            identity: self.identity.clone(),
            waiting: self.waiting.clone(),
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
