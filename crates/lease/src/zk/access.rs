//! How idcar proves who it is to ZooKeeper and whom it trusts: TLS (`--zk-tls-ca`, and a
//! client certificate from `--zk-tls-cert`/`--zk-tls-key`) and the digest credential
//! (`--zk-auth`, or `--zk-auth-file`).
//!
//! Files are read again for every new connection (and checked once a second while connected),
//! so a rotated Kubernetes Secret is picked up without a restart; a file that does not parse
//! mid-rotation keeps the last good contents in force (logged). With TLS configured every
//! server is reached over TLS — a `tcp://` entry in `--zk` is refused, never a plaintext
//! fallback — and without it a `tcp+tls://` entry is refused. A connection that fails is
//! diagnosed with a TLS handshake of our own, so the error names the flag to fix.
//!
//! Credentials never appear in `Debug` output, logs, metrics or error messages.

use super::diagnose::probe;
use crate::tls::{check_digest, check_pair, read_files, AccessError, Contents, TlsFiles};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use zookeeper_client as zk;

/// The TLS and authentication settings of a ZooKeeper connection. Cheap to clone.
#[derive(Clone)]
pub struct Access {
    digest: Option<Digest>,
    tls: Option<Arc<Tls>>,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("digest", &self.digest.as_ref().map(Digest::source))
            .field("tls", &self.tls.as_ref().map(|t| &t.files))
            .finish()
    }
}

#[derive(Clone)]
enum Digest {
    /// `--zk-auth user:password` (or `IDCAR_ZK_AUTH`).
    Given(String),
    /// `--zk-auth-file FILE`, read at every connect.
    File(PathBuf),
}

impl Digest {
    fn source(&self) -> String {
        match self {
            Digest::Given(_) => "--zk-auth (hidden)".into(),
            Digest::File(p) => format!("--zk-auth-file {}", p.display()),
        }
    }

    fn flag(&self) -> &'static str {
        match self {
            Digest::Given(_) => "--zk-auth",
            Digest::File(_) => "--zk-auth-file",
        }
    }

    fn read(&self) -> Result<String, AccessError> {
        match self {
            Digest::Given(s) => Ok(s.clone()),
            Digest::File(p) => {
                let s = std::fs::read_to_string(p).map_err(|e| {
                    AccessError(format!("--zk-auth-file {}: cannot read: {e}", p.display()))
                })?;
                let s = s.trim_end_matches(['\n', '\r']).to_string();
                check_digest(&s)
                    .map_err(|why| AccessError(format!("--zk-auth-file {}: {why}", p.display())))?;
                Ok(s)
            }
        }
    }
}

struct Tls {
    files: TlsFiles,
    certs: zk::TlsDynamicCerts,
    /// The files' contents last loaded (to notice a rotation).
    loaded: Mutex<Contents>,
}

impl Access {
    /// Checks the flags and reads every file once: a missing or malformed file is an error
    /// at start, naming its flag.
    pub fn new(
        auth: Option<String>,
        auth_file: Option<PathBuf>,
        tls: Option<TlsFiles>,
    ) -> Result<Access, AccessError> {
        let digest = match (auth, auth_file) {
            (Some(_), Some(_)) => {
                return Err(AccessError(
                    "--zk-auth and --zk-auth-file are exclusive: give the credential once".into(),
                ))
            }
            (Some(a), None) => {
                check_digest(&a)
                    .map_err(|_| AccessError("--zk-auth: expected user:password".into()))?;
                Some(Digest::Given(a))
            }
            (None, Some(p)) => Some(Digest::File(p)),
            (None, None) => None,
        };
        if let Some(d) = &digest {
            d.read()?;
        }
        let tls = match tls {
            None => None,
            Some(files) => {
                let contents = read(&files)?;
                let certs = load(&files, &contents)?;
                Some(Arc::new(Tls {
                    files,
                    certs: zk::TlsDynamicCerts::new(certs),
                    loaded: Mutex::new(contents),
                }))
            }
        };
        Ok(Access { digest, tls })
    }

    /// No TLS, no credential.
    pub fn none() -> Access {
        Access {
            digest: None,
            tls: None,
        }
    }

    /// Whether the znodes idcar creates are restricted to its own identity (creator-only
    /// ACLs): with a digest credential or a client certificate (ZooKeeper's `x509` scheme).
    pub fn restricted(&self) -> bool {
        self.digest.is_some()
            || self
                .tls
                .as_ref()
                .is_some_and(|t| t.files.identity.is_some())
    }

    pub fn tls(&self) -> bool {
        self.tls.is_some()
    }

    /// The flags that identify us, for error messages.
    pub fn identity_flags(&self) -> String {
        let mut f = Vec::new();
        if let Some(d) = &self.digest {
            f.push(d.flag());
        }
        if self
            .tls
            .as_ref()
            .is_some_and(|t| t.files.identity.is_some())
        {
            f.push("--zk-tls-cert");
        }
        if f.is_empty() {
            "no credential (give --zk-auth-file or a client certificate)".into()
        } else {
            f.join(" and ")
        }
    }

    /// Checks the connect string against the TLS setting: no plaintext entry with TLS, no
    /// TLS entry without a CA.
    pub fn check_connect(&self, connect: &str) -> Result<(), AccessError> {
        // Entries are comma-separated, each `[tcp://|tcp+tls://]host[:port]`; the last may
        // end with the chroot (`/path`), which never holds a comma.
        if connect.chars().any(char::is_whitespace) {
            return Err(AccessError(format!(
                "--zk {connect:?}: no spaces in a connect string (host:port,host:port[/chroot])"
            )));
        }
        for entry in connect.split(',') {
            if self.tls() && entry.starts_with("tcp://") {
                return Err(AccessError(format!(
                    "--zk {entry}: a plaintext server while --zk-tls-ca is given; idcar never \
                     falls back to plaintext (drop tcp://, and give the server's TLS port)"
                )));
            }
            if !self.tls() && entry.starts_with("tcp+tls://") {
                return Err(AccessError(format!(
                    "--zk {entry}: a TLS server needs --zk-tls-ca (the CA that signed it)"
                )));
            }
        }
        Ok(())
    }

    /// Reads the files again (a rotated Secret); keeps the last good contents if they no
    /// longer parse. Returns whether something new was loaded.
    pub fn refresh(&self) -> bool {
        let Some(t) = &self.tls else { return false };
        let contents = match read(&t.files) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the TLS files; keeping the ones loaded");
                return false;
            }
        };
        let mut loaded = t.loaded.lock().unwrap_or_else(|p| p.into_inner());
        if *loaded == contents {
            return false;
        }
        match load(&t.files, &contents) {
            Ok(certs) => {
                t.certs.update(certs);
                *loaded = contents;
                tracing::info!("loaded rotated TLS certificates for ZooKeeper");
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "the TLS files changed but do not load (a rotation under way?); keeping the ones loaded");
                false
            }
        }
    }

    /// A connector with these credentials (files read again now).
    pub fn connector(&self) -> Result<zk::Connector, AccessError> {
        let mut c = zk::Client::connector();
        if let Some(d) = &self.digest {
            c = c.with_auth("digest", d.read()?.as_bytes());
        }
        if let Some(t) = &self.tls {
            self.refresh();
            c = c.with_tls(zk::TlsOptions::new().with_certs(t.certs.clone()));
        }
        Ok(c)
    }

    /// Connects with `c` (TLS for every server when configured).
    pub async fn connect(&self, c: zk::Connector, connect: &str) -> Result<zk::Client, zk::Error> {
        if self.tls() {
            c.secure_connect(connect).await
        } else {
            c.connect(connect).await
        }
    }

    /// Why connecting to `connect` failed, in terms of the flags, when a handshake of our own
    /// with its first server tells (TLS problems, TLS against a plaintext port or the
    /// reverse); `None` when it does not (then the client's own error is the best there is).
    pub async fn diagnose(&self, connect: &str) -> Option<String> {
        let (host, port) = first_server(connect)?;
        let files = self.tls.as_ref().map(|t| t.files.clone());
        tokio::task::spawn_blocking(move || probe(&host, port, files.as_ref()))
            .await
            .ok()
            .flatten()
    }
}

/// The first `host:port` of a connect string (default port 2181).
fn first_server(connect: &str) -> Option<(String, u16)> {
    let entry = connect.split(',').next()?.trim();
    let entry = entry
        .strip_prefix("tcp+tls://")
        .or_else(|| entry.strip_prefix("tcp://"))
        .unwrap_or(entry);
    let entry = entry.split('/').next()?;
    let (host, port) = match entry.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(':') => (h, p.parse().ok()?),
        _ => (entry, 2181),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((host.to_string(), port))
}

fn read(files: &TlsFiles) -> Result<Contents, AccessError> {
    read_files("zk", files)
}

/// Checks what the files hold: the CA is PEM with at least one certificate; the client
/// certificate is PEM, within its validity, and its key matches it.
fn load(files: &TlsFiles, c: &Contents) -> Result<zk::TlsCerts, AccessError> {
    let ca = std::str::from_utf8(&c.ca)
        .ok()
        .and_then(|s| zk::TlsCa::from_pem(s).ok())
        .ok_or_else(|| {
            AccessError(format!(
                "--zk-tls-ca {}: no PEM certificate in it (expected -----BEGIN CERTIFICATE-----)",
                files.ca.display()
            ))
        })?;
    let mut b = zk::TlsCerts::builder().with_ca(ca);
    if let (Some((cert, key)), Some((cert_pem, key_pem))) = (&files.identity, &c.identity) {
        b = b.with_identity(check_identity(cert, cert_pem, key, key_pem)?);
    }
    b.build()
        .map_err(|e| AccessError(format!("--zk-tls-ca {}: {e}", files.ca.display())))
}

/// The client certificate and key: PEM, in force now, and a pair.
fn check_identity(
    cert: &Path,
    cert_pem: &[u8],
    key: &Path,
    key_pem: &[u8],
) -> Result<zk::TlsIdentity, AccessError> {
    check_pair("zk", cert, cert_pem, key, key_pem)?;
    let (cert_s, key_s) = (
        String::from_utf8_lossy(cert_pem),
        String::from_utf8_lossy(key_pem),
    );
    zk::TlsIdentity::from_pem(&cert_s, &key_s)
        .map_err(|e| AccessError(format!("--zk-tls-cert {}: {e}", cert.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_server_of_a_connect_string() {
        assert_eq!(first_server("a:1,b:2/chroot"), Some(("a".into(), 1)));
        assert_eq!(first_server("tcp+tls://h:2281"), Some(("h".into(), 2281)));
        assert_eq!(first_server("tcp://h:1,k:2/r"), Some(("h".into(), 1)));
        assert_eq!(first_server("host"), Some(("host".into(), 2181)));
        assert_eq!(first_server("[::1]:7"), Some(("::1".into(), 7)));
    }

    #[test]
    fn a_tls_server_needs_a_ca() {
        let plain = Access::none();
        assert!(plain.check_connect("a:1,tcp+tls://b:2").is_err());
        assert!(plain.check_connect("a:1,tcp://b:2").is_ok());
        assert!(plain.check_connect("tcp+tls://b:2/chroot").is_err());
    }

    #[test]
    fn tls_never_reaches_a_plaintext_entry() {
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        let status = std::process::Command::new("bash")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../zk/tls-certs.sh"
            ))
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(status.success());
        let tls = Access::new(None, None, Some(TlsFiles { ca, identity: None })).unwrap();
        for s in [
            "tcp://a:1",
            "b:2,tcp://a:1/chroot",
            " tcp://a:1",
            "a:1, b:2",
        ] {
            assert!(tls.check_connect(s).is_err(), "{s}");
        }
        assert!(tls.check_connect("a:1,tcp+tls://b:2/chroot").is_ok());
    }

    #[test]
    fn digest_credentials_are_checked_and_hidden() {
        assert!(check_digest("u:p").is_ok());
        for bad in ["", "u", ":p", "u:", "u:p\nx"] {
            assert!(check_digest(bad).is_err(), "{bad:?}");
        }
        let a = Access::new(Some("idcar:s3cret".into()), None, None).unwrap();
        assert!(!format!("{a:?}").contains("s3cret"));
        assert!(a.restricted());
        let e = Access::new(Some("nopassword".into()), None, None).unwrap_err();
        assert!(
            e.0.contains("--zk-auth") && !e.0.contains("nopassword"),
            "{e}"
        );
    }
}
