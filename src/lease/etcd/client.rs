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
use idcar_etcd_api::etcdserverpb as rpc;
use idcar_etcd_api::etcdserverpb::{auth_client::AuthClient, kv_client::KvClient};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::metadata::{AsciiMetadataValue, MetadataValue};
use tonic::transport::{Channel, Endpoint};

/// How an etcd call failed, as the lease must treat it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EtcdError {
    /// Not reachable now, or no answer in time (the call may still have been applied).
    #[error("{0}")]
    Unavailable(String),
    /// The etcd lease named in the call no longer exists: every key attached to it is gone.
    #[error("{0}")]
    LeaseGone(String),
    /// etcd refused our identity: a wrong password, a user without the permission, a missing
    /// client certificate. Not ready; tried again after a pause (the files may be fixed).
    #[error("{0}")]
    Refused(String),
    /// A request etcd cannot serve at all (a bug, or a server too old).
    #[error("{0}")]
    Fatal(String),
}

/// A connected client (channels are opened lazily, per endpoint). Cheap to clone.
#[derive(Clone)]
pub struct Etcd {
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
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
    /// Every watch of this client, on one stream.
    pub(super) watches: super::watches::Watches,
}

impl Etcd {
    /// A client for `access` (files read again now); authenticates when a user is given.
    pub async fn connect(access: &EtcdAccess, timeout: Duration) -> Result<Etcd, EtcdError> {
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
        let etcd = Etcd {
            inner: Arc::new(Inner {
                endpoints,
                // A random first endpoint: instances spread over the members, and a member
                // that is down costs each new client one failed call at most.
                current: AtomicUsize::new(rand::random::<u32>() as usize % access.endpoints.len()),
                access: access.clone(),
                user,
                token: Mutex::new(None),
                authenticating: tokio::sync::Mutex::new(()),
                timeout,
                watches: Default::default(),
            }),
        };
        if etcd.inner.user.is_some() {
            etcd.authenticate(None).await?;
        }
        Ok(etcd)
    }

    /// The endpoints, for messages.
    pub fn endpoints(&self) -> String {
        let urls: Vec<&str> = self
            .inner
            .endpoints
            .iter()
            .map(|(u, _)| u.as_str())
            .collect();
        urls.join(",")
    }

    pub(super) fn pick(&self) -> (usize, Channel) {
        let n = self.inner.endpoints.len();
        let i = self.inner.current.load(Ordering::Relaxed) % n;
        (i, self.inner.endpoints[i].1.clone())
    }

    /// The next call goes to the endpoint after `i` (unless another call moved on already).
    pub(super) fn move_on(&self, i: usize) {
        let n = self.inner.endpoints.len();
        let _ = self.inner.current.compare_exchange(
            i,
            (i + 1) % n,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    pub(super) fn request<T>(&self, msg: T) -> tonic::Request<T> {
        let mut r = tonic::Request::new(msg);
        r.set_timeout(self.inner.timeout);
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
        self.inner
            .token
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Fetches a token, with the user and password as `--etcd-auth-file` holds them now (a
    /// rotated Secret), else as read at connect — unless another task already replaced
    /// `stale`, the token that was refused. The token in use stays in use meanwhile.
    async fn authenticate(&self, stale: Option<AsciiMetadataValue>) -> Result<(), EtcdError> {
        let Some(known) = self.inner.user.clone() else {
            return Ok(());
        };
        let _one = self.inner.authenticating.lock().await;
        if self.token() != stale {
            return Ok(());
        }
        let (name, password) = match self.inner.access.read_user() {
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
        *self.inner.token.lock().unwrap_or_else(|p| p.into_inner()) = Some(token);
        Ok(())
    }

    /// One call to the current endpoint, bounded by the timeout.
    async fn once<T, R, F, Fut>(&self, what: &str, msg: T, f: F) -> Result<R, EtcdError>
    where
        F: FnOnce(Channel, tonic::Request<T>) -> Fut,
        Fut: std::future::Future<Output = Result<tonic::Response<R>, tonic::Status>>,
    {
        let (i, ch) = self.pick();
        let url = &self.inner.endpoints[i].0;
        let sent = std::time::Instant::now();
        match tokio::time::timeout(self.inner.timeout, f(ch, self.request(msg))).await {
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
                    self.inner.timeout
                )))
            }
        }
    }

    /// [`Etcd::once`], authenticating again once if etcd no longer knows our token.
    async fn call<T: Clone, R, F, Fut>(&self, what: &str, msg: T, f: F) -> Result<R, EtcdError>
    where
        F: Fn(Channel, tonic::Request<T>) -> Fut,
        Fut: std::future::Future<Output = Result<tonic::Response<R>, tonic::Status>>,
    {
        let used = self.token();
        match self.once(what, msg.clone(), &f).await {
            // "user name is empty": sent while another task was fetching the first token.
            Err(EtcdError::Refused(why))
                if self.inner.user.is_some()
                    && (stale_token(&why) || why.contains("user name is empty")) =>
            {
                self.authenticate(used).await?;
                self.once(what, msg, &f).await
            }
            r => r,
        }
    }

    /// [`Etcd::call`] on each endpoint in turn while they are unreachable: for calls that may
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
        for _ in 0..self.inner.endpoints.len() {
            match self.call(what, msg.clone(), &f).await {
                Err(e @ EtcdError::Unavailable(_)) => last = Some(e),
                r => return r,
            }
        }
        Err(last.expect("at least one endpoint"))
    }

    pub async fn range(
        &self,
        what: &str,
        req: rpc::RangeRequest,
    ) -> Result<rpc::RangeResponse, EtcdError> {
        self.call_any(what, req, |ch, r| async move {
            KvClient::new(ch).range(r).await
        })
        .await
    }

    pub async fn txn(
        &self,
        what: &str,
        req: rpc::TxnRequest,
    ) -> Result<rpc::TxnResponse, EtcdError> {
        self.call(
            what,
            req,
            |ch, r| async move { KvClient::new(ch).txn(r).await },
        )
        .await
    }
}

/// etcd no longer takes our token (a member restarted, the auth store changed): fetch another.
fn stale_token(why: &str) -> bool {
    why.contains("invalid auth token") || why.contains("revision of auth store is old")
}

/// The first key after every key starting with `prefix` (etcd's `range_end` for a prefix).
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(&last) = end.last() {
        if last < 0xff {
            *end.last_mut().expect("not empty") += 1;
            return end;
        }
        end.pop();
    }
    vec![0]
}

/// How an etcd status bears on the lease. Messages keep etcd's own words, with what we did.
pub(super) fn classify(s: &tonic::Status, what: &str, url: &str) -> EtcdError {
    use tonic::Code;
    let msg = s.message();
    let detail = source_chain(s);
    let text = format!("{what}: {msg}{detail}");
    if msg.contains("requested lease not found") || msg.contains("lease not found") {
        return EtcdError::LeaseGone(text);
    }
    match s.code() {
        Code::PermissionDenied | Code::Unauthenticated => EtcdError::Refused(text),
        Code::FailedPrecondition
            if msg.contains("authentication failed")
                || msg.contains("authentication is not enabled") =>
        {
            EtcdError::Refused(text)
        }
        _ if stale_token(msg) => EtcdError::Refused(text),
        Code::InvalidArgument if msg.contains("user name") || msg.contains("auth") => {
            EtcdError::Refused(text)
        }
        Code::InvalidArgument | Code::Unimplemented => EtcdError::Fatal(text),
        _ => match tls_reason(&detail) {
            Some(why) => EtcdError::Refused(format!("{what}: {url}: {why}")),
            None => EtcdError::Unavailable(text),
        },
    }
}

/// The transport errors under a status (where TLS failures are told), as ": a: b".
fn source_chain(s: &tonic::Status) -> String {
    let mut out = String::new();
    let mut e: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(s);
    let mut n = 0;
    while let Some(err) = e {
        let t = err.to_string();
        if !out.contains(&t) {
            out.push_str(": ");
            out.push_str(&t);
        }
        e = err.source();
        n += 1;
        if n > 8 {
            break;
        }
    }
    out
}

/// A TLS failure under a transport error, in terms of the flags.
fn tls_reason(detail: &str) -> Option<String> {
    let d = detail;
    let why = if d.contains("UnknownIssuer") || d.contains("BadSignature") {
        "etcd's certificate is not signed by --etcd-tls-ca"
    } else if d.contains("NotValidForName") {
        "etcd's certificate is not for the host named in --etcd"
    } else if d.contains("Expired") {
        "etcd's certificate has expired (or this host's clock is wrong)"
    } else if d.contains("CertificateRequired") || d.contains("certificate required") {
        "etcd asks for a client certificate: give --etcd-tls-cert and --etcd-tls-key"
    } else if d.contains("BadCertificate")
        || d.contains("UnknownCA")
        || d.contains("bad certificate")
    {
        "etcd refused the client certificate of --etcd-tls-cert (is it signed by the CA etcd trusts?)"
    } else if d.contains("InvalidContentType") || d.contains("CorruptMessage") {
        "the endpoint does not speak TLS: --etcd names a plaintext port while --etcd-tls-ca is given"
    } else {
        return None;
    };
    Some(why.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::tls::TlsFiles;

    #[test]
    fn a_prefix_ends_after_its_last_key() {
        assert_eq!(prefix_end(b"/idcar/a/"), b"/idcar/a0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff"), vec![0]);
    }

    /// etcd's answers map onto what the lease does: retry, a new lease, not ready, or stop.
    #[test]
    fn statuses_are_classified_as_the_lease_must_treat_them() {
        use tonic::{Code, Status};
        let c = |code, msg: &str| classify(&Status::new(code, msg), "x", "http://h:1");
        assert!(matches!(
            c(Code::NotFound, "etcdserver: requested lease not found"),
            EtcdError::LeaseGone(_)
        ));
        for (code, msg) in [
            (Code::PermissionDenied, "etcdserver: permission denied"),
            (Code::InvalidArgument, "etcdserver: user name is empty"),
            (
                Code::InvalidArgument,
                "etcdserver: authentication failed, invalid user ID or password",
            ),
            (Code::Unauthenticated, "etcdserver: invalid auth token"),
        ] {
            assert!(matches!(c(code, msg), EtcdError::Refused(_)), "{msg}");
        }
        for (code, msg) in [
            (Code::Unavailable, "etcdserver: no leader"),
            (Code::Unavailable, "transport error"),
            (Code::DeadlineExceeded, "etcdserver: request timed out"),
            (
                Code::ResourceExhausted,
                "etcdserver: mvcc: database space exceeded",
            ),
            (Code::Unknown, "etcdserver: leader changed"),
        ] {
            assert!(matches!(c(code, msg), EtcdError::Unavailable(_)), "{msg}");
        }
        assert!(matches!(
            c(
                Code::InvalidArgument,
                "etcdserver: too many operations in txn request"
            ),
            EtcdError::Fatal(_)
        ));
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
