//! The lease protocol's conformance suite, run against every store: the state file, a real
//! ZooKeeper and a real etcd (each started per test on loopback ports), and a real Kubernetes
//! API server (one shared by the suite, a namespace per test). Each check drives the one hold loop
//! (`idcar_lease::protocol::hold`) over the store; faults the store cannot be asked for
//! (a lost reply, a failing write) come from thin wrappers around the real store, never a
//! mock of it. A new store is one `Fixture` and one `conformance!` line at the end.

#[path = "../common/mod.rs"]
mod common;
mod etcd_fixture;
mod fixture;
mod kube_fixture;
mod running;
mod zk_fixture;

use common::etcd_client;
use idcar_core::clock::{Clock, ManualClock, SystemClock};
use idcar_core::layout::{by_name, LayoutParams};
use idcar_lease::etcd::{Etcd as EtcdClient, EtcdMarks};
use idcar_lease::local::FileMarks;
use idcar_lease::metrics::LeaseMetrics;
use idcar_lease::pool::Paths;
use idcar_lease::protocol::{
    self, Claim, MarkStore, Outcome, Protocol, Recheck, StoreError, Stored, Timing,
};
use idcar_lease::stop::Stop;
use idcar_lease::zk::{PoolFence, ZkMarks};
use idcar_lease::{Issued, LeaseState, Window};
use idcar_testkit::etcd::Etcd;
use idcar_testkit::release::{Newest, Older, Release};
use idcar_testkit::zk::Zk;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{oneshot, watch};
use zookeeper_client as zk;

use etcd_fixture::*;
use fixture::*;
use kube_fixture::*;
use running::*;
use zk_fixture::*;

const SLOT: u32 = 3;
const HORIZON: Duration = Duration::from_millis(400);

/// A first claim of a never-used slot: floor 0, and the window is published only once its
/// mark is in the store.
async fn first_claim<F: Fixture>() {
    let f = F::new().await;
    let mut r = run(f.holder().await, Arc::new(SystemClock), PASS).await;
    let w = r.window(|_| true).await;
    assert_eq!(w.floor, 0);
    let stored = f.stored().await;
    assert!(
        stored >= w.mark,
        "published {} beyond the stored {stored}",
        w.mark
    );
    assert!(w.mark >= now_tick() + 100, "a horizon ahead: {w:?}");
    assert_eq!(r.release(None).await, Outcome::Released);
}

/// A holder that vanished without releasing: its successor reads its mark as the floor and
/// publishes only once the clock is past it.
async fn successor_waits_past_the_mark<F: Fixture>() {
    let f = F::new().await;
    let mut a = run(f.holder().await, Arc::new(SystemClock), PASS).await;
    let wa = a.window(|_| true).await;
    a.task.abort(); // a crash: no write-down
    let _ = a.task.await;
    let before = f.stored().await;
    assert!(before >= wa.mark);
    let mut b = run(f.holder().await, Arc::new(SystemClock), PASS).await;
    let wb = b.window(|_| true).await;
    let at = now_tick();
    assert_eq!(wb.floor, before, "the successor's floor is the stored mark");
    assert!(
        at > before,
        "published at tick {at}, not past the mark {before}"
    );
    let waited = b.metrics.mark_wait_seconds.get_sample_sum();
    assert!(waited > 0.05, "waited {waited}s");
    assert_eq!(b.release(None).await, Outcome::Released);
}

/// A write applied whose reply was lost is recognised as ours (our token) and the lease
/// carries on; a foreign write of the very value we tried, in place of our lost one, is not
/// taken for ours: the lease is stolen.
async fn lost_reply_recovered_only_with_our_token<F: Fixture>() {
    let f = F::new().await;
    let mut r = run(f.holder().await, Arc::new(SystemClock), PASS).await;
    let w1 = r.window(|_| true).await;
    r.mode.store(LOSE_REPLY, Ordering::SeqCst);
    let w2 = r.window(|w| w.mark > w1.mark + 150).await;
    assert_eq!(w2.generation, w1.generation, "the same lease carried on");
    assert_eq!(r.losses("stolen"), 0);
    assert!(f.stored().await >= w2.mark);

    r.mode.store(DROP, Ordering::SeqCst);
    // The dropped write turns the store to FAIL: its value is then the last one recorded.
    r.wait_mode(FAIL, "a write was dropped").await;
    let tried = *r.written.lock().unwrap().last().unwrap();
    f.foreign_write(tried).await;
    r.mode.store(PASS, Ordering::SeqCst);
    assert!(matches!(
        r.outcome().await,
        Outcome::Stolen { slot: SLOT, .. }
    ));
}

/// A write applied whose reply was lost, and the store then unreadable for a while when the
/// holder looks for it (its writes conflict, its rechecks see the mark moved): a mark that
/// may be ours is not taken for a theft — the holder looks again and carries on.
async fn a_lost_reply_not_yet_readable_is_not_a_theft<F: Fixture>() {
    let f = F::new().await;
    let mut r = run(f.holder().await, Arc::new(SystemClock), PASS).await;
    let w1 = r.window(|_| true).await;
    r.mode.store(LOSE_REPLY_THEN_BLIND, Ordering::SeqCst);
    r.wait_mode(BLIND, "a reply was lost").await;
    // Several passes and watch wakes while our write cannot be read back.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(r.losses("stolen"), 0, "our own write taken for a theft");
    assert!(!r.task.is_finished(), "the hold ended");
    r.mode.store(PASS, Ordering::SeqCst);
    let w2 = r.window(|w| w.mark > w1.mark + 150).await;
    assert_eq!(r.losses("stolen"), 0);
    assert!(f.stored().await >= w2.mark);
    assert_eq!(r.release(None).await, Outcome::Released);
}

/// The clock steps back: renewals keep writing the mark already reached, never lower.
async fn renewal_never_lowers_the_mark<F: Fixture>() {
    let f = F::new().await;
    let clock = Arc::new(ManualClock::new(SystemClock.now_unix_ns()));
    let mut r = run(f.holder().await, clock.clone(), PASS).await;
    let w = r.window(|_| true).await;
    clock.set(clock.now_unix_ns() - 10_000_000_000);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let written = r.written.lock().unwrap().clone();
    assert!(written.len() >= 3, "{written:?}");
    assert!(written.windows(2).all(|p| p[0] <= p[1]), "{written:?}");
    assert!(f.stored().await >= w.mark);
    assert_eq!(r.window(|_| true).await.mark, w.mark);
    assert_eq!(r.release(None).await, Outcome::Released);
}

/// The store stops taking writes: the published mark stays in force until it runs out, the
/// lease then says it is lost (counted once), and no later window reaches past it.
async fn a_lapse_stops_issuing_at_the_mark<F: Fixture>() {
    let f = F::new().await;
    let mut r = run(f.holder().await, Arc::new(SystemClock), PASS).await;
    r.window(|_| true).await;
    r.mode.store(FAIL, Ordering::SeqCst);
    // A write already under way when the store went down may still land: let it.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let last = r.rx.borrow().window().unwrap().mark;
    let lost = tokio::time::timeout(
        Duration::from_secs(5),
        r.rx.wait_for(|s| matches!(s, LeaseState::Lost { .. })),
    )
    .await
    .expect("lost in time")
    .unwrap()
    .clone();
    let at = now_tick();
    assert!(
        at > last,
        "lost at tick {at}, before the mark {last} ran out"
    );
    assert!(at < last + 150, "said late: tick {at}, mark {last}");
    assert!(
        format!("{lost:?}").contains("cannot be written"),
        "{lost:?}"
    );
    assert_eq!(r.losses("unreachable"), 1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(r.losses("unreachable"), 1, "counted once");
    assert!(r.rx.borrow().window().is_none());
    // Writes get through again: the same lease is back, a horizon past the clock.
    r.mode.store(PASS, Ordering::SeqCst);
    let w = r.window(|w| w.mark > last).await;
    assert!(w.mark > now_tick());
    assert_eq!(r.release(None).await, Outcome::Released);
}

/// Release writes the mark down to the highest tick issued, never below the floor.
async fn release_writes_down<F: Fixture>() {
    let f = F::new().await;
    let mut r = run(f.holder().await, Arc::new(SystemClock), PASS).await;
    let w = r.window(|_| true).await;
    let issued = w.mark - 300;
    let highest = Some(Issued {
        slot: SLOT,
        tick: issued,
    });
    assert_eq!(r.release(highest).await, Outcome::Released);
    assert_eq!(f.stored().await, issued);
    // And the slot is free for the next holder at once.
    let mut b = run(f.holder().await, Arc::new(SystemClock), PASS).await;
    assert_eq!(b.window(|_| true).await.floor, issued);
    assert_eq!(b.release(None).await, Outcome::Released);
}

/// The owner goes away without saying what it issued (its release handle dropped, as by an
/// unwinding panic or a release abandoned at its timeout): no mark is written — the one in
/// force stays, never the floor — and the slot is let go for a successor, who waits past it.
async fn an_abandoned_release_leaves_the_mark<F: Fixture>() {
    let f = F::new().await;
    let mut r = run(f.holder().await, Arc::new(SystemClock), PASS).await;
    let w = r.window(|_| true).await;
    let written = *r.written.lock().unwrap().last().unwrap();
    drop(r.release);
    assert_eq!(ended(r.task).await, Outcome::Abandoned);
    let stored = f.stored().await;
    assert!(
        stored >= w.mark && stored >= written,
        "the mark fell to {stored}, below the window's {} (floor {})",
        w.mark,
        w.floor
    );
    let mut b = run(f.holder().await, Arc::new(SystemClock), PASS).await;
    let wb = b.window(|_| true).await;
    assert_eq!(
        wb.floor, stored,
        "the successor starts above the mark in force"
    );
    assert_eq!(b.release(None).await, Outcome::Released);
}

/// Someone else writes the mark: the next renewal fails its compare-and-set, the holder
/// stops at once and counts the loss.
async fn a_foreign_write_is_stolen<F: Fixture>() {
    let f = F::new().await;
    let mut r = run(f.holder().await, Arc::new(SystemClock), PASS).await;
    let w = r.window(|_| true).await;
    f.foreign_write(w.mark + 5_000).await;
    let mut rx = r.rx.clone();
    assert_eq!(r.losses("stolen"), 0);
    let metrics = r.metrics.clone();
    // The outcome names the highest mark this holder wrote: a new claim starts above it.
    let out = r.outcome().await;
    assert!(
        matches!(out, Outcome::Stolen { slot: SLOT, mark } if mark >= w.mark),
        "{out:?}"
    );
    assert!(matches!(*rx.borrow_and_update(), LeaseState::Lost { .. }));
    assert_eq!(metrics.losses.with_label_values(&["stolen"]).get(), 1);
    assert_eq!(f.stored().await, w.mark + 5_000, "the foreign mark stays");
}

/// Someone else lowers the mark (a script, a restore) while the slot is still the holder's:
/// the holder writes it back up before anything else, goes on holding (no loss, the same
/// lease) and says so (`idcar_lease_marks_restored_total`), so no successor could read the
/// lowered mark as its floor.
async fn a_lowered_mark_is_written_back<F: Fixture>() {
    let f = F::new().await;
    let mut r = run(f.holder().await, Arc::new(SystemClock), PASS).await;
    let w = r.window(|_| true).await;
    f.foreign_write(w.mark.saturating_sub(10_000)).await;
    written_back(&f, &mut r, w).await;
}

/// Someone else deletes the mark while the slot is still the holder's: written back as a
/// lowered one is.
async fn a_deleted_mark_is_written_back<F: Fixture>() {
    let f = F::new().await;
    let mut r = run(f.holder().await, Arc::new(SystemClock), PASS).await;
    let w = r.window(|_| true).await;
    f.delete_mark().await;
    written_back(&f, &mut r, w).await;
}

/// The mark is deleted and the holder's write that recreates it is applied but its reply is
/// lost: the next write finds the mark there, recognises its own write and carries on.
async fn a_deleted_mark_recreated_with_a_lost_reply_carries_on<F: Fixture>() {
    let f = F::new().await;
    let mut r = run(f.holder().await, Arc::new(SystemClock), PASS).await;
    let w = r.window(|_| true).await;
    f.delete_mark().await;
    r.mode.store(LOSE_REPLY, Ordering::SeqCst);
    written_back(&f, &mut r, w).await;
}

async fn written_back<F: Fixture>(f: &F, r: &mut Running, w: Window) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while r.metrics.marks_restored.get() == 0 || f.stored().await < w.mark {
        assert!(
            Instant::now() < deadline,
            "not written back: {}",
            f.stored().await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let later = r.window(|later| later.mark > w.mark).await;
    assert_eq!(later.generation, w.generation, "the same lease went on");
    assert_eq!(later.floor, w.floor);
    assert_eq!(r.losses("stolen"), 0);
    assert!(f.stored().await >= later.mark);
}

/// A mark lowered just before the release (the holder has not renewed since): the release's
/// compare fails, and the mark is written down over the lowered one, to the highest tick
/// issued — never left lowered for the next holder.
async fn a_mark_lowered_before_release_is_written_down_over<F: Fixture>() {
    let f = F::new().await;
    let mut r = run(f.holder().await, Arc::new(SystemClock), PASS).await;
    let w = r.window(|_| true).await;
    let issued = w.mark - 300;
    f.foreign_write(w.mark.saturating_sub(10_000)).await;
    let highest = Some(Issued {
        slot: SLOT,
        tick: issued,
    });
    assert_eq!(r.release(highest).await, Outcome::Released);
    assert_eq!(f.stored().await, issued);
}

/// The pool's recorded parameters are deleted and recorded anew under a holder: its next
/// write fails on the pool's identity, it stops issuing at once and says the pool was
/// replaced.
async fn a_replaced_pool_stops_the_holder<F: Fixture>() {
    let f = F::new().await;
    let mut r = run(f.holder().await, Arc::new(SystemClock), PASS).await;
    r.window(|_| true).await;
    f.replace_pool().await;
    let mut rx = r.rx.clone();
    let metrics = r.metrics.clone();
    let out = r.outcome().await;
    assert!(matches!(out, Outcome::PoolReplaced { .. }), "{out:?}");
    let st = rx.borrow_and_update().clone();
    assert!(st.window().is_none());
    assert!(
        st.reason()
            .is_some_and(|r| r.contains("the pool was replaced")),
        "{st:?}"
    );
    assert_eq!(metrics.losses.with_label_values(&["replaced"]).get(), 1);
    assert_eq!(metrics.losses.with_label_values(&["stolen"]).get(), 0);
}

/// The mark is lowered (`delete`: deleted) right after its holder vanished, before anyone
/// could write it back: the successor's floor still covers everything the holder may have
/// issued — it comes from the mark's witness, which the tampering did not touch.
async fn successor_floor_after_tampering<F: Fixture>(delete: bool) {
    let f = F::new().await;
    let mut a = run(f.holder().await, Arc::new(SystemClock), PASS).await;
    let wa = a.window(|_| true).await;
    a.task.abort(); // a crash: no write-down, no write-back
    let _ = a.task.await;
    let before = f.stored().await;
    assert!(before >= wa.mark);
    if delete {
        f.delete_mark().await;
    } else {
        f.foreign_write(before.saturating_sub(10_000)).await;
    }
    assert!(f.stored().await < before, "the mark was not lowered");
    let mut b = run(f.holder().await, Arc::new(SystemClock), PASS).await;
    let wb = b.window(|_| true).await;
    assert!(
        wb.floor >= before,
        "the successor's floor {} is below the vanished holder's mark {before}",
        wb.floor
    );
    assert!(now_tick() > before);
    assert_eq!(b.release(None).await, Outcome::Released);
}

/// Someone deletes the slot's witness under its holder (in ZooKeeper the whole `witness/`
/// directory): the holder's next write finds it missing, recreates it and writes it again —
/// the same lease goes on, and the witness covers the mark once more.
async fn a_deleted_witness_is_written_back<F: Fixture>() {
    let f = F::new().await;
    let mut r = run(f.holder().await, Arc::new(SystemClock), PASS).await;
    let w = r.window(|_| true).await;
    assert!(f.witness().await >= w.mark);
    f.delete_witness().await;
    assert_eq!(f.witness().await, 0);
    let later = r.window(|l| l.mark > w.mark + 300).await;
    assert_eq!(later.generation, w.generation, "the same lease went on");
    assert_eq!(r.losses("stolen"), 0);
    assert!(
        f.witness().await >= later.mark,
        "witness {} below the mark {}",
        f.witness().await,
        later.mark
    );
    assert_eq!(r.release(None).await, Outcome::Released);
}

async fn a_mark_lowered_with_its_holder_gone_still_floors_the_successor<F: Fixture>() {
    successor_floor_after_tampering::<F>(false).await;
}

async fn a_mark_deleted_with_its_holder_gone_still_floors_the_successor<F: Fixture>() {
    successor_floor_after_tampering::<F>(true).await;
}

/// A store that fails every write: no window is ever published.
async fn a_store_error_never_publishes<F: Fixture>() {
    let f = F::new().await;
    let mut r = run(f.holder().await, Arc::new(SystemClock), FAIL).await;
    let published = tokio::time::timeout(
        Duration::from_millis(800),
        r.rx.wait_for(|s| s.window().is_some()),
    )
    .await
    .is_ok();
    assert!(!published, "a window was published: {:?}", *r.rx.borrow());
    assert!(r.written.lock().unwrap().is_empty());
    assert!(!matches!(r.release(None).await, Outcome::Stolen { .. }));
}

/// One test per check of the suite, for one store's fixture; given two, the newest release's
/// and the older one's, each test runs its check against both at once.
macro_rules! checks {
    ($fixture:ty; $($name:ident),*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            super::$name::<$fixture>().await
        }
    )*};
    ($newest:ty, $older:ty; $($name:ident),*) => {
        idcar_testkit::newest_and_older_tests!($newest, $older; $($name),*);
    };
}

/// The whole suite for one store (the fixtures of its supported releases).
macro_rules! conformance {
    ($store:ident, $($fixture:ty),+) => {
        mod $store {
            use super::*;
            checks!(
                $($fixture),+;
                first_claim,
                successor_waits_past_the_mark,
                lost_reply_recovered_only_with_our_token,
                a_lost_reply_not_yet_readable_is_not_a_theft,
                renewal_never_lowers_the_mark,
                a_lapse_stops_issuing_at_the_mark,
                release_writes_down,
                an_abandoned_release_leaves_the_mark,
                a_lowered_mark_is_written_back,
                a_deleted_mark_is_written_back,
                a_deleted_mark_recreated_with_a_lost_reply_carries_on,
                a_mark_lowered_before_release_is_written_down_over,
                a_foreign_write_is_stolen,
                a_store_error_never_publishes
            );
        }
    };
}

conformance!(state_file, FileFixture);
// Each check against the newest and the older supported release (docs/compatibility.md).
conformance!(zookeeper, ZkFixture, ZkFixture<Older>);
conformance!(etcd, EtcdFixture, EtcdFixture<Older>);
conformance!(kubernetes, KubeFixture);

/// What only stores with a pool (an identity) must also pass, for one store.
macro_rules! pools {
    ($store:ident, $($fixture:ty),+) => {
        mod $store {
            use super::*;
            checks!(
                $($fixture),+;
                a_replaced_pool_stops_the_holder,
                a_mark_lowered_with_its_holder_gone_still_floors_the_successor,
                a_mark_deleted_with_its_holder_gone_still_floors_the_successor,
                a_deleted_witness_is_written_back
            );
        }
    };
}

mod pools {
    use super::*;
    pools!(zookeeper, ZkFixture, ZkFixture<Older>);
    pools!(etcd, EtcdFixture, EtcdFixture<Older>);
    pools!(kubernetes, KubeFixture);
}
