//! A claimant's look at the pool — the copy of this process's follower ([`super::view`]), once
//! it has seen the claimant's own reads and writes — and what a claimant does with it: the
//! queue, the next change, taking a slot read just now.

use super::api::KubeError;
use super::call_timeout;
use super::objects::{self, annotation, holder, OWNER, STAMP};
use super::session::KubeSession;
use super::view::{View, RECHECK};
use crate::pool::tree::{parse_owner, Owner};
use crate::pool::{Change, Fault, Took};
use crate::protocol::Stored;
use k8s_openapi::api::coordination::v1::Lease;
use std::sync::Arc;
use std::time::Duration;

impl KubeSession {
    /// The pool as this process's follower saw it, once it has seen every write this session
    /// read or made (and at least `floor`).
    pub(crate) async fn snapshot_from(&self, floor: u64) -> Result<Arc<View>, KubeError> {
        let bound = call_timeout(self.ttl).max(Duration::from_secs(5));
        self.view.fresh(floor.max(self.kube.seen()), bound).await
    }

    /// [`KubeSession::snapshot_from`] with no floor of its own.
    pub(crate) async fn snapshot(&self) -> Result<Arc<View>, KubeError> {
        self.snapshot_from(0).await
    }

    /// Whether anyone but us waits for a slot, or every slot of the pool is held by a live
    /// session (a crashed holder's slot is then wanted soon), as `view` shows the pool.
    pub(crate) fn busy(&self, view: &View, pool: u32) -> (bool, bool) {
        let waiting = view.wanting.iter().any(|n| **n != *self.name);
        let full = view
            .unheld
            .iter()
            .all(|(n, h)| *n >= pool || h.as_deref() == Some(self.name.as_str()));
        (waiting, full)
    }

    /// Whether `slot` may be taken under our identity.
    pub(super) fn usable(&self, slot: &Lease) -> bool {
        self.identity
            .as_deref()
            .is_none_or(|id| annotation(slot, STAMP) == Some(id))
    }

    /// Whether `slot` is held by a live session other than ours.
    pub(super) fn held_by_other(&self, view: &View, slot: &Lease) -> bool {
        holder(slot).is_some_and(|h| h != self.name && view.judged.alive.contains(h))
    }

    /// The next change of the pool after `view` as this process sees it, or [`RECHECK`]
    /// (a watch only saves polling).
    pub(super) fn change(&self, view: &Arc<View>) -> Change {
        Box::pin(self.view.changed(view, RECHECK))
    }

    /// The live sessions other than ours queued, by place.
    pub(super) fn queue(&self, view: &View) -> Vec<(u64, String, Option<Owner>)> {
        view.queued()
            .into_iter()
            .filter(|(_, n, _)| ***n != *self.name)
            .map(|(place, n, s)| {
                let owner = annotation(s, OWNER).and_then(|o| parse_owner(o.as_bytes()));
                (place, n.to_string(), owner)
            })
            .collect()
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
                Some(s) => self.view.live(&s, &l),
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
