//! The static lease: a slot given on the command line, its time mark kept in a state file.
//!
//! Same protocol as the ZooKeeper lease, with the state file standing in for the mark znode:
//! read the stored mark, wait (bounded by `max_clock_wait`) until the clock has passed it,
//! write `now + horizon`, then publish the lease; renew every `renew_every` with
//! `max(mark, now + horizon)`; on release write the mark down to the highest tick issued. A
//! restart on a host whose clock went back therefore never repeats an ID; a crash (no
//! release) costs at most one horizon of waiting on the next start.

use super::statefile::StateFile;
use super::{Issued, LeaseError, LeaseHandle, LeaseState, Window};
use crate::clock::Clock;
use crate::layout::Scheme;
use crate::metrics::Metrics;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{oneshot, watch};
use tracing::Instrument;

/// What the static lease needs to know.
#[derive(Clone, Debug)]
pub struct LocalConfig {
    pub state_file: PathBuf,
    /// `layout/cluster/slot`: the key of this slot's mark in the state file.
    pub key: String,
    pub slot: u32,
    /// How far ahead of the clock each written mark reaches.
    pub horizon: Duration,
    /// How often the mark is pushed forward.
    pub renew_every: Duration,
    /// How long start-up may wait for the clock to pass the stored mark.
    pub max_clock_wait: Duration,
}

struct Ctx {
    cfg: LocalConfig,
    scheme: Scheme,
    clock: Arc<dyn Clock>,
    metrics: Arc<Metrics>,
    file: Arc<StateFile>,
    tx: watch::Sender<LeaseState>,
}

impl Ctx {
    fn now_tick(&self) -> u64 {
        self.scheme.tick_at(self.clock.now_unix_ns()).unwrap_or(0)
    }

    async fn write(&self, mark: u64) -> Result<(), LeaseError> {
        let file = self.file.clone();
        let key = self.cfg.key.clone();
        tokio::task::spawn_blocking(move || file.write(&key, mark))
            .await
            .map_err(|e| LeaseError::Task(e.to_string()))?
    }

    /// How long until the clock is past `mark`.
    fn wait_past(&self, mark: u64) -> Duration {
        self.scheme.wait_past(mark, self.clock.now_unix_ns())
    }
}

/// Locks the state file, checks the stored mark against the clock and starts the maintainer.
///
/// Fails at once (no waiting) when the state file is locked or unreadable, or when the stored
/// mark is further ahead of the clock than `max_clock_wait`.
pub fn start(
    cfg: LocalConfig,
    scheme: Scheme,
    clock: Arc<dyn Clock>,
    metrics: Arc<Metrics>,
) -> Result<LeaseHandle, LeaseError> {
    let file = Arc::new(StateFile::open(&cfg.state_file)?);
    let floor = file.read(&cfg.key)?.unwrap_or(0);
    let (tx, rx) = watch::channel(LeaseState::Pending {
        reason: "starting".into(),
    });
    let ctx = Ctx {
        cfg,
        scheme,
        clock,
        metrics,
        file,
        tx,
    };
    let ahead = ctx.wait_past(floor);
    // Two ticks on top: a mark written a horizon ahead is passed up to two ticks after it.
    if ahead > ctx.cfg.max_clock_wait + ctx.scheme.rounding_slack() {
        return Err(LeaseError::ClockBehind {
            key: ctx.cfg.key.clone(),
            ahead,
            max: ctx.cfg.max_clock_wait,
        });
    }
    let (release_tx, release_rx) = oneshot::channel();
    let span = tracing::info_span!("lease", kind = "local", key = %ctx.cfg.key);
    let task = tokio::spawn(maintain(ctx, floor, release_rx).instrument(span));
    Ok(LeaseHandle::new(rx, release_tx, task))
}

async fn maintain(
    ctx: Ctx,
    floor: u64,
    mut release: oneshot::Receiver<Option<Issued>>,
) -> Result<(), LeaseError> {
    if let Some(done) = wait_for_clock(&ctx, floor, &mut release).await {
        return done;
    }
    renew(&ctx, floor, &mut release).await
}

/// Waits until the clock has passed the stored mark; the bound was checked in `start`, and is
/// re-checked here in case the clock moves back while we wait. `Some` when the lease ended
/// meanwhile (released, or the clock too far behind).
async fn wait_for_clock(
    ctx: &Ctx,
    floor: u64,
    release: &mut oneshot::Receiver<Option<Issued>>,
) -> Option<Result<(), LeaseError>> {
    let started = Instant::now();
    loop {
        let wait = ctx.wait_past(floor);
        if wait.is_zero() {
            break;
        }
        if started.elapsed() + wait > ctx.cfg.max_clock_wait + ctx.scheme.rounding_slack() {
            let e = LeaseError::ClockBehind {
                key: ctx.cfg.key.clone(),
                ahead: wait,
                max: ctx.cfg.max_clock_wait,
            };
            ctx.tx.send_replace(LeaseState::Failed {
                reason: e.to_string(),
            });
            return Some(Err(e));
        }
        tracing::info!(
            wait_ms = wait.as_millis() as u64,
            floor,
            "waiting for the clock to pass the stored mark"
        );
        ctx.tx.send_replace(LeaseState::Pending {
            reason: format!("waiting {wait:?} for the clock to pass the stored mark"),
        });
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            highest = &mut *release => {
                return Some(release_now(ctx, floor, highest.ok().flatten()).await);
            }
        }
    }
    ctx.metrics
        .lease
        .mark_wait_seconds
        .observe(started.elapsed().as_secs_f64());
    None
}

/// Writes `max(mark, now + horizon)` every `renew_every` (backing off on errors), publishing
/// the lease; counts a loss when the mark runs out unrenewed; releases when asked.
async fn renew(
    ctx: &Ctx,
    floor: u64,
    release: &mut oneshot::Receiver<Option<Issued>>,
) -> Result<(), LeaseError> {
    let horizon = ctx.scheme.ticks_in(ctx.cfg.horizon);
    let mut mark = floor;
    let mut held = false;
    // Set while the mark has run out with renewals failing: counted once as a loss.
    let mut lapsed = false;
    let mut backoff = Duration::from_millis(100);
    loop {
        let want = mark.max(ctx.now_tick().saturating_add(horizon));
        let t = Instant::now();
        let next = match ctx.write(want).await {
            Ok(()) => {
                ctx.metrics
                    .lease
                    .renewal_seconds
                    .observe(t.elapsed().as_secs_f64());
                mark = want;
                ctx.metrics.lease.renewals.with_label_values(&["ok"]).inc();
                let w = Window {
                    slot: ctx.cfg.slot,
                    floor,
                    mark,
                    generation: 1,
                };
                ctx.tx.send_replace(LeaseState::Held(w));
                if !held || lapsed {
                    tracing::info!(slot = ctx.cfg.slot, floor, mark, "lease held");
                    held = true;
                    lapsed = false;
                }
                backoff = Duration::from_millis(100);
                ctx.cfg.renew_every
            }
            Err(e) => {
                // Keep serving up to the mark already written; the generator stops there.
                ctx.metrics
                    .lease
                    .renewals
                    .with_label_values(&["error"])
                    .inc();
                tracing::warn!(error = %e, mark, "could not renew the time mark");
                if held && !lapsed && ctx.now_tick() > mark {
                    // The mark ran out: the generator has stopped; say so and count it.
                    lapsed = true;
                    ctx.metrics
                        .lease
                        .losses
                        .with_label_values(&["unreachable"])
                        .inc();
                    tracing::error!(error = %e, mark, "lease lost: the time mark ran out and the state file cannot be written");
                    ctx.tx.send_replace(LeaseState::Lost {
                        reason: format!(
                            "the time mark ran out and the state file cannot be written: {e}"
                        ),
                    });
                }
                backoff = (backoff * 2).min(ctx.cfg.renew_every);
                // Wake when the mark runs out, to report it then rather than a backoff later.
                let until_out = ctx.wait_past(mark);
                if held && !lapsed && !until_out.is_zero() {
                    backoff.min(until_out)
                } else {
                    backoff
                }
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(next) => {}
            highest = &mut *release => {
                return release_now(ctx, floor, highest.ok().flatten()).await;
            }
        }
    }
}

async fn release_now(ctx: &Ctx, floor: u64, highest: Option<Issued>) -> Result<(), LeaseError> {
    ctx.tx.send_replace(LeaseState::Released);
    let down = super::mark_down(ctx.cfg.slot, floor, highest);
    ctx.write(down).await?;
    tracing::info!(
        mark = down,
        "lease released; mark written down to the highest issued time"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::layout::{by_name, LayoutParams};

    fn setup(dir: &std::path::Path, wait: Duration) -> (LocalConfig, Scheme) {
        let scheme = by_name("lable64", LayoutParams::default())
            .unwrap()
            .scheme();
        let cfg = LocalConfig {
            state_file: dir.join("state.json"),
            key: "lable64/0/0".into(),
            slot: 0,
            horizon: Duration::from_secs(3),
            renew_every: Duration::from_secs(1),
            max_clock_wait: wait,
        };
        (cfg, scheme)
    }

    async fn held(rx: &mut watch::Receiver<LeaseState>) -> Window {
        let st = tokio::time::timeout(
            Duration::from_secs(10),
            rx.wait_for(|s| s.window().is_some()),
        )
        .await
        .expect("lease held in time")
        .unwrap();
        st.window().unwrap()
    }

    #[tokio::test]
    async fn claim_renew_release_writes_mark_down() {
        let dir = tempfile::tempdir().unwrap();
        let (cfg, scheme) = setup(dir.path(), Duration::from_secs(5));
        let clock = Arc::new(ManualClock::new(1_000 * 1_000_000));
        let m = Arc::new(Metrics::new("lable64", 0));
        let lease = start(cfg.clone(), scheme, clock.clone(), m).unwrap();
        let mut rx = lease.subscribe();
        let w = held(&mut rx).await;
        assert_eq!((w.floor, w.mark), (0, 1_000 + 3_000));
        lease
            .release(Some(Issued {
                slot: 0,
                tick: 1_234,
            }))
            .await
            .unwrap();
        let f = StateFile::open(&cfg.state_file).unwrap();
        assert_eq!(f.read("lable64/0/0").unwrap(), Some(1_234));
    }

    #[tokio::test]
    async fn refuses_a_mark_too_far_ahead_and_waits_for_a_near_one() {
        let dir = tempfile::tempdir().unwrap();
        let (cfg, scheme) = setup(dir.path(), Duration::from_millis(300));
        StateFile::open(&cfg.state_file)
            .unwrap()
            .write("lable64/0/0", 5_000)
            .unwrap();
        let clock = Arc::new(ManualClock::new(1_000 * 1_000_000));
        let m = Arc::new(Metrics::new("lable64", 0));
        let e = start(cfg.clone(), scheme, clock.clone(), m.clone()).unwrap_err();
        assert!(matches!(e, LeaseError::ClockBehind { .. }), "{e}");

        // 200 ms ahead: within the bound, so the lease waits; the clock then moves past.
        clock.set(4_800 * 1_000_000);
        let lease = start(cfg, scheme, clock.clone(), m).unwrap();
        let mut rx = lease.subscribe();
        assert!(rx.borrow().window().is_none());
        clock.set(5_001 * 1_000_000);
        let w = held(&mut rx).await;
        assert_eq!(w.floor, 5_000);
        assert!(w.mark > 5_001);
        lease.release(None).await.unwrap();
    }
}
