//! etcd for the server's tests: the members are the test kit's (`idcar_testkit::etcd`); here,
//! what runs `idcar serve` against them and reads them with idcar's own client.
#![allow(dead_code)]

pub use idcar_testkit::etcd::*;

use super::Idcar;
use idcar_testkit::release::Release;
use std::time::Duration;

/// idcar's own etcd client, connected to every member of `etcd`.
pub async fn client<R: Release>(etcd: &Etcd<R>) -> idcar::lease::etcd::Etcd {
    let access = idcar::lease::etcd::EtcdAccess::new(&etcd.endpoints(), None, None).unwrap();
    idcar::lease::etcd::Etcd::connect(&access, Duration::from_secs(2))
        .await
        .unwrap()
}

/// `serve` arguments for etcd mode against `endpoints` with short test timings; `extra`
/// flags replace the defaults they name.
pub fn serve_args(endpoints: &str, extra: &[&str]) -> Vec<String> {
    let defaults = [
        ("--etcd", endpoints),
        ("--etcd-ttl", "2s"),
        ("--lease-horizon", "2s"),
        ("--renew-interval", "300ms"),
        ("--threads", "1"),
        ("--log", "info"),
    ];
    super::with_defaults(&[], &defaults, extra)
}

/// Starts idcar in etcd mode against `endpoints` (see [`serve_args`]).
pub async fn start(endpoints: &str, extra: &[&str]) -> Idcar {
    let args = serve_args(endpoints, extra);
    Idcar::start(&args.iter().map(String::as_str).collect::<Vec<_>>()).await
}

/// Starts an instance in etcd mode that is expected to refuse to run.
pub async fn start_refused(endpoints: &str, extra: &[&str]) -> Idcar {
    let args = serve_args(endpoints, extra);
    Idcar::start_or_exit(&args.iter().map(String::as_str).collect::<Vec<_>>()).await
}
