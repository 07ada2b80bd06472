//! How an etcd call failed ([`EtcdError`]), as the lease must treat it: etcd's statuses and
//! transport errors classified, keeping etcd's own words and naming the flag where TLS fails.

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

/// etcd no longer takes our token (a member restarted, the auth store changed): fetch another.
pub(super) fn stale_token(why: &str) -> bool {
    why.contains("invalid auth token") || why.contains("revision of auth store is old")
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
}
