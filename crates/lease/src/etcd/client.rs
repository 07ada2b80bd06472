//! A small etcd v3 client over the generated gRPC code (`idcar-etcd-api`): the few calls the lease makes,
//! each bounded in time, with the endpoints of `--etcd` tried in turn, TLS, and user/password
//! authentication.
//!
//! - Every call carries etcd's `hasleader` metadata: a member cut off from its cluster's
//!   leader fails the call at once instead of hanging (and the next call goes to the next
//!   endpoint).
//! - A call that times out or finds its endpoint unreachable moves on to the next endpoint for
//!   the next call; the lease protocol retries (a lost reply may have been applied: the
//!   protocol's compare-and-set and its token tell).
//! - With a user, the token is fetched at connect and fetched again once when etcd answers
//!   that it is no longer valid (etcd forgets tokens when a member restarts).
//! - The certificate and credential files are read when a client is built: the session loop
//!   builds one per etcd lease, so rotated files are used from the next lease on.

use super::access::EtcdAccess;
use super::conn::Conn;
use super::watches::{Watches, SEEN};
use idcar_etcd_api::etcdserverpb as rpc;
use idcar_etcd_api::etcdserverpb::kv_client::KvClient;
use std::sync::Arc;
use std::time::Duration;

pub use super::error::EtcdError;
pub use super::ops::prefix_end;

/// How long a failed read waits before it is tried again.
const AGAIN: Duration = Duration::from_millis(500);

/// A connected client: its connection and its watches, on one stream. Cheap to clone.
#[derive(Clone)]
pub struct Etcd {
    pub(super) conn: Arc<Conn>,
    watches: Arc<Watches>,
}

impl Etcd {
    /// A client for `access` (files read again now); authenticates when a user is given.
    pub async fn connect(access: &EtcdAccess, timeout: Duration) -> Result<Etcd, EtcdError> {
        let conn = Arc::new(Conn::connect(access, timeout).await?);
        let watches = Arc::new(Watches::new(conn.clone()));
        Ok(Etcd { conn, watches })
    }

    /// The endpoints, for messages.
    pub fn endpoints(&self) -> String {
        self.conn.endpoints()
    }

    /// Waits until a key in `[key, range_end)` changes after `revision`, or `max` passes, or
    /// the watch ends (the caller reads again in every case: a watch only saves polling).
    pub async fn wait_change(&self, key: &[u8], range_end: &[u8], revision: i64, max: Duration) {
        self.watches
            .wait_change(key, range_end, revision, max)
            .await
    }

    /// Resolves once `still` no longer holds of `key` — of its `mod_revision`, `None` while it
    /// does not exist — given that it held at `revision`: the key is read after every wake (a
    /// change, `max`, a broken stream, a compaction), and watched next from that read. A wait
    /// starts from the last read of the key (by any wait) if `still` holds of what it found
    /// and it is later than `revision`: nothing changed in between that a watch from there
    /// would miss.
    pub async fn wait_until(
        &self,
        key: &str,
        revision: i64,
        max: Duration,
        still: impl Fn(Option<i64>) -> bool,
    ) {
        let key = key.as_bytes();
        let mut end = key.to_vec();
        end.push(0);
        let mut from = revision;
        if let Some(&(state, at)) = self.watches.seen().get(key) {
            if still(state) {
                from = from.max(at);
            }
        }
        for _ in 0..u32::MAX {
            self.wait_change(key, &end, from, max).await;
            let req = rpc::RangeRequest {
                key: key.to_vec(),
                keys_only: true,
                ..Default::default()
            };
            match self.range("looking at a key watched", req).await {
                Ok(r) => {
                    let state = r.kvs.first().map(|kv| kv.mod_revision);
                    if !still(state) {
                        return;
                    }
                    let Some(read_at) = r.header.map(|h| h.revision) else {
                        continue;
                    };
                    // A member behind the one that answered `revision` may answer older.
                    from = from.max(read_at);
                    let mut seen = self.watches.seen();
                    if seen.len() >= SEEN {
                        seen.clear();
                    }
                    seen.insert(key.to_vec(), (state, read_at));
                }
                Err(_) => tokio::time::sleep(AGAIN).await,
            }
        }
    }

    pub async fn range(
        &self,
        what: &str,
        req: rpc::RangeRequest,
    ) -> Result<rpc::RangeResponse, EtcdError> {
        self.conn
            .call_any(what, req, |ch, r| async move {
                KvClient::new(ch).range(r).await
            })
            .await
    }

    pub async fn txn(
        &self,
        what: &str,
        req: rpc::TxnRequest,
    ) -> Result<rpc::TxnResponse, EtcdError> {
        self.conn
            .call(
                what,
                req,
                |ch, r| async move { KvClient::new(ch).txn(r).await },
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::TlsFiles;

    #[test]
    fn a_prefix_ends_after_its_last_key() {
        assert_eq!(prefix_end(b"/idcar/a/"), b"/idcar/a0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff"), vec![0]);
    }

    #[test]
    fn endpoints_are_checked_against_tls() {
        let e = EtcdAccess::new("127.0.0.1:2379,http://h:1", None, None).unwrap();
        assert_eq!(e.endpoints, ["http://127.0.0.1:2379", "http://h:1"]);
        for bad in ["", "h", "h:x", "https://h:1", "ftp://h:1", "h:1/x", "h :1"] {
            let err = EtcdAccess::new(bad, None, None).unwrap_err().to_string();
            assert!(err.starts_with("--etcd"), "{bad}: {err}");
        }
        let tls = Some(TlsFiles {
            ca: "/nonexistent/ca.pem".into(),
            identity: None,
        });
        let err = EtcdAccess::new("http://h:1", tls.clone(), None).unwrap_err();
        assert!(
            err.to_string().contains("never falls back to plaintext"),
            "{err}"
        );
        let err = EtcdAccess::new("h:1", tls, None).unwrap_err();
        assert!(
            err.to_string()
                .contains("--etcd-tls-ca /nonexistent/ca.pem"),
            "{err}"
        );
    }
}
