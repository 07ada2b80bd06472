//! The service against a manual clock: issuing and refusing as the lease says, waits and
//! timeouts, and sno80's tick-tock timelines through the real layout.

use super::*;
use crate::clock::ManualClock;
use crate::generator::Window;
use std::time::Instant;

use crate::layout::{by_name, LayoutParams};

fn service(
    clock: Arc<ManualClock>,
    window: Option<Window>,
) -> (Arc<Service>, watch::Sender<LeaseState>) {
    let layout = by_name(
        "lable64",
        LayoutParams {
            cluster: 3,
            ..Default::default()
        },
    )
    .unwrap();
    let state = match window {
        Some(w) => LeaseState::Held(w),
        None => LeaseState::Pending {
            reason: "test".into(),
        },
    };
    let (tx, rx) = watch::channel(state);
    let limits = Limits {
        max_batch: 1_000,
        max_wait: Duration::from_secs(5),
    };
    let metrics = Arc::new(Metrics::new("lable64", 3));
    (
        Service::new(
            layout,
            clock,
            metrics,
            vec![rx],
            limits,
            Describe::default(),
        )
        .unwrap(),
        tx,
    )
}

fn win(floor: u64, mark: u64) -> Window {
    Window {
        slot: 5,
        floor,
        mark,
        generation: 1,
    }
}

#[tokio::test]
async fn issues_and_refuses_as_the_lease_says() {
    let clock = Arc::new(ManualClock::new(1_000 * 1_000_000));
    let (svc, tx) = service(clock.clone(), None);
    tokio::spawn(svc.clone().follow_lease(Vec::new()));
    let mut out = Vec::new();
    assert_eq!(
        svc.issue(1, &RequestOptions::default(), &mut out).await,
        Err(IssueError::NoLease("test".into()))
    );
    assert_eq!(
        IssueError::NoLease("test".into()).to_string(),
        "no lease is held: test",
        "the refusal carries the lease's own reason"
    );
    assert!(svc.ready().is_err());
    tx.send_replace(LeaseState::Held(win(0, 2_000)));
    tokio::time::timeout(Duration::from_secs(5), async {
        while svc.ready().is_err() {
            tokio::task::yield_now().await;
        }
    })
    .await
    .unwrap();
    svc.issue(10, &RequestOptions::default(), &mut out)
        .await
        .unwrap();
    assert_eq!(out.len(), 80);
    assert!(!svc
        .issue(0, &RequestOptions::default(), &mut out)
        .await
        .unwrap_err()
        .is_unavailable());
    assert!(svc
        .issue(1_001, &RequestOptions::default(), &mut out)
        .await
        .is_err());
    clock.set(2_001 * 1_000_000);
    assert_eq!(
        svc.issue(1, &RequestOptions::default(), &mut out).await,
        Err(IssueError::Refused(Refusal::MarkReached { mark: 2_000 }))
    );
    assert_eq!(
        svc.close(),
        vec![Some(Issued {
            slot: 5,
            tick: 1_000
        })]
    );
}

/// A request waiting in the lane for the next tick keeps its place: one arriving when that
/// tick has just begun (before the waiter woke) queues behind it instead of taking the tick's
/// first sequence number from under it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newcomer_queues_behind_a_waiter_for_the_fresh_tick() {
    use crate::layout::lable64::Fields;
    let clock = Arc::new(ManualClock::new(1_000 * 1_000_000));
    let (svc, _tx) = service(clock.clone(), Some(win(0, 2_000)));
    let opts = RequestOptions::default();
    let mut first = Vec::new();
    svc.issue(63, &opts, &mut first).await.unwrap();
    // Wants 2: gets the tick's last sequence number, then waits for tick 1,001.
    let waiter = tokio::spawn({
        let svc = svc.clone();
        async move {
            let mut out = Vec::new();
            svc.issue(2, &RequestOptions::default(), &mut out)
                .await
                .map(|()| out)
        }
    });
    let deadline = Instant::now() + Duration::from_secs(5);
    while svc.metrics().sequence_waits.get() == 0 {
        assert!(Instant::now() < deadline, "the waiter never waited");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    clock.set(1_001 * 1_000_000);
    let mut newcomer = Vec::new();
    svc.issue(1, &opts, &mut newcomer).await.unwrap();
    let waited = waiter.await.unwrap().unwrap();
    let seq = |id: &[u8]| {
        let f = Fields::unpack(u64::from_be_bytes(id.try_into().unwrap())).unwrap();
        (f.timestamp_ms, f.sequence)
    };
    assert_eq!(
        seq(&waited[8..16]),
        (1_001, 0),
        "the waiter got the fresh tick first"
    );
    assert_eq!(seq(&newcomer), (1_001, 1), "the newcomer queued behind it");
}

#[tokio::test]
async fn spent_tick_waits_until_deadline_then_times_out() {
    // A frozen clock: the second batch of 64 can never be served, so it times out.
    let clock = Arc::new(ManualClock::new(1_000 * 1_000_000));
    let (svc, _tx) = service(clock, Some(win(0, 2_000)));
    let mut out = Vec::new();
    svc.issue(64, &RequestOptions::default(), &mut out)
        .await
        .unwrap();
    let mut svc = Arc::into_inner(svc).unwrap();
    svc.issuing.limits = Limits {
        max_batch: 1_000,
        max_wait: Duration::from_millis(50),
    };
    let svc2 = Arc::new(svc);
    let e = svc2
        .issue(1, &RequestOptions::default(), &mut out)
        .await
        .unwrap_err();
    assert_eq!(e, IssueError::TimedOut(Duration::from_millis(50)));
    assert!(svc2.metrics().sequence_waits.get() >= 1);
}

mod sno80 {
    use super::*;
    use crate::clock::ManualClock;

    use crate::layout::{by_name, LayoutParams};

    /// Through the service and the real layout: a clock step back toggles sno80's tick bit and
    /// the IDs issued at the earlier time stay distinct from those issued before the step.
    #[tokio::test]
    async fn clock_step_back_toggles_the_tick_bit() {
        let unit = 4_000_000u64;
        let epoch = crate::layout::sno80::EPOCH_UNIX_NS;
        let clock = Arc::new(ManualClock::new(epoch + 1_000 * unit));
        let layout = by_name("sno80", LayoutParams::default()).unwrap();
        let window = Window {
            slot: 42,
            floor: 900,
            mark: 2_000,
            generation: 1,
        };
        let (_tx, rx) = watch::channel(LeaseState::Held(window));
        let limits = Limits {
            max_batch: 1_000,
            max_wait: Duration::from_secs(5),
        };
        let metrics = Arc::new(Metrics::new("sno80", 0));
        let svc = Service::new(
            layout,
            clock.clone(),
            metrics,
            vec![rx],
            limits,
            Describe::default(),
        )
        .unwrap();
        let opts = RequestOptions {
            meta: Some(9),
            transaction: false,
        };
        let mut out = Vec::new();
        svc.issue(100, &opts, &mut out).await.unwrap();
        clock.set(epoch + 950 * unit);
        svc.issue(100, &opts, &mut out).await.unwrap();
        let mut seen = std::collections::HashSet::new();
        let mut ticks = Vec::new();
        for id in out.chunks_exact(10) {
            assert!(seen.insert(id.to_vec()), "duplicate {id:?}");
            let f = svc.layout().decode(id).unwrap().to_map();
            assert_eq!(
                (f["meta"].as_u64(), f["partition"].as_u64()),
                (Some(9), Some(42))
            );
            ticks.push((f["units"].as_u64().unwrap(), f["tick"].as_u64().unwrap()));
        }
        assert_eq!(ticks[0], (1_000, 0));
        assert_eq!(
            ticks[199],
            (950, 1),
            "after the step back: earlier units, other timeline"
        );
        assert_eq!(svc.metrics().clock_regressions.get(), 1);
        assert_eq!(
            svc.close(),
            vec![Some(Issued {
                slot: 42,
                tick: 1_000
            })],
            "the mark written down covers both timelines"
        );
    }
}
