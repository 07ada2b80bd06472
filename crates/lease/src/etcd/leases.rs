//! etcd's lease calls: grant, revoke, and keep alive on one stream per lease.

use super::client::Etcd;
use super::error::{classify, EtcdError};
use idcar_etcd_api::etcdserverpb as rpc;
use idcar_etcd_api::etcdserverpb::lease_client::LeaseClient;
use std::time::Duration;

impl Etcd {
    /// Grants a lease of `ttl` seconds: its ID and the TTL etcd gave it.
    pub async fn grant(&self, ttl: i64) -> Result<(i64, i64), EtcdError> {
        let req = rpc::LeaseGrantRequest { ttl, id: 0 };
        let r = self
            .conn
            .call_any("granting a lease", req, |ch, r| async move {
                LeaseClient::new(ch).lease_grant(r).await
            })
            .await?;
        if !r.error.is_empty() {
            return Err(EtcdError::Unavailable(format!(
                "granting a lease: {}",
                r.error
            )));
        }
        Ok((r.id, r.ttl))
    }

    /// Revokes a lease: every key attached to it goes.
    pub async fn revoke(&self, id: i64) -> Result<(), EtcdError> {
        let req = rpc::LeaseRevokeRequest { id };
        self.conn
            .call_any("revoking a lease", req, |ch, r| async move {
                LeaseClient::new(ch).lease_revoke(r).await
            })
            .await
            .map(|_| ())
    }

    /// Opens a keep-alive stream for lease `id` on the current endpoint and keeps the lease
    /// alive once on it (bounded): the stream and the TTL the lease has again. The first
    /// request goes out with the stream: etcd answers the stream's headers only with the
    /// first answer.
    pub async fn keeper(&self, id: i64) -> Result<(Keeper, i64), EtcdError> {
        let (i, ch) = self.conn.pick();
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        tx.try_send(rpc::LeaseKeepAliveRequest { id })
            .expect("an empty channel takes one request");
        let mut req = self
            .conn
            .request(tokio_stream::wrappers::ReceiverStream::new(rx));
        // A stream lives for the lease: no grpc-timeout on it, each answer is bounded.
        req.metadata_mut().remove("grpc-timeout");
        let url = &self.conn.endpoints[i].0;
        let opened = tokio::time::timeout(self.conn.timeout, async {
            let mut rx = LeaseClient::new(ch)
                .lease_keep_alive(req)
                .await?
                .into_inner();
            let first = rx.message().await?;
            Ok::<_, tonic::Status>((rx, first))
        })
        .await;
        match opened {
            Ok(Ok((rx, Some(first)))) => Ok((
                Keeper {
                    id,
                    tx,
                    rx,
                    timeout: self.conn.timeout,
                    etcd: self.clone(),
                    endpoint: i,
                },
                first.ttl,
            )),
            Ok(Ok((_, None))) => {
                self.conn.move_on(i);
                Err(EtcdError::Unavailable(format!(
                    "keeping the lease alive: etcd at {url} closed the stream"
                )))
            }
            Ok(Err(s)) => {
                let e = classify(&s, "keeping the lease alive", url);
                if matches!(e, EtcdError::Unavailable(_)) {
                    self.conn.move_on(i);
                }
                Err(e)
            }
            Err(_) => {
                self.conn.move_on(i);
                Err(EtcdError::Unavailable(format!(
                    "keeping the lease alive: no answer from etcd at {url} within {:?}",
                    self.conn.timeout
                )))
            }
        }
    }
}

/// One lease's keep-alive stream: a request and its answer per keep-alive, on one HTTP/2
/// stream for as long as it works (a new stream per keep-alive would cost etcd a stream set-up
/// each time, for every instance).
pub struct Keeper {
    id: i64,
    tx: tokio::sync::mpsc::Sender<rpc::LeaseKeepAliveRequest>,
    rx: tonic::Streaming<rpc::LeaseKeepAliveResponse>,
    timeout: Duration,
    /// The client and endpoint the stream is on: a broken stream moves the client on.
    etcd: Etcd,
    endpoint: usize,
}

impl Keeper {
    /// One keep-alive: the TTL the lease has again (0 or less: it is gone). An error means
    /// the stream is broken: open another.
    pub async fn keep_alive(&mut self) -> Result<i64, EtcdError> {
        let req = rpc::LeaseKeepAliveRequest { id: self.id };
        let answer = tokio::time::timeout(self.timeout, async {
            self.tx
                .send(req)
                .await
                .map_err(|_| tonic::Status::unavailable("the keep-alive stream closed"))?;
            self.rx.message().await
        })
        .await;
        let r = match answer {
            Ok(Ok(Some(m))) => Ok(m.ttl),
            Ok(Ok(None)) => Err(EtcdError::Unavailable("the keep-alive stream ended".into())),
            Ok(Err(s)) => Err(classify(&s, "keeping the lease alive", "")),
            Err(_) => Err(EtcdError::Unavailable(format!(
                "keeping the lease alive: no answer within {:?}",
                self.timeout
            ))),
        };
        if matches!(r, Err(EtcdError::Unavailable(_))) {
            // The next stream opens on another member.
            self.etcd.conn.move_on(self.endpoint);
        }
        r
    }
}
