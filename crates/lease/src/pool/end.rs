//! How a session ends ([`End`]) and how a claim fails ([`ClaimFailed`]): what the
//! negotiation's parts hand each other when a store's session, a claim or an agreement is over.

use super::Fault;
use crate::handle::LeaseError;
use crate::protocol::{MarkStore, Stored};
use crate::stop::Interrupted;

/// How one session ended.
pub(crate) enum End {
    Released,
    /// The session is gone; `holding`: a lease was in force when it went; `refused`: the
    /// store refused us mid-session (a password rotated, a permission revoked), so the next
    /// session waits a pause as a refusal at the start does.
    SessionGone {
        reason: String,
        holding: bool,
        refused: bool,
    },
    /// The store refused our identity (an ACL, a credential, a permission): not ready, a new
    /// session after a pause — the credential may be rotated or the permissions fixed
    /// without a restart.
    Refused(String),
    /// The pool's identity under this session's claims is gone (`params` deleted or
    /// recreated): a new session agrees on the pool again.
    Replaced(String),
    /// This instance's parameters differ from the pool's, found when agreeing again after the
    /// pool was replaced: not ready saying why, tried again after a pause (at start it is
    /// fatal instead: refused, naming the flag).
    Disagrees(String),
    Fatal(LeaseError),
}

impl End {
    /// This instance's parameters differ from the pool's (`why`, naming the flag): refused at
    /// its first agreement, not ready afterwards (the pool was replaced under it).
    pub(crate) fn disagreeing(first: bool, why: String) -> End {
        if first {
            End::Fatal(LeaseError::Task(why))
        } else {
            End::Disagrees(why)
        }
    }

    pub(crate) fn gone(reason: impl Into<String>) -> End {
        End::SessionGone {
            reason: reason.into(),
            holding: false,
            refused: false,
        }
    }

    /// How an interrupted wait ends the session (nothing held).
    pub(crate) fn interrupted(i: Interrupted, during: &str) -> End {
        match i {
            Interrupted::Release(_) | Interrupted::Abandoned => End::Released,
            Interrupted::SessionEnded => End::gone(format!("session ended {during}")),
        }
    }
}

/// Why a claim failed.
pub(crate) enum ClaimFailed {
    /// A passing fault (a connection lost, a leader election): tried again after a backoff.
    Retry(String),
    /// Every slot is held and another part of the instance holds one: this spare part gave
    /// its place in the queue up (see [`exhausted`]) and tries again after a pause.
    GaveWay,
    /// The session is over, or the store refused us, or nothing can mend it.
    End(End),
}

/// A slot just claimed and its mark as read.
pub(crate) type Taken<M> = (u32, Stored<<M as MarkStore>::Version>);

/// How a store's fault outside the mark's writes ends the session (`during`: what was done).
pub(crate) fn end_for(f: Fault, during: &str) -> End {
    match f {
        Fault::Refused(why) => End::Refused(format!("{during}: {why}")),
        Fault::Fatal(why) => End::Fatal(LeaseError::Task(format!("{during}: {why}"))),
        Fault::SessionGone(why) | Fault::Unavailable(why) => End::gone(format!("{during}: {why}")),
    }
}
