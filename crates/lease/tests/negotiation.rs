//! The negotiation's conformance suite, run against every store that hands out slots (a real
//! ZooKeeper and a real etcd, each started per test on loopback ports, and a real Kubernetes
//! API server shared by the suite, a namespace per test): leases started in this
//! process through the store's `start`, as `idcar serve` starts them, each with its own session
//! or etcd lease. Queue order, exhaustion, the hand-over on release, the preferred slot and
//! probing of large pools are the negotiation's (`idcar_lease::pool`), written once; each
//! store must show the same behaviour. A new store is one `Fixture` and one `negotiation!` line
//! at the end.

mod common;

use common::etcd_client;
use idcar_core::clock::SystemClock;
use idcar_core::layout::{by_name, LayoutParams};
use idcar_lease::etcd::{EtcdAccess, EtcdConfig};
use idcar_lease::kube::KubeConfig;
use idcar_lease::metrics::LeaseMetrics;
use idcar_lease::pool::PoolConfig;
use idcar_lease::zk::{Access, ZkConfig};
use idcar_lease::{LeaseHandle, LeaseState, Timing, Window};
use idcar_testkit::etcd::Etcd;
use idcar_testkit::release::{Newest, Older, Release};
use idcar_testkit::zk::Zk;
use std::sync::Arc;
use std::time::Duration;

/// A store that hands out slots: how to start one lease in it.
trait Fixture: Send + Sync + Sized + 'static {
    fn new() -> Self;
    fn start(&self, pool: PoolConfig) -> LeaseHandle;
    /// Puts an entry at the head of the queue of [`pool`]'s namespace (which must exist) that
    /// never moves: a contender that does not leave.
    async fn stuck_in_queue(&self);
    /// A count that grows with every entry ever put in [`pool`]'s queue (which must exist).
    async fn queue_entries(&self) -> u64;
}

/// [`pool`]'s queue.
const QUEUE: &str = "/negotiation/lable64/0/queue";

struct ZkFixture<R: Release = Newest>(Zk<R>);

impl<R: Release> Fixture for ZkFixture<R> {
    fn new() -> Self {
        ZkFixture(Zk::new(1))
    }
    fn start(&self, pool: PoolConfig) -> LeaseHandle {
        let store = ZkConfig {
            connect: self.0.connect(),
            session_timeout: Duration::from_secs(4),
            access: Access::none(),
        };
        let (scheme, metrics) = scheme_and_metrics();
        idcar_lease::zk::start(store, pool, scheme, Arc::new(SystemClock), metrics)
    }
    async fn stuck_in_queue(&self) {
        let mode = zookeeper_client::CreateMode::PersistentSequential
            .with_acls(zookeeper_client::Acls::anyone_all());
        let client = self.0.client().await;
        client
            .create(&format!("{QUEUE}/claim-"), b"", &mode)
            .await
            .unwrap();
    }
    async fn queue_entries(&self) -> u64 {
        // Each child created or deleted bumps the node's child version.
        let (_, stat) = self.0.client().await.get_data(QUEUE).await.unwrap();
        stat.cversion as u64
    }
}

struct EtcdFixture<R: Release = Newest>(Etcd<R>);

impl<R: Release> Fixture for EtcdFixture<R> {
    fn new() -> Self {
        EtcdFixture(Etcd::new(1))
    }
    fn start(&self, pool: PoolConfig) -> LeaseHandle {
        let store = EtcdConfig {
            access: EtcdAccess::new(&self.0.endpoints(), None, None).unwrap(),
            ttl: Duration::from_secs(4),
        };
        let (scheme, metrics) = scheme_and_metrics();
        idcar_lease::etcd::start(store, pool, scheme, Arc::new(SystemClock), metrics)
    }
    async fn stuck_in_queue(&self) {
        use idcar_etcd_api::etcdserverpb as rpc;
        let put = rpc::PutRequest {
            key: format!("{QUEUE}/0000000000000001").into_bytes(),
            ..Default::default()
        };
        let req = rpc::TxnRequest {
            success: vec![rpc::RequestOp {
                request: Some(rpc::request_op::Request::RequestPut(put)),
            }],
            ..Default::default()
        };
        etcd_client(&self.0)
            .await
            .txn("planting", req)
            .await
            .unwrap();
    }
    async fn queue_entries(&self) -> u64 {
        // The queue keys created at each revision so far, read at that revision (an entry
        // lives from its put to its take or delete, at least the revision it was put at).
        use idcar_etcd_api::etcdserverpb as rpc;
        let client = etcd_client(&self.0).await;
        let prefix = format!("{QUEUE}/").into_bytes();
        let range = |revision: i64| rpc::RangeRequest {
            key: prefix.clone(),
            range_end: idcar_lease::etcd::client::prefix_end(&prefix),
            revision,
            min_create_revision: revision,
            max_create_revision: revision,
            keys_only: true,
            ..Default::default()
        };
        let now = client.range("now", range(0)).await.unwrap();
        let last = now.header.unwrap().revision;
        let mut entries = 0;
        for revision in 1..=last.min(10_000) {
            let r = client.range("history", range(revision)).await.unwrap();
            entries += r.kvs.len() as u64;
        }
        entries
    }
}

/// Kubernetes: the API server shared by the suite, a namespace per test, reached as the
/// service account the shipped Role binds.
struct KubeFixture {
    kubeconfig: std::path::PathBuf,
    ns: String,
    /// Queue entries counted so far, and the version they were counted up to.
    entries: std::sync::Mutex<Option<(String, u64)>>,
}

impl KubeFixture {
    async fn client(&self) -> idcar_lease::kube::Kube {
        idcar_lease::kube::Kube::connect(&self.config(), Duration::from_secs(5))
            .await
            .unwrap()
    }

    fn config(&self) -> KubeConfig {
        KubeConfig {
            kubeconfig: Some(self.kubeconfig.clone()),
            namespace: Some(self.ns.clone()),
            ttl: Duration::from_secs(4),
            followers: Default::default(),
        }
    }
}

impl Fixture for KubeFixture {
    fn new() -> Self {
        let (kubeconfig, ns) = idcar_testkit::kube::ApiServer::shared().fresh_namespace();
        KubeFixture {
            kubeconfig,
            ns,
            entries: Default::default(),
        }
    }
    fn start(&self, mut pool: PoolConfig) -> LeaseHandle {
        pool.root = "negotiation".into();
        let (scheme, metrics) = scheme_and_metrics();
        idcar_lease::kube::start(self.config(), pool, scheme, Arc::new(SystemClock), metrics)
    }
    async fn stuck_in_queue(&self) {
        use idcar_lease::kube::objects as obj;
        let kube = self.client().await;
        let names = obj::Names::new("negotiation", "lable64", 0);
        let name = names.session("00000000000000ff");
        // Places are versions of the API server's etcd: 1 is ahead of every one drawn.
        let queued = [(obj::QUEUED.to_string(), "1".to_string())].into();
        let mut session = obj::object(&names, &name, "session", queued);
        // Declares an hour: never judged gone while the test runs.
        session.spec.as_mut().unwrap().lease_duration_seconds = Some(3600);
        kube.create("planting", &session).await.unwrap();
    }
    /// The writes of a session object that queues it, counted from the first call on (a watch
    /// of the pool's session objects from the version counted up to).
    async fn queue_entries(&self) -> u64 {
        use futures_util::StreamExt;
        use idcar_lease::kube::objects as obj;
        let kube = self.client().await;
        let names = obj::Names::new("negotiation", "lable64", 0);
        let selector = names.role("session");
        let last = self.entries.lock().unwrap().clone();
        let Some((from, mut n)) = last else {
            let (_, version) = kube.list("sessions", &selector).await.unwrap();
            *self.entries.lock().unwrap() = Some((version, 0));
            return 0;
        };
        let mut version = from.clone();
        let events = kube
            .events(&selector, &from, Duration::from_secs(1))
            .await
            .unwrap();
        let mut events = std::pin::pin!(events);
        while let Some(e) = events.next().await {
            if let idcar_lease::kube::Event::Put(l) = e {
                n += u64::from(obj::annotation(&l, obj::QUEUED).is_some());
                version = obj::version(&l).to_string();
            }
        }
        *self.entries.lock().unwrap() = Some((version, n));
        n
    }
}

fn scheme_and_metrics() -> (idcar_core::layout::Scheme, Arc<LeaseMetrics>) {
    let scheme = by_name("lable64", LayoutParams::default())
        .unwrap()
        .scheme();
    (scheme, Arc::new(LeaseMetrics::new()))
}

/// One lease of a pool of `size` (lable64, cluster 0), preferring `prefer`.
fn pool(size: u32, prefer: Option<u32>) -> PoolConfig {
    PoolConfig {
        root: "/negotiation".into(),
        layout: "lable64",
        cluster: 0,
        pool_size: size,
        prefer,
        timing: Timing {
            horizon: Duration::from_millis(600),
            idle_horizon: Duration::from_millis(600),
            renew_every: Duration::from_millis(200),
            max_clock_wait: Duration::from_secs(5),
            starve: Duration::ZERO,
        },
        pod: None,
        pool_params: vec![("layout".into(), "lable64".into())],
        planted: Default::default(),
        part: Default::default(),
    }
}

/// The window `lease` holds, waiting up to `limit` for one.
async fn held(lease: &LeaseHandle, limit: Duration) -> Window {
    let mut rx = lease.subscribe();
    let s = tokio::time::timeout(limit, rx.wait_for(|s| s.window().is_some()))
        .await
        .unwrap_or_else(|_| {
            panic!(
                "no lease within {limit:?}: {:?}",
                *lease.subscribe().borrow()
            )
        })
        .unwrap()
        .clone();
    s.window().unwrap()
}

/// Waits until `lease` says why it holds nothing with a reason containing `what`.
async fn pending_with(lease: &LeaseHandle, what: &str) {
    let mut rx = lease.subscribe();
    let found = tokio::time::timeout(
        Duration::from_secs(10),
        rx.wait_for(|s| matches!(s, LeaseState::Pending { reason } if reason.contains(what))),
    )
    .await;
    assert!(
        found.is_ok(),
        "never pending with {what:?}: {:?}",
        *lease.subscribe().borrow()
    );
}

/// Whether `lease` holds a window now.
fn holds(lease: &LeaseHandle) -> bool {
    lease.subscribe().borrow().window().is_some()
}

const LIMIT: Duration = Duration::from_secs(15);

/// Free slots go first, lowest number first; the slot preferred is taken when free.
async fn free_and_preferred_slots<F: Fixture>() {
    let f = F::new();
    let a = f.start(pool(4, None));
    assert_eq!(held(&a, LIMIT).await.slot, 0);
    let b = f.start(pool(4, Some(3)));
    assert_eq!(held(&b, LIMIT).await.slot, 3, "the preferred slot is free");
    let c = f.start(pool(4, Some(0)));
    assert_eq!(held(&c, LIMIT).await.slot, 1, "the preferred slot is held");
    for l in [a, b, c] {
        l.release(None).await.unwrap();
    }
}

/// A full pool: the contender says so and waits at the head of the queue; the one queued
/// after it waits behind it; a release hands the slot to the head first, above the mark the
/// releaser wrote.
async fn exhaustion_and_queue_order<F: Fixture>() {
    let f = F::new();
    let holder = f.start(pool(1, None));
    let first = held(&holder, LIMIT).await;
    let head = f.start(pool(1, None));
    pending_with(&head, "pool exhausted").await;
    let behind = f.start(pool(1, None));
    pending_with(&behind, "waiting in the slot queue").await;
    assert!(!holds(&head) && !holds(&behind));
    holder.release(None).await.unwrap();
    let next = held(&head, Duration::from_secs(5)).await;
    assert_eq!(next.slot, first.slot);
    assert!(
        next.floor >= first.floor,
        "the successor starts above what was written: {next:?} after {first:?}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!holds(&behind), "the head of the queue goes first");
    pending_with(&behind, "pool exhausted").await;
    head.release(None).await.unwrap();
    held(&behind, Duration::from_secs(5)).await;
    behind.release(None).await.unwrap();
}

/// A graceful release hands the slot over at once (not a session timeout later).
async fn a_release_hands_over_at_once<F: Fixture>() {
    let f = F::new();
    let holder = f.start(pool(1, None));
    held(&holder, LIMIT).await;
    let waiter = f.start(pool(1, None));
    pending_with(&waiter, "pool exhausted").await;
    let released = std::time::Instant::now();
    holder.release(None).await.unwrap();
    held(&waiter, Duration::from_secs(3)).await;
    let took = released.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "hand-over took {took:?}, as long as a session timeout"
    );
    waiter.release(None).await.unwrap();
}

/// Contenders queued together claim together, not one after another: behind a contender
/// that does not move (an entry stuck at the head of the queue), with slots free for both, the
/// next takes the second free slot at once and leaves the first to the one ahead.
async fn contenders_claim_together<F: Fixture>() {
    let f = F::new();
    let a = f.start(pool(4, None));
    assert_eq!(held(&a, LIMIT).await.slot, 0);
    f.stuck_in_queue().await;
    let b = f.start(pool(4, None));
    let w = held(&b, Duration::from_secs(5)).await;
    assert_eq!(w.slot, 2, "slot 1 is the one ahead's to take");
    let c = f.start(pool(4, None));
    assert_eq!(held(&c, Duration::from_secs(5)).await.slot, 3);
    // One slot left, for the one ahead: the next contender waits its turn.
    let d = f.start(pool(4, None));
    pending_with(&d, "waiting in the slot queue").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!holds(&d), "took the slot left to the one ahead");
    for l in [a, b, c, d] {
        l.release(None).await.unwrap();
    }
}

/// Contenders that start together beside a holder, with no one queued, claim without queueing:
/// one that finds its slot taken first tries the next (the order every one of them read).
async fn starts_together_beside_a_holder_do_not_queue<F: Fixture>() {
    let f = F::new();
    let a = f.start(pool(8, None));
    assert_eq!(held(&a, LIMIT).await.slot, 0);
    let before = f.queue_entries().await;
    // Three: each take lost is another one's success, so the third try always finds a slot.
    let together: Vec<LeaseHandle> = (0..3).map(|_| f.start(pool(8, None))).collect();
    let mut slots = Vec::new();
    for l in &together {
        slots.push(held(l, Duration::from_secs(5)).await.slot);
    }
    slots.sort_unstable();
    assert_eq!(slots, [1, 2, 3], "the lowest free slots, one each");
    assert_eq!(f.queue_entries().await, before, "a contender queued");
    for l in together.into_iter().chain([a]) {
        l.release(None).await.unwrap();
    }
}

/// Large pools are claimed by random probes: every instance holds a slot of its own in the
/// pool, and the slot preferred is taken when free.
async fn large_pools_are_probed<F: Fixture>() {
    let f = F::new();
    let size = 50_000;
    let leases: Vec<LeaseHandle> = (0..4).map(|_| f.start(pool(size, None))).collect();
    let mut slots = Vec::new();
    for l in &leases {
        slots.push(held(l, LIMIT).await.slot);
    }
    assert!(slots.iter().all(|s| *s < size), "{slots:?}");
    let mut distinct = slots.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), slots.len(), "a slot held twice: {slots:?}");
    let preferred = f.start(pool(size, Some(size - 1)));
    assert_eq!(held(&preferred, LIMIT).await.slot, size - 1);
    for l in leases.into_iter().chain([preferred]) {
        l.release(None).await.unwrap();
    }
}

/// One test per check of the suite, for one store: each runs its check against the newest
/// supported release and the older one at once (docs/compatibility.md). A store with one
/// release tested and pools of at most 1,024 slots (Kubernetes: an object per slot) runs every
/// check but the probing of large pools.
macro_rules! negotiation {
    ($store:ident, $fixture:ty) => {
        mod $store {
            use super::*;
            negotiation!(@one $fixture;
                free_and_preferred_slots,
                exhaustion_and_queue_order,
                a_release_hands_over_at_once,
                contenders_claim_together,
                starts_together_beside_a_holder_do_not_queue
            );
        }
    };
    (@one $fixture:ty; $($name:ident),*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            super::$name::<$fixture>().await
        }
    )*};
    ($store:ident, $newest:ty, $older:ty) => {
        mod $store {
            use super::*;
            idcar_testkit::newest_and_older_tests!(
                $newest, $older;
                free_and_preferred_slots,
                exhaustion_and_queue_order,
                a_release_hands_over_at_once,
                contenders_claim_together,
                starts_together_beside_a_holder_do_not_queue,
                large_pools_are_probed
            );
        }
    };
}

negotiation!(zookeeper, ZkFixture, ZkFixture<Older>);
negotiation!(etcd, EtcdFixture, EtcdFixture<Older>);
negotiation!(kubernetes, KubeFixture);
