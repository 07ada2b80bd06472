//! The API server client: kube-rs, configured from a kubeconfig or the pod's service account,
//! every call bounded in time, every failure sorted into what the negotiation does with it.

use super::KubeConfig;
use futures_util::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions, WatchEvent,
    WatchParams,
};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Lease objects of one namespace, through the API server.
#[derive(Clone)]
pub struct Kube {
    api: Api<Lease>,
    namespace: String,
    timeout: Duration,
    /// The highest `resourceVersion` of an object this client read or wrote (shared by its
    /// clones): a copy of the pool that has seen it has seen everything this client did.
    seen: Arc<AtomicU64>,
}

/// The bound of a list, whatever the bound of one call.
const LIST_AT_LEAST: Duration = Duration::from_secs(5);

/// A change of a watched object.
pub enum Event {
    /// Created or changed: the object now.
    Put(Lease),
    /// Deleted: the object as it was.
    Gone(Lease),
}

/// How an API call failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KubeError {
    /// Not reachable now, no answer in time, or the server busy (5xx, 429): tried again.
    #[error("{0}")]
    Unavailable(String),
    /// Unauthenticated or forbidden (no Role, a token not accepted).
    #[error("{0}")]
    Refused(String),
    /// A compare-and-set lost (`resourceVersion` changed) or a create found the object there.
    #[error("{0}")]
    Conflict(String),
    /// The object is not there.
    #[error("{0}")]
    NotFound(String),
    /// A request the server cannot serve (invalid, a bug).
    #[error("{0}")]
    Fatal(String),
}

impl KubeError {
    fn of(what: &str, e: kube::Error) -> KubeError {
        match e {
            kube::Error::Api(s) => {
                let why = format!("{what}: {} ({} {})", s.message, s.code, s.reason);
                match s.code {
                    401 | 403 => KubeError::Refused(why),
                    404 => KubeError::NotFound(why),
                    409 => KubeError::Conflict(why),
                    410 | 429 | 500..=599 => KubeError::Unavailable(why),
                    _ => KubeError::Fatal(why),
                }
            }
            kube::Error::Auth(e) => KubeError::Refused(format!("{what}: {e}")),
            e => KubeError::Unavailable(format!("{what}: {e}")),
        }
    }
}

/// What a configuration error says.
fn config_error(e: impl std::fmt::Display) -> KubeError {
    KubeError::Refused(format!("cannot configure the Kubernetes client: {e}"))
}

impl Kube {
    /// Configures the client (a kubeconfig, else in-cluster) for `cfg`'s namespace; each call
    /// bounded by `timeout`. Nothing is sent yet.
    pub async fn connect(cfg: &KubeConfig, timeout: Duration) -> Result<Kube, KubeError> {
        let mut config = match &cfg.kubeconfig {
            Some(path) => {
                let file = kube::config::Kubeconfig::read_from(path).map_err(config_error)?;
                let options = kube::config::KubeConfigOptions::default();
                kube::Config::from_custom_kubeconfig(file, &options)
                    .await
                    .map_err(config_error)?
            }
            None => kube::Config::infer().await.map_err(config_error)?,
        };
        config.connect_timeout = Some(timeout);
        config.read_timeout = Some(timeout);
        config.write_timeout = Some(timeout);
        let namespace = cfg
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let client = kube::Client::try_from(config).map_err(config_error)?;
        Ok(Kube {
            api: Api::namespaced(client, &namespace),
            namespace,
            timeout,
            seen: Arc::default(),
        })
    }

    /// The highest `resourceVersion` of an object this client (or a clone) read or wrote.
    pub fn seen(&self) -> u64 {
        self.seen.load(Ordering::Relaxed)
    }

    /// Notes `lease` as read or written.
    fn saw(&self, lease: &Lease) -> &Self {
        if let Ok(v) = super::objects::version_number(lease) {
            self.seen.fetch_max(v, Ordering::Relaxed);
        }
        self
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    async fn bounded<T, F: Future<Output = Result<T, kube::Error>>>(
        &self,
        what: &str,
        call: impl Fn() -> F,
    ) -> Result<T, KubeError> {
        self.within(self.timeout, what, call).await
    }

    /// One call, bounded by `bound` in all; a call the server turned away as too many at once
    /// (429: nothing was done) is made again after a growing, jittered pause within the bound,
    /// so a fleet starting together spreads its calls instead of repeating them in step.
    async fn within<T, F: Future<Output = Result<T, kube::Error>>>(
        &self,
        bound: Duration,
        what: &str,
        call: impl Fn() -> F,
    ) -> Result<T, KubeError> {
        let deadline = tokio::time::Instant::now() + bound;
        let mut pause = Duration::from_millis(50);
        for _ in 0..16 {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match tokio::time::timeout(left, call()).await {
                Ok(Err(kube::Error::Api(s))) if s.code == 429 => {
                    let wait = pause.mul_f64(rand::random_range(0.5..1.5));
                    pause = (pause * 2).min(Duration::from_secs(2));
                    if tokio::time::Instant::now() + wait >= deadline {
                        return Err(KubeError::of(what, kube::Error::Api(s)));
                    }
                    tokio::time::sleep(wait).await;
                }
                Ok(r) => return r.map_err(|e| KubeError::of(what, e)),
                Err(_) => break,
            }
        }
        Err(KubeError::Unavailable(format!(
            "{what}: no answer within {bound:?}"
        )))
    }

    /// The object `name`, or `None`.
    pub async fn get(&self, what: &str, name: &str) -> Result<Option<Lease>, KubeError> {
        let found = self.bounded(what, || self.api.get_opt(name)).await?;
        if let Some(l) = &found {
            self.saw(l);
        }
        Ok(found)
    }

    /// The objects with `labels` (a label selector), read at one moment, and the list's
    /// resource version (for a watch from it).
    pub async fn list(&self, what: &str, labels: &str) -> Result<(Vec<Lease>, String), KubeError> {
        self.list_with(what, ListParams::default().labels(labels))
            .await
    }

    async fn list_with(
        &self,
        what: &str,
        lp: ListParams,
    ) -> Result<(Vec<Lease>, String), KubeError> {
        // A pool of a thousand slots is a list of a megabyte: given longer than one object.
        let bound = self.timeout.max(LIST_AT_LEAST);
        let list = self.within(bound, what, || self.api.list(&lp)).await?;
        let rv = list.metadata.resource_version.unwrap_or_default();
        Ok((list.items, rv))
    }

    /// Creates `lease`; [`KubeError::Conflict`] if its name is taken. Given as long as a list
    /// (creates are rare: a session, a pool's objects once).
    pub async fn create(&self, what: &str, lease: &Lease) -> Result<Lease, KubeError> {
        let bound = self.timeout.max(LIST_AT_LEAST);
        let pp = PostParams::default();
        let l = self
            .within(bound, what, || self.api.create(&pp, lease))
            .await?;
        self.saw(&l);
        Ok(l)
    }

    /// Applies a JSON merge patch to `name` (with `metadata.resourceVersion` in it, a
    /// compare-and-set: [`KubeError::Conflict`] if the object changed).
    pub async fn patch(
        &self,
        what: &str,
        name: &str,
        patch: serde_json::Value,
    ) -> Result<Lease, KubeError> {
        let pp = PatchParams::default();
        let merge = Patch::Merge(&patch);
        let l = self
            .bounded(what, || self.api.patch(name, &pp, &merge))
            .await?;
        self.saw(&l);
        Ok(l)
    }

    /// Deletes `name` if it is still at `version` (any version with `None`): whether it went;
    /// gone already counts as gone.
    pub async fn delete(
        &self,
        what: &str,
        name: &str,
        version: Option<&str>,
    ) -> Result<bool, KubeError> {
        let dp = DeleteParams {
            preconditions: version.map(|v| Preconditions {
                resource_version: Some(v.to_string()),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        match self.bounded(what, || self.api.delete(name, &dp)).await {
            Ok(_) | Err(KubeError::NotFound(_)) => Ok(true),
            Err(KubeError::Conflict(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The changes after `version` of the objects with `labels`, as they come (the objects
    /// themselves: no read follows); the stream ends after `trusted`, or at an error or an
    /// expired version (the caller lists again).
    pub async fn events(
        &self,
        labels: &str,
        version: &str,
        trusted: Duration,
    ) -> Result<impl futures_util::Stream<Item = Event> + Send + use<>, KubeError> {
        let secs = trusted.as_secs().clamp(1, 290) as u32;
        let wp = WatchParams::default().labels(labels).timeout(secs);
        let stream = self
            .bounded("watching the pool", || self.api.watch(&wp, version))
            .await?;
        Ok(stream
            .take_while(|e| {
                std::future::ready(matches!(
                    e,
                    Ok(WatchEvent::Added(_)
                        | WatchEvent::Modified(_)
                        | WatchEvent::Deleted(_)
                        | WatchEvent::Bookmark(_))
                ))
            })
            .filter_map(|e| {
                std::future::ready(match e {
                    Ok(WatchEvent::Added(l) | WatchEvent::Modified(l)) => Some(Event::Put(l)),
                    Ok(WatchEvent::Deleted(l)) => Some(Event::Gone(l)),
                    _ => None,
                })
            }))
    }
}
