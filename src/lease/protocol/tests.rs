//! The protocol's pure steps; the whole loop is checked against every store by
//! `tests/lease_conformance.rs`.

use super::*;
use crate::lease::Issued;
use tokio::time::Instant;

fn claim(mark: u64) -> Claim<i32> {
    Claim {
        slot: 1,
        floor: 100,
        mark,
        version: 3,
        token: 7,
    }
}

#[test]
fn recovery_never_lowers_the_mark() {
    // The lost write was for 9,000 (before the clock stepped back); now we want 4,000.
    let (after, want) = recovered(&claim(1_000), 4, 9_000, 4_000);
    assert_eq!((after.mark, after.version, want), (9_000, 4, 9_000));
    let (_, want) = recovered(&claim(1_000), 4, 2_000, 4_000);
    assert_eq!(want, 4_000);
}

#[test]
fn a_renewal_never_lowers_the_mark() {
    let c = claim(5_000);
    assert_eq!(next_mark(&c, 1_000, 3_000), 5_000, "clock stepped back");
    assert_eq!(next_mark(&c, 4_000, 3_000), 7_000);
    assert_eq!(next_mark(&c, u64::MAX, 3_000), u64::MAX);
}

#[test]
fn release_writes_down_to_the_highest_issued_never_below_the_floor() {
    let at = |slot, tick| Some(Issued { slot, tick });
    assert_eq!(mark_down(1, 100, at(1, 150)), 150);
    assert_eq!(mark_down(1, 100, at(1, 50)), 100);
    assert_eq!(mark_down(1, 100, at(2, 150)), 100, "another slot's tick");
    assert_eq!(mark_down(1, 100, None), 100);
}

/// A write still pending when the mark runs out: the lapse is declared at that moment,
/// not when the write finally fails; a write that answers in time declares nothing.
#[tokio::test(start_paused = true)]
async fn a_lapse_is_declared_when_the_mark_runs_out_not_when_the_write_ends() {
    let start = Instant::now();
    let mut lapsed_at = None;
    let slow = async {
        tokio::time::sleep(Duration::from_secs(5)).await;
        7
    };
    let r = or_lapse(slow, Some(Duration::from_secs(2)), || {
        lapsed_at = Some(start.elapsed())
    })
    .await;
    assert_eq!(r, 7);
    assert_eq!(lapsed_at, Some(Duration::from_secs(2)));
    assert_eq!(start.elapsed(), Duration::from_secs(5));

    let mut lapsed = false;
    let quick = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        8
    };
    let r = or_lapse(quick, Some(Duration::from_secs(2)), || lapsed = true).await;
    assert_eq!(r, 8);
    assert!(!lapsed);
}
