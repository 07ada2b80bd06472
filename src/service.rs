//! The ID service: the generator, the clock, the lease it follows, and the waits between ticks.
//!
//! Both socket interfaces call [`Service::issue`] (or [`Service::issue_blocking`]). The
//! generator is held under a std mutex only while runs are taken and packed (no await, no
//! sleep, no log line under the lock).
//!
//! **Two paths.** While no request is waiting for a tick, a request takes its IDs straight
//! under that short lock: many threads asking at once cost a few uncontended atomics each,
//! never a sleep or a hand-over between threads. A request that finds the tick's sequence
//! spent joins the *lane* (FIFO) and waits there for the next tick on the precise [`Timer`],
//! bounded by the request timeout; while anyone is in the lane, newcomers queue behind it, so
//! waits are shared out in arrival order instead of won by races (docs/benchmarks.md).

use crate::clock::{kernel_monotonic_ns, Clock, ClockFaults};
use crate::generator::{Generator, Issued, Refusal, Take, Window};
use crate::layout::{Layout, RequestOptions, Scheme};
use crate::lease::LeaseState;
use crate::metrics::Metrics;
use crate::timer::Timer;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Per-request limits.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The most IDs one request may ask for.
    pub max_batch: u32,
    /// The longest a request may wait for sequence numbers before it is refused.
    pub max_wait: Duration,
}

/// Why a request got no IDs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IssueError {
    #[error("count must be between 1 and {max}, got {count}")]
    BadCount { count: u64, max: u32 },
    #[error("{0}")]
    BadOption(crate::layout::LayoutError),
    /// No lease: with the lease's own reason (claiming, pool exhausted, mark reached, ...).
    #[error("no lease is held: {0}")]
    NoLease(String),
    #[error("{0}")]
    Refused(#[from] Refusal),
    #[error("timed out after {0:?} waiting for sequence numbers")]
    TimedOut(Duration),
}

impl IssueError {
    /// Whether retrying later may succeed (HTTP 503) rather than never (HTTP 400).
    pub fn is_unavailable(&self) -> bool {
        !matches!(self, IssueError::BadCount { .. } | IssueError::BadOption(_))
    }
}

/// A request being issued: what is left of it and its deadlines.
#[derive(Debug)]
struct Pending {
    count: u64,
    left: u32,
    /// When the request joined the lane (its timeout runs from there: the direct path,
    /// taken first, lasts microseconds and reads no clock for it).
    start: Option<Instant>,
    /// On the kernel's clock, set at the first tick wait.
    wait_deadline: Option<u64>,
}

impl Pending {
    /// When the request joined the lane (now, the first time this is asked).
    fn started(&mut self) -> Instant {
        *self.start.get_or_insert_with(Instant::now)
    }
}

/// A request queued for (or in) the lane: counted in `waiting` while this lives.
struct Queued<'a>(&'a AtomicUsize);

impl<'a> Queued<'a> {
    fn join(waiting: &'a AtomicUsize) -> Queued<'a> {
        waiting.fetch_add(1, Ordering::AcqRel);
        Queued(waiting)
    }
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Everything a request handler needs.
#[derive(Debug)]
pub struct Service {
    layout: Box<dyn Layout>,
    scheme: Scheme,
    /// One generator per lease (`--slots`), each on cache lines of its own: every request
    /// writes one, and the fields around them are read by every request (a write beside
    /// them would move their line between cores too).
    cores: Box<[Aligned<Mutex<Core>>]>,
    clock: Arc<dyn Clock>,
    /// Clocks found stalled (set by [`crate::clock::watch_clocks`] where one runs).
    clock_faults: Arc<ClockFaults>,
    timer: Timer,
    metrics: Arc<Metrics>,
    /// What each lease publishes, in the order of `cores`.
    leases: Vec<watch::Receiver<LeaseState>>,
    /// Clock regressions reported: the most any generator saw (each generator sees the same
    /// step of the clock when it is used across it, so they are not added up; a step only one
    /// generator saw may go uncounted, so with `--slots` the metric is a lower bound).
    regressions: AtomicU64,
    /// The slots `idcar_lease_slot_remaining_seconds` shows (stale ones are removed).
    shown: Mutex<Vec<u32>>,
    limits: Limits,
    /// Set once shutdown begins: readiness is false from then on.
    draining: AtomicBool,
    /// Requests that must wait for a tick pass through here in arrival order (tokio's mutex
    /// is FIFO). One that must wait keeps its place, so later requests cannot take every
    /// fresh tick from under it. It also keeps what the log was told of overflow.
    lane: tokio::sync::Mutex<Reported>,
    /// Requests in the lane or queued for it: while above 0, newcomers queue too.
    waiting: AtomicUsize,
    /// What shapes the layout's IDs (flag name without dashes, value), for describe requests.
    params: std::sync::OnceLock<Vec<(String, String)>>,
    /// What this instance issues for, when it is not negotiated (a static generator): said
    /// by `/readyz` under its first line.
    issues_for: std::sync::OnceLock<String>,
}

thread_local! {
    /// Where this thread's next request starts among several generators (`--slots`); threads
    /// start at different places.
    static NEXT: std::cell::Cell<usize> = std::cell::Cell::new(rand::random::<u32>() as usize);
}

/// Aligned to two cache lines (adjacent-line prefetching pairs them).
#[derive(Debug)]
#[repr(align(128))]
struct Aligned<T>(T);

/// The generator and what the metrics were told of its regressions, under one short lock.
#[derive(Debug)]
struct Core {
    gen: Generator,
    /// Regressions already copied into the metric.
    regressions: u64,
}

/// What the log and metrics were told of overflow, kept under the lane (only requests that
/// wait for a tick update it), so reporting needs no atomics of its own.
#[derive(Debug, Default)]
struct Reported {
    /// The tick the last overflowing request waited for (overflow is counted once per tick).
    overflow_tick: Option<u64>,
    /// Overflowing ticks not yet reported in the log.
    overflow_unlogged: u64,
    /// When overflow was last logged.
    overflow_logged_at: Option<Instant>,
}

impl Service {
    pub fn new(
        layout: Box<dyn Layout>,
        clock: Arc<dyn Clock>,
        metrics: Arc<Metrics>,
        lease: watch::Receiver<LeaseState>,
        limits: Limits,
    ) -> std::io::Result<Arc<Service>> {
        Service::with_leases(layout, clock, metrics, vec![lease], limits)
    }

    /// A service issuing under every lease of `leases` (one slot each, `--slots`): requests
    /// are spread over the slots held (see [`Service::issue`]).
    pub fn with_leases(
        layout: Box<dyn Layout>,
        clock: Arc<dyn Clock>,
        metrics: Arc<Metrics>,
        leases: Vec<watch::Receiver<LeaseState>>,
        limits: Limits,
    ) -> std::io::Result<Arc<Service>> {
        assert!(!leases.is_empty(), "a service needs a lease");
        let scheme = layout.scheme();
        let cores = leases
            .iter()
            .map(|lease| {
                let mut gen = Generator::new(scheme);
                gen.set_window(lease.borrow().window());
                Aligned(Mutex::new(Core {
                    gen,
                    regressions: 0,
                }))
            })
            .collect();
        metrics.slots_wanted.set(leases.len() as i64);
        Ok(Arc::new(Service {
            layout,
            scheme,
            cores,
            regressions: AtomicU64::new(0),
            shown: Mutex::new(Vec::new()),
            clock,
            clock_faults: Arc::default(),
            timer: Timer::new()?,
            metrics,
            leases,
            limits,
            draining: AtomicBool::new(false),
            lane: tokio::sync::Mutex::new(Reported::default()),
            waiting: AtomicUsize::new(0),
            params: std::sync::OnceLock::new(),
            issues_for: std::sync::OnceLock::new(),
        }))
    }

    pub fn layout(&self) -> &dyn Layout {
        &*self.layout
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub fn metrics_arc(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Records the parameters that shape the layout's IDs (flag name without dashes, value),
    /// for describe requests. Only the first call counts.
    pub fn set_params(&self, params: &[(String, String)]) {
        let _ = self.params.set(params.to_vec());
    }

    /// Records what this instance issues for (a static generator), for `/readyz`. Only the
    /// first call counts.
    pub fn set_issues_for(&self, what: String) {
        let _ = self.issues_for.set(what);
    }

    /// What [`Service::set_issues_for`] recorded.
    pub fn issues_for(&self) -> Option<&str> {
        self.issues_for.get().map(String::as_str)
    }

    /// The parameters recorded by [`Service::set_params`] (none if never called).
    pub fn params(&self) -> &[(String, String)] {
        self.params.get().map_or(&[], |p| p.as_slice())
    }

    /// Where a clock watchdog reports stalled clocks; readiness follows it.
    pub fn clock_faults(&self) -> Arc<ClockFaults> {
        self.clock_faults.clone()
    }

    /// The generator of lease `part`.
    fn core(&self, part: usize) -> MutexGuard<'_, Core> {
        // The generator's state stays consistent even if a holder panicked mid-way: every
        // mutation completes before any code that could panic.
        self.cores[part].0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Each generator's window (`None` where its lease holds nothing).
    fn windows(&self) -> Vec<Option<Window>> {
        (0..self.cores.len())
            .map(|i| self.core(i).gen.window())
            .collect()
    }

    /// Installs each lease change in its generator until the lease channels close.
    ///
    /// Each change in what may be issued is logged as a lease record (`lease_record =
    /// "issuing"` with slot, floor and generation, before the window is installed; `"stopped"`
    /// with the reason, after it is removed), so a log bounds in time every ID the process
    /// issued for each slot: the fault campaign's checker attributes IDs with it.
    pub async fn follow_lease(self: Arc<Self>) {
        let mut parts = tokio::task::JoinSet::new();
        for part in 0..self.cores.len() {
            parts.spawn(self.clone().follow_part(part));
        }
        // Dropping the set (this task aborted) aborts every part's follower.
        while parts.join_next().await.is_some() {}
    }

    /// [`Service::follow_lease`] for the lease of generator `part`.
    async fn follow_part(self: Arc<Self>, part: usize) {
        let mut rx = self.leases[part].clone();
        let mut was: Option<Window> = None;
        loop {
            let state = rx.borrow_and_update().clone();
            let window = state.window();
            let same = |a: Option<Window>, b: Option<Window>| match (a, b) {
                (Some(a), Some(b)) => a.slot == b.slot && a.generation == b.generation,
                _ => false,
            };
            let changed = !same(was, window);
            if let Some(w) = window.filter(|_| changed) {
                tracing::info!(
                    lease_record = "issuing",
                    part,
                    slot = w.slot,
                    floor = w.floor,
                    mark = w.mark,
                    generation = w.generation,
                    "issuing IDs under the lease"
                );
            }
            self.core(part).gen.set_window(window);
            if let Some(a) = was.filter(|_| changed) {
                tracing::info!(
                    lease_record = "stopped",
                    part,
                    slot = a.slot,
                    generation = a.generation,
                    reason = state.reason().unwrap_or("another lease"),
                    "stopped issuing IDs"
                );
            }
            was = window;
            let held: Vec<u32> = self.windows().iter().flatten().map(|w| w.slot).collect();
            self.metrics.lease.held.set(i64::from(!held.is_empty()));
            self.metrics.slots_held.set(held.len() as i64);
            let lowest = held.iter().min().map_or(-1, |s| i64::from(*s));
            self.metrics.lease.slot.set(lowest);
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// Stops issuing and returns, per lease, the highest tick issued with its slot.
    ///
    /// Permanent: a lease change arriving afterwards cannot re-open a generator, so each
    /// returned tick bounds every ID this process issued under that lease's slot.
    pub fn close(&self) -> Vec<Option<Issued>> {
        self.draining.store(true, Ordering::SeqCst);
        (0..self.cores.len())
            .map(|i| self.core(i).gen.close())
            .collect()
    }

    /// Marks the service as shutting down: readiness turns false at once.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Whether an ID can be issued at this moment: a valid lease is held, the wall clock is
    /// inside its window, and the generator has room (not merely "a lease was published").
    pub fn ready(&self) -> Result<(), String> {
        if self.draining.load(Ordering::SeqCst) {
            return Err("shutting down".into());
        }
        if let Some(why) = self.clock_faults.fault() {
            return Err(why.into());
        }
        let now = self.now_tick();
        let mut refused = None;
        for part in 0..self.cores.len() {
            match self.core(part).gen.can_issue(now) {
                Ok(()) => return Ok(()),
                Err(Refusal::NoLease) => {}
                Err(r) => refused = refused.or(Some(r)),
            }
        }
        match refused {
            Some(r) => Err(r.to_string()),
            None => Err(self.lease_reason()),
        }
    }

    /// How many generators can issue now (`idcar_lease_slots_held` when scraped).
    fn slots_issuing(&self) -> usize {
        let now = self.now_tick();
        (0..self.cores.len())
            .filter(|i| self.core(*i).gen.can_issue(now).is_ok())
            .count()
    }

    /// Why the lease holds nothing now, in the lease's words (with `--slots`, every lease's).
    fn lease_reason(&self) -> String {
        let reason = |rx: &watch::Receiver<LeaseState>| rx.borrow().reason().map(str::to_string);
        match self.leases.as_slice() {
            [one] => reason(one).unwrap_or_else(|| "no lease".into()),
            all => {
                let mut why: Vec<String> = Vec::new();
                for r in all.iter().filter_map(reason) {
                    if !why.contains(&r) {
                        why.push(r);
                    }
                }
                format!("no slot is held (of {}): {}", all.len(), why.join("; "))
            }
        }
    }

    /// Seconds until the time mark of `w`.
    fn remaining(&self, w: &Window) -> f64 {
        let end = self.scheme.tick_start_ns(w.mark.saturating_add(1));
        end.saturating_sub(self.clock.now_unix_ns()) as f64 / 1e9
    }

    /// Seconds until the lease's mark (with `--slots`, the soonest of the slots held: a
    /// renewal stuck on any of them shows), or 0 without a lease.
    pub fn lease_remaining(&self) -> f64 {
        self.windows()
            .iter()
            .flatten()
            .map(|w| self.remaining(w))
            .reduce(f64::min)
            .unwrap_or(0.0)
    }

    /// Seconds until the layout's time field runs out (negative once it has).
    pub fn layout_remaining(&self) -> f64 {
        crate::layout::seconds_left(&self.scheme, self.clock.now_unix_ns())
    }

    /// Updates the gauges that are read when scraped: what can be issued now, each slot's
    /// time left, the layout's time left.
    pub fn refresh_gauges(&self) {
        let m = &self.metrics;
        m.lease.remaining_seconds.set(self.lease_remaining());
        // Held means "can issue now", as /readyz says, not merely "a lease was published".
        m.lease.held.set(i64::from(self.ready().is_ok()));
        let issuing = self.slots_issuing();
        m.slots_held.set(issuing as i64);
        let held: Vec<Window> = self.windows().into_iter().flatten().collect();
        let lowest = held.iter().map(|w| i64::from(w.slot)).min();
        m.lease.slot.set(lowest.unwrap_or(-1));
        // Exhausted means "waits with nothing to issue from": a spare lease of an instance
        // that holds slots already is `idcar_lease_slots_held` below `_wanted`.
        m.pool_exhausted
            .set(i64::from(m.exhausted_parts() != 0 && issuing == 0));
        let mut shown = self.shown.lock().unwrap_or_else(|p| p.into_inner());
        for gone in shown.iter().filter(|s| !held.iter().any(|w| w.slot == **s)) {
            let _ = m
                .slot_remaining_seconds
                .remove_label_values(&[&gone.to_string()]);
        }
        *shown = held.iter().map(|w| w.slot).collect();
        for w in &held {
            m.slot_remaining_seconds
                .with_label_values(&[&w.slot.to_string()])
                .set(self.remaining(w));
        }
        drop(shown);
        m.layout_seconds_remaining.set(self.layout_remaining());
    }

    fn now_tick(&self) -> u64 {
        self.scheme.now_tick(&*self.clock)
    }

    /// Appends `count` IDs in binary form to `out`, waiting for ticks as needed.
    ///
    /// A transaction (`opts.transaction`) takes a single `(tick, sequence)` for the whole
    /// request and the layout packs all `count` IDs from it.
    pub async fn issue(
        &self,
        count: u64,
        opts: &RequestOptions,
        out: &mut Vec<u8>,
    ) -> Result<(), IssueError> {
        let mut p = self.prepare(count, opts)?;
        out.reserve(count as usize * self.layout.width());
        if self.try_direct(&mut p, opts, out)? {
            return Ok(());
        }
        let _queued = Queued::join(&self.waiting);
        let start = p.started();
        let deadline = start.checked_add(self.limits.max_wait).unwrap_or(start);
        let Ok(mut turn) = tokio::time::timeout_at(deadline.into(), self.lane.lock()).await else {
            return Err(self.timed_out());
        };
        while let Some(wait) = self.step(&mut p, opts, out, &mut turn)? {
            self.timer.sleep(wait).await;
        }
        Ok(())
    }

    /// [`Service::issue`] for a blocking thread (the binary protocol's connections): the same
    /// lane, generator and deadlines; tick waits sleep the thread. `rt` serves only a wait for
    /// the lane while another request holds it.
    pub fn issue_blocking(
        &self,
        count: u64,
        opts: &RequestOptions,
        out: &mut Vec<u8>,
        rt: &tokio::runtime::Handle,
    ) -> Result<(), IssueError> {
        let mut p = self.prepare(count, opts)?;
        out.reserve(count as usize * self.layout.width());
        if self.try_direct(&mut p, opts, out)? {
            return Ok(());
        }
        let _queued = Queued::join(&self.waiting);
        let mut turn = match self.lane.try_lock() {
            Ok(turn) => turn,
            Err(_) => {
                let left = self.limits.max_wait.saturating_sub(p.started().elapsed());
                match rt.block_on(async { tokio::time::timeout(left, self.lane.lock()).await }) {
                    Ok(turn) => turn,
                    Err(_) => return Err(self.timed_out()),
                }
            }
        };
        while let Some(wait) = self.step(&mut p, opts, out, &mut turn)? {
            // A relative sleep: on time whatever std's clocks say (see `crate::timer`).
            std::thread::sleep(wait);
        }
        Ok(())
    }

    /// The direct path: while no request waits for a tick, takes what the current tick
    /// allows. `Ok(true)` when the request is complete; `Ok(false)` when it must wait for a
    /// tick (what it took so far stays in `out` and `p`): it then joins the lane.
    fn try_direct(
        &self,
        p: &mut Pending,
        opts: &RequestOptions,
        out: &mut Vec<u8>,
    ) -> Result<bool, IssueError> {
        if self.waiting.load(Ordering::Acquire) > 0 {
            return Ok(false);
        }
        Ok(self.take(p, opts, out)?.0.is_none())
    }

    /// Checks a request and counts its size.
    fn prepare(&self, count: u64, opts: &RequestOptions) -> Result<Pending, IssueError> {
        let max = self.limits.max_batch;
        if count == 0 || count > u64::from(max) {
            return Err(IssueError::BadCount { count, max });
        }
        self.layout.check(opts).map_err(IssueError::BadOption)?;
        self.metrics.batch_size.observe(count as f64);
        Ok(Pending {
            count,
            left: if opts.transaction { 1 } else { count as u32 },
            start: None,
            wait_deadline: None,
        })
    }

    fn timed_out(&self) -> IssueError {
        self.metrics
            .refusals
            .with_label_values(&["timed_out"])
            .inc();
        IssueError::TimedOut(self.limits.max_wait)
    }

    /// Issues what the current tick allows, under the generator's lock (no wait there):
    /// `Ok(None)` once the request is complete, `Ok(Some(d))` to wait `d` for the next tick
    /// and call again, or the refusal. Called in the lane (`told` is its state).
    fn step(
        &self,
        p: &mut Pending,
        opts: &RequestOptions,
        out: &mut Vec<u8>,
        told: &mut Reported,
    ) -> Result<Option<Duration>, IssueError> {
        let (Some(tick), now_ns) = self.take(p, opts, out)? else {
            return Ok(None);
        };
        self.metrics.sequence_waits.inc();
        self.note_overflow(told, tick);
        // Tick waits are bounded on the kernel's clock (see `crate::timer`), from the first.
        let k = kernel_monotonic_ns();
        let start = p.started();
        let end = *p.wait_deadline.get_or_insert_with(|| {
            let left = self.limits.max_wait.saturating_sub(start.elapsed());
            k.saturating_add(u64::try_from(left.as_nanos()).unwrap_or(u64::MAX))
        });
        if k >= end {
            return Err(self.timed_out());
        }
        // With a lead (one ID per tick, issued ahead of the clock) waking for every single
        // tick would cost a timer wake-up per ID: wait until a quarter of the lead (or what
        // is left of the request) is available instead. The generator's tick stays ahead
        // of the clock meanwhile, so no tick goes unused.
        let chunk = u64::from(p.left).min(self.scheme.lead_ticks / 4).max(1);
        let until = self
            .scheme
            .tick_start_ns(tick + chunk - 1)
            .saturating_sub(now_ns);
        Ok(Some(Duration::from_nanos(until.min(end - k))))
    }

    /// Takes and packs what the current tick allows: `(None, _)` once the request is
    /// complete (counted), `(Some(tick), now)` when it must wait for `tick` (the clock read
    /// `now`), or the refusal (counted).
    ///
    /// With `--slots`, the generators are tried in turn from a rotating start, each under
    /// its own lock, until the request is complete: a batch takes what the current tick of
    /// each slot allows before it waits for the next tick, and a slot whose lease holds
    /// nothing is passed over. The request is refused only when every slot refuses.
    fn take(
        &self,
        p: &mut Pending,
        opts: &RequestOptions,
        out: &mut Vec<u8>,
    ) -> Result<(Option<u64>, u64), IssueError> {
        let parts = self.cores.len();
        let first = match parts {
            1 => 0,
            // Round robin per thread: no counter shared by every request.
            _ => NEXT.with(|n| {
                let i = n.get();
                n.set(i.wrapping_add(1));
                i % parts
            }),
        };
        let (mut wait, mut refused, mut now_ns) = (None::<u64>, None::<Refusal>, 0);
        for j in 0..parts {
            let (outcome, at) = self.take_from((first + j) % parts, p, opts, out);
            now_ns = at;
            match outcome {
                Ok(None) => {
                    self.metrics.ids_issued.inc_by(p.count);
                    return Ok((None, now_ns));
                }
                Ok(Some(tick)) => wait = Some(wait.map_or(tick, |w| w.min(tick))),
                // The most telling refusal: "no lease" only when no slot says more.
                Err(r) if refused.is_none_or(|was| was == Refusal::NoLease) => refused = Some(r),
                Err(_) => {}
            }
        }
        if let Some(tick) = wait {
            return Ok((Some(tick), now_ns));
        }
        let r = refused.unwrap_or(Refusal::NoLease);
        self.metrics.refusals.with_label_values(&[r.kind()]).inc();
        Err(match r {
            Refusal::NoLease => IssueError::NoLease(self.lease_reason()),
            r => r.into(),
        })
    }

    /// [`Service::take`] from generator `part`, under its lock (no wait there): `Ok(None)`
    /// once the request is complete, `Ok(Some(tick))` when this generator's tick is spent;
    /// with the clock read under the lock.
    fn take_from(
        &self,
        part: usize,
        p: &mut Pending,
        opts: &RequestOptions,
        out: &mut Vec<u8>,
    ) -> (Result<Option<u64>, Refusal>, u64) {
        let mut core = self.core(part);
        let now_ns = self.clock.now_unix_ns();
        let now = self.scheme.tick_at(now_ns).unwrap_or(0);
        let outcome = loop {
            match core.gen.take(now, p.left) {
                Ok(Take::Run(run)) => {
                    let ids = if opts.transaction {
                        p.count as u32
                    } else {
                        run.len
                    };
                    self.layout.pack_run(&run, opts, ids, out);
                    p.left -= run.len;
                    if p.left == 0 {
                        break Ok(None);
                    }
                }
                Ok(Take::WaitFor { tick }) => break Ok(Some(tick)),
                Err(r) => break Err(r),
            }
        };
        let seen = core.gen.regressions();
        let regressed = seen > core.regressions;
        core.regressions = seen;
        drop(core);
        if regressed {
            let before = self.regressions.fetch_max(seen, Ordering::AcqRel);
            if seen > before {
                self.note_regressions(seen - before);
            }
        }
        (outcome, now_ns)
    }

    /// Counts a tick whose sequence ran out, once per tick, and logs it — at most one line a
    /// second, saying how many ticks overflowed since the last line (sno reports overflow
    /// once per 4 ms unit; at 250 lines a second that would drown a sidecar's log).
    fn note_overflow(&self, told: &mut Reported, waiting_for: u64) {
        if told.overflow_tick.replace(waiting_for) == Some(waiting_for) {
            return;
        }
        self.metrics.sequence_overflow_ticks.inc();
        told.overflow_unlogged += 1;
        if told
            .overflow_logged_at
            .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            return;
        }
        told.overflow_logged_at = Some(Instant::now());
        let ticks = std::mem::take(&mut told.overflow_unlogged);
        tracing::warn!(
            ticks,
            ids_per_tick = self.scheme.ids_per_tick(),
            "sequence overflow: {ticks} tick(s) ran out of sequence numbers since the last \
             report; requests waited for the next tick (demand above capacity, or a narrow \
             sequence range)"
        );
    }

    /// Counts (and logs) `new` regressions of the clock seen by the generator.
    fn note_regressions(&self, new: u64) {
        self.metrics.clock_regressions.inc_by(new);
        tracing::warn!(
            total = self.metrics.clock_regressions.get(),
            "the wall clock stepped back; issuing ahead of it up to the lease mark"
        );
    }
}

#[cfg(test)]
mod tests;
