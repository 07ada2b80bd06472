//! One follower per process and pool: a copy of the pool's objects — one list, then its watch,
//! each change applied to the copy — its sessions judged by [`super::liveness`], published to
//! every lease of the process in that pool. Their claims, their demand and the gauges read the
//! copy instead of listing the pool each; their holders learn from it that their slot changed
//! or the pool's params object went. A process with many leases in one pool (`--slots`, a
//! benchmark) so costs the API server one watch of the pool, not one per lease and per slot.
//!
//! A copy may be a moment behind; nothing that fences rests on it: a take, a mark write and a
//! session's deletion are compare-and-sets on the version they read. A claimant asks for a
//! copy that has seen every write its session read or made ([`PoolView::fresh`]); one that lags
//! is listed again at once. While any lease of the process claims, the pool is also listed
//! every [`RECHECK`] and when a session may be over: those consistent reads, with the watch's
//! changes, are what sessions are judged on, and the sessions a list shows unrenewed for their
//! duration are deleted on the way.

use super::api::{Kube, KubeError};
use super::copy::Copy;
use super::liveness::{Judged, Observer};
use super::objects::{self, Names};
use super::{call_timeout, KubeConfig};
use futures_util::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

/// A claimant looks again at least this often; while one does, the follower lists the pool
/// this often (its reads judge sessions).
pub(crate) const RECHECK: Duration = Duration::from_secs(2);
/// How long one watch of the pool is trusted before the pool is listed again.
const TRUSTED: Duration = Duration::from_secs(60);
/// A claimant that asked for a copy within this counts as claiming.
const CLAIMING: Duration = Duration::from_secs(5);
/// How long a claimant waits for the watch to bring a copy that has seen its writes before
/// the pool is listed again for it.
const CATCH_UP: Duration = Duration::from_secs(2);

/// The pool's objects by role.
#[derive(Clone, Default)]
pub(crate) struct Objects {
    pub slots: BTreeMap<u32, Arc<Lease>>,
    pub sessions: BTreeMap<Arc<str>, Arc<Lease>>,
    pub params: Option<Arc<Lease>>,
}

/// The pool as this process last saw it.
#[derive(Default)]
pub(crate) struct View {
    pub objects: Objects,
    pub judged: Judged,
    /// The live sessions that say they want a slot.
    pub wanting: Vec<Arc<str>>,
    /// The slots no live session holds, and who they name as holder.
    pub unheld: Vec<(u32, Option<String>)>,
    /// The highest `resourceVersion` applied: the list's, then each change's. Every write of
    /// the pool's objects up to it is in the copy.
    pub version: u64,
    /// Whether the pool has been listed at all.
    pub listed: bool,
}

impl View {
    /// The live sessions in the queue, by place: those holding no slot (a place left on a
    /// holder's session by a failed write would hold the queue up forever).
    pub fn queued(&self) -> Vec<(u64, &Arc<str>, &Lease)> {
        let holding: std::collections::HashSet<&str> = self
            .slots
            .values()
            .filter_map(|l| objects::holder(l))
            .collect();
        let mut q: Vec<_> = self
            .sessions
            .iter()
            .filter(|(n, _)| self.judged.alive.contains(*n) && !holding.contains(&***n))
            .filter_map(|(n, s)| Some((objects::queued(s)?, n, &**s)))
            .collect();
        q.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        q
    }
}

impl std::ops::Deref for View {
    type Target = Objects;
    fn deref(&self) -> &Objects {
        &self.objects
    }
}

/// The followers of one configuration's pools (shared by the leases started with it).
#[derive(Clone, Default)]
pub struct Followers(Arc<Mutex<HashMap<String, Weak<PoolView>>>>);

impl std::fmt::Debug for Followers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Followers")
    }
}

impl Followers {
    /// The follower of `names`' pool, started if none runs.
    pub(crate) fn of(&self, cfg: &KubeConfig, names: &Names) -> Arc<PoolView> {
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let key = format!("{:?} {:?} {}", cfg.kubeconfig, cfg.namespace, names.pool());
        if let Some(v) = all.get(&key).and_then(Weak::upgrade) {
            if !v.task.is_finished() {
                return v;
            }
        }
        all.retain(|_, v| v.strong_count() > 0);
        let v = Arc::new(PoolView::start(cfg, names));
        all.insert(key, Arc::downgrade(&v));
        v
    }
}

/// A running follower; it stops when the last lease holding it is dropped.
pub(crate) struct PoolView {
    names: Names,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

struct Shared {
    tx: watch::Sender<Arc<View>>,
    observer: Observer,
    /// When a claimant last asked for a copy.
    asked: Mutex<Option<Instant>>,
    /// A claimant wants the pool listed now (the copy lags behind its writes).
    relist: Notify,
    /// Sessions whose deletion was tried, at the version judged, and when.
    ending: Mutex<HashMap<(String, String), Instant>>,
}

impl Drop for PoolView {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl PoolView {
    fn start(cfg: &KubeConfig, names: &Names) -> PoolView {
        let shared = Arc::new(Shared {
            tx: watch::channel(Arc::new(View::default())).0,
            observer: Observer::default(),
            asked: Mutex::new(None),
            relist: Notify::new(),
            ending: Mutex::default(),
        });
        let task = tokio::spawn(follow(cfg.clone(), names.clone(), shared.clone()));
        PoolView {
            names: names.clone(),
            shared,
            task,
        }
    }

    /// The names of the pool's objects.
    pub fn names(&self) -> &Names {
        &self.names
    }

    /// The copy now (perhaps not listed yet: see [`View::listed`]).
    pub fn now(&self) -> Arc<View> {
        self.shared.tx.borrow().clone()
    }

    /// Every copy as it is published.
    pub fn subscribe(&self) -> watch::Receiver<Arc<View>> {
        self.shared.tx.subscribe()
    }

    /// Whether a session read just now, with a slot it holds read just now, is live as this
    /// process judged it.
    pub fn live(&self, session: &Lease, slot: &Lease) -> bool {
        self.shared.observer.live(session, slot)
    }

    /// A copy that has seen every write up to `floor` (a version this claimant read or wrote),
    /// within `bound`; the pool is listed again if the watch does not bring one soon. Counts
    /// the caller as claiming (see the module documentation).
    pub async fn fresh(&self, floor: u64, bound: Duration) -> Result<Arc<View>, KubeError> {
        let was = self
            .shared
            .asked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace(Instant::now());
        if was.is_none_or(|at| at.elapsed() >= CLAIMING) {
            // The first claimant in a while: its sessions are judged on reads from now on.
            self.shared.relist.notify_one();
        }
        let mut rx = self.subscribe();
        let ok = |v: &Arc<View>| v.listed && v.version >= floor;
        let mut wait = async |within| {
            let got = tokio::time::timeout(within, rx.wait_for(ok)).await;
            got.ok().and_then(|r| r.ok().map(|v| v.clone()))
        };
        if let Some(v) = wait(CATCH_UP).await {
            return Ok(v);
        }
        self.shared.relist.notify_one();
        match wait(bound).await {
            Some(v) => Ok(v),
            _ => Err(KubeError::Unavailable(format!(
                "the pool could not be read within {bound:?}"
            ))),
        }
    }

    /// Resolves once a copy other than `seen` is published, or after `at_most`.
    pub fn changed(
        &self,
        seen: &Arc<View>,
        at_most: Duration,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let (mut rx, seen) = (self.subscribe(), seen.clone());
        async move {
            let _ = tokio::time::timeout(at_most, rx.wait_for(|v| !Arc::ptr_eq(v, &seen))).await;
        }
    }

    /// Resolves once a copy that has seen `version` says `changed`, or after `at_most`.
    pub fn until(
        &self,
        version: u64,
        at_most: Duration,
        changed: impl Fn(&View) -> bool + Send + Sync + 'static,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut rx = self.subscribe();
        async move {
            let wait = rx.wait_for(|v| v.listed && v.version >= version && changed(v));
            let _ = tokio::time::timeout(at_most, wait).await;
        }
    }
}

/// Follows the pool for as long as a lease holds the follower: lists it, watches it from the
/// list, publishes the judged copy at every batch of changes and when a session may be judged
/// over. Lists it again when a claimant asks, and while one claims whenever the watch brought
/// nothing for [`RECHECK`] (its reads judge sessions); a list that shows what the watch did not
/// starts the watch over from it. Lists it again too when the watch ends or fails (a new client
/// after failures in a row: a connection to a server that went away is not reused).
async fn follow(cfg: KubeConfig, names: Names, shared: Arc<Shared>) {
    let labels = names.all();
    let mut kube: Option<Kube> = None;
    let mut failures = 0u32;
    // A list to watch from, when the last one showed what the watch missed.
    let mut start: Option<(Copy, String)> = None;
    for _ in 0..u64::MAX {
        if failures > 0 {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        if failures >= 2 {
            kube = None;
        }
        let k = match &kube {
            Some(k) => k.clone(),
            None => match Kube::connect(&cfg, call_timeout(cfg.ttl)).await {
                Ok(k) => kube.insert(k).clone(),
                Err(_) => {
                    failures += 1;
                    continue;
                }
            },
        };
        let (mut copy, version) = match start.take() {
            Some(listed) => listed,
            None => match k.list("following the pool", &labels).await {
                Ok((items, version)) => (Copy::listed(&names, items, &version), version),
                Err(_) => {
                    failures += 1;
                    continue;
                }
            },
        };
        let mut listed_at = Instant::now();
        let mut next = publish(&shared, &copy, Read::Listed, &k);
        let Ok(events) = k.events(&labels, &version, TRUSTED).await else {
            failures += 1;
            continue;
        };
        failures = 0;
        let mut events = std::pin::pin!(events);
        // Bounded by the watch's own end (TRUSTED), a failed list and a missed change.
        loop {
            let claiming = shared
                .asked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_some_and(|at| at.elapsed() < CLAIMING);
            let relist_at = listed_at + if claiming { RECHECK } else { TRUSTED };
            let list = tokio::select! {
                e = events.next() => {
                    let Some(e) = e else { break };
                    copy.apply(&names, e);
                    // The changes that came together (a fleet starting, a rollout) at once.
                    for _ in 0..1_000 {
                        match futures_util::FutureExt::now_or_never(events.next()) {
                            Some(Some(e)) => copy.apply(&names, e),
                            Some(None) | None => break,
                        }
                    }
                    next = publish(&shared, &copy, Read::Changes, &k);
                    continue;
                }
                // While a lease claims, a session that may be over is judged on a list.
                () = tokio::time::sleep_until(next.min(relist_at)) => {
                    claiming || Instant::now() >= relist_at
                }
                () = shared.relist.notified() => true,
            };
            if !list {
                next = publish(&shared, &copy, Read::Time, &k);
                continue;
            }
            let Ok((items, version)) = k.list("following the pool", &labels).await else {
                failures += 1;
                break;
            };
            let listed = Copy::listed(&names, items, &version);
            let missed = listed.differs(&copy);
            copy = listed;
            listed_at = Instant::now();
            next = publish(&shared, &copy, Read::Listed, &k);
            if missed {
                start = Some((copy, version));
                break;
            }
        }
    }
}

/// What a judgement of the copy rests on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Read {
    /// A consistent list, just now: sessions judged over on it are deleted.
    Listed,
    /// The watch's changes, just now.
    Changes,
    /// Nothing new: time passed.
    Time,
}

/// Judges `copy` on what `read` says, publishes it, and — on a list, while a claimant of this
/// process claims — deletes the sessions judged over (never on the watch's copy alone: a
/// holder renews through its mark writes, which a lagging watch may not show yet): when to
/// look again.
fn publish(shared: &Shared, copy: &Copy, read: Read, k: &Kube) -> Instant {
    let o = &copy.objects;
    let judged = shared.observer.judge(
        o.sessions.values().map(|l| &**l),
        o.slots.values().map(|l| &**l),
        read != Read::Time,
    );
    let wanting = o
        .sessions
        .iter()
        .filter(|(n, s)| {
            judged.alive.contains(*n) && objects::annotation(s, objects::WANTS) == Some("true")
        })
        .map(|(n, _)| n.clone())
        .collect();
    let unheld = o
        .slots
        .iter()
        .filter_map(|(n, l)| {
            let h = objects::holder(l);
            (!h.is_some_and(|h| judged.alive.contains(h))).then(|| (*n, h.map(str::to_string)))
        })
        .collect();
    let claiming = shared
        .asked
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .is_some_and(|at| at.elapsed() < CLAIMING);
    if read == Read::Listed && claiming && !judged.ended.is_empty() {
        end(shared, k, &judged.ended);
    }
    let next = judged
        .next
        .map_or(TRUSTED, |n| n + Duration::from_millis(50));
    shared.tx.send_replace(Arc::new(View {
        objects: o.clone(),
        judged,
        wanting,
        unheld,
        version: copy.version,
        listed: true,
    }));
    Instant::now() + next
}

/// Deletes sessions judged over, each at the version judged (a renewal since makes the
/// deletion fail), each tried once per [`RECHECK`]: their slots are free then.
fn end(shared: &Shared, k: &Kube, ended: &[(String, String)]) {
    let mut tried = shared.ending.lock().unwrap_or_else(|e| e.into_inner());
    tried.retain(|_, at| at.elapsed() < RECHECK);
    let new: Vec<_> = ended
        .iter()
        .filter(|e| !tried.contains_key(*e))
        .cloned()
        .collect();
    if new.is_empty() {
        return;
    }
    tried.extend(new.iter().map(|e| (e.clone(), Instant::now())));
    let k = k.clone();
    tokio::spawn(async move {
        for (name, version) in new {
            tracing::info!(session = %name, "a session went unrenewed for its whole duration; deleting it, which frees its slots");
            let _ = k
                .delete("ending a session seen unrenewed", &name, Some(&version))
                .await;
        }
    });
}
