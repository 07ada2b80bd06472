//! What the instances of one ZooKeeper pool must agree on, against real ZooKeeper: the pool's
//! recorded parameters (a mismatch refuses to start, naming the flag), and a layout whose
//! tick is a whole second (ugd60) fenced through ZooKeeper like the millisecond ones.

mod common;

use common::zk::{start, start_refused, Zk};
use common::*;
use nix::sys::signal::Signal;
use std::time::{Duration, Instant};

/// An instance whose ID-shaping parameters differ from the pool's refuses to start, naming
/// the parameter and both values; one that agrees joins.
#[tokio::test]
async fn mismatched_pool_parameters_are_refused() {
    let zk = Zk::standalone();
    let c = zk.connect();
    let mut first = start(&c, &["--layout", "si53", "--mid-bits", "5"]).await;
    first.wait_ready(Duration::from_secs(15)).await;
    let mut odd = start_refused(&c, &["--layout", "si53", "--mid-bits", "7"]).await;
    let (st, log) = odd.exit_and_logs(Duration::from_secs(15)).await;
    assert!(!st.success(), "{log}");
    assert!(
        log.contains("--mid-bits: the pool has 5, this instance 7"),
        "{log}"
    );
    let mut odd = start_refused(&c, &["--layout", "si53", "--base-clock", "1600000000000"]).await;
    let (st, log) = odd.exit_and_logs(Duration::from_secs(15)).await;
    assert!(
        !st.success() && log.contains("--base-clock: the pool has"),
        "{log}"
    );
    let mut same = start(&c, &["--layout", "si53", "--mid-bits", "5"]).await;
    same.wait_ready(Duration::from_secs(15)).await;
    // muid128's medallion base likewise.
    let mut m = start(&c, &["--layout", "muid128"]).await;
    m.wait_ready(Duration::from_secs(15)).await;
    let mut odd = start_refused(
        &c,
        &["--layout", "muid128", "--medallion-base", "0x20000000000"],
    )
    .await;
    let (st, log) = odd.exit_and_logs(Duration::from_secs(15)).await;
    assert!(
        !st.success() && log.contains("--medallion-base: the pool has"),
        "{log}"
    );
    for i in [&mut first, &mut same, &mut m] {
        i.stop_ok().await;
    }
}

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
