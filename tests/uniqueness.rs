//! Uniqueness at the edges: the process's own failure paths (a panic anywhere), the static
//! slot's lock, and what a static instance says about the generator it issues for. The
//! store-side edges (an abandoned release, a lowered mark, a replaced pool) are in the
//! conformance suite (`tests/lease_conformance.rs`) and the ZooKeeper and etcd suites.

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
    let out = std::process::Command::new(BIN)
        .args(["serve", "--generator-id", "5", "--admin-addr", "none"])
        .arg("--socket")
        .arg(other.path().join("b.sock"))
        .arg("--state-file")
        .arg(&a.state)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let logs = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{logs}");
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
