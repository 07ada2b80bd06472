//! The session loop: connect (retrying until ZooKeeper answers), follow the session's state,
//! create the namespace, hold slots in it ([`super::hold`]), and open a new session when one
//! expires — until the release is asked for or a fatal error.

use super::access::{Access, AccessError};
use super::hold::{self, AcrossSessions, End};
use super::tree::acls;
use super::{params, pool, session_gone, Negotiator};
use crate::lease::holding::{self, Across};
use crate::lease::stop::Stop;
use crate::lease::{Issued, LeaseError, LeaseState};
use crate::metrics::Metrics;
use crate::retry::Backoff;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use zookeeper_client as zk;

/// How [`connect`] treats servers that do not answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// Keep trying (the negotiator: ZooKeeper may be restarting).
    UntilConnected,
    /// Fail once every server has been tried (the CLI: "connection refused" at once).
    FailFast,
}

/// Why a client could not be had: a credential file that no longer reads, or ZooKeeper's
/// answer (with what a handshake of our own could tell about it, in terms of the flags).
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("{0}")]
    Access(#[from] AccessError),
    #[error("{why}")]
    Zk { error: zk::Error, why: String },
}

/// Connects a client with `access`'s TLS and credentials (files read again now).
pub async fn connect(
    connect: &str,
    session_timeout: Duration,
    access: &Access,
    retry: Retry,
) -> Result<zk::Client, ConnectError> {
    // A short connection timeout: a server that drops packets is given up on within a second,
    // not two fifths of the session timeout.
    let connection_timeout = (session_timeout * 2 / 5).min(Duration::from_secs(1));
    let mut c = access
        .connector()?
        .with_session_timeout(session_timeout)
        .with_connection_timeout(connection_timeout);
    if retry == Retry::FailFast {
        c = c.with_fail_eagerly();
    }
    match access.connect(c, connect).await {
        Ok(client) => Ok(client),
        Err(error) => {
            let why = match &error {
                zk::Error::AuthFailed => format!(
                    "ZooKeeper refused the credentials of {}: {error}",
                    access.identity_flags()
                ),
                _ => match access.diagnose(connect).await {
                    Some(why) => why,
                    None => format!("cannot connect to ZooKeeper at {connect}: {error}"),
                },
            };
            Err(ConnectError::Zk { error, why })
        }
    }
}

/// The negotiator's task: sessions one after another.
pub(crate) async fn run(
    neg: Negotiator,
    release: oneshot::Receiver<Option<Issued>>,
) -> Result<(), LeaseError> {
    let mut stop = Stop::new(release);
    let mut across = AcrossSessions {
        held: Across::new(neg.cfg.prefer, &neg.cfg.part),
        claims: Default::default(),
    };
    let mut sessions = 0u64;
    // Whether this instance ever agreed on the pool: a disagreement before refuses to start,
    // after (the pool replaced under it) it is not ready instead.
    let mut agreed_once = false;
    // Fail fast and retry here, at least once a second: the client's own schedule backs off
    // for seconds, so after a long outage IDs would flow again only seconds after ZooKeeper.
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
    // After ZooKeeper refused our identity: no hammering, but a fixed credential is seen soon.
    let mut refused = Backoff::new(Duration::from_secs(1), Duration::from_secs(10));
    loop {
        neg.proto
            .metrics
            .session_state(neg.proto.part.index, "disconnected");
        // No session yet: only the release request interrupts the connect.
        stop.follow(CancellationToken::new());
        let client = match open(&neg, &mut stop, &mut backoff).await {
            Opened::Client(c) => c,
            Opened::Retry => continue,
            Opened::Released => {
                neg.proto.tx.send_replace(LeaseState::Released);
                return Ok(());
            }
        };
        backoff.reset();
        sessions += 1;
        if sessions > 1 {
            neg.proto.metrics.lease.zk_reconnects.inc();
        }
        neg.proto
            .metrics
            .session_state(neg.proto.part.index, "connected");
        tracing::info!(session = %client.session_id(), "ZooKeeper session established");
        let ended = CancellationToken::new();
        stop.follow(ended.clone());
        // With --slots: a slot given back to an instance holding none ends the session.
        let gave = CancellationToken::new();
        let give_back = (neg.proto.part.of > 1).then(|| {
            let (client_, paths, pool) = (client.clone(), neg.paths.clone(), neg.cfg.pool_size);
            tokio::spawn(holding::give_back_when_asked(
                neg.proto.part.clone(),
                gave.clone(),
                ended.clone(),
                move || pool::look(client_.clone(), paths.clone(), pool),
            ))
        });
        let states = tokio::spawn(track_states(
            client.state_watcher(),
            neg.proto.metrics.clone(),
            neg.proto.part.index,
            ended,
        ));
        // One follower of the pool per instance: its first lease's.
        let gauges = (neg.proto.part.index == 0).then(|| {
            pool::spawn_gauges(
                client.clone(),
                neg.paths.clone(),
                neg.cfg.pool_size,
                neg.proto.metrics.clone(),
            )
        });
        // Nodes a previous session may have left belong to it alone: this one starts afresh.
        across.claims.suspects.clear();
        let agreed = match make_namespace(&neg, &client, &mut stop).await {
            Ok(()) => params::agree(&neg, &client, !agreed_once).await,
            Err(end) => Err(end),
        };
        let end = match agreed {
            Ok(a) => {
                agreed_once = true;
                across.claims.params_version = a.params_version;
                across.claims.identity = (!a.agreed.id.is_empty()).then(|| a.agreed.id.clone());
                across.claims.not_before = a.agreed.not_before;
                hold::serve(&neg, &client, &mut stop, &mut across).await
            }
            Err(end) => end,
        };
        if let Some(gauges) = gauges {
            gauges.abort();
            let _ = gauges.await;
        }
        states.abort();
        if let Some(task) = give_back {
            task.abort();
            let _ = task.await;
        }
        if holding::gave_back(&neg.proto, &gave, &end) {
            close(client).await;
            neg.proto
                .metrics
                .session_state(neg.proto.part.index, "closed");
            continue;
        }
        match end {
            End::Released => {
                close(client).await;
                neg.proto
                    .metrics
                    .session_state(neg.proto.part.index, "closed");
                return Ok(());
            }
            End::SessionGone {
                reason: why,
                holding,
            } => {
                if holding {
                    neg.proto
                        .metrics
                        .lease
                        .losses
                        .with_label_values(&["expired"])
                        .inc();
                }
                neg.proto
                    .metrics
                    .session_state(neg.proto.part.index, "expired");
                tracing::warn!(reason = %why, "ZooKeeper session lost; opening a new one");
                neg.proto.tx.send_replace(LeaseState::Lost { reason: why });
            }
            End::Refused(what) => {
                close(client).await;
                neg.proto
                    .metrics
                    .session_state(neg.proto.part.index, "disconnected");
                // No session now: only the release request interrupts the pause.
                stop.follow(CancellationToken::new());
                let why = format!(
                    "ZooKeeper refused access ({what}): check {} and the ACLs under --zk-root",
                    neg.cfg.access.identity_flags()
                );
                tracing::warn!(reason = %why, "not ready; trying again in a few seconds");
                neg.proto.pending(why);
                if stop.sleep(refused.next_wait()).await.is_err() {
                    neg.proto.tx.send_replace(LeaseState::Released);
                    return Ok(());
                }
                continue;
            }
            End::Replaced(why) => {
                close(client).await;
                neg.proto
                    .metrics
                    .session_state(neg.proto.part.index, "closed");
                tracing::warn!(reason = %why, "the pool was replaced; agreeing on it again");
                neg.proto.tx.send_replace(LeaseState::Lost { reason: why });
            }
            End::Disagrees(why) => {
                close(client).await;
                neg.proto
                    .metrics
                    .session_state(neg.proto.part.index, "closed");
                stop.follow(CancellationToken::new());
                tracing::warn!(reason = %why, "not ready; agreeing again in a few seconds");
                neg.proto.pending(why);
                if stop.sleep(refused.next_wait()).await.is_err() {
                    neg.proto.tx.send_replace(LeaseState::Released);
                    return Ok(());
                }
                continue;
            }
            End::Fatal(e) => return Err(neg.proto.fail(e)),
        }
        refused.reset();
    }
}

/// What an attempt to open a session gave.
enum Opened {
    Client(zk::Client),
    /// Not now: try again (after the backoff already waited).
    Retry,
    Released,
}

/// Opens a session; on a passing failure waits the next `backoff`.
async fn open(neg: &Negotiator, stop: &mut Stop, backoff: &mut Backoff) -> Opened {
    let cfg = &neg.cfg;
    let connecting = connect(
        &cfg.connect,
        cfg.session_timeout,
        &cfg.access,
        Retry::FailFast,
    );
    match stop.or(connecting).await {
        Err(_) => Opened::Released,
        Ok(Ok(c)) => Opened::Client(c),
        // Not ready, and retried: a credential or certificate may be fixed (a Secret
        // rotated, ZooKeeper's configuration corrected) without restarting the pod. Never
        // a plaintext fallback, never an ID on a connection not established.
        Ok(Err(e)) => {
            tracing::warn!(error = %e, connect = %cfg.connect, "cannot connect to ZooKeeper; retrying");
            neg.proto
                .pending(format!("cannot connect to ZooKeeper: {e}"));
            if stop.sleep(backoff.next_wait()).await.is_err() {
                return Opened::Released;
            }
            Opened::Retry
        }
    }
}

/// Closes the session: dropping the last handle sends CloseSession; waits (bounded) until it
/// went, so our ephemeral nodes go now and not a session timeout later.
async fn close(client: zk::Client) {
    let mut w = client.state_watcher();
    drop(client);
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        while !matches!(
            w.changed().await,
            zk::SessionState::Closed | zk::SessionState::Expired
        ) {}
    })
    .await;
}

/// Creates `queue/`, `slots/`, `marks/`, `witness/` and `identity/` when missing, retrying
/// passing faults.
async fn make_namespace(neg: &Negotiator, client: &zk::Client, stop: &mut Stop) -> Result<(), End> {
    let dir = zk::CreateMode::Persistent.with_acls(acls(neg.cfg.access.restricted()));
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
    for path in [
        neg.paths.queue(),
        neg.paths.slots(),
        neg.paths.marks(),
        neg.paths.witnesses(),
        neg.paths.identities(),
    ] {
        loop {
            match client.mkdir(&path, &dir).await {
                Ok(()) => break,
                Err(e)
                    if session_gone(&e)
                        || matches!(e, zk::Error::NoAuth | zk::Error::InvalidAcl) =>
                {
                    return Err(hold::classify(e, &format!("cannot create {path}")));
                }
                Err(e) => {
                    // Passing faults (connection loss, a leader election): try again.
                    tracing::warn!(path = %path, error = %e, "cannot create a directory node yet; retrying");
                    if let Err(i) = stop.sleep(backoff.next_wait()).await {
                        return Err(End::interrupted(i, "creating the namespace"));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Follows the session's state into metrics; cancels `ended` once the session is over.
async fn track_states(
    mut w: zk::StateWatcher,
    metrics: Arc<Metrics>,
    part: u32,
    ended: CancellationToken,
) {
    let mut was_disconnected = false;
    loop {
        let state = w.changed().await;
        match state {
            zk::SessionState::Disconnected => {
                was_disconnected = true;
                metrics.session_state(part, "disconnected");
                tracing::warn!("disconnected from ZooKeeper");
            }
            zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                if was_disconnected {
                    metrics.lease.zk_reconnects.inc();
                    tracing::info!("reconnected to ZooKeeper");
                }
                was_disconnected = false;
                metrics.session_state(part, "connected");
            }
            zk::SessionState::Expired | zk::SessionState::Closed | zk::SessionState::AuthFailed => {
                metrics.session_state(
                    part,
                    match state {
                        zk::SessionState::Expired => "expired",
                        zk::SessionState::AuthFailed => "auth_failed",
                        _ => "closed",
                    },
                );
                ended.cancel();
                return;
            }
        }
    }
}
