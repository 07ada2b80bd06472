//! A ZooKeeper session: connect (files read again), follow the session's state into metrics
//! and its end, create the namespace, close it.

use super::access::Access;
use super::tree::Paths;
use super::{acls, fault, session_gone};
use crate::metrics::LeaseMetrics;
use crate::pool::end::{end_for, End};
use crate::repeated::Repeated;
use crate::retry::Backoff;
use crate::stop::Stop;
use crate::tls::AccessError;
use std::sync::Arc;
use std::time::Duration;
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

/// Ends the session `old` (one given up on: the client declared it expired, or it was closed)
/// if ZooKeeper still keeps it — reconnected to and closed — so that its ephemeral nodes go at
/// once, not when ZooKeeper expires it (a tick after it answers again, or a whole session
/// timeout after a leader election): a holder whose store was away then finds its own slot
/// free at once. Nothing of it is in use: every claim made in it has stopped. Best effort, and
/// bounded by the connection timeout.
pub(crate) async fn end_old(c: super::ZkConfig, old: zk::SessionInfo) {
    let connection_timeout = (c.session_timeout * 2 / 5).min(Duration::from_secs(1));
    let Ok(connector) = c.access.connector() else {
        return;
    };
    let connector = connector
        .with_session(old)
        .with_session_timeout(c.session_timeout)
        .with_connection_timeout(connection_timeout)
        .with_fail_eagerly();
    let attempt = c.access.connect(connector, &c.connect);
    if let Ok(Ok(client)) = tokio::time::timeout(c.session_timeout, attempt).await {
        tracing::info!(session = %client.session_id(), "ended the session given up on");
        close(client).await;
    }
}

/// Closes the session: dropping the last handle sends CloseSession; waits (bounded) until it
/// went, so our ephemeral nodes go now and not a session timeout later.
pub(crate) async fn close(client: zk::Client) {
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

/// Creates `queue/`, `slots/`, `marks/`, `witness/`, `identity/` and `wanted/` when missing, retrying
/// passing faults.
pub(crate) async fn make_namespace(
    client: &zk::Client,
    paths: &Paths,
    restricted: bool,
    stop: &mut Stop,
) -> Result<(), End> {
    let dir = zk::CreateMode::Persistent.with_acls(acls(restricted));
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
    let all = [
        paths.queue(),
        paths.slots(),
        paths.marks(),
        paths.witnesses(),
        paths.identities(),
        paths.wanted(),
    ];
    // Read first, all at once: a create that finds its node costs the ensemble a transaction
    // as a write does (ZooKeeper logs the error), and every instance starts here.
    let found: Vec<_> = all.iter().map(|path| client.check_stat(path)).collect();
    let mut missing = Vec::new();
    for (path, found) in all.into_iter().zip(found) {
        if !matches!(found.await, Ok(Some(_))) {
            missing.push(path);
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    // A new pool: its own node (and parents), then the directories in one transaction, so
    // that a fleet starting on a new pool pays a transaction or two per instance, not one per
    // directory; whatever that leaves missing (another instance's create won a race, a
    // passing fault) is created one by one.
    if matches!(client.check_stat(paths.base()).await, Ok(None)) {
        let _ = client.mkdir(paths.base(), &dir).await;
    }
    let mut w = client.new_multi_writer();
    for path in &missing {
        w.add_create(path, &[], &dir)
            .map_err(|e| end_for(fault(e), "creating the namespace"))?;
    }
    if w.commit().await.is_ok() {
        return Ok(());
    }
    let mut failing = Repeated::new("cannot create the pool's directory nodes yet");
    for path in missing {
        loop {
            match client.mkdir(&path, &dir).await {
                Ok(()) => {
                    failing.ended();
                    break;
                }
                Err(e)
                    if session_gone(&e)
                        || matches!(e, zk::Error::NoAuth | zk::Error::InvalidAcl) =>
                {
                    let what = format!("cannot create {path}");
                    return Err(end_for(fault(e), &what));
                }
                Err(e) => {
                    // Passing faults (connection loss, a leader election): try again.
                    failing.failed(&format_args!("{path}: {e}"));
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
pub(crate) async fn track_states(
    mut w: zk::StateWatcher,
    metrics: Arc<LeaseMetrics>,
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
                    metrics.zk_reconnects.inc();
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
