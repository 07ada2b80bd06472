//! How to reach a coordinating store (ZooKeeper, etcd), checked: shared by `serve` and `pool`.

use super::{usage, UsageError};
use crate::cli::{EtcdArgs, ZkArgs};
use std::time::Duration;

/// How to reach etcd, checked (shared by `serve` and `pool`).
#[derive(Debug, Clone)]
pub struct EtcdConn {
    pub access: crate::lease::etcd::EtcdAccess,
    pub prefix: String,
    pub ttl: Duration,
}

/// Checked etcd settings of `serve`.
#[derive(Debug, Clone)]
pub struct EtcdSettings {
    pub conn: EtcdConn,
    pub pool_size: u32,
    /// The slot the first lease prefers (the next ones prefer the slots after it).
    pub prefer: Option<u32>,
    /// The pod name for the slot's owner record.
    pub pod: Option<String>,
    /// How many slots the instance holds at once (`--slots`).
    pub slots: u32,
}

impl EtcdConn {
    /// Checks the etcd flags shared by `serve` and `pool`.
    pub fn from_args(endpoints: &str, e: &EtcdArgs) -> Result<EtcdConn, UsageError> {
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

/// How to reach ZooKeeper, checked (shared by `serve` and `pool`).
#[derive(Debug, Clone)]
pub struct ZkConn {
    pub connect: String,
    pub root: String,
    pub session_timeout: Duration,
    /// TLS and credentials (files read and checked).
    pub access: crate::lease::zk::Access,
}

/// Checked ZooKeeper settings of `serve`.
#[derive(Debug, Clone)]
pub struct ZkSettings {
    pub conn: ZkConn,
    pub pool_size: u32,
    /// The slot the first lease prefers (the next ones prefer the slots after it).
    pub prefer: Option<u32>,
    /// The pod name for the slot's owner record.
    pub pod: Option<String>,
    /// How many slots the instance holds at once (`--slots`).
    pub slots: u32,
}

impl ZkConn {
    /// Checks the ZooKeeper flags shared by `serve` and `pool`.
    pub fn from_args(connect: &str, z: &ZkArgs) -> Result<ZkConn, UsageError> {
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
