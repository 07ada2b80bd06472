//! The store a pool lives in (ZooKeeper, etcd), checked: shared by `serve` and `pool`. The one
//! place the server tells the stores apart: everything past it holds a [`StoreSpec`].

use super::{usage, UsageError};
use crate::cli::{EtcdArgs, KubeArgs, StoreArgs, ZkArgs};
use crate::lease::etcd::EtcdConfig;
use crate::lease::kube::KubeConfig;
use crate::lease::zk::ZkConfig;
use crate::lease::StoreSpec;
use std::time::Duration;

impl StoreArgs {
    /// Whether a store is given (else `serve` holds a static slot).
    pub fn given(&self) -> bool {
        self.zk.is_some() || self.etcd.is_some() || self.kube
    }

    /// How long the given store keeps a slot held after its holder stops answering, as the
    /// flags say (checked with the rest by [`StoreArgs::spec`]); `None` without a store.
    pub fn expiry(&self) -> Option<Duration> {
        match (&self.zk, &self.etcd) {
            (Some(_), _) => Some(self.zk_args.zk_session_timeout),
            (None, Some(_)) => Some(self.etcd_args.etcd_ttl),
            (None, None) => self.kube.then_some(self.kube_args.kube_ttl),
        }
    }

    /// The store given, checked; `None` without one.
    pub fn spec(&self) -> Result<Option<StoreSpec>, UsageError> {
        Ok(Some(match (&self.zk, &self.etcd) {
            (Some(_), Some(_)) => {
                return usage("--zk and --etcd are exclusive: the pool lives in one store")
            }
            (None, None) if self.kube => return kube_spec(&self.kube_args).map(Some),
            (None, None) => return Ok(None),
            (Some(connect), None) => {
                let z = ZkConn::from_args(connect, &self.zk_args)?;
                StoreSpec::Zk {
                    config: ZkConfig {
                        connect: z.connect,
                        session_timeout: z.session_timeout,
                        access: z.access,
                    },
                    root: z.root,
                }
            }
            (None, Some(endpoints)) => {
                let e = EtcdConn::from_args(endpoints, &self.etcd_args)?;
                StoreSpec::Etcd {
                    config: EtcdConfig {
                        access: e.access,
                        ttl: e.ttl,
                    },
                    prefix: e.prefix,
                }
            }
        }))
    }
}

/// The Kubernetes flags, checked.
fn kube_spec(k: &KubeArgs) -> Result<StoreSpec, UsageError> {
    crate::lease::kube::check_prefix(&k.kube_prefix).map_err(UsageError)?;
    let ttl = k.kube_ttl;
    if ttl.subsec_nanos() != 0 || ttl < Duration::from_secs(2) || ttl > Duration::from_secs(600) {
        return usage(format!(
            "--kube-ttl must be whole seconds between 2s and 10m, got {ttl:?}"
        ));
    }
    if let Some(ns) = &k.kube_namespace {
        let ok = !ns.is_empty()
            && ns.len() <= 63
            && ns
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !ns.starts_with('-')
            && !ns.ends_with('-');
        if !ok {
            return usage(format!(
                "--kube-namespace {ns:?}: not a namespace name (lowercase letters, digits, '-')"
            ));
        }
    }
    if let Some(path) = &k.kubeconfig {
        if let Err(e) = std::fs::metadata(path) {
            return usage(format!("--kubeconfig {}: {e}", path.display()));
        }
    }
    Ok(StoreSpec::Kube {
        config: KubeConfig {
            kubeconfig: k.kubeconfig.clone(),
            namespace: k.kube_namespace.clone(),
            ttl,
            followers: Default::default(),
        },
        prefix: k.kube_prefix.clone(),
    })
}

/// How to reach etcd, checked.
struct EtcdConn {
    access: crate::lease::etcd::EtcdAccess,
    prefix: String,
    ttl: Duration,
}

impl EtcdConn {
    /// Checks the etcd flags shared by `serve` and `pool`.
    fn from_args(endpoints: &str, e: &EtcdArgs) -> Result<EtcdConn, UsageError> {
        let prefix = e.etcd_prefix.trim_end_matches('/');
        if !prefix.starts_with('/') || prefix.split('/').skip(1).any(str::is_empty) {
            return usage(format!(
                "--etcd-prefix {:?}: expected an absolute path such as /idcar",
                e.etcd_prefix
            ));
        }
        let ttl = e.etcd_ttl;
        if ttl.subsec_nanos() != 0 || ttl < Duration::from_secs(2) || ttl > Duration::from_secs(600)
        {
            return usage(format!(
                "--etcd-ttl must be whole seconds between 2s (etcd's minimum) and 10m, got {ttl:?}"
            ));
        }
        let tls = match (&e.etcd_tls_ca, &e.etcd_tls_cert, &e.etcd_tls_key) {
            (None, None, None) => None,
            (None, _, _) => {
                return usage("--etcd-tls-cert and --etcd-tls-key need --etcd-tls-ca (TLS to etcd)")
            }
            (Some(ca), cert, key) => Some(crate::lease::tls::TlsFiles {
                ca: ca.clone(),
                identity: cert.clone().zip(key.clone()),
            }),
        };
        let access = crate::lease::etcd::EtcdAccess::new(endpoints, tls, e.etcd_auth_file.clone())
            .map_err(|e| UsageError(e.0))?;
        Ok(EtcdConn {
            access,
            prefix: prefix.to_string(),
            ttl,
        })
    }
}

/// How to reach ZooKeeper, checked.
struct ZkConn {
    connect: String,
    root: String,
    session_timeout: Duration,
    /// TLS and credentials (files read and checked).
    access: crate::lease::zk::Access,
}

impl ZkConn {
    /// Checks the ZooKeeper flags shared by `serve` and `pool`.
    fn from_args(connect: &str, z: &ZkArgs) -> Result<ZkConn, UsageError> {
        if connect.trim().is_empty() {
            return usage(
                "--zk: empty connect string (expected host:port[,host:port...][/chroot])",
            );
        }
        let root = z.zk_root.trim_end_matches('/');
        if !root.starts_with('/') || root.split('/').skip(1).any(str::is_empty) {
            return usage(format!(
                "--zk-root {:?}: expected an absolute path such as /idcar",
                z.zk_root
            ));
        }
        if z.zk_session_timeout < Duration::from_millis(400)
            || z.zk_session_timeout > Duration::from_secs(600)
        {
            return usage("--zk-session-timeout must be between 400ms and 10m");
        }
        let tls = match (&z.zk_tls_ca, &z.zk_tls_cert, &z.zk_tls_key) {
            (None, None, None) => None,
            (None, _, _) => {
                return usage("--zk-tls-cert and --zk-tls-key need --zk-tls-ca (TLS to ZooKeeper)")
            }
            (Some(ca), cert, key) => Some(crate::lease::tls::TlsFiles {
                ca: ca.clone(),
                identity: cert.clone().zip(key.clone()),
            }),
        };
        let access = crate::lease::zk::Access::new(z.zk_auth.clone(), z.zk_auth_file.clone(), tls)
            .map_err(|e| UsageError(e.0))?;
        access.check_connect(connect).map_err(|e| UsageError(e.0))?;
        Ok(ZkConn {
            connect: connect.to_string(),
            root: root.to_string(),
            session_timeout: z.zk_session_timeout,
            access,
        })
    }
}
