//! Where etcd is and how idcar proves who it is to it: `--etcd` endpoints, TLS
//! (`--etcd-tls-ca`, and a client certificate) and `--etcd-auth-file` (`user:password`), each
//! checked at start naming its flag, and read again for every new client.

use crate::tls::{check_ca, check_digest, check_pair, read_files, AccessError, TlsFiles};
use std::path::PathBuf;
use tonic::transport::{Certificate, ClientTlsConfig, Identity};

/// Where etcd is and how to reach it, checked (files read once at start to fail early).
#[derive(Clone, Debug)]
pub struct EtcdAccess {
    /// `http://host:port` or `https://host:port`, at least one.
    pub endpoints: Vec<String>,
    /// `--etcd-tls-ca` and the client certificate.
    pub tls: Option<TlsFiles>,
    /// `--etcd-auth-file`: one line `user:password`.
    pub auth_file: Option<PathBuf>,
}

impl EtcdAccess {
    /// Checks the endpoints against the TLS setting and reads every file once.
    pub fn new(
        endpoints: &str,
        tls: Option<TlsFiles>,
        auth_file: Option<PathBuf>,
    ) -> Result<EtcdAccess, AccessError> {
        let mut list = Vec::new();
        for e in endpoints.split(',') {
            let e = e.trim();
            let url = if e.contains("://") {
                e.to_string()
            } else if tls.is_some() {
                format!("https://{e}")
            } else {
                format!("http://{e}")
            };
            let bad = |why: &str| AccessError(format!("--etcd {e:?}: {why}"));
            let rest = match (url.split_once("://"), tls.is_some()) {
                (Some(("https", _)), false) => return Err(bad(
                    "an https endpoint needs --etcd-tls-ca (the CA that signed etcd's certificate)",
                )),
                (Some(("http", _)), true) => {
                    return Err(bad(
                        "a plaintext endpoint while --etcd-tls-ca is given; idcar never falls \
                         back to plaintext (use https://)",
                    ))
                }
                (Some(("http" | "https", rest)), _) => rest,
                _ => {
                    return Err(bad(
                        "expected host:port, http://host:port or https://host:port",
                    ))
                }
            };
            let hostport = rest.trim_end_matches('/');
            let port_ok = hostport
                .rsplit_once(':')
                .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
            if e.is_empty() || !port_ok || hostport.contains(['/', ' ', '@']) {
                return Err(bad(
                    "expected host:port, http://host:port or https://host:port",
                ));
            }
            list.push(format!("{}://{hostport}", url.split_once("://").unwrap().0));
        }
        let access = EtcdAccess {
            endpoints: list,
            tls,
            auth_file,
        };
        access.read_files()?;
        Ok(access)
    }

    /// The user and password of `--etcd-auth-file`, and the TLS files, read and checked now.
    pub(super) fn read_files(&self) -> Result<Loaded, AccessError> {
        Ok((self.read_user()?, self.read_tls()?))
    }

    /// The user and password of `--etcd-auth-file`, read now.
    pub(super) fn read_user(&self) -> Result<Option<(String, String)>, AccessError> {
        Ok(match &self.auth_file {
            None => None,
            Some(p) => {
                let s = std::fs::read_to_string(p).map_err(|e| {
                    AccessError(format!(
                        "--etcd-auth-file {}: cannot read: {e}",
                        p.display()
                    ))
                })?;
                let s = s.trim_end_matches(['\n', '\r']);
                check_digest(s).map_err(|why| {
                    AccessError(format!("--etcd-auth-file {}: {why}", p.display()))
                })?;
                let (u, pw) = s.split_once(':').expect("checked");
                Some((u.to_string(), pw.to_string()))
            }
        })
    }

    /// The TLS settings from the files of `--etcd-tls-*`, read and checked now.
    fn read_tls(&self) -> Result<Option<ClientTlsConfig>, AccessError> {
        Ok(match &self.tls {
            None => None,
            Some(files) => {
                let c = read_files("etcd", files)?;
                check_ca("etcd", &files.ca, &c.ca)?;
                let mut t = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&c.ca));
                if let (Some((cert, key)), Some((cert_pem, key_pem))) =
                    (&files.identity, &c.identity)
                {
                    check_pair("etcd", cert, cert_pem, key, key_pem)?;
                    t = t.identity(Identity::from_pem(cert_pem, key_pem));
                }
                Some(t)
            }
        })
    }

    /// The flags that identify us, for messages.
    pub fn identity_flags(&self) -> String {
        let mut f = Vec::new();
        if self.auth_file.is_some() {
            f.push("--etcd-auth-file");
        }
        if self.tls.as_ref().is_some_and(|t| t.identity.is_some()) {
            f.push("--etcd-tls-cert");
        }
        if f.is_empty() {
            "no credential (give --etcd-auth-file or a client certificate)".into()
        } else {
            f.join(" and ")
        }
    }
}

/// What [`EtcdAccess`]'s files hold: the user and password, and the TLS settings.
type Loaded = (Option<(String, String)>, Option<ClientTlsConfig>);
