//! Bad clients, floods and tight limits against the real binary: no client behaviour, no
//! flood of the admin port and no descriptor limit may stop idcar issuing IDs to a
//! well-behaved client for longer than `--idle-timeout` (+1 s), and none may cost the lease.
//!
//! Each test prints what it measured (time to serve a well-behaved client, RSS) with
//! `--nocapture`.

#[path = "../common/mod.rs"]
mod common;
mod load;
mod readers;
mod strict;

use common::*;
use nix::sys::signal::Signal;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};

/// A short lease, so that holding an attack for a few seconds outlasts several horizons.
const SHORT_LEASE: [&str; 6] = [
    "--lease-horizon",
    "1s",
    "--renew-interval",
    "250ms",
    "--max-clock-wait",
    "5s",
];

fn args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = SHORT_LEASE.to_vec();
    v.extend_from_slice(extra);
    v
}

/// Time for a fresh client to connect and get one ID over HTTP (bounded by 20 s).
async fn time_to_serve(idcar: &Idcar) -> Duration {
    let started = Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(20), async {
        let mut h = idcar.http().await;
        h.get("/id", false).await.unwrap()
    })
    .await
    .expect("a well-behaved client is served at all");
    assert_eq!(r.status, 200, "{}", r.body);
    started.elapsed()
}

/// The lease was never lost nor failed to renew, and the log never saw descriptors run out.
async fn lease_untouched(idcar: &Idcar) {
    assert_eq!(
        idcar
            .metric("idcar_lease_renewals_total{result=\"error\"}")
            .await,
        Some(0.0),
        "{}",
        idcar.logs()
    );
    assert_eq!(idcar.metric_sum("idcar_lease_losses_total").await, 0.0);
    assert!(idcar
        .metric("idcar_lease_renewals_total{result=\"ok\"}")
        .await
        .is_some_and(|n| n > 0.0));
    assert!(
        !idcar.logs().contains("Too many open files"),
        "{}",
        idcar.logs()
    );
}

/// Is the stream closed by the server (EOF or an error), within `limit`?
async fn closed_within(s: &mut UnixStream, limit: Duration) -> bool {
    let mut buf = vec![0u8; 1 << 16];
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
        }
    }
}
