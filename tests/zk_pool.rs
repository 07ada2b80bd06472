//! A layout whose tick is a whole second (ugd60) fenced through ZooKeeper like the
//! millisecond ones. (That the instances of one pool must agree on its parameters is checked
//! against every store in `store_faults.rs`.)

mod common;

use common::zk::{start, Zk};
use common::*;
use nix::sys::signal::Signal;
use std::time::{Duration, Instant};

/// ugd60 through ZooKeeper: 1 s ticks against a 2 s horizon (two ticks) with `--max-clock-wait`
/// equal to it. The lease renews without a loss or a gap for several horizons, every ID names
/// the slot held, and after a crash the successor of the slot waits past the mark (up to a
/// horizon and two ticks ahead) instead of exiting with a spurious "clock behind".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ugd60_one_second_ticks_through_zookeeper() {
    let zk = Zk::standalone();
    let flags = [
        "--layout",
        "ugd60",
        "--pool-size",
        "1",
        "--lease-horizon",
        "2s",
        "--max-clock-wait",
        "2s",
        "--renew-interval",
        "300ms",
        "--zk-session-timeout",
        "1s",
    ];
    let a = start(&zk.connect(), &flags).await;
    a.wait_ready(Duration::from_secs(15)).await;
    let (ids, refused) = hammer(&a, Instant::now() + Duration::from_secs(5)).await;
    assert_eq!(refused, 0, "{}", a.logs());
    assert!(ids.len() > 1_000);
    assert_unique(&ids);
    assert!(ids
        .iter()
        .all(|id| idcar::layout::ugd60::Fields::unpack(*id).worker == 0));
    assert_eq!(a.metric_sum("idcar_lease_losses_total").await, 0.0);
    assert_eq!(
        a.metric("idcar_lease_renewals_total{result=\"error\"}")
            .await,
        Some(0.0)
    );
    a.signal(Signal::SIGKILL);
    let mut b = start(&zk.connect(), &flags).await;
    b.wait_ready(Duration::from_secs(15)).await;
    assert!(b.metric("idcar_lease_mark_wait_seconds_sum").await > Some(0.0));
    let (more, _) = hammer(&b, Instant::now() + Duration::from_millis(500)).await;
    assert_unique(&[ids, more].concat());
    b.stop_ok().await;
}
