//! The lease protocol's conformance suite, run against every store: the state file, a real
//! ZooKeeper and a real etcd (each started per test on loopback ports). Each check drives the one hold loop
//! (`idcar_lease::protocol::hold`) over the store; faults the store cannot be asked for
//! (a lost reply, a failing write) come from thin wrappers around the real store, never a
//! mock of it. A new store is one `Fixture` and one `conformance!` line at the end.

mod common;

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

const SLOT: u32 = 3;
const HORIZON: Duration = Duration::from_millis(400);

/// A store under test: how to become a holder of `SLOT`, and how others touch its mark.
trait Fixture: Send + Sync + Sized + 'static {
    type S: MarkStore + 'static;
    async fn new() -> Self;
    /// A holder of the slot, claimed the way this store claims (retrying while a previous
    /// holder still has it).
    async fn holder(&self) -> Self::S;
    /// Someone else (an operator, another holder) writes `mark` with another token.
    async fn foreign_write(&self, mark: u64);
    /// The slot's mark as stored.
    async fn stored(&self) -> u64;
    /// Someone else (an operator, a script) deletes the slot's mark.
    async fn delete_mark(&self);
    /// An operator deletes the pool's recorded parameters and records them anew (a store
    /// without pools: nothing).
    async fn replace_pool(&self) {}
    /// Someone deletes the slot's witness (ZooKeeper: the whole `witness/` directory; a store
    /// without witnesses: nothing).
    async fn delete_witness(&self) {}
    /// The slot's witness as stored (0: none).
    async fn witness(&self) -> u64 {
        0
    }
}

struct FileFixture {
    dir: tempfile::TempDir,
}

impl FileFixture {
    fn path(&self) -> std::path::PathBuf {
        self.dir.path().join("state.json")
    }
}

const KEY: &str = "lable64/0/3";

impl Fixture for FileFixture {
    type S = FileMarks;
    async fn new() -> Self {
        FileFixture {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    async fn holder(&self) -> FileMarks {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match FileMarks::open(&self.path(), KEY) {
                Ok(s) => return s,
                Err(e) if Instant::now() > deadline => panic!("{e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }
    async fn foreign_write(&self, mark: u64) {
        // An operator's edit, past the holder's lock (which only keeps idcar processes out).
        let text = format!(
            r#"{{"version":1,"marks":{{"{KEY}":{mark}}},"tokens":{{"{KEY}":"00000000000000ff"}}}}"#
        );
        std::fs::write(self.path(), text).unwrap();
    }
    async fn stored(&self) -> u64 {
        let text = std::fs::read_to_string(self.path()).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["marks"][KEY].as_u64().unwrap_or(0)
    }
    async fn delete_mark(&self) {
        std::fs::write(self.path(), r#"{"version":1,"marks":{}}"#).unwrap();
    }
}

struct ZkFixture<R: Release = Newest> {
    zk: Zk<R>,
    client: zk::Client,
    paths: Paths,
}

impl<R: Release> ZkFixture<R> {
    /// Records the pool's parameters and its identity, as an instance does: the path of the
    /// identity node every mark write checks.
    async fn record_pool(&self) -> String {
        let mode = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        let (stat, _) = self
            .client
            .create(&self.paths.params(), b"{}", &mode)
            .await
            .unwrap();
        let id = self.paths.identity(&format!(
            "{}-0000000000",
            idcar_lease::identity::id_of(stat.czxid, 0)
        ));
        self.client.create(&id, b"{}", &mode).await.unwrap();
        id
    }

    async fn identity(&self) -> String {
        let (_, stat) = self.client.get_data(&self.paths.params()).await.unwrap();
        self.paths.identity(&format!(
            "{}-0000000000",
            idcar_lease::identity::id_of(stat.czxid, 0)
        ))
    }
}

impl<R: Release> Fixture for ZkFixture<R> {
    type S = ZkMarks;
    async fn new() -> Self {
        let zk = Zk::<R>::new(1);
        let client = zk.client().await;
        let paths = Paths::new("/conformance", "lable64", 0);
        for dir in [
            paths.slots(),
            paths.marks(),
            paths.witnesses(),
            paths.identities(),
        ] {
            let mode = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
            client.mkdir(&dir, &mode).await.unwrap();
        }
        let f = ZkFixture { zk, client, paths };
        f.record_pool().await;
        f
    }
    async fn holder(&self) -> ZkMarks {
        let client = self.zk.client().await;
        let eph = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match client.create(&self.paths.slot(SLOT), b"{}", &eph).await {
                Ok(_) => break,
                Err(zk::Error::NodeExists) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await
                }
                Err(e) => panic!("claiming slot {SLOT}: {e}"),
            }
        }
        ZkMarks {
            client,
            paths: self.paths.clone(),
            auth: false,
            pool: Some(PoolFence {
                params: self.paths.params(),
                params_version: 0,
                params_creation: self
                    .client
                    .check_stat(&self.paths.params())
                    .await
                    .unwrap()
                    .expect("params recorded")
                    .czxid,
                identity: self.identity().await,
            }),
            witness: true,
        }
    }
    async fn foreign_write(&self, mark: u64) {
        let data = format!("{mark} 00000000000000ff");
        let path = self.paths.mark(SLOT);
        self.client
            .set_data(&path, data.as_bytes(), None)
            .await
            .unwrap();
    }
    async fn stored(&self) -> u64 {
        match self.client.get_data(&self.paths.mark(SLOT)).await {
            Ok((d, _)) => idcar_lease::pool::tree::parse_mark(&d).unwrap(),
            Err(zk::Error::NoNode) => 0,
            Err(e) => panic!("{e}"),
        }
    }
    async fn delete_mark(&self) {
        self.client
            .delete(&self.paths.mark(SLOT), None)
            .await
            .unwrap();
    }
    async fn delete_witness(&self) {
        for path in [self.paths.witness(SLOT), self.paths.witnesses()] {
            self.client.delete(&path, None).await.unwrap();
        }
    }
    async fn witness(&self) -> u64 {
        match self.client.get_data(&self.paths.witness(SLOT)).await {
            Ok((d, _)) => idcar_lease::pool::tree::parse_mark(&d).unwrap_or(0),
            Err(zk::Error::NoNode) => 0,
            Err(e) => panic!("{e}"),
        }
    }
    async fn replace_pool(&self) {
        // As an operator and the next instance would: `params` deleted and recorded anew,
        // the old identity's node deleted by the one recording the new one.
        let old = self.identity().await;
        self.client
            .delete(&self.paths.params(), None)
            .await
            .unwrap();
        self.record_pool().await;
        self.client.delete(&old, None).await.unwrap();
    }
}

struct EtcdFixture<R: Release = Newest> {
    etcd: Etcd<R>,
    client: EtcdClient,
    paths: Paths,
}

/// An etcd holder: the marks of a lease kept alive while it exists; dropped, the lease is
/// revoked (as a ZooKeeper holder's session closes with its client).
struct EtcdHolder {
    marks: EtcdMarks,
    keeper: tokio::task::JoinHandle<()>,
}

impl Drop for EtcdHolder {
    fn drop(&mut self) {
        self.keeper.abort();
        let (etcd, lease) = (self.marks.etcd.clone(), self.marks.lease);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = etcd.revoke(lease).await;
            });
        }
    }
}

impl MarkStore for EtcdHolder {
    type Version = i64;
    fn name(&self) -> &'static str {
        self.marks.name()
    }
    fn key(&self, slot: u32) -> String {
        self.marks.key(slot)
    }
    async fn read(&self, slot: u32) -> Result<Stored<i64>, StoreError> {
        self.marks.read(slot).await
    }
    async fn write(&self, c: &Claim<i64>, mark: u64) -> Result<i64, StoreError> {
        self.marks.write(c, mark).await
    }
    async fn own_write(
        &self,
        c: &Claim<i64>,
        attempts: &[u64],
    ) -> Result<Option<(i64, u64)>, StoreError> {
        self.marks.own_write(c, attempts).await
    }
    async fn write_down(&self, c: &Claim<i64>, mark: u64) -> Result<(), StoreError> {
        self.marks.write_down(c, mark).await
    }
    async fn give_back(&self, slot: u32) {
        self.marks.give_back(slot).await
    }
    async fn recheck(&self, c: &Claim<i64>) -> Result<Recheck<i64>, StoreError> {
        self.marks.recheck(c).await
    }
}

fn etcd_put(key: &str, value: &[u8], lease: i64) -> idcar_etcd_api::etcdserverpb::TxnRequest {
    use idcar_etcd_api::etcdserverpb as rpc;
    rpc::TxnRequest {
        compare: vec![rpc::Compare {
            result: rpc::compare::CompareResult::Equal as i32,
            target: rpc::compare::CompareTarget::Create as i32,
            key: key.as_bytes().to_vec(),
            range_end: vec![],
            target_union: Some(rpc::compare::TargetUnion::CreateRevision(0)),
        }],
        success: vec![rpc::RequestOp {
            request: Some(rpc::request_op::Request::RequestPut(rpc::PutRequest {
                key: key.as_bytes().to_vec(),
                value: value.to_vec(),
                lease,
                ..Default::default()
            })),
        }],
        failure: vec![],
    }
}

impl<R: Release> Fixture for EtcdFixture<R> {
    type S = EtcdHolder;
    async fn new() -> Self {
        let etcd = Etcd::<R>::new(1);
        let client = etcd_client(&etcd).await;
        let f = EtcdFixture {
            etcd,
            client,
            paths: Paths::new("/conformance", "lable64", 0),
        };
        f.put(&f.paths.params(), b"{}").await;
        f
    }
    async fn holder(&self) -> EtcdHolder {
        let client = etcd_client(&self.etcd).await;
        let (lease, _) = client.grant(3).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let r = client
                .txn("claim", etcd_put(&self.paths.slot(SLOT), b"{}", lease))
                .await
                .unwrap();
            if r.succeeded {
                break;
            }
            assert!(Instant::now() < deadline, "slot {SLOT} stays held");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let keep = client.clone();
        let keeper = tokio::spawn(async move {
            let mut stream = None;
            for _ in 0..600 {
                match stream.as_mut() {
                    Some(k) => {
                        if idcar_lease::etcd::Keeper::keep_alive(k).await.is_err() {
                            stream = None;
                        }
                    }
                    None => stream = keep.keeper(lease).await.ok().map(|(k, _)| k),
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
        EtcdHolder {
            marks: EtcdMarks {
                etcd: client,
                paths: self.paths.clone(),
                lease,
                pool: Some({
                    let (created, modified) = self.params_revisions().await;
                    (self.paths.params(), created, modified)
                }),
                witness: true,
            },
            keeper,
        }
    }
    async fn foreign_write(&self, mark: u64) {
        let value = format!("{mark} 00000000000000ff");
        self.put(&self.paths.mark(SLOT), value.as_bytes()).await;
    }
    async fn delete_mark(&self) {
        self.delete(&self.paths.mark(SLOT)).await;
    }
    async fn delete_witness(&self) {
        self.delete(&self.paths.witness(SLOT)).await;
    }
    async fn witness(&self) -> u64 {
        use idcar_etcd_api::etcdserverpb as rpc;
        let req = rpc::RangeRequest {
            key: self.paths.witness(SLOT).into_bytes(),
            ..Default::default()
        };
        let r = self.client.range("read", req).await.unwrap();
        r.kvs
            .first()
            .and_then(|kv| idcar_lease::pool::tree::parse_mark(&kv.value))
            .unwrap_or(0)
    }
    async fn replace_pool(&self) {
        self.delete(&self.paths.params()).await;
        self.put(&self.paths.params(), b"{}").await;
    }
    async fn stored(&self) -> u64 {
        use idcar_etcd_api::etcdserverpb as rpc;
        let key = self.paths.mark(SLOT);
        let r = self
            .client
            .range(
                "read",
                rpc::RangeRequest {
                    key: key.into_bytes(),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        r.kvs.first().map_or(0, |kv| {
            idcar_lease::pool::tree::parse_mark(&kv.value).unwrap()
        })
    }
}

impl<R: Release> EtcdFixture<R> {
    async fn put(&self, key: &str, value: &[u8]) {
        use idcar_etcd_api::etcdserverpb as rpc;
        let put = rpc::TxnRequest {
            compare: vec![],
            success: vec![rpc::RequestOp {
                request: Some(rpc::request_op::Request::RequestPut(rpc::PutRequest {
                    key: key.as_bytes().to_vec(),
                    value: value.to_vec(),
                    ..Default::default()
                })),
            }],
            failure: vec![],
        };
        self.client.txn("put", put).await.unwrap();
    }

    async fn delete(&self, key: &str) {
        use idcar_etcd_api::etcdserverpb as rpc;
        let del = rpc::TxnRequest {
            compare: vec![],
            success: vec![rpc::RequestOp {
                request: Some(rpc::request_op::Request::RequestDeleteRange(
                    rpc::DeleteRangeRequest {
                        key: key.as_bytes().to_vec(),
                        ..Default::default()
                    },
                )),
            }],
            failure: vec![],
        };
        self.client.txn("delete", del).await.unwrap();
    }

    async fn params_revisions(&self) -> (i64, i64) {
        use idcar_etcd_api::etcdserverpb as rpc;
        let r = self
            .client
            .range(
                "read",
                rpc::RangeRequest {
                    key: self.paths.params().into_bytes(),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        (r.kvs[0].create_revision, r.kvs[0].mod_revision)
    }
}

/// A store whose writes can be made to fail, or to lose their replies, on demand: the real
/// store underneath, and every mark that reached it recorded.
struct Faulty<S> {
    inner: S,
    /// Writes from now on: `Ok`, fail before reaching the store, or apply and lose the reply.
    mode: Arc<AtomicU32>,
    /// Every mark written (the reply kept or lost), in order.
    written: Arc<Mutex<Vec<u64>>>,
}

const PASS: u32 = 0;
const FAIL: u32 = 1;
const LOSE_REPLY: u32 = 2;
/// Not applied, reply lost (the test then writes the same value itself, as a foreigner).
const DROP: u32 = 3;
/// Applied, reply lost, and then the store cannot be read for our own write (it still
/// answers writes and rechecks): a moved mark that may be ours.
const LOSE_REPLY_THEN_BLIND: u32 = 4;
const BLIND: u32 = 5;

impl<S: MarkStore> MarkStore for Faulty<S> {
    type Version = S::Version;
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn key(&self, slot: u32) -> String {
        self.inner.key(slot)
    }
    async fn read(&self, slot: u32) -> Result<Stored<S::Version>, StoreError> {
        self.inner.read(slot).await
    }
    async fn write(&self, c: &Claim<S::Version>, mark: u64) -> Result<S::Version, StoreError> {
        match self.mode.load(Ordering::SeqCst) {
            FAIL => return Err(StoreError::Unavailable("injected: store down".into())),
            DROP => {
                self.written.lock().unwrap().push(mark);
                self.mode.store(FAIL, Ordering::SeqCst);
                return Err(StoreError::Unavailable("injected: reply lost".into()));
            }
            _ => {}
        }
        let r = self.inner.write(c, mark).await;
        if r.is_ok() {
            self.written.lock().unwrap().push(mark);
        }
        if r.is_ok() && self.mode.load(Ordering::SeqCst) == LOSE_REPLY {
            self.mode.store(PASS, Ordering::SeqCst);
            return Err(StoreError::Unavailable("injected: reply lost".into()));
        }
        if r.is_ok() && self.mode.load(Ordering::SeqCst) == LOSE_REPLY_THEN_BLIND {
            self.mode.store(BLIND, Ordering::SeqCst);
            return Err(StoreError::Unavailable("injected: reply lost".into()));
        }
        r
    }
    async fn own_write(
        &self,
        c: &Claim<S::Version>,
        attempts: &[u64],
    ) -> Result<Option<(S::Version, u64)>, StoreError> {
        if self.mode.load(Ordering::SeqCst) == BLIND {
            return Err(StoreError::Unavailable("injected: cannot read".into()));
        }
        self.inner.own_write(c, attempts).await
    }
    async fn write_down(&self, c: &Claim<S::Version>, mark: u64) -> Result<(), StoreError> {
        self.inner.write_down(c, mark).await
    }
    async fn give_back(&self, slot: u32) {
        self.inner.give_back(slot).await
    }
    async fn recheck(&self, c: &Claim<S::Version>) -> Result<Recheck<S::Version>, StoreError> {
        self.inner.recheck(c).await
    }
}

/// A running hold over a store: its states, the release, its outcome.
struct Running {
    rx: watch::Receiver<LeaseState>,
    release: oneshot::Sender<Option<Issued>>,
    task: tokio::task::JoinHandle<Outcome>,
    metrics: Arc<LeaseMetrics>,
    mode: Arc<AtomicU32>,
    written: Arc<Mutex<Vec<u64>>>,
}

async fn ended(task: tokio::task::JoinHandle<Outcome>) -> Outcome {
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the hold ends in time")
        .unwrap()
}

fn protocol(clock: Arc<dyn Clock>) -> (Protocol, watch::Receiver<LeaseState>) {
    let scheme = by_name("lable64", LayoutParams::default())
        .unwrap()
        .scheme();
    let timing = Timing {
        horizon: HORIZON,
        idle_horizon: HORIZON,
        renew_every: Duration::from_millis(100),
        max_clock_wait: Duration::from_secs(3),
        starve: Duration::ZERO,
    };
    let metrics = Arc::new(LeaseMetrics::new());
    let planted = Default::default();
    Protocol::new(
        scheme,
        clock,
        metrics,
        timing,
        planted,
        Default::default(),
        "test",
    )
}

/// Claims the slot in `store` (reading its mark) and runs the hold loop on a task.
async fn run<S: MarkStore + 'static>(store: S, clock: Arc<dyn Clock>, mode: u32) -> Running {
    let (p, rx) = protocol(clock);
    let stored = store.read(SLOT).await.expect("the mark reads");
    let claim = Claim::new(&p, SLOT, stored);
    let (release, release_rx) = oneshot::channel();
    let mode = Arc::new(AtomicU32::new(mode));
    let written = Arc::new(Mutex::new(Vec::new()));
    let faulty = Faulty {
        inner: store,
        mode: mode.clone(),
        written: written.clone(),
    };
    let metrics = p.metrics.clone();
    let task = tokio::spawn(async move {
        let mut stop = Stop::new(release_rx);
        let mut generation = 0;
        let mut demand = protocol::Demand::none();
        protocol::hold(&p, &faulty, claim, &mut stop, &mut generation, &mut demand).await
    });
    Running {
        rx,
        release,
        task,
        metrics,
        mode,
        written,
    }
}

impl Running {
    /// The next published window satisfying `f` (bounded wait).
    async fn window(&mut self, f: impl Fn(&Window) -> bool) -> Window {
        let st = tokio::time::timeout(
            Duration::from_secs(10),
            self.rx.wait_for(|s| s.window().is_some_and(|w| f(&w))),
        )
        .await
        .expect("a window in time")
        .expect("the hold is running");
        st.window().unwrap()
    }

    async fn outcome(self) -> Outcome {
        ended(self.task).await
    }

    async fn release(self, highest: Option<Issued>) -> Outcome {
        let _ = self.release.send(highest);
        ended(self.task).await
    }

    /// Waits (up to 5 s) until a write has turned the store's mode to `mode`.
    async fn wait_mode(&self, mode: u32, what: &str) {
        for _ in 0..1_000 {
            if self.mode.load(Ordering::SeqCst) == mode {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(self.mode.load(Ordering::SeqCst), mode, "{what}");
    }

    fn losses(&self, reason: &str) -> u64 {
        self.metrics.losses.with_label_values(&[reason]).get()
    }
}

fn now_tick() -> u64 {
    let scheme = by_name("lable64", LayoutParams::default())
        .unwrap()
        .scheme();
    scheme.tick_at(SystemClock.now_unix_ns()).unwrap_or(0)
}

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
}
