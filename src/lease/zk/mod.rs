//! The ZooKeeper lease: a slot claimed from a pool, fenced by a compare-and-set time mark.
//!
//! Tree, one namespace per layout and cluster (see DESIGN.md):
//!
//! ```text
//! <root>/<layout>/<cluster>/queue/claim-<seq>   EPHEMERAL_SEQUENTIAL  a contender waiting its turn
//! <root>/<layout>/<cluster>/slots/<N>           EPHEMERAL             the slot's holder (JSON owner)
//! <root>/<layout>/<cluster>/marks/<N>           PERSISTENT            the slot's time mark (decimal ticks)
//! ```
//!
//! Why IDs stay unique across holders of one slot, whatever the clocks say: a holder issues
//! only ticks `<=` the mark it last wrote, and a new holder issues only ticks `>` the mark it
//! read, after writing its own mark with a compare-and-set on that read's version. Every write
//! of `marks/N` is such a compare-and-set (in a `multi` that also checks `slots/N`), so the
//! writers of one slot's mark form a single order: the new holder's first write succeeds only
//! if no older holder wrote in between, and every later write of the older holder fails.
//!
//! The maintainer task ([`start`]) loops over sessions; within a session it claims
//! (`claim`), waits for the clock to pass the mark, writes `now + horizon`, publishes the
//! lease, renews, and on release writes the mark down to the highest tick issued and deletes
//! its slot node in one `multi`. A version mismatch or a vanished slot node stops issuing at
//! once and claims again; an unreachable ZooKeeper leaves the last mark in force (the generator
//! stops there); an expired session opens a new one and claims again, preferring the same slot.

mod claim;
pub mod pool;

use super::{Issued, LeaseError, LeaseHandle, LeaseState, Window};
use crate::clock::Clock;
use crate::layout::Scheme;
use crate::metrics::Metrics;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use zookeeper_client as zk;

/// What the negotiator needs to know.
#[derive(Clone, Debug)]
pub struct ZkConfig {
    /// Connect string: `host:port[,host:port...][/chroot]`.
    pub connect: String,
    /// Root of idcar's tree (default `/idcar`).
    pub root: String,
    pub layout: &'static str,
    pub cluster: u8,
    /// Slots `0..pool_size` are negotiated.
    pub pool_size: u32,
    /// A slot to take when it is free.
    pub prefer: Option<u32>,
    pub session_timeout: Duration,
    pub horizon: Duration,
    pub renew_every: Duration,
    /// How long to wait for the clock to pass a claimed slot's mark before giving up.
    pub max_clock_wait: Duration,
    /// `user:password` for ZooKeeper digest auth; znodes are then created creator-only.
    pub auth: Option<String>,
    /// The Kubernetes pod this instance runs in, shown in the slot's owner record.
    pub pod: Option<String>,
}

/// The paths of one layout and cluster's namespace.
#[derive(Clone, Debug)]
pub struct Paths {
    base: String,
}

impl Paths {
    pub fn new(root: &str, layout: &str, cluster: u8) -> Paths {
        Paths {
            base: format!("{}/{layout}/{cluster}", root.trim_end_matches('/')),
        }
    }
    pub fn queue(&self) -> String {
        format!("{}/queue", self.base)
    }
    pub fn slots(&self) -> String {
        format!("{}/slots", self.base)
    }
    pub fn marks(&self) -> String {
        format!("{}/marks", self.base)
    }
    pub fn slot(&self, n: u32) -> String {
        format!("{}/slots/{n}", self.base)
    }
    pub fn mark(&self, n: u32) -> String {
        format!("{}/marks/{n}", self.base)
    }
}

/// Who holds a slot: the JSON data of a slot node (and of a queue node).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Owner {
    pub host: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    pub pid: u32,
    /// Random per process: tells this process's own expired sessions from other instances.
    pub instance: String,
    /// The ZooKeeper session that created the node, in hex.
    pub session: String,
    /// When the node was written, milliseconds since the Unix epoch.
    pub since_ms: u64,
}

impl Owner {
    fn for_this_process(
        session: zk::SessionId,
        instance: &str,
        pod: Option<&str>,
        now_ms: u64,
    ) -> Owner {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .or_else(|_| std::env::var("HOSTNAME"))
            .unwrap_or_else(|_| "unknown".into());
        Owner {
            host,
            pod: pod.map(str::to_string),
            pid: std::process::id(),
            instance: instance.to_string(),
            session: format!("{session}"),
            since_ms: now_ms,
        }
    }
}

/// A random instance ID (from the kernel's generator; the time as a fallback).
fn instance_id() -> String {
    let mut b = [0u8; 8];
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
        .is_ok();
    if !ok {
        b = (std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos() as u64)
            .to_be_bytes();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Whether `e` means the session is gone for good (a new one is needed).
pub(crate) fn session_gone(e: &zk::Error) -> bool {
    matches!(
        e,
        zk::Error::SessionExpired
            | zk::Error::ClientClosed
            | zk::Error::AuthFailed
            | zk::Error::NoHosts
    )
}

/// Connects a client (digest auth when `auth` is given).
pub async fn connect(
    connect: &str,
    session_timeout: Duration,
    auth: Option<&str>,
) -> Result<zk::Client, zk::Error> {
    let mut c = zk::Client::connector().with_session_timeout(session_timeout);
    if let Some(a) = auth {
        c = c.with_auth("digest", a.as_bytes());
    }
    c.connect(connect).await
}

/// Like [`connect`], but fails as soon as every server has been tried once (for the CLI,
/// where "connection refused" should say so at once rather than after a session timeout).
pub async fn connect_once(
    connect: &str,
    session_timeout: Duration,
    auth: Option<&str>,
) -> Result<zk::Client, zk::Error> {
    let mut c = zk::Client::connector()
        .with_session_timeout(session_timeout)
        .with_fail_eagerly();
    if let Some(a) = auth {
        c = c.with_auth("digest", a.as_bytes());
    }
    c.connect(connect).await
}

/// ACLs for nodes idcar creates: creator-only under digest auth, else open.
pub(crate) fn acls(auth: bool) -> zk::Acls<'static> {
    if auth {
        zk::Acls::creator_all()
    } else {
        zk::Acls::anyone_all()
    }
}

/// Shared by the maintainer's parts.
pub(crate) struct Ctx {
    pub cfg: ZkConfig,
    pub scheme: Scheme,
    pub clock: Arc<dyn Clock>,
    pub metrics: Arc<Metrics>,
    pub paths: Paths,
    pub instance: String,
    pub tx: watch::Sender<LeaseState>,
}

impl Ctx {
    fn now_tick(&self) -> u64 {
        self.scheme.tick_at(self.clock.now_unix_ns()).unwrap_or(0)
    }

    fn now_ms(&self) -> u64 {
        self.clock.now_unix_ns() / 1_000_000
    }

    pub(crate) fn owner(&self, client: &zk::Client) -> Vec<u8> {
        let o = Owner::for_this_process(
            client.session_id(),
            &self.instance,
            self.cfg.pod.as_deref(),
            self.now_ms(),
        );
        serde_json::to_vec(&o).expect("owner serialises")
    }

    pub(crate) fn pending(&self, reason: impl Into<String>) {
        self.tx.send_replace(LeaseState::Pending {
            reason: reason.into(),
        });
    }

    /// How long until the clock is past `mark`.
    fn wait_past(&self, mark: u64) -> Duration {
        self.scheme.wait_past(mark, self.clock.now_unix_ns())
    }
}

/// Starts the negotiator; the lease is published once a slot is held.
pub fn start(
    cfg: ZkConfig,
    scheme: Scheme,
    clock: Arc<dyn Clock>,
    metrics: Arc<Metrics>,
) -> LeaseHandle {
    metrics.pool_size.set(i64::from(cfg.pool_size));
    let (tx, rx) = watch::channel(LeaseState::Pending {
        reason: "connecting to ZooKeeper".into(),
    });
    let span = tracing::info_span!(
        "lease",
        kind = "zookeeper",
        layout = cfg.layout,
        cluster = cfg.cluster
    );
    let ctx = Ctx {
        paths: Paths::new(&cfg.root, cfg.layout, cfg.cluster),
        cfg,
        scheme,
        clock,
        metrics,
        instance: instance_id(),
        tx,
    };
    let (release_tx, release_rx) = oneshot::channel();
    let task = tokio::spawn(maintain(ctx, release_rx).instrument(span));
    LeaseHandle::new(rx, release_tx, task)
}

/// How one session ended.
enum End {
    Released,
    /// The session is gone; `bool`: a lease was held when it went.
    SessionGone(String, bool),
    Fatal(LeaseError),
}

/// A slot held in the current session.
struct Held {
    slot: u32,
    slot_version: i32,
    floor: u64,
    mark: u64,
    mark_version: i32,
}

async fn maintain(
    ctx: Ctx,
    mut release: oneshot::Receiver<Option<Issued>>,
) -> Result<(), LeaseError> {
    let mut prefer = ctx.cfg.prefer;
    let mut memo = claim::Memo::default();
    let mut generation = 0u64;
    let mut sessions = 0u64;
    let mut backoff = Duration::from_millis(100);
    loop {
        ctx.metrics.session_state("disconnected");
        let connected = tokio::select! {
            r = connect(&ctx.cfg.connect, ctx.cfg.session_timeout, ctx.cfg.auth.as_deref()) => r,
            _ = &mut release => {
                ctx.tx.send_replace(LeaseState::Released);
                return Ok(());
            }
        };
        let client = match connected {
            Ok(c) => c,
            Err(e @ zk::Error::AuthFailed) => {
                let e = LeaseError::Task(format!(
                    "ZooKeeper refused the credentials of --zk-auth: {e}"
                ));
                ctx.tx.send_replace(LeaseState::Failed {
                    reason: e.to_string(),
                });
                return Err(e);
            }
            Err(e) => {
                tracing::warn!(error = %e, connect = %ctx.cfg.connect, "cannot connect to ZooKeeper; retrying");
                ctx.pending(format!("cannot connect to ZooKeeper: {e}"));
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = &mut release => {
                        ctx.tx.send_replace(LeaseState::Released);
                        return Ok(());
                    }
                }
                backoff = (backoff * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        backoff = Duration::from_millis(100);
        sessions += 1;
        if sessions > 1 {
            ctx.metrics.zk_reconnects.inc();
        }
        ctx.metrics.session_state("connected");
        tracing::info!(session = %client.session_id(), "ZooKeeper session established");
        let dead = CancellationToken::new();
        let states = tokio::spawn(track_states(
            client.state_watcher(),
            ctx.metrics.clone(),
            dead.clone(),
        ));
        let watchers = pool::spawn_gauges(
            client.clone(),
            ctx.paths.clone(),
            ctx.cfg.pool_size,
            ctx.metrics.clone(),
        );
        // Nodes this session may have left belong to it alone: a new session starts afresh.
        memo.suspects.clear();
        let mut state = SessionState {
            prefer: &mut prefer,
            generation: &mut generation,
            memo: &mut memo,
        };
        let end = session(&ctx, &client, &dead, &mut state, &mut release).await;
        watchers.abort();
        let _ = watchers.await;
        match end {
            End::Released => {
                // Dropping the last handle sends CloseSession; wait (bounded) until it went, so
                // our ephemeral nodes go now and not a session timeout later.
                let mut w = client.state_watcher();
                drop(client);
                let _ = tokio::time::timeout(Duration::from_secs(1), async {
                    while !matches!(
                        w.changed().await,
                        zk::SessionState::Closed | zk::SessionState::Expired
                    ) {}
                })
                .await;
                states.abort();
                ctx.metrics.session_state("closed");
                return Ok(());
            }
            End::SessionGone(why, was_holding) => {
                states.abort();
                if was_holding {
                    ctx.metrics
                        .lease_losses
                        .with_label_values(&["expired"])
                        .inc();
                }
                ctx.metrics.session_state("expired");
                tracing::warn!(reason = %why, "ZooKeeper session lost; opening a new one");
                ctx.tx.send_replace(LeaseState::Lost { reason: why });
            }
            End::Fatal(e) => {
                states.abort();
                ctx.tx.send_replace(LeaseState::Failed {
                    reason: e.to_string(),
                });
                return Err(e);
            }
        }
    }
}

/// Follows the session's state into metrics; cancels `dead` once the session is over.
async fn track_states(mut w: zk::StateWatcher, metrics: Arc<Metrics>, dead: CancellationToken) {
    let mut was_disconnected = false;
    loop {
        let state = w.changed().await;
        match state {
            zk::SessionState::Disconnected => {
                was_disconnected = true;
                metrics.session_state("disconnected");
                tracing::warn!("disconnected from ZooKeeper");
            }
            zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                if was_disconnected {
                    metrics.zk_reconnects.inc();
                    tracing::info!("reconnected to ZooKeeper");
                }
                was_disconnected = false;
                metrics.session_state("connected");
            }
            zk::SessionState::Expired | zk::SessionState::Closed | zk::SessionState::AuthFailed => {
                metrics.session_state(match state {
                    zk::SessionState::Expired => "expired",
                    zk::SessionState::AuthFailed => "auth_failed",
                    _ => "closed",
                });
                dead.cancel();
                return;
            }
        }
    }
}

/// What a session's claims carry over from the maintainer.
struct SessionState<'a> {
    prefer: &'a mut Option<u32>,
    generation: &'a mut u64,
    memo: &'a mut claim::Memo,
}

fn classify(e: zk::Error, what: &str) -> End {
    if session_gone(&e) {
        End::SessionGone(format!("{what}: {e}"), false)
    } else if matches!(e, zk::Error::NoAuth | zk::Error::InvalidAcl) {
        End::Fatal(LeaseError::Task(format!(
            "{what}: {e} (check --zk-auth and the ACLs under --zk-root)"
        )))
    } else {
        End::Fatal(LeaseError::Task(format!("{what}: {e}")))
    }
}

async fn session(
    ctx: &Ctx,
    client: &zk::Client,
    dead: &CancellationToken,
    st: &mut SessionState<'_>,
    release: &mut oneshot::Receiver<Option<Issued>>,
) -> End {
    let dir = zk::CreateMode::Persistent.with_acls(acls(ctx.cfg.auth.is_some()));
    let mut retry = Duration::from_millis(100);
    for path in [ctx.paths.queue(), ctx.paths.slots(), ctx.paths.marks()] {
        loop {
            match client.mkdir(&path, &dir).await {
                Ok(()) => break,
                Err(e)
                    if session_gone(&e)
                        || matches!(e, zk::Error::NoAuth | zk::Error::InvalidAcl) =>
                {
                    return classify(e, &format!("cannot create {path}"));
                }
                Err(e) => {
                    // Passing faults (connection loss, a leader election): try again.
                    tracing::warn!(path = %path, error = %e, "cannot create a directory node yet; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(retry) => {}
                        _ = &mut *release => return End::Released,
                        _ = dead.cancelled() => return End::SessionGone("session ended".into(), false),
                    }
                    retry = (retry * 2).min(Duration::from_secs(5));
                }
            }
        }
    }
    let (prefer, generation) = (&mut *st.prefer, &mut *st.generation);
    loop {
        ctx.pending("claiming a slot");
        let started = Instant::now();
        let claimed = tokio::select! {
            r = claim::claim(ctx, client, *prefer, st.memo) => r,
            _ = &mut *release => return End::Released,
            _ = dead.cancelled() => return End::SessionGone("session ended while claiming".into(), false),
        };
        let c = match claimed {
            Ok(c) => c,
            Err(e) if session_gone(&e) => return End::SessionGone(format!("claiming: {e}"), false),
            Err(e @ (zk::Error::NoAuth | zk::Error::InvalidAcl)) => return classify(e, "claiming"),
            Err(e) => {
                tracing::warn!(error = %e, "claim failed; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(retry) => {}
                    _ = &mut *release => return End::Released,
                    _ = dead.cancelled() => return End::SessionGone("session ended while claiming".into(), false),
                }
                retry = (retry * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        retry = Duration::from_millis(100);
        ctx.metrics.lease_claims.inc();
        ctx.metrics
            .lease_claim_seconds
            .observe(started.elapsed().as_secs_f64());
        tracing::info!(
            slot = c.slot,
            mark = c.mark,
            claim_ms = started.elapsed().as_millis() as u64,
            "slot claimed"
        );
        let mut held = Held {
            slot: c.slot,
            slot_version: c.slot_version,
            floor: c.mark,
            mark: c.mark,
            mark_version: c.mark_version,
        };
        *prefer = Some(c.slot);

        // Wait for the clock to pass the mark read; a far-behind clock is an error, not a wait.
        let waited = Instant::now();
        let wait = ctx.wait_past(held.floor);
        if wait > ctx.cfg.max_clock_wait
            && ctx.cfg.pool_size > claim::PROBE_ABOVE
            && st.memo.far_ahead < claim::FAR_AHEAD_SKIPS
        {
            // A probed slot is a random pick, not the lowest mark: leave this one (its last
            // holder's clock ran far ahead of ours) and probe another. Nothing was issued
            // and the mark is untouched, so deleting our slot node is all there is to undo.
            tracing::warn!(
                slot = held.slot,
                ahead = ?wait,
                "slot's mark is further ahead of our clock than --max-clock-wait; trying another slot"
            );
            st.memo.far_ahead += 1;
            st.memo.skip.insert(held.slot);
            claim::delete_if_ours(ctx, client, held.slot).await;
            *prefer = None;
            continue;
        }
        if wait > ctx.cfg.max_clock_wait {
            let e = LeaseError::ClockBehind {
                key: ctx.paths.mark(held.slot),
                ahead: wait,
                max: ctx.cfg.max_clock_wait,
            };
            release_slot(ctx, client, &held, None).await;
            return End::Fatal(e);
        }
        if !wait.is_zero() {
            ctx.pending(format!(
                "waiting {wait:?} for the clock to pass slot {}'s mark",
                held.slot
            ));
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                h = &mut *release => {
                    release_slot(ctx, client, &held, h.ok().flatten()).await;
                    return End::Released;
                }
                _ = dead.cancelled() => return End::SessionGone("session ended while waiting for the mark".into(), false),
            }
        }
        ctx.metrics
            .lease_mark_wait_seconds
            .observe(waited.elapsed().as_secs_f64());

        // Write the first mark, publish, renew.
        let horizon = ctx.scheme.ticks_in(ctx.cfg.horizon);
        let mut next = Duration::ZERO;
        let mut published = false;
        let mut unreachable_counted = false;
        // Marks written with no reply (the write may have been applied): our own if seen.
        let mut unconfirmed: Vec<u64> = Vec::new();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(next) => {}
                h = &mut *release => {
                    release_slot(ctx, client, &held, h.ok().flatten()).await;
                    return End::Released;
                }
                _ = dead.cancelled() => return End::SessionGone("session expired".into(), published),
            }
            let want = held.mark.max(ctx.now_tick().saturating_add(horizon));
            let t = Instant::now();
            let mut written = write_mark(ctx, client, &held, want).await;
            if matches!(written, Err(zk::Error::BadVersion | zk::Error::NoNode))
                && !unconfirmed.is_empty()
            {
                // An earlier write whose reply was lost may have gone through: if the slot is
                // still ours and the mark holds a value we wrote, carry on from there.
                if let Some((version, value)) = own_write(ctx, client, &held, &unconfirmed).await {
                    tracing::info!(mark = value, "an earlier mark write had gone through");
                    held.mark = held.mark.max(value);
                    held.mark_version = version;
                    written = write_mark(ctx, client, &held, want).await;
                }
            }
            match written {
                Ok(version) => {
                    ctx.metrics
                        .lease_renewal_seconds
                        .observe(t.elapsed().as_secs_f64());
                    ctx.metrics.lease_renewals.with_label_values(&["ok"]).inc();
                    held.mark = want;
                    held.mark_version = version;
                    if !published {
                        *generation += 1;
                        published = true;
                        tracing::info!(
                            slot = held.slot,
                            floor = held.floor,
                            mark = held.mark,
                            "lease held"
                        );
                    }
                    ctx.tx.send_replace(LeaseState::Held(Window {
                        slot: held.slot,
                        floor: held.floor,
                        mark: held.mark,
                        generation: *generation,
                    }));
                    unreachable_counted = false;
                    unconfirmed.clear();
                    next = ctx.cfg.renew_every;
                }
                Err(e) if session_gone(&e) => {
                    return End::SessionGone(format!("renewing: {e}"), published)
                }
                Err(e @ (zk::Error::BadVersion | zk::Error::NoNode)) => {
                    // Someone else wrote the mark or removed our slot node: stop at once.
                    ctx.metrics
                        .lease_renewals
                        .with_label_values(&["error"])
                        .inc();
                    ctx.metrics
                        .lease_losses
                        .with_label_values(&["stolen"])
                        .inc();
                    let why = format!("slot {} lost: {e}", held.slot);
                    tracing::warn!(reason = %why, "lease lost; claiming again");
                    ctx.tx.send_replace(LeaseState::Lost { reason: why });
                    // Our slot node may still be ours (same session): free it for a clean claim.
                    claim::delete_if_ours(ctx, client, held.slot).await;
                    break;
                }
                Err(e) => {
                    // Unreachable or slow: the mark already written stays in force. The write
                    // may still have been applied.
                    unconfirmed.push(want);
                    ctx.metrics
                        .lease_renewals
                        .with_label_values(&["error"])
                        .inc();
                    tracing::warn!(error = %e, mark = held.mark, "could not renew the time mark");
                    if ctx.now_tick() > held.mark && !unreachable_counted {
                        unreachable_counted = true;
                        ctx.metrics
                            .lease_losses
                            .with_label_values(&["unreachable"])
                            .inc();
                    }
                    next = (ctx.cfg.renew_every / 4).max(Duration::from_millis(50));
                }
            }
        }
    }
}

/// If the slot node is still this session's and `marks/N` holds one of `attempts` at the
/// version after ours, that write was ours: its version and value.
async fn own_write(
    ctx: &Ctx,
    client: &zk::Client,
    held: &Held,
    attempts: &[u64],
) -> Option<(i32, u64)> {
    let (_, slot) = client.get_data(&ctx.paths.slot(held.slot)).await.ok()?;
    if slot.ephemeral_owner != client.session_id().0 || slot.version != held.slot_version {
        return None;
    }
    let (data, mark) = client.get_data(&ctx.paths.mark(held.slot)).await.ok()?;
    let value = claim::parse_mark(&data)?;
    (mark.version == held.mark_version + 1 && attempts.contains(&value))
        .then_some((mark.version, value))
}

/// Writes `mark` with a compare-and-set on the mark's version, in a `multi` that also checks
/// the slot node still exists at the version we created it with. That check alone does not
/// prove the node is ours (any holder's node has version 0); the compare-and-set on the mark
/// is what fences holders. Returns the mark node's new version.
async fn write_mark(
    ctx: &Ctx,
    client: &zk::Client,
    held: &Held,
    mark: u64,
) -> Result<i32, zk::Error> {
    let mut w = client.new_multi_writer();
    w.add_check_version(&ctx.paths.slot(held.slot), held.slot_version)?;
    w.add_set_data(
        &ctx.paths.mark(held.slot),
        mark.to_string().as_bytes(),
        Some(held.mark_version),
    )?;
    let results = w.commit().await.map_err(zk::Error::from)?;
    match results.into_iter().nth(1) {
        Some(zk::MultiWriteResult::SetData { stat }) => Ok(stat.version),
        other => Err(zk::Error::UnexpectedError(format!(
            "unexpected multi result {other:?}"
        ))),
    }
}

/// Writes the mark down to the highest tick issued and deletes the slot node, in one `multi`.
async fn release_slot(ctx: &Ctx, client: &zk::Client, held: &Held, highest: Option<Issued>) {
    ctx.tx.send_replace(LeaseState::Released);
    let down = super::mark_down(held.slot, held.floor, highest);
    match client.get_data(&ctx.paths.slot(held.slot)).await {
        Ok((_, stat)) if stat.ephemeral_owner == client.session_id().0 => {}
        _ => {
            tracing::warn!(
                slot = held.slot,
                "the slot node is no longer ours; nothing to release"
            );
            return;
        }
    }
    let mut w = client.new_multi_writer();
    let built = w
        .add_check_version(&ctx.paths.slot(held.slot), held.slot_version)
        .and_then(|()| {
            w.add_set_data(
                &ctx.paths.mark(held.slot),
                down.to_string().as_bytes(),
                Some(held.mark_version),
            )
        })
        .and_then(|()| w.add_delete(&ctx.paths.slot(held.slot), Some(held.slot_version)));
    let result = match built {
        Ok(()) => w.commit().await.map(|_| ()).map_err(zk::Error::from),
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => tracing::info!(
            slot = held.slot,
            mark = down,
            "slot released; mark written down to the highest issued time"
        ),
        Err(e) => {
            tracing::warn!(slot = held.slot, error = %e, "could not release the slot cleanly; it frees when the session ends")
        }
    }
}
