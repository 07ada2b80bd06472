//! What only the Kubernetes store meets, against a real API server of each test's own (the
//! pinned release, its etcd behind it): the API server killed and started again, its etcd
//! killed and started again, and holders whose clocks disagree. What every store must survive
//! (a holder killed or frozen, a partition, an exhausted pool) is in `store_faults/`.

mod common;

use common::kube::KubeStore;
use common::*;
use idcar::layout::lable64::Fields;
use nix::sys::signal::Signal;
use std::time::{Duration, Instant};

fn ts(id: u64) -> u64 {
    Fields::unpack(id).expect("valid lable64 ID").timestamp_ms
}

/// Asks `a` for IDs every 5 ms until it has served again for 500 ms after `back` (bounded by
/// `limit`): the IDs, and how long after `back` the last refusal came.
async fn until_served_again(a: &Idcar, back: Instant, limit: Duration) -> (Vec<u64>, Duration) {
    let mut ids = Vec::new();
    let mut last_refused = Duration::ZERO;
    while back.elapsed() < limit {
        match a.take(5).await {
            Ok(got) => {
                ids.extend(got);
                if back.elapsed() > last_refused + Duration::from_millis(500) {
                    break;
                }
            }
            Err(_) => last_refused = back.elapsed(),
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    (ids, last_refused)
}

/// The API server killed for longer than the holder's mark, then started again; then its etcd
/// killed and started again behind a running API server. The holder serves up to its mark
/// meanwhile and again within 2 s of the API server answering; its session survives both (no
/// one could judge it). No ID twice, and no ID after the outages below one before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_and_its_etcd_restarted_cost_at_most_2_s_after_they_answer() {
    let mut s = KubeStore::new();
    let args = [
        "--pool-size",
        "2",
        "--kube-ttl",
        "3s",
        "--lease-horizon",
        "2s",
        "--idle-horizon",
        "4s",
    ];
    let mut a = common::kube::start(&s.config, &args).await;
    a.wait_ready(Duration::from_secs(20)).await;
    let mut all = a.take(300).await.unwrap();

    s.api.kill();
    let killed = Instant::now();
    let (during, _) = hammer(&a, killed + Duration::from_secs(6)).await;
    let highest = all.iter().map(|id| ts(*id)).max().unwrap();
    assert!(
        a.take(1).await.is_err(),
        "still serving 6 s into an outage with a 4 s mark"
    );
    all.extend(&during);
    s.api.restart();
    let (after, refused) = until_served_again(&a, Instant::now(), Duration::from_secs(10)).await;
    eprintln!("API server restarted: IDs again {refused:?} after it answered");
    assert!(
        refused < Duration::from_secs(2),
        "IDs again only {refused:?} after: {}",
        a.logs()
    );
    assert!(after.iter().all(|id| ts(*id) > highest));
    all.extend(after);

    let before_etcd = all.iter().map(|id| ts(*id)).max().unwrap();
    s.api.etcd.kill(0);
    let (during, _) = hammer(&a, Instant::now() + Duration::from_secs(6)).await;
    all.extend(during);
    s.api.etcd.restart(0);
    s.api.etcd.wait_up(0, Duration::from_secs(30));
    s.api
        .wait_ready(Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("{e}\n{}", s.api.log_tail()));
    let (after, refused) = until_served_again(&a, Instant::now(), Duration::from_secs(10)).await;
    eprintln!("etcd restarted: IDs again {refused:?} after the API server answered");
    assert!(
        refused < Duration::from_secs(2),
        "IDs again only {refused:?} after: {}",
        a.logs()
    );
    assert!(after.iter().all(|id| ts(*id) > before_etcd));
    all.extend(after);
    // And it keeps serving (an API server whose etcd came back may refuse for a moment while
    // its authorization caches fill: tried again, never a lost session).
    let (steady, refused) = hammer(&a, Instant::now() + Duration::from_secs(5)).await;
    assert_eq!(refused, 0, "refused after the recovery: {}", a.logs());
    all.extend(steady);
    assert_unique(&all);
    assert!(!a.logs().contains("session lost"), "{}", a.logs());
    a.stop_ok().await;
}

/// Holders whose clocks disagree by seconds: a holder 3 s ahead killed in a full pool, its
/// successor (3 s behind) judges its session by its own monotonic clock, then waits past the
/// mark the fast clock wrote; and the other way round. Every ID of the successor lies above
/// every ID of the holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skewed_clocks_never_duplicate_and_never_end_a_session_early() {
    let s = KubeStore::new();
    for (cluster, ahead, behind) in [("1", "3s", "-3s"), ("2", "-3s", "3s")] {
        let args = [
            "--pool-size",
            "1",
            "--cluster-id",
            cluster,
            "--kube-ttl",
            "3s",
            "--lease-horizon",
            "2s",
            "--idle-horizon",
            "4s",
            "--max-clock-wait",
            "15s",
        ];
        let a =
            common::kube::start(&s.config, &[&args[..], &["--clock-skew", ahead]].concat()).await;
        a.wait_ready(Duration::from_secs(20)).await;
        let b =
            common::kube::start(&s.config, &[&args[..], &["--clock-skew", behind]].concat()).await;
        // A live holder is never judged gone, whatever the clocks: 3 durations of waiting.
        let (mut from_a, _) = hammer(&a, Instant::now() + Duration::from_secs(9)).await;
        assert_ne!(
            b.admin_get("/readyz").await.0,
            200,
            "took a live holder's slot"
        );
        a.signal(Signal::SIGKILL);
        let killed = Instant::now();
        b.wait_ready(Duration::from_secs(30)).await;
        eprintln!(
            "clocks {ahead}/{behind}: the successor served {:?} after the kill",
            killed.elapsed()
        );
        let (from_b, _) = hammer(&b, Instant::now() + Duration::from_millis(500)).await;
        let a_max = from_a.iter().map(|id| ts(*id)).max().unwrap();
        let b_min = from_b.iter().map(|id| ts(*id)).min().unwrap();
        assert!(
            b_min > a_max,
            "the successor issued at or below the holder's ticks"
        );
        from_a.extend(from_b);
        assert_unique(&from_a);
    }
}
