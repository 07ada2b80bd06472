//! ZooKeeper for the server's tests: the servers are the test kit's (`idcar_testkit::zk`);
//! here, what runs `idcar serve` against them and reads them with idcar's own client code.
#![allow(dead_code)]

pub use idcar_testkit::zk::*;

use super::Idcar;
use idcar_testkit::release::Release;
use std::time::Duration;

/// The stored lable64 mark of `slot` in `cluster`, read directly (the pool report shows
/// held slots' marks only, and holding a slot to read it would change it).
pub fn lable64_mark<R: Release>(zk: &Zk<R>, cluster: u8, slot: u32) -> u64 {
    let connect = zk.connect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    std::thread::spawn(move || {
        rt.block_on(async {
            let c = client(&connect).await;
            let (d, _) = c
                .get_data(&format!("/idcar/lable64/{cluster}/marks/{slot}"))
                .await
                .unwrap();
            idcar::lease::pool::tree::parse_mark(&d).expect("a mark")
        })
    })
    .join()
    .unwrap()
}

/// A ZooKeeper client of the test's own with `access`'s TLS and credentials (one try).
pub async fn client_with(
    connect: &str,
    access: &idcar::lease::zk::Access,
) -> Result<zookeeper_client::Client, String> {
    use idcar::lease::zk::{connect as zk_connect, Retry};
    zk_connect(connect, Duration::from_secs(5), access, Retry::FailFast)
        .await
        .map_err(|e| e.to_string())
}

/// `serve` arguments for ZooKeeper mode against `connect` with short test timings; `extra`
/// flags replace the defaults they name.
pub fn serve_args(connect: &str, extra: &[&str]) -> Vec<String> {
    let defaults = [
        ("--zk", connect),
        ("--zk-session-timeout", "1s"),
        ("--lease-horizon", "2s"),
        ("--renew-interval", "300ms"),
        ("--threads", "1"),
        ("--log", "info,zookeeper_client=warn"),
    ];
    super::with_defaults(&[], &defaults, extra)
}

/// Starts idcar in ZooKeeper mode against `connect` (see [`serve_args`]).
pub async fn start(connect: &str, extra: &[&str]) -> Idcar {
    let args = serve_args(connect, extra);
    Idcar::start(&args.iter().map(String::as_str).collect::<Vec<_>>()).await
}

/// Starts an instance in ZooKeeper mode that is expected to refuse to run.
pub async fn start_refused(connect: &str, extra: &[&str]) -> Idcar {
    let args = serve_args(connect, extra);
    Idcar::start_or_exit(&args.iter().map(String::as_str).collect::<Vec<_>>()).await
}
