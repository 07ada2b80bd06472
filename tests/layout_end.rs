//! Layouts run out of time: each layout's end date (from its parameters) is exposed as
//! `idcar_layout_seconds_remaining`, warned about at start within a year, refused at start
//! within the lease horizon, shown by `decode`; and a process that reaches it stops issuing
//! cleanly. The date is moved with libfaketime (wall clock only; the monotonic clock runs true).

mod common;

use common::*;
use idcar::layout::{by_name, end_date, LayoutParams};
use std::time::{Duration, Instant};

const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
/// si53 with this base clock runs out at 2038-02-11T14:33:47.776Z (40 clock bits).
const BASE: &str = "1050000000000";
const SI53_END: &str = "2038-02-11T14:33:47.776Z";

/// libfaketime's "start at" form for a Unix time in seconds (the clock runs on from there).
fn at(unix_s: u64) -> String {
    let out = std::process::Command::new("date")
        .args(["-u", "-d", &format!("@{unix_s}"), "+%Y-%m-%d %H:%M:%S"])
        .output()
        .unwrap();
    format!("@{}", String::from_utf8(out.stdout).unwrap().trim())
}

/// The shell prefix that moves idcar's wall clock to `when` (libfaketime's format).
fn moved_to(when: &str) -> String {
    assert!(
        std::path::Path::new(FAKETIME).exists(),
        "{FAKETIME} missing: run tests/ensure-deps.sh (Debian package faketime)"
    );
    format!(
        "export TZ=UTC LD_PRELOAD={FAKETIME} FAKETIME='{when}' FAKETIME_DONT_FAKE_MONOTONIC=1 \
         FAKETIME_NO_CACHE=1"
    )
}

fn end_unix_s(layout: &str, params: LayoutParams) -> (u64, String) {
    let scheme = by_name(layout, params).unwrap().scheme();
    (scheme.end_unix_ns() / 1_000_000_000, end_date(&scheme))
}

fn si53() -> LayoutParams {
    LayoutParams {
        base_clock_ms: BASE.parse().unwrap(),
        ..LayoutParams::default()
    }
}

/// Every layout, 200 days before its end (default parameters): a warning naming the date, the
/// gauge below the alert's 180-day threshold plus 20 days, and IDs still issued. Today's
/// lable64 neither warns nor is near.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_layout_warns_within_a_year_of_its_end() {
    for e in idcar::layout::LAYOUTS {
        let (end_s, end) = end_unix_s(e.name, LayoutParams::default());
        let shell = moved_to(&at(end_s - 200 * 86_400 + 2));
        let mut i = Idcar::start_under(&shell, &["--layout", e.name]).await;
        i.wait_ready(Duration::from_secs(10)).await;
        let ids = i.binary().await.ids(3).await;
        assert_eq!(ids.map(|v| v.len()).ok(), Some(3), "{}", e.name);
        let left = i.metric("idcar_layout_seconds_remaining").await.unwrap();
        assert!(
            (199.0 * 86_400.0..200.0 * 86_400.0).contains(&left),
            "{}: {left}",
            e.name
        );
        let logs = i.logs();
        assert!(
            logs.contains(&format!("runs out of time at {end}, in 199 days")),
            "{}: {logs}",
            e.name
        );
        i.stop_ok().await;
    }
    let mut today = Idcar::start(&[]).await;
    today.wait_ready(Duration::from_secs(10)).await;
    let left = today
        .metric("idcar_layout_seconds_remaining")
        .await
        .unwrap();
    assert!(left > 80.0 * 365.0 * 86_400.0, "{left}");
    assert!(
        !today.logs().contains("runs out of time"),
        "{}",
        today.logs()
    );
    today.stop_ok().await;
}

/// si53 whose base clock leaves less than the lease horizon: refused at start (exit 2) with
/// the date and the flag to change, before any time mark is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn less_than_the_horizon_left_refuses_to_start() {
    let (end_s, end) = end_unix_s("si53", si53());
    assert_eq!(end, SI53_END);
    let shell = moved_to(&at(end_s - 1));
    let mut i =
        Idcar::start_or_exit_under(&shell, &["--layout", "si53", "--base-clock", BASE]).await;
    let (status, logs) = i.exit_and_logs(Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(2), "{logs}");
    assert!(
        logs.contains(&format!("layout si53 runs out of time at {end}")),
        "{logs}"
    );
    assert!(logs.contains("less than the lease horizon"), "{logs}");
    assert!(logs.contains("--base-clock"), "{logs}");
    assert!(!i.state.exists(), "no time mark written");
}

/// A process running when its layout runs out stops issuing with a clear refusal and
/// readiness says why; it neither panics nor exits, and the IDs it issued are from before
/// the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reaching_the_end_stops_issuing_cleanly() {
    let (end_s, _) = end_unix_s("si53", si53());
    // Room for a slow start: the end comes 20 s after it.
    let shell = moved_to(&at(end_s - 20));
    let args = [
        "--layout",
        "si53",
        "--base-clock",
        BASE,
        "--lease-horizon",
        "2s",
    ];
    let mut i = Idcar::start_under(&shell, &args).await;
    i.wait_ready(Duration::from_secs(10)).await;
    let before = i.take(10).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(40);
    let refused = loop {
        match i.take(1).await {
            Ok(ids) => {
                let (code, out, _) = run(&[
                    "decode",
                    "--layout",
                    "si53",
                    "--base-clock",
                    BASE,
                    &ids[0].to_string(),
                ]);
                assert_eq!(code, 0);
                assert!(out.contains(&format!("layout_ends: {SI53_END}")), "{out}");
            }
            Err(e) => break e.to_string(),
        }
        assert!(Instant::now() < deadline, "still issuing: {}", i.logs());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(refused.contains("exhausted"), "{refused}");
    let (status, why) = i.admin_get("/readyz").await;
    assert_eq!(status, 503);
    assert!(why.contains("time field is exhausted"), "{why}");
    assert!(i.metric("idcar_layout_seconds_remaining").await.unwrap() <= 0.0);
    let overflow = i
        .metric("idcar_refusals_total{reason=\"time_overflow\"}")
        .await;
    assert!(overflow.unwrap_or(0.0) >= 1.0, "{overflow:?}");
    assert!(i.child.try_wait().unwrap().is_none(), "still running");
    assert_unique(&before);
    i.stop_ok().await;
}

/// `decode` gives the end date of the layout with the parameters given.
#[test]
fn decode_shows_when_the_layout_ends() {
    let (code, out, err) = run(&["decode", "--layout", "lable64", "0"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("layout_ends: 2109-05-15T07:35:11.104Z"),
        "{out}"
    );
    let (code, out, err) = run(&["decode", "--layout", "si53", "--base-clock", BASE, "12345"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("layout_ends: {SI53_END}")), "{out}");
}
