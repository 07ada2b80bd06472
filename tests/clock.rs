//! A clock that stops: with libfaketime freezing the clocks idcar reads through libc, readiness
//! says which clock stalled (it does not claim "ready" while nothing can be issued), the metric
//! shows it, and a request that needs the next tick gets an error within `--request-timeout`
//! instead of hanging (waits are timed on the kernel's clock, read past libc).

mod common;

use common::*;
use std::time::{Duration, Instant};

const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// The current UTC time as libfaketime's absolute (frozen) format.
fn frozen_now() -> String {
    let out = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M:%S"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

async fn frozen(extra_env: &str) -> Idcar {
    assert!(
        std::path::Path::new(FAKETIME).exists(),
        "{FAKETIME} missing: run tests/ensure-deps.sh (Debian package faketime)"
    );
    let shell = format!(
        "export LD_PRELOAD={FAKETIME} FAKETIME='{}' FAKETIME_NO_CACHE=1 {extra_env}",
        frozen_now()
    );
    Idcar::start_under(&shell, &["--request-timeout", "1s"]).await
}

/// Waits (bounded) until /readyz says 503 with a body containing `why`.
async fn not_ready_because(i: &Idcar, why: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, body) = i.admin_get("/readyz").await;
        if status == 503 && body.contains(why) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "readiness still {status} {body:?}: {}",
            i.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// More IDs than one tick holds: needs the clock to move. Must end within the request timeout
/// (plus slack for a loaded machine) with an error, not hang.
async fn needs_the_next_tick_fails_fast(i: &Idcar) {
    let t = Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(10), i.take(1_000)).await;
    let r = r.unwrap_or_else(|_| panic!("a request hung with the clock frozen: {}", i.logs()));
    assert!(r.is_err(), "1,000 IDs from a frozen tick?");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_wall_and_monotonic_clocks_are_not_ready_and_do_not_hang() {
    let mut i = frozen("").await;
    not_ready_because(
        &i,
        "neither the wall clock nor the monotonic clock is advancing",
    )
    .await;
    assert_eq!(
        i.metric("idcar_clock_stalled{clock=\"monotonic\"}").await,
        Some(1.0)
    );
    needs_the_next_tick_fails_fast(&i).await;
    assert!(i.logs().contains("clock fault"), "{}", i.logs());
    i.signal(nix::sys::signal::Signal::SIGKILL);
    i.wait_exit(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_wall_clock_is_not_ready_and_does_not_hang() {
    let mut i = frozen("FAKETIME_DONT_FAKE_MONOTONIC=1").await;
    not_ready_because(&i, "the wall clock is not advancing").await;
    assert_eq!(
        i.metric("idcar_clock_stalled{clock=\"wall\"}").await,
        Some(1.0)
    );
    assert_eq!(
        i.metric("idcar_clock_stalled{clock=\"monotonic\"}").await,
        Some(0.0)
    );
    needs_the_next_tick_fails_fast(&i).await;
    // With the monotonic clock real, shutdown works as ever.
    i.stop_ok().await;
}

/// The watchdog does not cry wolf: a healthy instance reports no stalled clock.
#[tokio::test]
async fn healthy_clocks_are_not_reported() {
    let mut i = Idcar::start(&[]).await;
    i.wait_ready(Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert_eq!(i.admin_get("/readyz").await.0, 200);
    for c in ["wall", "monotonic"] {
        let q = format!("idcar_clock_stalled{{clock=\"{c}\"}}");
        assert_eq!(i.metric(&q).await, Some(0.0), "{c}");
    }
    i.stop_ok().await;
}
