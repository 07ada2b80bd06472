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
use std::time::Duration;

/// Lease objects of one namespace, through the API server.
#[derive(Clone)]
pub struct Kube {
    api: Api<Lease>,
    namespace: String,
    timeout: Duration,
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
        })
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    async fn bounded<T>(
        &self,
        what: &str,
        call: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, KubeError> {
        match tokio::time::timeout(self.timeout, call).await {
            Ok(r) => r.map_err(|e| KubeError::of(what, e)),
            Err(_) => Err(KubeError::Unavailable(format!(
                "{what}: no answer within {:?}",
                self.timeout
            ))),
        }
    }

    /// The object `name`, or `None`.
    pub async fn get(&self, what: &str, name: &str) -> Result<Option<Lease>, KubeError> {
        self.bounded(what, self.api.get_opt(name)).await
    }

    /// The objects with `labels` (a label selector), read at one moment, and the list's
    /// resource version (for a watch from it).
    pub async fn list(&self, what: &str, labels: &str) -> Result<(Vec<Lease>, String), KubeError> {
        self.list_with(what, ListParams::default().labels(labels))
            .await
    }

    /// As [`Kube::list`], served from the API server's cache (`resourceVersion=0`): possibly a
    /// moment old, and no read of its etcd — for followers that only need hints (the gauges,
    /// who waits), never for a decision a compare-and-set does not fence.
    pub async fn list_cached(
        &self,
        what: &str,
        labels: &str,
    ) -> Result<(Vec<Lease>, String), KubeError> {
        self.list_with(what, ListParams::default().labels(labels).match_any())
            .await
    }

    async fn list_with(
        &self,
        what: &str,
        lp: ListParams,
    ) -> Result<(Vec<Lease>, String), KubeError> {
        // A pool of a thousand slots is a list of a megabyte: given longer than one object.
        let bound = self.timeout.max(LIST_AT_LEAST);
        let list = match tokio::time::timeout(bound, self.api.list(&lp)).await {
            Ok(r) => r.map_err(|e| KubeError::of(what, e))?,
            Err(_) => {
                return Err(KubeError::Unavailable(format!(
                    "{what}: no answer within {bound:?}"
                )))
            }
        };
        let rv = list.metadata.resource_version.unwrap_or_default();
        Ok((list.items, rv))
    }

    /// Creates `lease`; [`KubeError::Conflict`] if its name is taken. Given as long as a list
    /// (creates are rare: a session, a pool's objects once).
    pub async fn create(&self, what: &str, lease: &Lease) -> Result<Lease, KubeError> {
        let bound = self.timeout.max(LIST_AT_LEAST);
        match tokio::time::timeout(bound, self.api.create(&PostParams::default(), lease)).await {
            Ok(r) => r.map_err(|e| KubeError::of(what, e)),
            Err(_) => Err(KubeError::Unavailable(format!(
                "{what}: no answer within {bound:?}"
            ))),
        }
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
        self.bounded(what, self.api.patch(name, &pp, &Patch::Merge(&patch)))
            .await
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
        match self.bounded(what, self.api.delete(name, &dp)).await {
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
            .bounded("watching the pool", self.api.watch(&wp, version))
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

    /// Resolves at the first change after `version` of the objects `selector` names (a label
    /// selector, or `metadata.name=` as a field selector), or after `trusted` (a watch only
    /// saves polling: its end, an error or an expired version wakes the waiter at once).
    pub fn changed(
        &self,
        labels: Option<String>,
        fields: Option<String>,
        version: String,
        trusted: Duration,
    ) -> impl Future<Output = ()> + Send + 'static {
        self.watch_until(labels, fields, version, trusted, |_| true)
    }

    /// Resolves once the object `name` is deleted after `version`, or after `trusted` (as
    /// [`Kube::changed`]: an error or an expired version wakes the waiter at once); its
    /// changes do not.
    pub fn deleted(
        &self,
        name: &str,
        version: String,
        trusted: Duration,
    ) -> impl Future<Output = ()> + Send + 'static {
        let fields = Some(format!("metadata.name={name}"));
        self.watch_until(None, fields, version, trusted, |e| {
            matches!(e, WatchEvent::Deleted(_))
        })
    }

    /// Resolves at the first event `wakes` says so of (an error always does), or after
    /// `trusted`.
    fn watch_until(
        &self,
        labels: Option<String>,
        fields: Option<String>,
        version: String,
        trusted: Duration,
        wakes: fn(&WatchEvent<Lease>) -> bool,
    ) -> impl Future<Output = ()> + Send + 'static {
        let api = self.api.clone();
        async move {
            let secs = trusted.as_secs().clamp(1, 290) as u32;
            let mut wp = WatchParams::default().timeout(secs);
            if let Some(l) = &labels {
                wp = wp.labels(l);
            }
            if let Some(f) = &fields {
                wp = wp.fields(f);
            }
            let watch = async {
                let Ok(stream) = api.watch(&wp, &version).await else {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    return;
                };
                let mut stream = std::pin::pin!(stream);
                while let Some(event) = stream.next().await {
                    match event {
                        Ok(WatchEvent::Bookmark(_)) => continue,
                        Ok(e) if !wakes(&e) => continue,
                        _ => return,
                    }
                }
            };
            let _ = tokio::time::timeout(trusted, watch).await;
        }
    }
}
