//! The files both stores are reached with: a CA, a client certificate and its key
//! (`--zk-tls-*`, `--etcd-tls-*`), and `user:password` credentials — read and checked the same
//! way for both, so a wrong file gets the same message naming its flag whichever store it is for.

use std::path::{Path, PathBuf};

/// What went wrong with a credential or certificate file (the message names the flag).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct AccessError(pub String);

/// `user:password`, both non-empty, on one line.
pub fn check_digest(s: &str) -> Result<(), &'static str> {
    match s.split_once(':') {
        Some((u, p)) if !u.is_empty() && !p.is_empty() && !s.contains(['\n', '\r']) => Ok(()),
        _ => Err("expected one line user:password"),
    }
}

/// The certificate files and what was last loaded from them.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub ca: PathBuf,
    /// Client certificate and key (mutual TLS).
    pub identity: Option<(PathBuf, PathBuf)>,
}

pub(crate) fn read_pem(flag: &str, p: &Path) -> Result<Vec<u8>, AccessError> {
    std::fs::read(p).map_err(|e| AccessError(format!("{flag} {}: cannot read: {e}", p.display())))
}

/// What the files hold, read once (compared to notice a rotation).
#[derive(Clone, PartialEq)]
pub(crate) struct Contents {
    pub ca: Vec<u8>,
    /// Certificate and key.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
}

/// Reads the files of `--<store>-tls-ca`, `--<store>-tls-cert` and `--<store>-tls-key`.
pub(crate) fn read_files(store: &str, files: &TlsFiles) -> Result<Contents, AccessError> {
    let identity = match &files.identity {
        Some((cert, key)) => Some((
            read_pem(&format!("--{store}-tls-cert"), cert)?,
            read_pem(&format!("--{store}-tls-key"), key)?,
        )),
        None => None,
    };
    Ok(Contents {
        ca: read_pem(&format!("--{store}-tls-ca"), &files.ca)?,
        identity,
    })
}

/// Installs one TLS crypto provider (aws-lc-rs) for the process, before any store connects:
/// ZooKeeper's TLS client builds its configuration from the default, and two crates enabling
/// a provider each must never become a panic. Calling it again does nothing.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

/// The CA file (`--<store>-tls-ca`) holds at least one PEM certificate.
#[cfg(feature = "etcd")]
pub(crate) fn check_ca(store: &str, ca: &Path, pem: &[u8]) -> Result<(), AccessError> {
    match rustls_pemfile::certs(&mut &pem[..]).collect::<Result<Vec<_>, _>>() {
        Ok(c) if !c.is_empty() => Ok(()),
        _ => Err(AccessError(format!(
            "--{store}-tls-ca {}: no PEM certificate in it (expected -----BEGIN CERTIFICATE-----)",
            ca.display()
        ))),
    }
}

/// A client certificate (`--<store>-tls-cert`) and its key (`--<store>-tls-key`): PEM, in
/// force now, and a pair.
pub(crate) fn check_pair(
    store: &str,
    cert: &Path,
    cert_pem: &[u8],
    key: &Path,
    key_pem: &[u8],
) -> Result<(), AccessError> {
    let no_cert = || {
        AccessError(format!(
            "--{store}-tls-cert {}: no PEM certificate in it (expected -----BEGIN CERTIFICATE-----)",
            cert.display()
        ))
    };
    let ders: Vec<_> = rustls_pemfile::certs(&mut &cert_pem[..])
        .collect::<Result<_, _>>()
        .map_err(|_| no_cert())?;
    let leaf = ders.first().ok_or_else(no_cert)?;
    let key_der = rustls_pemfile::private_key(&mut &key_pem[..])
        .ok()
        .flatten()
        .ok_or_else(|| {
            AccessError(format!(
                "--{store}-tls-key {}: no PEM private key in it (expected -----BEGIN PRIVATE KEY----- \
                 or an RSA/EC key)",
                key.display()
            ))
        })?;
    let (_, parsed) = x509_parser::parse_x509_certificate(leaf).map_err(|_| no_cert())?;
    let validity = parsed.validity();
    let now = x509_parser::time::ASN1Time::now();
    if now > validity.not_after {
        return Err(AccessError(format!(
            "--{store}-tls-cert {}: the certificate expired on {}",
            cert.display(),
            validity.not_after
        )));
    }
    if now < validity.not_before {
        return Err(AccessError(format!(
            "--{store}-tls-cert {}: the certificate is not valid before {}",
            cert.display(),
            validity.not_before
        )));
    }
    let provider = rustls::crypto::aws_lc_rs::default_provider();
    let signer = provider
        .key_provider
        .load_private_key(key_der.clone_key())
        .map_err(|e| {
            AccessError(format!(
                "--{store}-tls-key {}: cannot use the key: {e}",
                key.display()
            ))
        })?;
    let matches = signer
        .public_key()
        .is_some_and(|spki| spki.as_ref() == parsed.tbs_certificate.subject_pki.raw);
    if !matches {
        return Err(AccessError(format!(
            "--{store}-tls-key {} does not match the certificate in --{store}-tls-cert {}",
            key.display(),
            cert.display()
        )));
    }
    Ok(())
}
