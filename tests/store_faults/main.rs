//! What every coordinating store must survive, written once and run against each (real
//! ZooKeeper servers and real etcd members, started per test on loopback ports, through
//! `common::store::Store`): a release that hands over at once, kill -9 of a holder, a holder
//! frozen past its expiry, the leader of three killed under load, a silent partition, an exhausted pool, and instances
//! whose parameters differ. What only one store has stays in its own file (`zk*.rs`, `etcd*.rs`).

#[path = "../common/mod.rs"]
mod common;
mod cut_off;
mod full;
mod handover;
mod outage;

use common::etcd::Etcd;
use common::proxy::Proxy;
use common::release::Older;
use common::store::Store;
use common::zk::Zk;
use common::*;
use idcar::layout::lable64::Fields;
use nix::sys::signal::Signal;
use std::time::{Duration, Instant};

use cut_off::*;
use full::*;
use handover::*;
use outage::*;

fn ts(id: u64) -> u64 {
    Fields::unpack(id).expect("valid lable64 ID").timestamp_ms
}

/// Milliseconds since the Unix epoch of `2026-11-27T10:01:02.345Z`.
fn rfc3339_ms(t: &str) -> u64 {
    let n = |a: usize, b: usize| t[a..b].parse::<i64>().unwrap();
    let (y, m, d) = (n(0, 4), n(5, 7), n(8, 10));
    // Days from 1970-01-01 (Howard Hinnant's days_from_civil).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    let secs = days * 86_400 + n(11, 13) * 3_600 + n(14, 16) * 60 + n(17, 19);
    (secs * 1_000 + n(20, 23)) as u64
}

#[test]
fn rfc3339_ms_reads_what_idcar_pool_prints() {
    assert_eq!(rfc3339_ms("2026-11-27T10:01:02.345Z"), 1_795_773_662_345);
    assert_eq!(rfc3339_ms("1970-01-01T00:00:00.000Z"), 0);
}

fn generator(id: u64) -> u8 {
    Fields::unpack(id).expect("valid lable64 ID").generator
}

/// Every scenario, for one store: each runs against the newest supported release and the
/// older one at once (docs/compatibility.md).
macro_rules! store_faults {
    ($store:ident, $newest:ty, $older:ty) => {
        mod $store {
            use super::*;
            idcar_testkit::newest_and_older_tests!(
                $newest, $older;
                a_release_hands_over_at_once,
                a_start_beside_a_holder_does_not_queue,
                a_killed_holder_is_taken_over_after_expiry,
                killing_the_leader_of_three_loses_nothing,
                an_exhausted_pool_is_reported_and_the_waiter_takes_the_first_free_slot,
                a_partitioned_holder_stops_and_its_successor_takes_over,
                a_frozen_holder_never_duplicates_its_successor,
                an_idle_holder_writes_seldom_and_a_waiter_brings_its_mark_down,
                an_idle_holder_takes_its_own_slot_back_after_a_store_outage,
                instances_of_several_slots_take_their_own_back_after_a_store_outage,
                a_crash_in_a_full_pool_is_taken_over_within_the_bound,
                mismatched_pool_parameters_are_refused
            );
        }
    };
}

store_faults!(zookeeper, Zk, Zk<Older>);
store_faults!(etcd, Etcd, Etcd<Older>);

/// The scenarios for Kubernetes (one release tested; one API server, so no leader of three:
/// its etcd's faults are in `tests/kube_faults.rs`).
mod kubernetes {
    use super::*;
    use common::kube::KubeStore;
    macro_rules! one {
        ($($name:ident),*) => {$(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                super::$name::<KubeStore>().await
            }
        )*};
    }
    one!(
        a_release_hands_over_at_once,
        a_start_beside_a_holder_does_not_queue,
        a_killed_holder_is_taken_over_after_expiry,
        an_exhausted_pool_is_reported_and_the_waiter_takes_the_first_free_slot,
        a_partitioned_holder_stops_and_its_successor_takes_over,
        a_frozen_holder_never_duplicates_its_successor,
        an_idle_holder_writes_seldom_and_a_waiter_brings_its_mark_down,
        an_idle_holder_takes_its_own_slot_back_after_a_store_outage,
        instances_of_several_slots_take_their_own_back_after_a_store_outage,
        a_crash_in_a_full_pool_is_taken_over_within_the_bound,
        mismatched_pool_parameters_are_refused
    );
}
