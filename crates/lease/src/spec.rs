//! The one description of the store a pool lives in ([`StoreSpec`]), and the two things done
//! with it from outside the crate: start a lease in it ([`StoreSpec::start`]) and read the
//! pool's report ([`StoreSpec::report`]). A program that negotiates slots names the store
//! once, here; nothing outside this crate matches on which store it is.

use crate::handle::LeaseHandle;
use crate::metrics::LeaseMetrics;
use crate::pool::report::ClusterReport;
use crate::pool::PoolConfig;
use idcar_core::clock::Clock;
use idcar_core::layout::Scheme;
use std::sync::Arc;
use std::time::Duration;

/// A store that hands out slots, checked, with the namespace its pools live under.
#[derive(Debug, Clone)]
pub enum StoreSpec {
    /// ZooKeeper: the pools under the znode `root`.
    #[cfg(feature = "zk")]
    Zk {
        config: crate::zk::ZkConfig,
        root: String,
    },
    /// etcd: the pools under the key prefix `prefix`.
    #[cfg(feature = "etcd")]
    Etcd {
        config: crate::etcd::EtcdConfig,
        prefix: String,
    },
    /// Kubernetes: the pools in Lease objects whose names begin with `prefix`.
    #[cfg(feature = "kube")]
    Kube {
        config: crate::kube::KubeConfig,
        prefix: String,
    },
}

/// Why a pool's report could not be read: what was asked, and the store's answer.
#[derive(Debug, thiserror::Error)]
#[error("{context}")]
pub struct ReportError {
    pub context: String,
    #[source]
    pub cause: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl ReportError {
    fn new(context: String) -> ReportError {
        ReportError {
            context,
            cause: None,
        }
    }

    fn because(context: String, cause: impl std::error::Error + Send + Sync + 'static) -> Self {
        ReportError {
            context,
            cause: Some(Box::new(cause)),
        }
    }
}

impl StoreSpec {
    /// The namespace the pools live under (ZooKeeper's root znode, etcd's key prefix).
    pub fn root(&self) -> &str {
        match self {
            #[cfg(feature = "zk")]
            StoreSpec::Zk { root, .. } => root,
            #[cfg(feature = "etcd")]
            StoreSpec::Etcd { prefix, .. } => prefix,
            #[cfg(feature = "kube")]
            StoreSpec::Kube { prefix, .. } => prefix,
        }
    }

    /// How long a slot stays held after its holder stops answering (ZooKeeper's session
    /// timeout, the etcd lease's TTL).
    pub fn expiry(&self) -> Duration {
        match self {
            #[cfg(feature = "zk")]
            StoreSpec::Zk { config, .. } => config.session_timeout,
            #[cfg(feature = "etcd")]
            StoreSpec::Etcd { config, .. } => config.ttl,
            #[cfg(feature = "kube")]
            StoreSpec::Kube { config, .. } => config.ttl,
        }
    }

    /// The pool size when none is given, if the store has its own (Kubernetes: 256 objects
    /// created at the first start, where a layout's pool is larger).
    pub fn default_pool(&self) -> Option<u32> {
        match self {
            #[cfg(feature = "kube")]
            StoreSpec::Kube { .. } => Some(crate::kube::DEFAULT_POOL),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// The largest pool the store keeps (Kubernetes: an object per slot), if it has a limit.
    pub fn max_pool(&self) -> Option<u32> {
        match self {
            #[cfg(feature = "kube")]
            StoreSpec::Kube { .. } => Some(crate::kube::MAX_POOL),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// The store and where it is, for a log line: `zookeeper HOST:PORT,...`, `etcd URL,...`.
    pub fn describe(&self) -> String {
        match self {
            #[cfg(feature = "zk")]
            StoreSpec::Zk { config, .. } => format!("zookeeper {}", config.connect),
            #[cfg(feature = "etcd")]
            StoreSpec::Etcd { config, .. } => {
                format!("etcd {}", config.access.endpoints.join(","))
            }
            #[cfg(feature = "kube")]
            StoreSpec::Kube { config, .. } => match &config.namespace {
                Some(ns) => format!("kubernetes namespace {ns}"),
                None => "kubernetes (the namespace of the pod or of the kubeconfig)".into(),
            },
        }
    }

    /// Starts one lease negotiated in this store (on the caller's runtime).
    pub fn start(
        &self,
        pool: PoolConfig,
        scheme: Scheme,
        clock: Arc<dyn Clock>,
        metrics: Arc<LeaseMetrics>,
    ) -> LeaseHandle {
        match self {
            #[cfg(feature = "zk")]
            StoreSpec::Zk { config, .. } => {
                crate::zk::start(config.clone(), pool, scheme, clock, metrics)
            }
            #[cfg(feature = "etcd")]
            StoreSpec::Etcd { config, .. } => {
                crate::etcd::start(config.clone(), pool, scheme, clock, metrics)
            }
            #[cfg(feature = "kube")]
            StoreSpec::Kube { config, .. } => {
                crate::kube::start(config.clone(), pool, scheme, clock, metrics)
            }
        }
    }

    /// Reads the report of the pools of `layout` (one `cluster`, or every cluster found), free
    /// slots counted in `pool_size` (`given`: asked for, not the recorded size). Bounded in
    /// time: a store that does not answer is an error saying which flag to check.
    pub async fn report(
        &self,
        layout: &str,
        cluster: Option<u8>,
        pool_size: u32,
        given: bool,
    ) -> Result<Vec<ClusterReport>, ReportError> {
        match self {
            #[cfg(feature = "zk")]
            StoreSpec::Zk { config, root } => {
                zk_report(config, root, layout, cluster, pool_size, given).await
            }
            #[cfg(feature = "etcd")]
            StoreSpec::Etcd { config, prefix } => {
                etcd_report(config, prefix, layout, cluster, pool_size, given).await
            }
            #[cfg(feature = "kube")]
            StoreSpec::Kube { config, prefix } => {
                kube_report(config, prefix, layout, cluster, pool_size, given).await
            }
        }
    }
}

#[cfg(feature = "zk")]
async fn zk_report(
    z: &crate::zk::ZkConfig,
    root: &str,
    layout: &str,
    cluster: Option<u8>,
    pool_size: u32,
    given: bool,
) -> Result<Vec<ClusterReport>, ReportError> {
    use crate::zk;
    let client = tokio::time::timeout(
        z.session_timeout + Duration::from_secs(5),
        zk::connect(
            &z.connect,
            z.session_timeout,
            &z.access,
            zk::Retry::FailFast,
        ),
    )
    .await
    .map_err(|_| {
        ReportError::new(format!(
            "timed out connecting to ZooKeeper at {}",
            z.connect
        ))
    })?
    .map_err(|e| ReportError::new(e.to_string()))?;
    zk::pool::report(&client, root, layout, cluster, pool_size, given)
        .await
        .map_err(|e| {
            ReportError::because(
                format!(
                    "cannot read the pool under {root} (ZooKeeper checks it against {})",
                    z.access.identity_flags()
                ),
                e,
            )
        })
}

#[cfg(feature = "etcd")]
async fn etcd_report(
    e: &crate::etcd::EtcdConfig,
    prefix: &str,
    layout: &str,
    cluster: Option<u8>,
    pool_size: u32,
    given: bool,
) -> Result<Vec<ClusterReport>, ReportError> {
    use crate::etcd;
    let endpoints = e.access.endpoints.join(",");
    let read = async {
        let client = etcd::Etcd::connect(&e.access, etcd::call_timeout(e.ttl)).await?;
        etcd::pool::report(&client, prefix, layout, cluster, pool_size, given).await
    };
    let read = tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .map_err(|_| {
            ReportError::new(format!(
                "timed out reading the pool from etcd at {endpoints}: check --etcd/IDCAR_ETCD"
            ))
        })?;
    read.map_err(|err| match err {
        // Our identity refused: the credential is what to look at.
        etcd::EtcdError::Refused(_) => ReportError::because(
            format!(
                "etcd at {endpoints} refused to show the pool under {prefix} to {}",
                e.access.identity_flags()
            ),
            err,
        ),
        err => ReportError::because(
            format!(
                "cannot read the pool under {prefix} from etcd at {endpoints}: check \
                 --etcd/IDCAR_ETCD"
            ),
            err,
        ),
    })
}

#[cfg(feature = "kube")]
async fn kube_report(
    k: &crate::kube::KubeConfig,
    prefix: &str,
    layout: &str,
    cluster: Option<u8>,
    pool_size: u32,
    given: bool,
) -> Result<Vec<ClusterReport>, ReportError> {
    use crate::kube;
    let mut namespace = k.namespace.clone().unwrap_or_default();
    let read = async {
        let client = kube::Kube::connect(k, kube::call_timeout(k.ttl)).await?;
        namespace = client.namespace().to_string();
        kube::pool::report(&client, prefix, layout, cluster, pool_size, given).await
    };
    let read = tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .map_err(|_| {
            ReportError::new(
                "timed out reading the pool from the Kubernetes API server: check --kubeconfig/KUBECONFIG".into(),
            )
        })?;
    read.map_err(|err| match err {
        kube::KubeError::Refused(_) => ReportError::because(
            format!(
                "the Kubernetes API server refused to show the pool's Lease objects in namespace {namespace:?}: bind the Role of deploy/kubernetes/kube/rbac.yaml"
            ),
            err,
        ),
        err => ReportError::because(
            format!("cannot read the pool's Lease objects in namespace {namespace:?} (prefix {prefix})"),
            err,
        ),
    })
}
