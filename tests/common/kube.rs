//! Kubernetes for the server's tests: the API server is the test kit's
//! (`idcar_testkit::kube`); here, what runs `idcar serve --kube` against it, as the service
//! account of a namespace that the shipped Role binds.
#![allow(dead_code)]

#[allow(unused_imports)]
pub use idcar_testkit::kube::*;

use super::Idcar;
use std::path::Path;

/// `serve --kube` arguments for the namespace of `kubeconfig` with short test timings;
/// `extra` flags replace the defaults they name.
pub fn serve_args(kubeconfig: &Path, extra: &[&str]) -> Vec<String> {
    let config = kubeconfig.display().to_string();
    let defaults = [
        ("--kubeconfig", config.as_str()),
        ("--kube-ttl", "3s"),
        ("--lease-horizon", "2s"),
        ("--renew-interval", "300ms"),
        ("--threads", "1"),
        ("--log", "info,kube_client=off"),
    ];
    super::with_defaults(&["--kube"], &defaults, extra)
}

/// Starts idcar against the namespace of `kubeconfig` (see [`serve_args`]).
pub async fn start(kubeconfig: &Path, extra: &[&str]) -> Idcar {
    let args = serve_args(kubeconfig, extra);
    Idcar::start(&args.iter().map(String::as_str).collect::<Vec<_>>()).await
}

/// Starts an instance that is expected not to become ready (or to exit).
pub async fn start_refused(kubeconfig: &Path, extra: &[&str]) -> Idcar {
    let args = serve_args(kubeconfig, extra);
    Idcar::start_or_exit(&args.iter().map(String::as_str).collect::<Vec<_>>()).await
}

/// The API server of a [`KubeStore`]: its own, or the one the test binary shares.
pub enum Server {
    Own(Box<ApiServer>),
    Shared(&'static ApiServer),
}

impl std::ops::Deref for Server {
    type Target = ApiServer;
    fn deref(&self) -> &ApiServer {
        match self {
            Server::Own(a) => a,
            Server::Shared(a) => a,
        }
    }
}

impl std::ops::DerefMut for Server {
    fn deref_mut(&mut self) -> &mut ApiServer {
        match self {
            Server::Own(a) => a,
            Server::Shared(_) => panic!("a test that stops its API server starts its own"),
        }
    }
}

/// The Kubernetes store of the fault tests: an API server (its own for the tests that stop,
/// freeze or restart it, else the shared one) and a namespace with the shipped Role; idcar
/// runs as its service account.
pub struct KubeStore {
    pub api: Server,
    pub config: std::path::PathBuf,
    pub ns: String,
}

impl KubeStore {
    /// An API server of its own, namespace `idcar`.
    pub fn new() -> KubeStore {
        let api = ApiServer::start();
        let config = api.namespace("idcar");
        KubeStore {
            api: Server::Own(Box::new(api)),
            config,
            ns: "idcar".into(),
        }
    }

    /// A namespace of its own on the shared API server.
    pub fn shared() -> KubeStore {
        let api = ApiServer::shared();
        let (config, ns) = api.fresh_namespace();
        KubeStore {
            api: Server::Shared(api),
            config,
            ns,
        }
    }

    /// The server itself, which the test may stop and freeze: its own.
    pub fn own_server(&self) -> &ApiServer {
        match &self.api {
            Server::Own(a) => a,
            Server::Shared(_) => panic!("a test that stops its API server starts its own"),
        }
    }

    /// The service account's kubeconfig with the server at `at` (a proxy in front of it).
    pub fn via(&self, at: &str) -> std::path::PathBuf {
        let text = std::fs::read_to_string(&self.config).unwrap();
        let text = text.replace(&self.api.url(), &format!("https://{at}"));
        let path = self.api.dir().join(format!(
            "via-{}-{}.kubeconfig",
            self.ns,
            at.replace(':', "-")
        ));
        std::fs::write(&path, text).unwrap();
        path
    }

    /// The annotation `key` of the Lease object `name`, if any.
    pub fn annotation(&self, name: &str, key: &str) -> Option<String> {
        let path = format!(
            "jsonpath={{.metadata.annotations.{}}}",
            key.replace('.', "\\.")
        );
        let out = self
            .api
            .must(&["get", "lease", name, "-n", &self.ns, "-o", &path]);
        Some(out.trim().to_string()).filter(|v| !v.is_empty())
    }

    /// The writes of the namespace's Lease objects, counted in the API server's etcd: the
    /// modifications of every object there (each create and update), deleted ones excepted.
    pub fn lease_writes(&self) -> u64 {
        let prefix = format!("/registry/leases/{}/", self.ns);
        let out = self
            .api
            .etcd
            .etcdctl(0, &["get", &prefix, "--prefix", "-w", "json"])
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["kvs"].as_array().map_or(0, |kvs| {
            kvs.iter()
                .map(|kv| kv["version"].as_u64().unwrap_or(0))
                .sum()
        })
    }
}

impl Default for KubeStore {
    fn default() -> Self {
        Self::new()
    }
}
