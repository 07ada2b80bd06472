//! Why a ZooKeeper connection failed, in terms of the flags: a TLS handshake of our own with
//! the first server (bounded), whose failure names the certificate or key to fix.

use crate::tls::TlsFiles;
use std::sync::Arc;
use std::time::Duration;

/// A TLS handshake of our own with `host:port` (bounded to a few seconds), telling what is
/// wrong in terms of the flags; `None` when nothing is (or nothing can be told).
pub(super) fn probe(host: &str, port: u16, files: Option<&TlsFiles>) -> Option<String> {
    use rustls::pki_types::ServerName;
    use std::io::{Read, Write};
    use std::net::ToSocketAddrs;
    // Short: it runs after every failed connect, before the next try.
    const LIMIT: Duration = Duration::from_secs(1);
    let addr = (host, port).to_socket_addrs().ok()?.next()?;
    let mut tcp = std::net::TcpStream::connect_timeout(&addr, LIMIT).ok()?;
    tcp.set_read_timeout(Some(LIMIT)).ok()?;
    tcp.set_write_timeout(Some(LIMIT)).ok()?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .ok()?;
    let config = match files {
        Some(f) => {
            let mut roots = rustls::RootCertStore::empty();
            let ca = std::fs::read(&f.ca).ok()?;
            for c in rustls_pemfile::certs(&mut &ca[..]).flatten() {
                let _ = roots.add(c);
            }
            let b = builder.with_root_certificates(roots);
            match &f.identity {
                Some((cert, key)) => {
                    let certs = rustls_pemfile::certs(&mut &std::fs::read(cert).ok()?[..])
                        .collect::<Result<Vec<_>, _>>()
                        .ok()?;
                    let key =
                        rustls_pemfile::private_key(&mut &std::fs::read(key).ok()?[..]).ok()??;
                    b.with_client_auth_cert(certs, key).ok()?
                }
                None => b.with_no_client_auth(),
            }
        }
        // Plaintext configured: does the port speak TLS? Any certificate will do to find out.
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServer(provider)))
            .with_no_client_auth(),
    };
    let name = ServerName::try_from(host.to_string()).ok()?;
    let mut conn = rustls::ClientConnection::new(Arc::new(config), name).ok()?;
    let mut stream = rustls::Stream::new(&mut conn, &mut tcp);
    // ZooKeeper speaks after the client: a handshake that completes is followed by a short
    // read (nothing to send: bytes of ours left unread would turn a refusal into a reset),
    // for a refusal of our certificate that TLS 1.3 only reports then. Silence is success.
    let outcome = stream.flush().and_then(|()| {
        stream
            .sock
            .set_read_timeout(Some(Duration::from_millis(500)))?;
        match stream.read(&mut [0u8; 64]) {
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                Ok(())
            }
            r => r.map(|_| ()),
        }
    });
    let tls_error = |e: &std::io::Error| {
        e.get_ref()
            .and_then(|i| i.downcast_ref::<rustls::Error>())
            .cloned()
    };
    match (files, outcome) {
        (None, Ok(())) => Some(format!(
            "{host}:{port} speaks TLS: give --zk-tls-ca (and --zk-tls-cert/--zk-tls-key if it \
             asks for a client certificate), or point --zk at the plaintext client port"
        )),
        (None, Err(e)) => match tls_error(&e) {
            Some(rustls::Error::InvalidMessage(_)) | None => None,
            Some(_) => Some(format!(
                "{host}:{port} speaks TLS: give --zk-tls-ca, or point --zk at the plaintext \
                 client port"
            )),
        },
        (Some(_), Ok(())) => None,
        (Some(f), Err(e)) => Some(explain(host, port, f, tls_error(&e), &e)),
    }
}

/// A handshake's failure with TLS configured, in terms of the flags.
fn explain(
    host: &str,
    port: u16,
    f: &TlsFiles,
    e: Option<rustls::Error>,
    io: &std::io::Error,
) -> String {
    use rustls::{AlertDescription as A, CertificateError as C, Error as E};
    let ca = f.ca.display();
    let cert = f
        .identity
        .as_ref()
        .map_or("(none given)".to_string(), |(c, _)| c.display().to_string());
    match e {
        Some(E::InvalidCertificate(c)) => match c {
            C::UnknownIssuer | C::BadSignature => {
                format!("the certificate of {host}:{port} is not signed by --zk-tls-ca {ca}")
            }
            C::NotValidForName | C::NotValidForNameContext { .. } => format!(
                "the certificate of {host}:{port} is not for {host:?} (the name in --zk): it \
                 must name it in its subjectAltName"
            ),
            C::Expired | C::ExpiredContext { .. } => {
                format!("the certificate of {host}:{port} has expired")
            }
            C::NotValidYet | C::NotValidYetContext { .. } => {
                format!("the certificate of {host}:{port} is not valid yet (check the clocks)")
            }
            C::Revoked => format!("the certificate of {host}:{port} is revoked"),
            other => format!("the certificate of {host}:{port} is refused: {other:?}"),
        },
        Some(E::AlertReceived(A::CertificateRequired | A::HandshakeFailure))
            if f.identity.is_none() =>
        {
            format!(
                "{host}:{port} asks for a client certificate: give --zk-tls-cert and \
                 --zk-tls-key"
            )
        }
        Some(E::AlertReceived(
            A::BadCertificate
            | A::UnknownCA
            | A::CertificateUnknown
            | A::CertificateExpired
            | A::CertificateRevoked
            | A::CertificateRequired
            | A::HandshakeFailure
            | A::DecryptError,
        )) => format!(
            "{host}:{port} refused the client certificate --zk-tls-cert {cert} (is it signed by \
             a CA ZooKeeper trusts, and in force?)"
        ),
        Some(E::InvalidMessage(_)) => format!(
            "{host}:{port} does not speak TLS: --zk points at a plaintext port while \
             --zk-tls-ca is given (use ZooKeeper's secureClientPort)"
        ),
        Some(other) => format!("TLS with {host}:{port} failed: {other}"),
        None if io.kind() == std::io::ErrorKind::UnexpectedEof
            || io.kind() == std::io::ErrorKind::ConnectionReset =>
        {
            format!(
                "{host}:{port} closed the connection during the TLS handshake: a plaintext port \
                 while --zk-tls-ca is given (use ZooKeeper's secureClientPort), or it refused \
                 the client certificate --zk-tls-cert {cert}"
            )
        }
        None => format!("TLS with {host}:{port} failed: {io}"),
    }
}

/// Accepts any server certificate: only to find out whether a port speaks TLS.
#[derive(Debug)]
struct AnyServer(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
