//! The protocol's pure steps; the whole loop is checked against every store by
//! `crates/lease/tests/lease_conformance/`.

use super::*;
use idcar_core::generator::Issued;
use tokio::time::Instant;

fn claim(mark: u64) -> Claim<i32> {
    Claim {
        slot: 1,
        floor: 100,
        mark,
        window: mark,
        version: 3,
        token: 7,
    }
}

#[test]
fn recovery_takes_the_mark_the_store_holds() {
    // The lost write was for 9,000 (raised) or 2,000 (brought down to the window): the claim
    // carries on from what the store holds, at that write's version; its window is untouched.
    let c = Claim {
        window: 1_500,
        ..claim(5_000)
    };
    let after = recovered(&c, 4, 9_000);
    assert_eq!((after.mark, after.version, after.window), (9_000, 4, 1_500));
    let after = recovered(&c, 4, 2_000);
    assert_eq!((after.mark, after.window), (2_000, 1_500));
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
