//! Slot objects as the protocol's [`MarkStore`]: the mark is an annotation of the slot object
//! its holder took, so every write is one compare-and-set of the object on the version of the
//! holder's last write (or of its take) — which fails once anyone else took the slot, stamped
//! it with a new identity, or deleted it.

use super::api::{Kube, KubeError};
use super::objects::{
    self, annotate, annotation, holder, mark_value, Names, MARK, OWNER, STAMP, WITNESS,
};
use crate::protocol::{Claim, MarkStore, Recheck, StoreError, Stored};
use std::time::Duration;

/// How long a watch of a holder's own slot is trusted before the slot is read again.
const WATCH_TRUSTED: Duration = Duration::from_secs(300);

/// The marks of one session's slots.
pub struct KubeMarks {
    pub(crate) kube: Kube,
    pub(crate) names: Names,
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
    /// The marks of the slots `session` (a session object's name) holds in the pool `names`
    /// names, fenced with `identity` (a params object's uid) if given.
    pub fn new(kube: Kube, names: Names, session: String, identity: Option<String>) -> Self {
        KubeMarks {
            kube,
            names,
            session,
            identity,
            witness: true,
            wrote: Default::default(),
        }
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

    fn changed(
        &self,
        slot: u32,
        version: u64,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let fields = format!("metadata.name={}", self.names.slot(slot));
        let mine = self
            .kube
            .changed(None, Some(fields), version.to_string(), WATCH_TRUSTED);
        // The pool replaced (its params object deleted): stop now, as in every store, rather
        // than at the first write after someone records the pool anew. Read first (it may have
        // gone before our last write), then watched from that read.
        let params = self.identity.clone().map(|uid| {
            let (kube, names) = (self.kube.clone(), self.names.clone());
            async move {
                match super::record::still_recorded(&kube, &names, &uid).await {
                    Ok(Some(version)) => kube.deleted(names.params(), version, WATCH_TRUSTED).await,
                    Ok(None) => {}
                    // Unreadable now: the watch of our slot goes on; looked at again after a
                    // pause (a recheck reads the params object too).
                    Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
                }
            }
        });
        async move {
            match params {
                Some(params) => {
                    tokio::select! {
                        () = mine => {}
                        () = params => {}
                    }
                }
                None => mine.await,
            }
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
