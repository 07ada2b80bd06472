//! The one session loop: open a session (retrying until the store answers), follow it, agree
//! the pool's parameters, hold slots in it ([`holding::serve`]), and open another when it is
//! gone — until the release is asked for or a fatal error.
//!
//! A session is taken as gone when the store says so (ZooKeeper: expired; etcd: a keep-alive
//! answered with TTL 0, a call naming the lease "not found"), never by a timer of ours: the
//! hold loop stops at once, and the mark already written keeps a successor waiting past every
//! tick issued. While the store does not answer the session is kept (the mark runs out
//! meanwhile). A session given up on while the store may still keep it (etcd's lease) is ended
//! as soon as the next one is open, so our old slot frees at once.

use super::claim::Claimant;
use super::end::End;
use super::holding::{self, Across};
use super::order::ClaimHistory;
use super::spare;
use super::{params, Fault, Negotiation, Session, Store};
use crate::handle::LeaseError;
use crate::repeated::Repeated;
use crate::retry::Backoff;
use crate::stop::Stop;
use idcar_core::generator::Issued;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// What the loop keeps from one session to the next.
struct Loop<S: Store> {
    stop: Stop,
    across: Across,
    history: ClaimHistory,
    /// A session given up on, ended once the next one is open (or at the release).
    old: Option<S::Session>,
    /// Whether this instance ever agreed on the pool: a disagreement before refuses to start,
    /// after (the pool replaced under it) it is not ready instead.
    agreed_once: bool,
    /// After the store refused us, or disagreed: no hammering, but a fix is seen soon.
    refused: Backoff,
}

/// What to do after a session ended.
enum Next {
    /// Open another session now.
    Again,
    /// Open another after a pause (not ready meanwhile, saying `why`).
    Pause(String),
    Done(Result<(), LeaseError>),
}

/// The lease's task: sessions one after another.
pub(crate) async fn run<S: Store>(
    store: &S,
    neg: Negotiation,
    release: oneshot::Receiver<Option<Issued>>,
) -> Result<(), LeaseError> {
    let mut l = Loop::<S> {
        stop: Stop::new(release),
        across: Across::new(neg.cfg.prefer, &neg.cfg.part),
        history: ClaimHistory::default(),
        old: None,
        agreed_once: false,
        refused: Backoff::new(
            std::time::Duration::from_secs(1),
            std::time::Duration::from_secs(10),
        ),
    };
    // Fail fast and retry here: IDs flow again soon after the store answers.
    let mut backoff = Backoff::new(std::time::Duration::from_millis(100), S::RETRY_AT_MOST);
    let (p, part) = (&neg.proto, neg.cfg.part.index);
    let mut sessions = 0u64;
    // Logged when they start, summarised while they go on, and when they end.
    let mut unreachable = Repeated::new(S::UNREACHABLE);
    let mut refused = Repeated::new("the store refused us; not ready");
    loop {
        store.state(&p.metrics, part, "disconnected");
        // No session yet: only the release request interrupts the open.
        l.stop.follow(CancellationToken::new());
        let next = match l.stop.or(store.open(&neg)).await {
            Err(_) => Next::Done(Ok(())),
            Ok(Ok(session)) => {
                backoff.reset();
                unreachable.ended();
                refused.ended();
                sessions += 1;
                store.opened(&p.metrics, sessions);
                store.state(&p.metrics, part, "connected");
                if let Some(old) = l.old.take() {
                    // Our slots under it go now, not when the store expires it; in the
                    // background, so that the new session is kept meanwhile.
                    tokio::spawn(old.close());
                }
                match serve(&neg, session, &mut l).await {
                    Some((end, session)) => after(store, &neg, &mut l, end, session).await,
                    None => Next::Again,
                }
            }
            Ok(Err(Fault::Refused(what))) => Next::Pause(store.refused(&what)),
            Ok(Err(Fault::Fatal(why))) => Next::Done(Err(p.fail(LeaseError::Task(why)))),
            Ok(Err(e)) => {
                // Not ready, and retried: a credential or certificate may be fixed (a Secret
                // rotated, the store's configuration corrected) without restarting the pod.
                // Never a plaintext fallback, never an ID on a connection not established.
                unreachable.failed(&e);
                p.pending(format!("{}: {e}", S::UNREACHABLE));
                match l.stop.sleep(backoff.next_wait()).await {
                    Ok(()) => Next::Again,
                    Err(_) => Next::Done(Ok(())),
                }
            }
        };
        match next {
            Next::Again => {}
            Next::Pause(why) => {
                // No session now: only the release request interrupts the pause.
                l.stop.follow(CancellationToken::new());
                refused.failed(&why);
                p.pending(why);
                if l.stop.sleep(l.refused.next_wait()).await.is_err() {
                    return released(&neg, &mut l).await;
                }
            }
            Next::Done(Ok(())) => return released(&neg, &mut l).await,
            Next::Done(Err(e)) => return Err(e),
        }
    }
}

/// Released: a session given up on is ended on the way out.
async fn released<S: Store>(neg: &Negotiation, l: &mut Loop<S>) -> Result<(), LeaseError> {
    if let Some(old) = l.old.take() {
        old.close().await;
    }
    neg.proto.released();
    Ok(())
}

/// Agrees on the pool and holds slots within one session: how it ended, and the session if
/// it is to be ended by [`after`] (`None`: this part gave its slot back and the session is
/// closed already).
async fn serve<S: Store>(
    neg: &Negotiation,
    mut session: S::Session,
    l: &mut Loop<S>,
) -> Option<(End, S::Session)> {
    let p = &neg.proto;
    let ended = CancellationToken::new();
    l.stop.follow(ended.clone());
    let follower = session.follow(neg, ended.clone());
    // With --slots: a slot given back to an instance holding none ends the session.
    let gave = CancellationToken::new();
    let give_back = (p.part.of > 1).then(|| {
        tokio::spawn(spare::give_back_when_asked(
            p.part.clone(),
            gave.clone(),
            ended.clone(),
            session.looker(neg),
        ))
    });
    // One follower of the pool per instance: its first lease's.
    let gauges = (p.part.index == 0).then(|| session.gauges(neg));
    // Whether anyone waits for a slot: holders keep their marks short meanwhile.
    let (waiting, demand) = tokio::sync::watch::channel(false);
    let waiters = Some(session.demand(neg, waiting));
    let agreed = match session.prepare(neg, &mut l.stop).await {
        Ok(()) => params::agree(neg, &mut session, &mut l.stop, !l.agreed_once).await,
        Err(end) => Err(end),
    };
    let end = match agreed {
        Ok(not_before) => {
            l.agreed_once = true;
            l.history.not_before = not_before;
            let mut claimant = Claimant {
                neg,
                session: &session,
                marks: session.marks(neg),
                history: &mut l.history,
                demand: crate::protocol::Demand::new(
                    demand,
                    p.part.full.subscribe(),
                    p.timing.horizon,
                ),
            };
            holding::serve(&mut claimant, &mut l.stop, &mut l.across).await
        }
        Err(end) => end,
    };
    // All stop at once; only the pool's followers are waited for (they hold a handle of
    // the store's client, which closing the session wants to be the last one). Waiting for
    // each in turn would cost every release a round of the runtime's scheduling per task.
    follower.abort();
    let watchers = [gauges, give_back, waiters];
    for task in watchers.iter().flatten() {
        task.abort();
    }
    for task in watchers.into_iter().flatten() {
        let _ = task.await;
    }
    if spare::gave_back(p, &gave, &end) {
        session.close().await;
        return None;
    }
    Some((end, session))
}

/// After a session ended: ends it as the way it ended asks, says so, and what follows.
async fn after<S: Store>(
    store: &S,
    neg: &Negotiation,
    l: &mut Loop<S>,
    end: End,
    session: S::Session,
) -> Next {
    let (p, part) = (&neg.proto, neg.cfg.part.index);
    let next = match end {
        End::Released => {
            l.old = Some(session);
            store.state(&p.metrics, part, "closed");
            Next::Done(Ok(()))
        }
        End::SessionGone {
            reason,
            holding,
            refused,
        } => {
            if holding {
                p.metrics.losses.with_label_values(&["expired"]).inc();
            }
            store.state(&p.metrics, part, "expired");
            tracing::warn!(reason = %reason, "{}", S::LOST);
            l.old = session.lost();
            p.lost(reason.clone());
            match refused {
                // Refused mid-session (a password rotated, a permission revoked): pause as a
                // refusal at the start does, instead of a new session at once.
                true => Next::Pause(store.refused(&reason)),
                false => Next::Again,
            }
        }
        End::Refused(what) => {
            session.close().await;
            store.state(&p.metrics, part, "disconnected");
            Next::Pause(store.refused(&what))
        }
        End::Replaced(why) => {
            session.close().await;
            store.state(&p.metrics, part, "closed");
            tracing::warn!(reason = %why, "the pool was replaced; agreeing on it again");
            p.lost(why);
            Next::Again
        }
        End::Disagrees(why) => {
            session.close().await;
            store.state(&p.metrics, part, "closed");
            Next::Pause(why)
        }
        End::Fatal(e) => {
            session.close().await;
            Next::Done(Err(p.fail(e)))
        }
    };
    if matches!(next, Next::Again) {
        l.refused.reset();
    }
    next
}
