//! Uniqueness at the edges: the process's own failure paths (a panic anywhere), the static
//! slot's lock, and what a static instance says about the generator it issues for. The
//! store-side edges (an abandoned release, a lowered mark, a replaced pool) are in the
//! conformance suite (`crates/lease/tests/lease_conformance/`) and the ZooKeeper and etcd suites.

mod common;

use common::*;
use idcar::layout::lable64::Fields;
use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

fn tick(id: u64) -> u64 {
    Fields::unpack(id).expect("valid lable64 ID").timestamp_ms
}

/// Issues IDs until `n` are taken: the highest tick among them.
async fn issue(idcar: &Idcar, n: u32) -> u64 {
    let mut highest = 0;
    for _ in 0..n / 100 {
        for id in idcar.take(100).await.unwrap() {
            highest = highest.max(tick(id));
        }
    }
    highest
}

/// A panic aborts the process at once (SIGABRT), logged: nothing is written after it, so the
/// mark in force stays (never written down, never to the floor) and covers every ID issued.
async fn a_panic_aborts_and_leaves_the_mark(plant: &str) {
    let key = "lable64/0/3";
    let mut idcar = Idcar::start(&["--generator-id", "3", "--plant-panic", plant]).await;
    idcar.wait_ready(Duration::from_secs(10)).await;
    let highest = issue(&idcar, 2_000).await;
    let before = idcar.stored_mark(key).expect("a mark is written");
    assert!(before >= highest);
    if plant.starts_with("request") {
        let mut h = idcar.http().await;
        assert_eq!(h.get("/id", false).await.unwrap().status, 200);
        assert!(h.get("/id", false).await.is_err(), "the panicking request");
    }
    let (st, logs) = idcar.exit_and_logs(Duration::from_secs(10)).await;
    assert_eq!(st.signal(), Some(libc_sigabrt()), "{st:?}: {logs}");
    assert!(logs.contains("panic: aborting at once"), "{logs}");
    assert!(!logs.contains("slot released"), "{logs}");
    let after = idcar.stored_mark(key).unwrap();
    assert!(
        after >= before && after >= highest,
        "the mark fell from {before} to {after} (highest issued {highest})"
    );
}

fn libc_sigabrt() -> i32 {
    nix::sys::signal::Signal::SIGABRT as i32
}

#[tokio::test]
async fn a_panic_in_a_request_handler_aborts_and_leaves_the_mark() {
    a_panic_aborts_and_leaves_the_mark("request:2").await;
}

#[tokio::test]
async fn a_panic_on_the_lease_thread_aborts_and_leaves_the_mark() {
    a_panic_aborts_and_leaves_the_mark("lease:2s").await;
}

/// The owner goes away without a release while the process lives on (what an unwinding panic
/// or an abandoned release would do; `abandon:..` drops the release handles): the lease
/// writes the mark it last wrote, never the floor, so the mark still covers every ID issued.
/// `bug`: the planted hole that writes the floor instead, which this test must see.
async fn an_abandoned_release(bug: &str) -> (u64, u64, String) {
    let key = "lable64/0/3";
    let mut idcar = Idcar::start(&[
        "--generator-id",
        "3",
        "--plant-panic",
        "abandon:3s",
        "--plant-bug",
        bug,
    ])
    .await;
    idcar.wait_ready(Duration::from_secs(10)).await;
    let highest = issue(&idcar, 2_000).await;
    let (st, logs) = idcar.exit_and_logs(Duration::from_secs(15)).await;
    assert_eq!(st.code(), Some(1), "{st:?}: {logs}");
    assert!(
        logs.contains("released without the highest tick issued"),
        "{logs}"
    );
    (highest, idcar.stored_mark(key).unwrap(), logs)
}

#[tokio::test]
async fn an_abandoned_release_leaves_the_mark_last_written() {
    let (highest, after, logs) = an_abandoned_release("none").await;
    assert!(
        after >= highest,
        "the mark fell to {after}, below the highest tick issued {highest}: {logs}"
    );
}

#[tokio::test]
async fn an_abandoned_release_that_writes_the_floor_is_seen_by_this_test() {
    let (highest, after, _) = an_abandoned_release("abandon-to-floor").await;
    assert!(after < highest, "the planted hole did not lower the mark");
}

/// The state file is locked on itself: deleting `<file>.lock` while idcar runs admits no
/// second idcar on the same state file.
#[tokio::test]
async fn a_deleted_lock_file_admits_no_second_idcar() {
    let mut a = Idcar::start(&["--generator-id", "5"]).await;
    a.wait_ready(Duration::from_secs(10)).await;
    let mut lock = a.state.as_os_str().to_owned();
    lock.push(".lock");
    std::fs::remove_file(&lock).unwrap();
    let other = tempfile::tempdir().unwrap();
    let log = other.path().join("b.log");
    let mut b = std::process::Command::new(BIN)
        .args(["serve", "--generator-id", "5", "--admin-addr", "none"])
        .arg("--socket")
        .arg(other.path().join("b.sock"))
        .arg("--state-file")
        .arg(&a.state)
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    // Bounded: a second idcar that is admitted keeps running (killed, then failed on).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let st = loop {
        if let Some(st) = b.try_wait().unwrap() {
            break Some(st);
        }
        if std::time::Instant::now() > deadline {
            let _ = b.kill();
            let _ = b.wait();
            break None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let logs = std::fs::read_to_string(&log).unwrap_or_default();
    let st = st.unwrap_or_else(|| panic!("a second idcar was admitted: {logs}"));
    assert_eq!(st.code(), Some(1), "{logs}");
    assert!(logs.contains("locked by another process"), "{logs}");
    assert!(!a.take(10).await.unwrap().is_empty());
    a.stop_ok().await;
}

/// A static instance says which generator and cluster it issues for, at start and on
/// `/readyz`, and how to keep it outside negotiated pools.
#[tokio::test]
async fn a_static_instance_says_what_it_issues_for() {
    let mut idcar = Idcar::start(&["--generator-id", "7", "--cluster-id", "15"]).await;
    idcar.wait_ready(Duration::from_secs(10)).await;
    let (status, body) = idcar.admin_get("/readyz").await;
    assert_eq!(status, 200);
    let mut lines = body.lines();
    assert_eq!(lines.next(), Some("ready"));
    let what = lines.next().unwrap_or_default();
    assert!(
        what.starts_with("static generator 7 of cluster 15 (lable64)") && what.contains("pool"),
        "{body}"
    );
    assert!(idcar.logs().contains("static generator 7 of cluster 15"));
    idcar.stop_ok().await;
}

/// A predecessor's mark further ahead than this instance's `--max-clock-wait` (its clock ran
/// ahead) is waited for, not fatal: not ready saying why, then serving above the mark.
fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

async fn a_far_ahead_mark_is_waited_for(store: &str, connect: &str) {
    let args = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            store,
            connect,
            "--pool-size",
            "1",
            "--lease-horizon",
            "1s",
            "--renew-interval",
            "300ms",
            "--max-clock-wait",
            "1s",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let expiry = if store == "--zk" {
            "--zk-session-timeout"
        } else {
            "--etcd-ttl"
        };
        v.extend([expiry.to_string(), "2s".to_string()]);
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let a_args = args(&["--clock-skew", "6s"]);
    let mut a = Idcar::start(&strs(&a_args)).await;
    a.wait_ready(Duration::from_secs(15)).await;
    let from_a = a.take(500).await.unwrap();
    let b_args = args(&[]);
    let mut b = Idcar::start(&strs(&b_args)).await;
    a.signal(nix::sys::signal::Signal::SIGKILL);
    let _ = a.wait_exit(Duration::from_secs(5)).await;
    // b claims once a's session or lease is gone, finds the mark ~8 s ahead of its clock.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = b.admin_get("/readyz").await;
        assert_ne!(status, 200, "ready before the mark passed: {body}");
        if body.contains("--max-clock-wait") {
            assert!(body.contains("ahead of this host's clock"), "{body}");
            break;
        }
        assert!(
            b.child.try_wait().unwrap().is_none(),
            "b exited: {}",
            b.logs()
        );
        assert!(std::time::Instant::now() < deadline, "{body}: {}", b.logs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    b.wait_ready(Duration::from_secs(15)).await;
    let newest = from_a.iter().map(|id| tick(*id)).max().unwrap();
    let from_b = b.take(500).await.unwrap();
    assert!(from_b.iter().all(|id| tick(*id) > newest));
    b.stop_ok().await;
}

#[tokio::test]
async fn zookeeper_a_far_ahead_mark_is_waited_for() {
    let zk = common::zk::Zk::standalone();
    a_far_ahead_mark_is_waited_for("--zk", &zk.connect()).await;
}

#[tokio::test]
async fn etcd_a_far_ahead_mark_is_waited_for() {
    let e = common::etcd::Etcd::single();
    a_far_ahead_mark_is_waited_for("--etcd", &e.endpoints()).await;
}
