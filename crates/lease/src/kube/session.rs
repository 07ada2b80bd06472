//! A session: an object this lease creates and renews, the counterpart of a ZooKeeper session
//! or an etcd lease. It ends when the object is deleted: by the lease when it closes (its slots
//! free at once), or by a claimant that saw it unrenewed for its whole duration.

use super::api::{Kube, KubeError};
use super::objects::{self, Names};
use super::view::PoolView;
use super::{call_timeout, KubeConfig};
use crate::pool::Negotiation;
use crate::repeated::Repeated;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// One session and what was agreed under it.
pub struct KubeSession {
    pub(crate) kube: Kube,
    /// The session object's name: the holder of its slots.
    pub(crate) name: String,
    pub(crate) ttl: Duration,
    pub(crate) names: Names,
    /// This process's follower of the pool (shared by its leases in it).
    pub(crate) view: Arc<PoolView>,
    /// The identity agreed (the params object's uid, as the slots are stamped); `None` until
    /// agreed, or never checked (a planted bug).
    pub(crate) identity: Option<String>,
    /// Whether anyone waits for a slot of the pool or every slot is held, as the session's
    /// demand follower saw it (true until it has looked): the session then declares its short
    /// duration.
    pub(crate) busy: Arc<tokio::sync::watch::Sender<bool>>,
    /// When a mark was last written to a slot of this session.
    pub(crate) wrote: Wrote,
}

/// Creates this lease's session object (files read again now).
pub(crate) async fn open(cfg: &KubeConfig, neg: &Negotiation) -> Result<KubeSession, KubeError> {
    let kube = Kube::connect(cfg, call_timeout(cfg.ttl)).await?;
    let names = Names::new(&neg.cfg.root, neg.cfg.layout, neg.cfg.cluster);
    let id = format!("{:016x}", rand::random::<u64>());
    let name = names.session(&id);
    let mut lease = objects::object(&names, &name, "session", BTreeMap::new());
    if let Some(spec) = lease.spec.as_mut() {
        spec.holder_identity = Some(neg.instance.clone());
        // Busy until the session has looked at the pool.
        spec.lease_duration_seconds = Some(cfg.ttl.as_secs().clamp(1, 3600) as i32);
        let now = objects::micro_time(std::time::SystemTime::now());
        spec.acquire_time = Some(now.clone());
        spec.renew_time = Some(now);
    }
    kube.create("opening a session", &lease).await?;
    let view = cfg.followers.of(cfg, &names);
    Ok(KubeSession {
        kube,
        name,
        ttl: cfg.ttl,
        names,
        view,
        identity: None,
        busy: Arc::new(tokio::sync::watch::channel(true).0),
        wrote: Wrote::default(),
    })
}

/// Whether every slot of the pool is held or anyone waits for one (see [`KubeSession::busy`]).
pub(crate) type Busy = tokio::sync::watch::Receiver<bool>;

/// When this session last wrote a mark to a slot it holds (shared with its marks).
pub(crate) type Wrote = Arc<std::sync::Mutex<Option<tokio::time::Instant>>>;

fn last_write(wrote: &Wrote) -> Option<tokio::time::Instant> {
    *wrote.lock().unwrap_or_else(|e| e.into_inner())
}

/// Says that a mark was written now.
pub(crate) fn written(wrote: &Wrote) {
    *wrote.lock().unwrap_or_else(|e| e.into_inner()) = Some(tokio::time::Instant::now());
}

/// How long a session declares it stays held while its pool has room: a crashed holder's
/// slot is then needed by no one soon, and renewals every third of it cost the API server no
/// more than a kubelet's node lease (one write every 20 s).
pub fn idle_duration(ttl: Duration) -> Duration {
    ttl.max(Duration::from_secs(60))
}

/// Renews the session object every third of the duration it declares (a mark written to a
/// slot it holds counts: see [`super::liveness`]) — `ttl` while every
/// slot of the pool is held or anyone waits for one (`busy`: a crashed holder's slot is then
/// wanted soon), else [`idle_duration`] — at once when that changes; cancels `ended` once it
/// is gone (deleted: someone saw it unrenewed for its duration, or an operator).
///
/// Failing renewals never end it: the API server may be down for everyone, and a claimant
/// judges a session only by what it saw without a gap in its own reads. Safety does not rest
/// on this: a holder whose slot was taken fails its next mark write.
pub(crate) async fn renew(
    kube: Kube,
    name: String,
    ttl: Duration,
    mut busy: Busy,
    wrote: Wrote,
    ended: CancellationToken,
) {
    // As the session object was created.
    let mut declared = ttl;
    let mut renewed = tokio::time::Instant::now();
    let mut failed = false;
    let mut failing = Repeated::new("renewing the Kubernetes session failed");
    let why = loop {
        let wanted = match *busy.borrow_and_update() {
            true => ttl,
            false => idle_duration(ttl),
        };
        // A mark written to a slot of ours renews the session as claimants see it.
        let last = last_write(&wrote).map_or(renewed, |w| w.max(renewed));
        let until = match (failed, wanted != declared) {
            (_, true) => tokio::time::Instant::now(),
            (true, false) => {
                tokio::time::Instant::now() + Duration::from_millis(500).min(declared / 3)
            }
            (false, false) => last + declared / 3,
        };
        tokio::select! {
            () = tokio::time::sleep_until(until) => {
                let last = last_write(&wrote).map_or(renewed, |w| w.max(renewed));
                if !failed && wanted == declared && last + declared / 3 > tokio::time::Instant::now() {
                    continue;
                }
            }
            changed = busy.changed() => {
                if changed.is_err() {
                    // No one says whether the pool is busy any more: the short duration.
                    busy = tokio::sync::watch::channel(true).1;
                }
                continue;
            }
        }
        let now = objects::micro_time(std::time::SystemTime::now());
        let secs = wanted.as_secs().clamp(1, 3600);
        let patch = serde_json::json!({"spec": {"renewTime": now, "leaseDurationSeconds": secs}});
        match kube.patch("renewing the session", &name, patch).await {
            Ok(_) => {
                failing.ended();
                failed = false;
                declared = wanted;
                renewed = tokio::time::Instant::now();
            }
            Err(KubeError::NotFound(e)) => break e,
            Err(e) => {
                failing.failed(&e);
                failed = true;
            }
        }
    };
    tracing::warn!(session = %name, reason = %why, "Kubernetes session gone");
    ended.cancel();
}

impl KubeSession {
    /// Ends the session: its object deleted, so its slots and its place in the queue are free
    /// at once (tried a few times; an object left behind is deleted by the first claimant that
    /// sees it unrenewed for its duration).
    pub(crate) async fn delete(&self) {
        for _ in 0..3 {
            match self
                .kube
                .delete("closing the session", &self.name, None)
                .await
            {
                Ok(_) | Err(KubeError::Refused(_)) => return,
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    /// Says on our own session object what `annotations` says (no compare: only we write it,
    /// but a deleted object stays deleted).
    pub(crate) async fn note(
        &self,
        what: &str,
        annotations: &[(&str, Option<String>)],
    ) -> Result<k8s_openapi::api::coordination::v1::Lease, KubeError> {
        let a: serde_json::Map<String, serde_json::Value> = annotations
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    v.clone().map_or(serde_json::Value::Null, Into::into),
                )
            })
            .collect();
        let patch = serde_json::json!({"metadata": {"annotations": a}});
        self.kube.patch(what, &self.name, patch).await
    }
}
