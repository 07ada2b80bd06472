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
        ("--log", "info"),
    ];
    let mut v = vec!["--kube".to_string()];
    for (flag, value) in defaults {
        if !extra.contains(&flag) {
            v.push(flag.to_string());
            v.push(value.to_string());
        }
    }
    super::idle_like_horizon(extra, &mut v);
    v.extend(extra.iter().map(|s| s.to_string()));
    v
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
