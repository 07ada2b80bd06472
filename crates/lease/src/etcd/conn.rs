//! One client's connection to etcd: the endpoints of `--etcd` tried in turn, each call bounded
//! in time and carrying etcd's `hasleader` metadata, and the user's token fetched again when
//! etcd forgets it (see [`super::client`]).

use super::access::EtcdAccess;
use super::error::{classify, stale_token, EtcdError};
use idcar_etcd_api::etcdserverpb as rpc;
use idcar_etcd_api::etcdserverpb::auth_client::AuthClient;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tonic::metadata::{AsciiMetadataValue, MetadataValue};
use tonic::transport::{Channel, Endpoint};

/// The endpoints (channels are opened lazily, per endpoint), the one the next call goes to, and
/// the credentials.
pub(super) struct Conn {
    pub(super) endpoints: Vec<(String, Channel)>,
    /// The endpoint the next call goes to.
    current: AtomicUsize,
    /// Where the user and password come from: read again when etcd wants a new token.
    access: EtcdAccess,
    user: Option<(String, String)>,
    token: Mutex<Option<AsciiMetadataValue>>,
    /// One authentication at a time: every task sharing the client learns of a stale token
    /// at once (a member restarted), and one new token serves them all.
    authenticating: tokio::sync::Mutex<()>,
    /// The bound of one call.
    pub(super) timeout: Duration,
}

impl Conn {
    /// A connection for `access` (files read again now); authenticates when a user is given.
    pub(super) async fn connect(access: &EtcdAccess, timeout: Duration) -> Result<Conn, EtcdError> {
        let (user, tls) = access
            .read_files()
            .map_err(|e| EtcdError::Refused(e.to_string()))?;
        let mut endpoints = Vec::new();
        for url in &access.endpoints {
            let mut ep = Endpoint::from_shared(url.clone())
                .map_err(|e| EtcdError::Fatal(format!("--etcd {url}: {e}")))?
                .connect_timeout(timeout.min(Duration::from_secs(1)))
                .tcp_nodelay(true)
                // etcd refuses pings more often than every 5 s (--grpc-keepalive-min-time),
                // and on connections without a stream; every call is bounded anyway.
                .http2_keep_alive_interval(Duration::from_secs(10))
                .keep_alive_timeout(timeout)
                .keep_alive_while_idle(false);
            if let Some(t) = &tls {
                ep = ep
                    .tls_config(t.clone())
                    .map_err(|e| EtcdError::Fatal(format!("--etcd {url}: TLS: {e}")))?;
            }
            endpoints.push((url.clone(), ep.connect_lazy()));
        }
        let conn = Conn {
            endpoints,
            // A random first endpoint: instances spread over the members, and a member
            // that is down costs each new client one failed call at most.
            current: AtomicUsize::new(rand::random::<u32>() as usize % access.endpoints.len()),
            access: access.clone(),
            user,
            token: Mutex::new(None),
            authenticating: tokio::sync::Mutex::new(()),
            timeout,
        };
        if conn.user.is_some() {
            conn.authenticate(None).await?;
        }
        Ok(conn)
    }

    /// The endpoints, for messages.
    pub fn endpoints(&self) -> String {
        let urls: Vec<&str> = self.endpoints.iter().map(|(u, _)| u.as_str()).collect();
        urls.join(",")
    }

    pub(super) fn pick(&self) -> (usize, Channel) {
        let n = self.endpoints.len();
        let i = self.current.load(Ordering::Relaxed) % n;
        (i, self.endpoints[i].1.clone())
    }

    /// The next call goes to the endpoint after `i` (unless another call moved on already).
    pub(super) fn move_on(&self, i: usize) {
        let n = self.endpoints.len();
        let _ = self
            .current
            .compare_exchange(i, (i + 1) % n, Ordering::Relaxed, Ordering::Relaxed);
    }

    pub(super) fn request<T>(&self, msg: T) -> tonic::Request<T> {
        let mut r = tonic::Request::new(msg);
        r.set_timeout(self.timeout);
        r.metadata_mut()
            .insert("hasleader", MetadataValue::from_static("true"));
        if let Some(t) = self.token() {
            r.metadata_mut().insert("token", t);
        }
        r
    }

    /// A request for a stream that lasts as long as it is used (no deadline: etcd keeps a
    /// watch while its stream is open).
    pub(super) fn streaming<T>(&self, msg: T) -> tonic::Request<T> {
        let mut r = tonic::Request::new(msg);
        r.metadata_mut()
            .insert("hasleader", MetadataValue::from_static("true"));
        if let Some(t) = self.token() {
            r.metadata_mut().insert("token", t);
        }
        r
    }

    fn token(&self) -> Option<AsciiMetadataValue> {
        self.token.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Fetches a token, with the user and password as `--etcd-auth-file` holds them now (a
    /// rotated Secret), else as read at connect — unless another task already replaced
    /// `stale`, the token that was refused. The token in use stays in use meanwhile.
    async fn authenticate(&self, stale: Option<AsciiMetadataValue>) -> Result<(), EtcdError> {
        let Some(known) = self.user.clone() else {
            return Ok(());
        };
        let _one = self.authenticating.lock().await;
        if self.token() != stale {
            return Ok(());
        }
        let (name, password) = match self.access.read_user() {
            Ok(Some(user)) => user,
            _ => known,
        };
        let req = rpc::AuthenticateRequest { name, password };
        let r = self
            .once("authenticating", req, |ch, mut r| async move {
                // Asked for without the old token.
                r.metadata_mut().remove("token");
                AuthClient::new(ch).authenticate(r).await
            })
            .await?;
        let token = AsciiMetadataValue::try_from(r.token)
            .map_err(|_| EtcdError::Fatal("etcd sent an auth token that is not ASCII".into()))?;
        *self.token.lock().unwrap_or_else(|p| p.into_inner()) = Some(token);
        Ok(())
    }

    /// One call to the current endpoint, bounded by the timeout.
    async fn once<T, R, F, Fut>(&self, what: &str, msg: T, f: F) -> Result<R, EtcdError>
    where
        F: FnOnce(Channel, tonic::Request<T>) -> Fut,
        Fut: std::future::Future<Output = Result<tonic::Response<R>, tonic::Status>>,
    {
        let (i, ch) = self.pick();
        let url = &self.endpoints[i].0;
        let sent = std::time::Instant::now();
        match tokio::time::timeout(self.timeout, f(ch, self.request(msg))).await {
            Ok(Ok(r)) => {
                tracing::trace!(what, url, took = ?sent.elapsed(), "etcd answered");
                Ok(r.into_inner())
            }
            Ok(Err(s)) => {
                let e = classify(&s, what, url);
                if matches!(e, EtcdError::Unavailable(_)) {
                    self.move_on(i);
                }
                Err(e)
            }
            Err(_) => {
                self.move_on(i);
                Err(EtcdError::Unavailable(format!(
                    "{what}: no answer from etcd at {url} within {:?}",
                    self.timeout
                )))
            }
        }
    }

    /// [`Conn::once`], authenticating again once if etcd no longer knows our token.
    pub(super) async fn call<T: Clone, R, F, Fut>(
        &self,
        what: &str,
        msg: T,
        f: F,
    ) -> Result<R, EtcdError>
    where
        F: Fn(Channel, tonic::Request<T>) -> Fut,
        Fut: std::future::Future<Output = Result<tonic::Response<R>, tonic::Status>>,
    {
        let used = self.token();
        match self.once(what, msg.clone(), &f).await {
            // "user name is empty": sent while another task was fetching the first token.
            Err(EtcdError::Refused(why))
                if self.user.is_some()
                    && (stale_token(&why) || why.contains("user name is empty")) =>
            {
                self.authenticate(used).await?;
                self.once(what, msg, &f).await
            }
            r => r,
        }
    }

    /// [`Conn::call`] on each endpoint in turn while they are unreachable: for calls that may
    /// be repeated (reads, keep-alives, grants — a lease granted twice expires unused).
    pub(super) async fn call_any<T: Clone, R, F, Fut>(
        &self,
        what: &str,
        msg: T,
        f: F,
    ) -> Result<R, EtcdError>
    where
        F: Fn(Channel, tonic::Request<T>) -> Fut,
        Fut: std::future::Future<Output = Result<tonic::Response<R>, tonic::Status>>,
    {
        let mut last = None;
        for _ in 0..self.endpoints.len() {
            match self.call(what, msg.clone(), &f).await {
                Err(e @ EtcdError::Unavailable(_)) => last = Some(e),
                r => return r,
            }
        }
        Err(last.expect("at least one endpoint"))
    }
}
