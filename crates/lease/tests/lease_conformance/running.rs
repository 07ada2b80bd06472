//! A hold over a store, run on a task, with faults the store cannot be asked for (a lost reply, a failing write) from a thin wrapper around it.

use super::*;

/// A store whose writes can be made to fail, or to lose their replies, on demand: the real
/// store underneath, and every mark that reached it recorded.
pub(crate) struct Faulty<S> {
    pub(crate) inner: S,
    /// Writes from now on: `Ok`, fail before reaching the store, or apply and lose the reply.
    pub(crate) mode: Arc<AtomicU32>,
    /// Every mark written (the reply kept or lost), in order.
    pub(crate) written: Arc<Mutex<Vec<u64>>>,
}

pub(crate) const PASS: u32 = 0;
pub(crate) const FAIL: u32 = 1;
pub(crate) const LOSE_REPLY: u32 = 2;
/// Not applied, reply lost (the test then writes the same value itself, as a foreigner).
pub(crate) const DROP: u32 = 3;
/// Applied, reply lost, and then the store cannot be read for our own write (it still
/// answers writes and rechecks): a moved mark that may be ours.
pub(crate) const LOSE_REPLY_THEN_BLIND: u32 = 4;
pub(crate) const BLIND: u32 = 5;

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
pub(crate) struct Running {
    pub(crate) rx: watch::Receiver<LeaseState>,
    pub(crate) release: oneshot::Sender<Option<Issued>>,
    pub(crate) task: tokio::task::JoinHandle<Outcome>,
    pub(crate) metrics: Arc<LeaseMetrics>,
    pub(crate) mode: Arc<AtomicU32>,
    pub(crate) written: Arc<Mutex<Vec<u64>>>,
}

pub(crate) async fn ended(task: tokio::task::JoinHandle<Outcome>) -> Outcome {
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the hold ends in time")
        .unwrap()
}

pub(crate) fn protocol(clock: Arc<dyn Clock>) -> (Protocol, watch::Receiver<LeaseState>) {
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
pub(crate) async fn run<S: MarkStore + 'static>(
    store: S,
    clock: Arc<dyn Clock>,
    mode: u32,
) -> Running {
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
    pub(crate) async fn window(&mut self, f: impl Fn(&Window) -> bool) -> Window {
        let st = tokio::time::timeout(
            Duration::from_secs(10),
            self.rx.wait_for(|s| s.window().is_some_and(|w| f(&w))),
        )
        .await
        .expect("a window in time")
        .expect("the hold is running");
        st.window().unwrap()
    }

    pub(crate) async fn outcome(self) -> Outcome {
        ended(self.task).await
    }

    pub(crate) async fn release(self, highest: Option<Issued>) -> Outcome {
        let _ = self.release.send(highest);
        ended(self.task).await
    }

    /// Waits (up to 5 s) until a write has turned the store's mode to `mode`.
    pub(crate) async fn wait_mode(&self, mode: u32, what: &str) {
        for _ in 0..1_000 {
            if self.mode.load(Ordering::SeqCst) == mode {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(self.mode.load(Ordering::SeqCst), mode, "{what}");
    }

    pub(crate) fn losses(&self, reason: &str) -> u64 {
        self.metrics.losses.with_label_values(&[reason]).get()
    }
}

pub(crate) fn now_tick() -> u64 {
    let scheme = by_name("lable64", LayoutParams::default())
        .unwrap()
        .scheme();
    scheme.tick_at(SystemClock.now_unix_ns()).unwrap_or(0)
}
