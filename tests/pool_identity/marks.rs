//! Marks lowered or deleted by hand, with their holder alive and gone.

use super::*;

/// A holder's mark is overwritten 10 s lower (or deleted) by someone else while a waiter
/// whose clock is 2 s behind queues for the slot: the holder writes the mark back up at its
/// next renewal and keeps the slot (counted, logged); the waiter never gets a lowered floor,
/// and after the holder's release it issues only above everything the holder issued.
pub(crate) async fn a_tampered_mark_never_reaches_the_successor(s: Store, delete: bool) {
    let pool = ["--pool-size", "1"];
    let a = s.start(&pool).await;
    a.wait_ready(Duration::from_secs(15)).await;
    let mut all = a.take(1_000).await.unwrap();
    let b = s
        .start(&[&pool[..], &["--clock-skew", "-2s"]].concat())
        .await;
    let key = "/idcar/lable64/0/marks/0";
    let stored = s.get(key).await.expect("a's mark");
    let mark: u64 = stored.split(' ').next().unwrap().parse().unwrap();
    if delete {
        s.delete(key).await;
    } else {
        s.put(key, &format!("{} 00000000000000ff", mark - 10_000))
            .await;
    }
    let (from_a, _) = hammer(&a, Instant::now() + Duration::from_secs(2)).await;
    assert!(!from_a.is_empty(), "a stopped issuing: {}", a.logs());
    all.extend(from_a);
    assert!(
        a.metric("idcar_lease_marks_restored_total")
            .await
            .unwrap_or(0.0)
            >= 1.0,
        "{}",
        a.logs()
    );
    assert!(a.logs().contains("writing it back up"), "{}", a.logs());
    assert_ne!(
        b.admin_get("/readyz").await.0,
        200,
        "the waiter took the slot"
    );
    let now: u64 = s
        .get(key)
        .await
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let highest = all.iter().map(|id| tick(*id)).max().unwrap();
    assert!(now >= highest, "stored {now}, issued up to {highest}");
    let mut a = a;
    a.stop_ok().await;
    b.wait_ready(Duration::from_secs(15)).await;
    let from_b = b.take(1_000).await.unwrap();
    assert!(from_b.iter().all(|id| tick(*id) > highest));
    all.extend(from_b);
    assert_unique(&all);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_a_lowered_mark_never_reaches_the_successor() {
    a_tampered_mark_never_reaches_the_successor(Store::zk(), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_a_lowered_mark_never_reaches_the_successor() {
    a_tampered_mark_never_reaches_the_successor(Store::etcd(), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_a_deleted_mark_never_reaches_the_successor() {
    a_tampered_mark_never_reaches_the_successor(Store::zk(), true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_a_deleted_mark_never_reaches_the_successor() {
    a_tampered_mark_never_reaches_the_successor(Store::etcd(), true).await;
}

/// A holder dies (kill -9) and its mark is then overwritten 10 s lower (or deleted) before
/// anyone could write it back, while a waiter whose clock is 5 s behind (more than the 2 s the
/// dead holder's session outlives it) queues for the slot:
/// the waiter's floor comes from the mark's witness, which the tampering did not touch, so it
/// issues only above everything the dead holder issued.
pub(crate) async fn a_mark_tampered_after_its_holder_died(s: Store, delete: bool) {
    // The dead holder's session (etcd lease) ends 2 s after its death.
    let expiry = match s {
        Store::Zk(_) => "--zk-session-timeout",
        Store::Etcd(_) => "--etcd-ttl",
    };
    let pool = ["--pool-size", "1", expiry, "2s"];
    let mut a = s.start(&pool).await;
    a.wait_ready(Duration::from_secs(15)).await;
    let b = s
        .start(&[&pool[..], &["--clock-skew", "-5s"]].concat())
        .await;
    let (all, _) = hammer(&a, Instant::now() + Duration::from_secs(1)).await;
    assert!(!all.is_empty(), "a issued nothing: {}", a.logs());
    a.signal(nix::sys::signal::Signal::SIGKILL);
    a.wait_exit(Duration::from_secs(10)).await;
    let key = "/idcar/lable64/0/marks/0";
    let stored = s.get(key).await.expect("a's mark");
    let mark: u64 = stored.split(' ').next().unwrap().parse().unwrap();
    if delete {
        s.delete(key).await;
    } else {
        s.put(key, &format!("{} 00000000000000ff", mark - 10_000))
            .await;
    }
    let highest = all.iter().map(|id| tick(*id)).max().unwrap();
    b.wait_ready(Duration::from_secs(20)).await;
    let from_b = b.take(1_000).await.unwrap();
    let lowest = from_b.iter().map(|id| tick(*id)).min().unwrap();
    assert!(
        lowest > highest,
        "the successor issued tick {lowest}, at or below the dead holder's {highest}: {}",
        b.logs()
    );
    let mut all = all;
    all.extend(from_b);
    assert_unique(&all);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_a_mark_lowered_after_its_holder_died() {
    a_mark_tampered_after_its_holder_died(Store::zk(), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_a_mark_lowered_after_its_holder_died() {
    a_mark_tampered_after_its_holder_died(Store::etcd(), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_a_mark_deleted_after_its_holder_died() {
    a_mark_tampered_after_its_holder_died(Store::zk(), true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_a_mark_deleted_after_its_holder_died() {
    a_mark_tampered_after_its_holder_died(Store::etcd(), true).await;
}
