//! Slot objects as the protocol's [`MarkStore`]: the mark is an annotation of the slot object
//! its holder took, so every write is one compare-and-set of the object on the version of the
//! holder's last write (or of its take) — which fails once anyone else took the slot, stamped
//! it with a new identity, or deleted it.

use super::api::{Kube, KubeError};
use super::objects::{
    self, annotate, annotation, holder, mark_value, Names, MARK, OWNER, STAMP, WITNESS,
};
use super::view::PoolView;
use super::KubeConfig;
use crate::protocol::{Claim, MarkStore, Recheck, StoreError, Stored};
use std::sync::Arc;
use std::time::Duration;

/// How long a holder trusts the process's copy of the pool to show its slot's changes before
/// it reads the slot again.
const WATCH_TRUSTED: Duration = Duration::from_secs(300);

/// The marks of one session's slots.
pub struct KubeMarks {
    pub(crate) kube: Kube,
    pub(crate) names: Names,
    /// The process's follower of the pool: a change of our slot, or of the params object.
    pub(crate) view: Arc<PoolView>,
    /// Our session object's name: the holder our slots name.
    pub(crate) session: String,
    /// The identity claims are made under (`None`: unchecked, a planted bug).
    pub(crate) identity: Option<String>,
    /// Whether mark writes keep the witness ([`crate::protocol::Protocol::keeps_witness`]).
    pub(crate) witness: bool,
    /// When a mark was last written: the session's renewals wait for a third of its duration
    /// after it (claimants count the slot's change as a renewal).
    pub(crate) wrote: super::session::Wrote,
}

impl KubeMarks {
    /// The marks of the slots `session` (a session object's name) holds in `view`'s pool,
    /// fenced with `identity` (a params object's uid) if given.
    pub(crate) fn new(
        kube: Kube,
        view: Arc<PoolView>,
        session: String,
        identity: Option<String>,
    ) -> Self {
        KubeMarks {
            kube,
            names: view.names().clone(),
            view,
            session,
            identity,
            witness: true,
            wrote: Default::default(),
        }
    }

    /// [`KubeMarks`] of the pool `names` names under `cfg` (its own client; the follower of
    /// `cfg`'s leases in that pool).
    pub async fn following(
        cfg: &KubeConfig,
        names: &Names,
        session: String,
        identity: Option<String>,
    ) -> Result<Self, KubeError> {
        let kube = Kube::connect(cfg, super::call_timeout(cfg.ttl)).await?;
        let view = cfg.followers.of(cfg, names);
        Ok(KubeMarks::new(kube, view, session, identity))
    }
}

/// A holder's failed call as the protocol takes it. A refusal is tried again like an outage:
/// an API server whose etcd just came back, or that just started, refuses for a moment while
/// its authorization caches fill; a Role really revoked stops the holder at its mark all the
/// same, and the log says why.
pub(crate) fn store_error(e: KubeError) -> StoreError {
    match e {
        KubeError::Refused(why) => StoreError::Unavailable(format!(
            "the Kubernetes API server refused us (its authorization not ready yet, or the \
             Role revoked): {why}"
        )),
        KubeError::Conflict(why) | KubeError::NotFound(why) => StoreError::Conflict(why),
        KubeError::Unavailable(why) | KubeError::Fatal(why) => StoreError::Unavailable(why),
    }
}

impl KubeMarks {
    /// A merge patch of the mark, its witness (and `more`) on `claim.version`.
    fn mark_patch(
        &self,
        claim: &Claim<u64>,
        mark: u64,
        more: serde_json::Value,
    ) -> serde_json::Value {
        let value = mark_value(mark, &claim.token_hex());
        let witness = self.witness.then(|| (WITNESS, Some(value.clone())));
        let marks: Vec<_> = [(MARK, Some(value))].into_iter().chain(witness).collect();
        let mut patch = annotate(&claim.version.to_string(), &marks);
        if let (Some(p), serde_json::Value::Object(more)) = (patch.as_object_mut(), more) {
            p.extend(more);
        }
        patch
    }

    fn version_of(l: &k8s_openapi::api::coordination::v1::Lease) -> Result<u64, StoreError> {
        objects::version_number(l).map_err(StoreError::Unavailable)
    }

    /// Lets `slot` go if our session still holds it (no mark is written): whether it went.
    pub(crate) async fn let_go(&self, slot: u32) -> bool {
        let name = self.names.slot(slot);
        let Ok(Some(l)) = self.kube.get("reading a slot", &name).await else {
            return false;
        };
        if holder(&l) != Some(self.session.as_str()) {
            return false;
        }
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": objects::version(&l), "annotations": {OWNER: null}},
            "spec": {"holderIdentity": null},
        });
        self.kube
            .patch("giving a slot back", &name, patch)
            .await
            .is_ok()
    }
}

impl MarkStore for KubeMarks {
    type Version = u64;

    fn name(&self) -> &'static str {
        "Kubernetes"
    }

    fn key(&self, slot: u32) -> String {
        format!("lease {} ({MARK})", self.names.slot(slot))
    }

    async fn read(&self, slot: u32) -> Result<Stored<u64>, StoreError> {
        let name = self.names.slot(slot);
        match self
            .kube
            .get("reading a mark", &name)
            .await
            .map_err(store_error)?
        {
            None => Ok(Stored {
                mark: 0,
                version: 0,
                by: None,
            }),
            Some(l) => {
                let (mark, by) = objects::mark(&l).map_err(StoreError::Unavailable)?;
                let mut s = Stored {
                    mark,
                    version: Self::version_of(&l)?,
                    by,
                };
                if self.witness {
                    s.raise_to_witness(objects::witness(&l));
                }
                Ok(s)
            }
        }
    }

    async fn write(&self, claim: &Claim<u64>, mark: u64) -> Result<u64, StoreError> {
        let patch = self.mark_patch(claim, mark, serde_json::json!({}));
        let name = self.names.slot(claim.slot);
        let l = self
            .kube
            .patch("writing the mark", &name, patch)
            .await
            .map_err(|e| match e {
                KubeError::Conflict(_) | KubeError::NotFound(_) => {
                    StoreError::Conflict(format!("{name} changed under us"))
                }
                e => store_error(e),
            })?;
        super::session::written(&self.wrote);
        Self::version_of(&l)
    }

    async fn own_write(
        &self,
        claim: &Claim<u64>,
        attempts: &[u64],
    ) -> Result<Option<(u64, u64)>, StoreError> {
        let name = self.names.slot(claim.slot);
        let Some(l) = self
            .kube
            .get("reading our mark", &name)
            .await
            .map_err(store_error)?
        else {
            return Ok(None);
        };
        if holder(&l) != Some(self.session.as_str()) {
            return Ok(None);
        }
        let Ok((value, by)) = objects::mark(&l) else {
            return Ok(None);
        };
        let version = Self::version_of(&l)?;
        let ours = by == Some(claim.token);
        Ok(
            (ours && version != claim.version && attempts.contains(&value))
                .then_some((version, value)),
        )
    }

    async fn write_down(&self, claim: &Claim<u64>, mark: u64) -> Result<(), StoreError> {
        let let_go = serde_json::json!({"spec": {"holderIdentity": null}});
        let mut patch = self.mark_patch(claim, mark, let_go);
        patch["metadata"]["annotations"][OWNER] = serde_json::Value::Null;
        let name = self.names.slot(claim.slot);
        self.kube
            .patch("writing the mark down", &name, patch)
            .await
            .map(|_| ())
            .map_err(|e| match e {
                KubeError::Conflict(_) | KubeError::NotFound(_) => {
                    StoreError::Conflict(format!("{name} is no longer ours, or the mark changed"))
                }
                e => store_error(e),
            })
    }

    /// Resolves once the process's copy of the pool, having seen our write at `version`,
    /// shows the slot changed or gone, or the params object deleted or replaced (the pool
    /// recorded anew: stop now, as in every store, rather than at the next write) — or after
    /// [`WATCH_TRUSTED`].
    fn changed(
        &self,
        slot: u32,
        version: u64,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let identity = self.identity.clone();
        let until = self.view.until(version, WATCH_TRUSTED, move |v| {
            let mine = v.slots.get(&slot);
            let moved = mine.is_none_or(|l| objects::version_number(l).unwrap_or(0) > version);
            let replaced = identity.as_deref().is_some_and(|uid| {
                v.params
                    .as_deref()
                    .is_none_or(|p| super::record::identity_of(p).0 != uid)
            });
            moved || replaced
        });
        async move {
            // A change the copy shows already, and a recheck that cannot read the slot now (the
            // API server down), are looked at again after a pause, not in a loop of reads.
            let start = tokio::time::Instant::now();
            until.await;
            tokio::time::sleep_until(start + Duration::from_millis(200)).await;
        }
    }

    async fn give_back(&self, slot: u32) {
        self.let_go(slot).await;
    }

    async fn recheck(&self, claim: &Claim<u64>) -> Result<Recheck<u64>, StoreError> {
        let name = self.names.slot(claim.slot);
        let Some(l) = self
            .kube
            .get("reading our slot", &name)
            .await
            .map_err(store_error)?
        else {
            return Ok(Recheck::PoolReplaced(format!(
                "{name} was deleted: the pool is recorded anew when its params object is"
            )));
        };
        if let Some(id) = &self.identity {
            if annotation(&l, STAMP) != Some(id.as_str()) {
                return Ok(Recheck::PoolReplaced(format!(
                    "{name} was stamped with another identity: the pool was recorded anew"
                )));
            }
            let recorded = super::record::still_recorded(&self.kube, &self.names, id)
                .await
                .map_err(store_error)?;
            if recorded.is_none() {
                return Ok(Recheck::PoolReplaced(format!(
                    "{} was deleted or replaced: the pool is recorded anew",
                    self.names.params()
                )));
            }
        }
        if holder(&l) != Some(self.session.as_str()) {
            return Ok(Recheck::Gone);
        }
        Ok(Recheck::Ours(Stored {
            mark: objects::mark(&l).map_or(0, |(m, _)| m),
            version: Self::version_of(&l)?,
            by: None,
        }))
    }
}
