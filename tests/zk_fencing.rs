//! How a ZooKeeper lease ends and is handed over, against real ZooKeeper: what stops a holder
//! (a stolen mark, a foreign write in place of a lost one, an outage), how a successor takes
//! over (the clock wait equal to the horizon, a release under load, IDs again within a second
//! of ZooKeeper's return). The faults every store must survive are in `store_faults.rs`, the
//! protocol's own checks against every store in `lease_conformance.rs`.

mod common;

use common::proxy::Proxy;
use common::zk::{start, Zk};
use common::*;
use nix::sys::signal::Signal;
use std::time::{Duration, Instant};

/// Someone else writes the holder's mark: the holder stops at once, counts a `stolen` loss,
/// and claims again, issuing only above the mark written.
#[tokio::test]
async fn a_stolen_lease_is_lost_counted_and_claimed_again() {
    let zk = Zk::standalone();
    let mut a = start(&zk.connect(), &["--pool-size", "1", "--cluster-id", "4"]).await;
    a.wait_ready(Duration::from_secs(15)).await;
    let c = zk.client().await;
    let path = "/idcar/lable64/4/marks/0";
    let (data, _) = c.get_data(path).await.unwrap();
    let theirs = idcar::lease::pool::tree::parse_mark(&data).unwrap() + 1_000;
    c.set_data(path, theirs.to_string().as_bytes(), None)
        .await
        .unwrap();
    a.wait_metric(
        "idcar_lease_losses_total{reason=\"stolen\"}",
        Duration::from_secs(10),
        |v| v == 1.0,
    )
    .await;
    a.wait_ready(Duration::from_secs(15)).await;
    let ids = a.take(100).await.unwrap();
    for id in ids {
        let ts = idcar::layout::lable64::Fields::unpack(id)
            .unwrap()
            .timestamp_ms;
        assert!(ts > theirs, "{ts} not above the foreign mark {theirs}");
    }
    assert_eq!(
        a.metric("idcar_lease_losses_total{reason=\"expired\"}")
            .await,
        Some(0.0)
    );
    a.stop_ok().await;
}

/// ZooKeeper goes away for longer than the horizon (not the session): the mark runs out and
/// that is counted as `unreachable` at once; readiness says so; a SIGTERM meanwhile exits
/// within `--shutdown-grace` instead of waiting out the session.
#[tokio::test]
async fn an_outage_is_counted_as_unreachable_and_shutdown_stays_bounded() {
    let mut zk = Zk::standalone();
    let mut a = start(
        &zk.connect(),
        &[
            "--zk-session-timeout",
            "20s",
            "--lease-horizon",
            "1s",
            "--max-clock-wait",
            "5s",
            "--shutdown-grace",
            "2s",
        ],
    )
    .await;
    a.wait_ready(Duration::from_secs(15)).await;
    zk.kill(0);
    a.wait_metric(
        "idcar_lease_losses_total{reason=\"unreachable\"}",
        Duration::from_secs(6),
        |v| v == 1.0,
    )
    .await;
    let (status, body) = a.admin_get("/readyz").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(a.metric("idcar_lease_held").await, Some(0.0));
    let t = Instant::now();
    a.signal(Signal::SIGTERM);
    let st = a.wait_exit(Duration::from_secs(15)).await;
    let took = t.elapsed();
    assert!(took < Duration::from_secs(4), "shutdown took {took:?}");
    // It could not release: not a clean exit, and it says why.
    assert!(!st.success());
    assert!(a.logs().contains("--shutdown-grace"), "{}", a.logs());
}

/// Static mode with `--max-clock-wait` equal to the horizon, ugd60 (1 s ticks): after a crash
/// the stored mark is up to a horizon and two ticks ahead, and start-up waits it out instead
/// of exiting with a spurious "clock behind".
#[tokio::test]
async fn a_clock_wait_equal_to_the_horizon_waits_out_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--layout",
        "ugd60",
        "--lease-horizon",
        "2s",
        "--renew-interval",
        "1s",
        "--max-clock-wait",
        "2s",
    ];
    let dir_path = dir.path().to_path_buf();
    let mut a = Idcar::start_in(dir, &args).await;
    a.wait_ready(Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    a.signal(Signal::SIGKILL);
    a.wait_exit(Duration::from_secs(5)).await;
    let admin = format!("127.0.0.1:{}", free_port());
    let started = Instant::now();
    let mut again = serve_cmd(&dir_path, &admin, &args).spawn().unwrap();
    loop {
        if let Some(st) = again.try_wait().unwrap() {
            panic!(
                "exited ({st:?}) instead of waiting: {}",
                std::fs::read_to_string(dir_path.join("idcar.log")).unwrap_or_default()
            );
        }
        if idcar::probe::get(admin.parse().unwrap(), "/readyz", Duration::from_secs(1))
            .is_ok_and(|(s, _)| s == 200)
        {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "never ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = again.kill();
    let _ = again.wait();
}

/// After a full outage longer than the session, IDs flow again within about a second of
/// ZooKeeper answering, whatever the outage's length (new sessions are tried at least once a
/// second, with a short connect timeout).
#[tokio::test]
async fn ids_flow_again_within_a_second_of_zookeeper_returning() {
    let mut zk = Zk::standalone();
    let a = start(
        &zk.connect(),
        &["--lease-horizon", "1s", "--max-clock-wait", "5s"],
    )
    .await;
    a.wait_ready(Duration::from_secs(15)).await;
    let mut recoveries = Vec::new();
    for outage in [Duration::from_millis(4_500), Duration::from_millis(9_700)] {
        zk.kill(0);
        tokio::time::sleep(outage).await;
        zk.restart(0);
        let back = Instant::now();
        let deadline = back + Duration::from_secs(15);
        while a.take(1).await.is_err() {
            assert!(
                Instant::now() < deadline,
                "no IDs after recovery: {}",
                a.logs()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        recoveries.push(back.elapsed());
    }
    eprintln!("IDs flowed again {recoveries:?} after ZooKeeper answered (outages 4.5 s, 9.7 s)");
    for r in &recoveries {
        assert!(*r < Duration::from_millis(2_500), "recovery took {r:?}");
    }
}

/// Own-write recovery recognises only this claim's token. The holder's renewals vanish in a
/// partition (none applied), then someone else writes the mark at exactly the version after
/// the holder's, with a value the holder itself attempted: everything but the token says
/// "ours". The holder must count the lease `stolen` and claim again above that mark, not carry
/// on from a write that is not its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_write_in_place_of_a_lost_one_is_not_taken_for_ours() {
    let zk = Zk::standalone();
    let proxy = Proxy::start(zk.connect()).await;
    let via = format!("127.0.0.1:{}", proxy.port);
    let a = start(
        &via,
        &[
            "--pool-size",
            "1",
            "--cluster-id",
            "6",
            "--zk-session-timeout",
            "8s",
            "--lease-horizon",
            "4s",
            "--renew-interval",
            "200ms",
        ],
    )
    .await;
    a.wait_ready(Duration::from_secs(15)).await;
    let c = zk.client().await;
    let path = "/idcar/lable64/6/marks/0";
    proxy.blackhole(true);
    tokio::time::sleep(Duration::from_millis(600)).await;
    let (_, before) = c.get_data(path).await.unwrap();
    // The connection breaks: the renewals sent into the partition fail, unconfirmed.
    proxy.reset();
    let deadline = Instant::now() + Duration::from_secs(10);
    let attempted: u64 = loop {
        let logs = a.logs();
        if let Some(v) = logs
            .lines()
            .filter(|l| l.contains("could not renew the time mark"))
            .find_map(|l| l.split("attempted=").nth(1))
            .and_then(|v| v.split_whitespace().next())
        {
            break v.parse().unwrap();
        }
        assert!(Instant::now() < deadline, "no failed renewal: {logs}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let foreign = format!("{attempted} not-the-holders-token");
    c.set_data(path, foreign.as_bytes(), Some(before.version))
        .await
        .unwrap();
    proxy.blackhole(false);
    a.wait_metric(
        "idcar_lease_losses_total{reason=\"stolen\"}",
        Duration::from_secs(15),
        |v| v == 1.0,
    )
    .await;
    assert!(
        !a.logs().contains("an earlier mark write had gone through"),
        "{}",
        a.logs()
    );
    a.wait_ready(Duration::from_secs(15)).await;
    for id in a.take(100).await.unwrap() {
        let ts = idcar::layout::lable64::Fields::unpack(id)
            .unwrap()
            .timestamp_ms;
        assert!(
            ts > attempted,
            "{ts} not above the foreign mark {attempted}"
        );
    }
}

/// Several clients hammering at each.
async fn load(i: &Idcar, until: Instant) -> Vec<u64> {
    let (a, b, c) = tokio::join!(hammer(i, until), hammer(i, until), hammer(i, until));
    [a.0, b.0, c.0].concat()
}

/// A holder shut down under load while a successor waits for its slot: the release writes the
/// mark down to the highest tick issued, so the successor serves within a second, far sooner
/// than the horizon; no ID repeats across the two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_under_load_hands_over_to_a_waiting_successor() {
    let zk = Zk::standalone();
    let flags = [
        "--pool-size",
        "1",
        "--cluster-id",
        "7",
        "--lease-horizon",
        "10s",
        "--zk-session-timeout",
        "4s",
    ];
    let mut a = start(&zk.connect(), &flags).await;
    a.wait_ready(Duration::from_secs(15)).await;
    let b = start(&zk.connect(), &flags).await;
    b.wait_metric("idcar_pool_exhausted", Duration::from_secs(15), |v| {
        v == 1.0
    })
    .await;
    let until = Instant::now() + Duration::from_secs(4);
    let stop_a = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let t = Instant::now();
        a.signal(Signal::SIGTERM);
        b.wait_ready(Duration::from_secs(8)).await;
        t.elapsed()
    };
    let (from_a, from_b, handover) = tokio::join!(load(&a, until), load(&b, until), stop_a);
    eprintln!(
        "release under load: holder {} IDs, successor {} IDs, successor ready {handover:?} \
         after SIGTERM (horizon 10 s)",
        from_a.len(),
        from_b.len()
    );
    assert!(!from_a.is_empty() && !from_b.is_empty());
    assert!(handover < Duration::from_secs(3), "{handover:?}");
    let (st, logs) = a.exit_and_logs(Duration::from_secs(10)).await;
    assert!(st.success(), "{logs}");
    assert_unique(&[from_a, from_b].concat());
}
