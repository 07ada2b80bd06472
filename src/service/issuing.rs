//! Issuing: the generators (one per lease) and the lane where requests wait for a tick.
//! The hot path: the generator's std mutex is held only while runs are taken and packed (no
//! await, no sleep, no log line under the lock).

use super::following::Following;
use super::{IssueError, Limits};
use crate::clock::{kernel_monotonic_ns, Clock};
use crate::generator::{Generator, Issued, Refusal, Take, Window};
use crate::layout::{Layout, RequestOptions, Scheme};
use crate::lease::Issuance;
use crate::metrics::Metrics;
use crate::timer::Timer;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

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

/// The generators and the lane: everything a request touches.
#[derive(Debug)]
pub(super) struct Issuing {
    pub(super) layout: Box<dyn Layout>,
    pub(super) scheme: Scheme,
    /// One generator per lease (`--slots`), each on cache lines of its own: every request
    /// writes one, and the fields around them are read by every request (a write beside
    /// them would move their line between cores too).
    cores: Box<[Aligned<Mutex<Core>>]>,
    pub(super) clock: Arc<dyn Clock>,
    timer: Timer,
    pub(super) metrics: Arc<Metrics>,
    /// Clock regressions reported: the most any generator saw (each generator sees the same
    /// step of the clock when it is used across it, so they are not added up; a step only one
    /// generator saw may go uncounted, so with `--slots` the metric is a lower bound).
    regressions: AtomicU64,
    pub(super) limits: Limits,
    /// Requests that must wait for a tick pass through here in arrival order (tokio's mutex
    /// is FIFO). One that must wait keeps its place, so later requests cannot take every
    /// fresh tick from under it. It also keeps what the log was told of overflow.
    lane: tokio::sync::Mutex<Reported>,
    /// Requests in the lane or queued for it: while above 0, newcomers queue too.
    waiting: AtomicUsize,
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

impl Issuing {
    /// One generator per lease, each starting with the window its lease holds now.
    pub(super) fn new(
        layout: Box<dyn Layout>,
        clock: Arc<dyn Clock>,
        metrics: Arc<Metrics>,
        windows: impl Iterator<Item = Option<Window>>,
        limits: Limits,
    ) -> std::io::Result<Issuing> {
        let scheme = layout.scheme();
        let cores = windows
            .map(|window| {
                let mut gen = Generator::new(scheme);
                gen.set_window(window);
                Aligned(Mutex::new(Core {
                    gen,
                    regressions: 0,
                }))
            })
            .collect();
        Ok(Issuing {
            layout,
            scheme,
            cores,
            clock,
            timer: Timer::new()?,
            metrics,
            regressions: AtomicU64::new(0),
            limits,
            lane: tokio::sync::Mutex::new(Reported::default()),
            waiting: AtomicUsize::new(0),
        })
    }

    /// How many generators (leases) there are.
    pub(super) fn parts(&self) -> usize {
        self.cores.len()
    }

    /// The generator of lease `part`.
    fn core(&self, part: usize) -> MutexGuard<'_, Core> {
        // The generator's state stays consistent even if a holder panicked mid-way: every
        // mutation completes before any code that could panic.
        self.cores[part].0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Installs `window` in the generator of lease `part` — none if the lease revoked its
    /// generation meanwhile — and says to `told`, under the generator's lock, what is installed
    /// now and the highest tick issued for its slot before and after (see [`Issuance`]).
    pub(super) fn install(&self, part: usize, window: Option<Window>, told: &Issuance) {
        let mut core = self.core(part);
        told.installing(window.map(|w| w.generation), |allowed| {
            let before = core.gen.slot_issued();
            core.gen.set_window(window.filter(|_| allowed));
            let installed = core.gen.window().map(|w| (w.slot, w.generation));
            (installed, before, core.gen.slot_issued())
        });
    }

    /// Each generator's window (`None` where its lease holds nothing).
    pub(super) fn windows(&self) -> Vec<Option<Window>> {
        (0..self.cores.len())
            .map(|i| self.core(i).gen.window())
            .collect()
    }

    /// Whether generator `part` can issue at tick `now`, or why not.
    pub(super) fn can_issue(&self, part: usize, now: u64) -> Result<(), Refusal> {
        self.core(part).gen.can_issue(now)
    }

    /// Stops every generator for good: per lease, the highest tick issued with its slot.
    pub(super) fn close(&self) -> Vec<Option<Issued>> {
        (0..self.cores.len())
            .map(|i| self.core(i).gen.close())
            .collect()
    }

    pub(super) fn now_tick(&self) -> u64 {
        self.scheme.tick_at(self.clock.now_unix_ns()).unwrap_or(0)
    }

    /// Appends `count` IDs in binary form to `out`, waiting for ticks as needed.
    ///
    /// A transaction (`opts.transaction`) takes a single `(tick, sequence)` for the whole
    /// request and the layout packs all `count` IDs from it.
    pub(super) async fn issue(
        &self,
        count: u64,
        opts: &RequestOptions,
        out: &mut Vec<u8>,
        leases: &Following,
    ) -> Result<(), IssueError> {
        let mut p = self.prepare(count, opts)?;
        out.reserve(count as usize * self.layout.width());
        if self.try_direct(&mut p, opts, out, leases)? {
            return Ok(());
        }
        let _queued = Queued::join(&self.waiting);
        let start = p.started();
        let deadline = start.checked_add(self.limits.max_wait).unwrap_or(start);
        let Ok(mut turn) = tokio::time::timeout_at(deadline.into(), self.lane.lock()).await else {
            return Err(self.timed_out());
        };
        while let Some(wait) = self.step(&mut p, opts, out, &mut turn, leases)? {
            self.timer.sleep(wait).await;
        }
        Ok(())
    }

    /// [`Issuing::issue`] for a blocking thread (the binary protocol's connections): the same
    /// lane, generator and deadlines; tick waits sleep the thread. `rt` serves only a wait for
    /// the lane while another request holds it.
    pub(super) fn issue_blocking(
        &self,
        count: u64,
        opts: &RequestOptions,
        out: &mut Vec<u8>,
        rt: &tokio::runtime::Handle,
        leases: &Following,
    ) -> Result<(), IssueError> {
        let mut p = self.prepare(count, opts)?;
        out.reserve(count as usize * self.layout.width());
        if self.try_direct(&mut p, opts, out, leases)? {
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
        while let Some(wait) = self.step(&mut p, opts, out, &mut turn, leases)? {
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
        leases: &Following,
    ) -> Result<bool, IssueError> {
        if self.waiting.load(Ordering::Acquire) > 0 {
            return Ok(false);
        }
        Ok(self.take(p, opts, out, leases)?.0.is_none())
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
        leases: &Following,
    ) -> Result<Option<Duration>, IssueError> {
        let (Some(tick), now_ns) = self.take(p, opts, out, leases)? else {
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
        leases: &Following,
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
            Refusal::NoLease => IssueError::NoLease(leases.reason()),
            r => r.into(),
        })
    }

    /// [`Issuing::take`] from generator `part`, under its lock (no wait there): `Ok(None)`
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
