//! One look at the pool — its objects listed at one moment, its sessions judged by
//! [`super::liveness`] (those seen unrenewed for their duration deleted on the way) — and what
//! a claimant does with it: the queue, the next change, taking a slot read just now.

use super::api::KubeError;
use super::liveness::Judged;
use super::objects::{self, annotation, holder, queued, OWNER, STAMP};
use super::session::KubeSession;
use crate::pool::tree::{parse_owner, Owner};
use crate::pool::{Change, Fault, Took};
use crate::protocol::Stored;
use k8s_openapi::api::coordination::v1::Lease;
use std::collections::BTreeMap;
use std::time::Duration;

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
        Ok(self.judged(items, version, true).await)
    }

    /// [`KubeSession::snapshot`] from the API server's cache, for followers: a moment old at
    /// most (a session judged over on it is deleted only at the version seen).
    pub(crate) async fn cached_snapshot(&self, what: &str) -> Result<Snapshot, KubeError> {
        let (items, version) = self.kube.list_cached(what, &self.names.all()).await?;
        Ok(self.judged(items, version, false).await)
    }

    /// The snapshot of `items` (the pool's objects, read at `version`), its sessions judged;
    /// with `end`, those seen unrenewed for their duration are deleted (only on what a
    /// consistent read showed: a follower's copy may be a moment old).
    pub(crate) async fn judged(&self, items: Vec<Lease>, version: String, end: bool) -> Snapshot {
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
        let judged = self.observer.judge(
            &sessions.iter().collect::<Vec<_>>(),
            &slots.values().collect::<Vec<_>>(),
        );
        for (name, version) in judged.ended.iter().filter(|_| end) {
            tracing::info!(session = %name, "a session went unrenewed for its whole duration; deleting it, which frees its slots");
            let _ = self
                .kube
                .delete("ending a session seen unrenewed", name, Some(version))
                .await;
        }
        Snapshot {
            slots,
            sessions,
            judged,
            version,
        }
    }

    /// Whether anyone but us waits for a slot, or every slot of the pool is held by a live
    /// session (a crashed holder's slot is then wanted soon): of `sessions` and `slots` as
    /// `judged`.
    pub(crate) fn busy(
        &self,
        sessions: &[&Lease],
        slots: &BTreeMap<u32, &Lease>,
        judged: &Judged,
        pool: u32,
    ) -> (bool, bool) {
        let waiting = sessions.iter().any(|s| {
            objects::name(s) != self.name
                && judged.alive.contains(objects::name(s))
                && annotation(s, super::objects::WANTS) == Some("true")
        });
        let full = (0..pool).all(|n| {
            slots.get(&n).is_none_or(|l| {
                holder(l).is_some_and(|h| judged.alive.contains(h) || h == self.name)
            })
        });
        (waiting, full)
    }

    /// Whether `slot` may be taken under our identity.
    pub(super) fn usable(&self, slot: &Lease) -> bool {
        self.identity
            .as_deref()
            .is_none_or(|id| annotation(slot, STAMP) == Some(id))
    }

    /// Whether `slot` is held by a live session other than ours.
    pub(super) fn held_by_other(&self, snap: &Snapshot, slot: &Lease) -> bool {
        holder(slot).is_some_and(|h| h != self.name && snap.judged.alive.contains(h))
    }

    /// The next change of the pool after `snap`: a watch of its objects, bounded by the
    /// first session that may be judged ended and by [`RECHECK`].
    pub(super) fn change(&self, snap: &Snapshot) -> Change {
        self.change_within(snap, RECHECK)
    }

    /// The next change of the pool after `snap`, or `at_most` (or when the first session may be
    /// judged over), whichever comes first.
    pub(super) fn change_within(&self, snap: &Snapshot, at_most: Duration) -> Change {
        let wait = snap.judged.next.map_or(at_most, |n| n.min(at_most));
        let watch = self
            .kube
            .changed(Some(self.names.all()), None, snap.version.clone(), wait);
        Box::pin(watch)
    }

    /// The live sessions other than ours queued, by place.
    pub(super) fn queue(&self, snap: &Snapshot) -> Vec<(u64, String, Option<Owner>)> {
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

    /// Draws a place in the queue: the version of our session object once it names its owner
    /// for the queue (`owner`) — the API server's etcd revision of that write, unique and
    /// ordered with every other write, so contenders arriving together draw their places
    /// without contending for one object.
    pub(super) async fn ticket(&self, owner: String) -> Result<u64, KubeError> {
        let l = self.note("queueing", &[(OWNER, Some(owner))]).await?;
        objects::version_number(&l).map_err(KubeError::Fatal)
    }

    /// Takes `slot` (read just now as `l`) in one compare-and-set: what was found.
    pub(super) async fn take_read(
        &self,
        l: Lease,
        owner: &[u8],
        witness: bool,
    ) -> Result<Took<u64>, Fault> {
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
