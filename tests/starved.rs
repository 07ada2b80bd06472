//! A starved renewal path does not cost the lease: with default lease flags (3 s
//! horizon, 1 s interval), every mark write held back 1.2 s after its mark was chosen — as on
//! a node where the renewal waits its turn behind a hundred busy threads. A fixed interval would
//! let the mark run out every cycle (the mark written when a renewal is due reaches 3 s; the
//! next lands 1.2 + 1 + 1.2 s later); the paced renewals keep it, and the lateness shows in
//! the metrics before IDs stop. Static mode and ZooKeeper mode (real ZooKeeper). Not timed:
//! the assertions are counts, over a run long enough for many renewals.

mod common;

use common::zk::{start, Zk};
use common::*;
use std::time::{Duration, Instant};

const STARVE: &str = "1200ms";

/// Asks for one ID every 50 ms for `run`; returns (served, refused).
async fn light_client(a: &Idcar, run: Duration) -> (u32, u32) {
    let (mut served, mut refused) = (0, 0);
    let end = Instant::now() + run;
    while Instant::now() < end {
        match a.take(1).await {
            Ok(_) => served += 1,
            Err(_) => refused += 1,
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (served, refused)
}

/// The lease outlived the starvation: nothing refused, no loss, renewals went on (more of
/// them than one per interval: the pacing pulled them forward), and they were counted late.
async fn assert_outlived(a: &Idcar, run: Duration) {
    let before = a
        .metric("idcar_lease_renewals_total{result=\"ok\"}")
        .await
        .unwrap();
    let (served, refused) = light_client(a, run).await;
    let logs = a.logs();
    assert_eq!(refused, 0, "{served} served, {refused} refused: {logs}");
    assert!(served > 100, "{served} served");
    assert_eq!(
        a.metric_sum("idcar_lease_losses_total").await,
        0.0,
        "{logs}"
    );
    let renewals = a
        .metric("idcar_lease_renewals_total{result=\"ok\"}")
        .await
        .unwrap()
        - before;
    // 10 s of 1.2 s writes back to back (plus the least gap): about 7; a fixed 1 s interval
    // after each would make about 4.
    assert!(renewals >= 5.0, "{renewals} renewals in {run:?}");
    assert!(
        a.metric_sum("idcar_lease_renewals_late_total").await >= 1.0,
        "late renewals are counted: {logs}"
    );
    assert!(logs.contains("a lease renewal landed late"), "{logs}");
    assert_eq!(
        a.metric("idcar_lease_held").await,
        Some(1.0),
        "still held: {logs}"
    );
}

#[tokio::test]
async fn a_starved_renewal_path_keeps_the_static_lease() {
    let mut a = Idcar::start(&["--starve-renewals", STARVE]).await;
    a.wait_ready(Duration::from_secs(15)).await;
    assert_outlived(&a, Duration::from_secs(10)).await;
    a.stop_ok().await;
}

#[tokio::test]
async fn a_starved_renewal_path_keeps_the_zookeeper_lease() {
    let zk = Zk::standalone();
    // idcar's defaults, not the harness's quick ones — except the horizon: static mode's 3 s,
    // stricter than ZooKeeper mode's default (5 s with this session timeout).
    let defaults = [
        "--zk-session-timeout",
        "6s",
        "--lease-horizon",
        "3s",
        "--renew-interval",
        "1s",
    ];
    let mut a = start(
        &zk.connect(),
        &[&defaults[..], &["--starve-renewals", STARVE]].concat(),
    )
    .await;
    a.wait_ready(Duration::from_secs(20)).await;
    assert_outlived(&a, Duration::from_secs(10)).await;
    a.stop_ok().await;
}
