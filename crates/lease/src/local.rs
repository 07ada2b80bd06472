//! The static lease: a slot given on the command line, its time mark kept in a state file.
//!
//! The protocol is the one every store runs ([`crate::protocol`]); this file is the
//! state file as its [`MarkStore`] ([`FileMarks`]) and the static way of handing out slots:
//! the configured one, claimed by locking the state file. A restart on a host whose clock
//! went back therefore never repeats an ID; a crash (no release) costs at most one horizon of
//! waiting on the next start.
//!
//! As a store: the version a write compares against is the stored mark with the token of
//! the claim that wrote it. Only this process writes the file (its lock), so a difference
//! means someone edited the file by hand: a mark lowered (or removed) is written back up at
//! once, as in every store; a mark raised is taken as a stolen lease: the lease stops issuing
//! and claims again above what is stored.

use super::planted::PlantedBug;
use super::protocol::{self, Claim, MarkStore, Outcome, Protocol, StoreError, Stored, Timing};
use super::statefile::StateFile;
use super::stop::Stop;
use crate::handle::{LeaseError, LeaseHandle};
use crate::metrics::LeaseMetrics;
use crate::repeated::Repeated;
use crate::retry::Backoff;
use idcar_core::clock::Clock;
use idcar_core::generator::Issued;
use idcar_core::layout::Scheme;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tracing::Instrument;

/// What the static lease needs to know.
#[derive(Clone, Debug)]
pub struct LocalConfig {
    pub state_file: PathBuf,
    /// `layout/cluster/slot`: the key of this slot's mark in the state file.
    pub key: String,
    pub slot: u32,
    pub timing: Timing,
    /// Testing aid (cargo feature `fault-injection`): a deliberate bug for the campaign.
    pub planted: PlantedBug,
}

/// The stored mark and the token (of the claim) that wrote it: what a write compares.
pub type FileVersion = (u64, Option<u64>);

/// A mark as read from the file (never written: 0, no token) with its version.
fn stored(read: Option<(u64, Option<u64>)>) -> Stored<FileVersion> {
    let (mark, token) = read.unwrap_or((0, None));
    Stored {
        mark,
        version: (mark, token),
        by: token,
    }
}

/// The state file as the protocol's store, for one key (the static slot's).
#[derive(Clone, Debug)]
pub struct FileMarks {
    file: Arc<StateFile>,
    key: String,
}

impl FileMarks {
    /// Locks the state file at `path` (failing if another process holds it) for `key`.
    pub fn open(path: &std::path::Path, key: &str) -> Result<FileMarks, LeaseError> {
        Ok(FileMarks {
            file: Arc::new(StateFile::open(path)?),
            key: key.to_string(),
        })
    }

    /// The stored mark and its version, read now.
    pub fn read_now(&self) -> Result<Stored<FileVersion>, LeaseError> {
        Ok(stored(self.file.read_with_token(&self.key)?))
    }

    /// Runs `f` on the file, right here on the lease's own thread (`lease::runtime`), which
    /// runs nothing that must not wait for it: a hand-over to a blocking-pool thread and back
    /// would cost two more wake-ups per renewal, each a wait for a CPU on a busy node. The
    /// generator stops at the mark on its own meanwhile, whatever this thread is doing.
    async fn blocking<T>(
        &self,
        f: impl FnOnce(&StateFile, &str) -> Result<T, LeaseError>,
    ) -> Result<T, StoreError> {
        f(&self.file, &self.key).map_err(|e| {
            let e = e.to_string();
            // The file at the path is another process's now: stop issuing at once.
            if e.contains(super::statefile::LOCKED) {
                StoreError::Conflict(e)
            } else {
                StoreError::Unavailable(e)
            }
        })
    }

    /// Compare-and-set: writes `mark` with the claim's token if the stored (mark, token) is
    /// still `claim.version`.
    async fn cas(&self, claim: &Claim<FileVersion>, mark: u64) -> Result<FileVersion, StoreError> {
        let (expected, token) = (claim.version, claim.token);
        let written = self
            .blocking(move |file, key| {
                let now = file.read_with_token(key)?.unwrap_or((0, None));
                if now != expected {
                    return Ok(Err(now));
                }
                file.write_with_token(key, mark, Some(token))?;
                Ok(Ok((mark, Some(token))))
            })
            .await?;
        written.map_err(|now| {
            StoreError::Conflict(format!(
                "the state file's mark for {} was changed by someone else (to {})",
                self.key, now.0
            ))
        })
    }
}

impl MarkStore for FileMarks {
    type Version = FileVersion;

    fn name(&self) -> &'static str {
        "the state file"
    }

    fn key(&self, _slot: u32) -> String {
        self.key.clone()
    }

    async fn read(&self, _slot: u32) -> Result<Stored<FileVersion>, StoreError> {
        Ok(stored(
            self.blocking(|f, key| f.read_with_token(key)).await?,
        ))
    }

    async fn write(
        &self,
        claim: &Claim<FileVersion>,
        mark: u64,
    ) -> Result<FileVersion, StoreError> {
        self.cas(claim, mark).await
    }

    async fn own_write(
        &self,
        claim: &Claim<FileVersion>,
        attempts: &[u64],
    ) -> Result<Option<(FileVersion, u64)>, StoreError> {
        let (mark, token) = self.read(claim.slot).await?.version;
        Ok((token == Some(claim.token) && attempts.contains(&mark))
            .then_some(((mark, token), mark)))
    }

    async fn write_down(&self, claim: &Claim<FileVersion>, mark: u64) -> Result<(), StoreError> {
        // The slot is let go when the lock is (the process ends).
        self.cas(claim, mark).await.map(|_| ())
    }

    async fn give_back(&self, _slot: u32) {}

    /// The claim is ours while the file at the path is the one this process holds locked (or
    /// can lock: deleted or replaced from outside, it is locked again); the state file has no
    /// pool identity.
    async fn recheck(
        &self,
        claim: &Claim<FileVersion>,
    ) -> Result<protocol::Recheck<FileVersion>, StoreError> {
        match self.blocking(|f, _| f.hold()).await {
            Err(StoreError::Conflict(_)) => return Ok(protocol::Recheck::Gone),
            Err(e) => return Err(e),
            Ok(()) => {}
        }
        Ok(protocol::Recheck::Ours(self.read(claim.slot).await?))
    }
}

/// Locks the state file, checks the stored mark against the clock and starts the maintainer.
///
/// Fails at once (no waiting) when the state file is locked or unreadable. A stored mark
/// further ahead of the clock than `max_clock_wait` is waited for, not ready meanwhile
/// ([`protocol::wait_far_ahead`]).
pub fn start(
    cfg: LocalConfig,
    scheme: Scheme,
    clock: Arc<dyn Clock>,
    metrics: Arc<LeaseMetrics>,
) -> Result<LeaseHandle, LeaseError> {
    let store = FileMarks::open(&cfg.state_file, &cfg.key)?;
    let stored = store.read_now()?;
    let (p, rx) = Protocol::new(
        scheme,
        clock,
        metrics,
        cfg.timing,
        cfg.planted,
        crate::part::Part::default(),
        "starting",
    );
    let (release_tx, release_rx) = oneshot::channel();
    let span = tracing::info_span!("lease", kind = "local", key = %cfg.key);
    let task = tokio::spawn(maintain(cfg, p, store, stored, release_rx).instrument(span));
    Ok(LeaseHandle::new(rx, release_tx, task, Default::default()))
}

/// Holds the static slot through the protocol; after a loss (the file edited under us, or
/// unreadable for a while) claims it again above what is stored.
async fn maintain(
    cfg: LocalConfig,
    p: Protocol,
    store: FileMarks,
    mut stored: Stored<FileVersion>,
    release: oneshot::Receiver<Option<Issued>>,
) -> Result<(), LeaseError> {
    let mut stop = Stop::new(release);
    let mut generation = 0;
    let mut backoff = Backoff::new(Duration::from_millis(100), cfg.timing.renew_every);
    // The highest mark written by a lease of this slot lost to a foreign write.
    let mut written = 0;
    loop {
        let mut claim = Claim::new(&p, cfg.slot, stored);
        claim.raise_floor(written);
        let mut demand = protocol::Demand::none();
        match protocol::hold(&p, &store, claim, &mut stop, &mut generation, &mut demand).await {
            Outcome::Released | Outcome::Abandoned => return Ok(()),
            Outcome::ReleaseFailed(e) => {
                return Err(LeaseError::StateFile {
                    path: cfg.state_file.display().to_string(),
                    why: e.to_string(),
                })
            }
            Outcome::ClockBehind(_) => {
                if let Err(i) = protocol::wait_far_ahead(&p, &cfg.key, claim.floor, &mut stop).await
                {
                    tracing::debug!(?i, "stopped while waiting for a mark far ahead");
                    p.released();
                    return Ok(());
                }
            }
            Outcome::Stolen { mark, .. } => written = written.max(mark),
            Outcome::SessionGone { .. } | Outcome::PoolReplaced { .. } => {}
        }
        // Claim again: read what is stored now (retrying a file that cannot be read).
        let mut failing = Repeated::new("cannot read the state file");
        stored = loop {
            match store.read(cfg.slot).await {
                Ok(s) => {
                    failing.ended();
                    break s;
                }
                Err(e) => {
                    failing.failed(&e);
                    if stop.sleep(backoff.next_wait()).await.is_err() {
                        p.released();
                        return Ok(());
                    }
                }
            }
        };
        backoff.reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::LeaseState;
    use idcar_core::clock::ManualClock;
    use idcar_core::generator::Window;
    use idcar_core::layout::{by_name, LayoutParams};

    fn setup(dir: &std::path::Path, wait: Duration) -> (LocalConfig, Scheme) {
        let scheme = by_name("lable64", LayoutParams::default())
            .unwrap()
            .scheme();
        let cfg = LocalConfig {
            state_file: dir.join("state.json"),
            key: "lable64/0/0".into(),
            slot: 0,
            timing: Timing {
                horizon: Duration::from_secs(3),
                idle_horizon: Duration::from_secs(3),
                renew_every: Duration::from_secs(1),
                max_clock_wait: wait,
                starve: Duration::ZERO,
            },
            planted: PlantedBug::None,
        };
        (cfg, scheme)
    }

    async fn held(rx: &mut tokio::sync::watch::Receiver<LeaseState>) -> Window {
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
        let m = Arc::new(LeaseMetrics::new());
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
    async fn waits_for_a_mark_far_ahead_saying_why_and_for_a_near_one() {
        let dir = tempfile::tempdir().unwrap();
        let (cfg, scheme) = setup(dir.path(), Duration::from_millis(300));
        StateFile::open(&cfg.state_file)
            .unwrap()
            .write("lable64/0/0", 5_000)
            .unwrap();
        let clock = Arc::new(ManualClock::new(1_000 * 1_000_000));
        let m = Arc::new(LeaseMetrics::new());
        // 4 s ahead, beyond the 300 ms bound: not ready saying why, then held once past.
        let lease = start(cfg.clone(), scheme, clock.clone(), m.clone()).unwrap();
        let mut rx = lease.subscribe();
        let why = tokio::time::timeout(
            Duration::from_secs(5),
            rx.wait_for(|s| s.reason().is_some_and(|r| r.contains("--max-clock-wait"))),
        )
        .await
        .expect("says why in time")
        .unwrap()
        .reason()
        .unwrap()
        .to_string();
        assert!(why.contains("ahead of this host's clock"), "{why}");
        assert!(rx.borrow().window().is_none());
        clock.set(5_001 * 1_000_000);
        let w = held(&mut rx).await;
        assert_eq!(w.floor, 5_000);
        lease.release(None).await.unwrap();

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
