//! Sessions judged by their renewals as this process sees them: a session whose object's
//! `resourceVersion`, and those of the slot objects it holds, have not changed for its whole
//! declared duration, watched without a gap on this process's monotonic clock, is taken as
//! ended. A holder's mark writes so count as renewals: it renews its session object only when
//! it wrote no mark for a third of the duration. No clock of another host is read (a
//! renewal's `renewTime` is for people), so skewed clocks cannot end a live session early; and
//! a gap in this process's own reads (the API server down, this pod cut off) longer than a
//! session's renewal interval starts its watch over, so an outage everyone shared ends nobody's
//! session: the holder could not write while we could not read.

use super::objects::{duration, holder, name, version, version_number};
use k8s_openapi::api::coordination::v1::Lease;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// Reads further apart than this are a gap for every session: what happened between them is
/// unknown.
const GAP: Duration = Duration::from_secs(10);

/// Reads further apart than this restart the watch of a session declaring `duration`: a third
/// of it (how often it is renewed), but never less than a waiting claimant's reads may lie
/// apart on a loaded node (it looks again every 2 s), nor more than [`GAP`]. The holder then
/// has at least the rest of its duration after an outage we shared to renew.
fn restarts_after(duration: Duration) -> Duration {
    (duration / 3).max(Duration::from_secs(3)).min(GAP)
}

/// What this process has seen of the pool's sessions.
#[derive(Default)]
pub struct Observer {
    inner: Mutex<Seen>,
}

/// One session as last seen changed.
struct Watched {
    /// Its object's version.
    own: u64,
    /// What changes at every renewal: the highest version of its object and the slot
    /// objects it holds (every write raises it: versions only grow).
    renewed: u64,
    /// Since when (this process's clock) it is unchanged.
    since: Instant,
    /// The judgement it was last seen in (those not seen in the latest are forgotten).
    seen_in: u64,
}

#[derive(Default)]
struct Seen {
    sessions: BTreeMap<Arc<str>, Watched>,
    last_read: Option<Instant>,
    judgements: u64,
}

/// A look at the pool's sessions.
#[derive(Debug, Default)]
pub struct Judged {
    /// Sessions renewed within their duration, as far as this process can tell.
    pub alive: BTreeSet<Arc<str>>,
    /// Sessions seen unrenewed for their whole duration: their names and versions (deleted at
    /// that version, their slots are free).
    pub ended: Vec<(String, String)>,
    /// When the first of the live ones would be judged ended, if it is not renewed.
    pub next: Option<Duration>,
}

impl Observer {
    /// Judges the pool's sessions (`sessions`: every session of the pool, `slots`: every slot
    /// object, as of one moment). `read`: they were just read (a list, or the watch's
    /// changes); else they are looked at again as time passed, and a session is judged over
    /// only if the last read is recent enough for its watch to count (see [`restarts_after`]).
    pub fn judge<'a>(
        &self,
        sessions: impl IntoIterator<Item = &'a Lease>,
        slots: impl IntoIterator<Item = &'a Lease>,
        read: bool,
    ) -> Judged {
        let mut held: HashMap<&str, u64> = HashMap::new();
        for slot in slots {
            if let Some(h) = holder(slot) {
                let v = version_number(slot).unwrap_or(0);
                let e = held.entry(h).or_default();
                *e = (*e).max(v);
            }
        }
        let now = Instant::now();
        let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let seen = &mut *guard;
        let gap = seen.last_read.map(|at| now.duration_since(at));
        if read {
            if gap.is_none_or(|g| g > GAP) {
                seen.sessions.clear();
            }
            seen.last_read = Some(now);
        }
        seen.judgements += 1;
        let this = seen.judgements;
        let mut judged = Judged::default();
        for s in sessions {
            let n = name(s);
            let own = version_number(s).unwrap_or(0);
            let renewed = own.max(held.get(n).copied().unwrap_or(0));
            let unread = gap.is_none_or(|g| g > restarts_after(duration(s)));
            let (key, w) = match seen.sessions.get_key_value(n) {
                Some((k, _)) => {
                    let k = k.clone();
                    let w = seen.sessions.get_mut(n).expect("just found");
                    // Renewed, or read again after a gap: its watch starts over.
                    if w.renewed != renewed || (read && unread) {
                        w.since = now;
                    }
                    (k, w)
                }
                None => {
                    let k: Arc<str> = Arc::from(n);
                    let w = Watched {
                        own,
                        renewed,
                        since: now,
                        seen_in: this,
                    };
                    let w = seen.sessions.entry(k.clone()).or_insert(w);
                    (k, w)
                }
            };
            w.own = own;
            w.renewed = renewed;
            w.seen_in = this;
            let left = duration(s).saturating_sub(now.duration_since(w.since));
            if left.is_zero() && (read || !unread) {
                judged.ended.push((n.to_string(), version(s).to_string()));
            } else {
                // Unread for too long, only a read can end it: nothing to look at before.
                if !left.is_zero() {
                    judged.next = Some(judged.next.map_or(left, |x| x.min(left)));
                }
                judged.alive.insert(key);
            }
        }
        seen.sessions.retain(|_, w| w.seen_in == this);
        judged
    }

    /// Whether a session read just now is live, `slot` (a slot it holds, read just now) with
    /// it: a session not seen before is, and so is one whose slot was written since it was
    /// last seen (a mark write renews it).
    pub fn live(&self, session: &Lease, slot: &Lease) -> bool {
        let now = Instant::now();
        let seen = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let since = match seen.sessions.get(name(session)) {
            Some(w)
                if w.own == version_number(session).unwrap_or(0)
                    && version_number(slot).unwrap_or(0) <= w.renewed =>
            {
                w.since
            }
            _ => now,
        };
        now.duration_since(since) < duration(session)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn session(name: &str, version: &str, secs: i32) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(name.into()),
                resource_version: Some(version.into()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                lease_duration_seconds: Some(secs),
                ..LeaseSpec::default()
            }),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_session_ends_only_after_its_duration_unrenewed_without_a_gap() {
        let o = Observer::default();
        let a = session("a", "1", 3);
        let j = o.judge([&a], [], true);
        assert!(j.alive.contains("a") && j.ended.is_empty());
        assert_eq!(j.next, Some(Duration::from_secs(3)));
        // Renewed: the watch starts over.
        tokio::time::advance(Duration::from_secs(2)).await;
        let a2 = session("a", "2", 3);
        assert!(o.judge([&a2], [], true).alive.contains("a"));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(o.judge([&a2], [], true).alive.contains("a"));
        tokio::time::advance(Duration::from_millis(1001)).await;
        let j = o.judge([&a2], [], true);
        assert_eq!(j.ended, vec![("a".to_string(), "2".to_string())]);
        // A gap in our own reads: nothing is known of it, the watch starts over.
        tokio::time::advance(Duration::from_secs(11)).await;
        assert!(o.judge([&a2], [], true).alive.contains("a"));
        // A shorter one, past a third of a longer session's duration (an outage we shared
        // with its holder, who could not renew meanwhile): its watch starts over too.
        let c = session("c", "1", 15);
        assert!(o.judge([&c], [], true).alive.contains("c"));
        tokio::time::advance(Duration::from_secs(4)).await;
        assert!(o.judge([&c], [], true).alive.contains("c"));
        tokio::time::advance(Duration::from_secs(6)).await;
        assert!(o.judge([&c], [], true).alive.contains("c"));
        tokio::time::advance(Duration::from_secs(4)).await;
        for _ in 0..5 {
            assert!(
                o.judge([&c], [], true).alive.contains("c"),
                "judged across the gap"
            );
            tokio::time::advance(Duration::from_secs(2)).await;
        }
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(o.judge([&c], [], true).ended.len(), 1);
        // One read alone: a session first seen now is live.
        assert!(o.live(&session("b", "7", 3), &session("slot-1", "8", 3)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_mark_written_to_a_slot_it_holds_renews_a_session() {
        let o = Observer::default();
        let a = session("a", "1", 3);
        let mut slot = session("slot-0", "10", 3);
        slot.spec.as_mut().unwrap().holder_identity = Some("a".into());
        assert!(o.judge([&a], [&slot], true).alive.contains("a"));
        for v in ["11", "12", "13"] {
            tokio::time::advance(Duration::from_secs(2)).await;
            slot.metadata.resource_version = Some(v.into());
            assert!(
                o.judge([&a], [&slot], true).alive.contains("a"),
                "renewed by {v}"
            );
        }
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(o.judge([&a], [&slot], true).alive.contains("a"));
        tokio::time::advance(Duration::from_millis(1001)).await;
        let j = o.judge([&a], [&slot], true);
        assert_eq!(j.ended, vec![("a".to_string(), "1".to_string())]);
        // Read alone with its slot: unrenewed as judged, unless the slot was written since.
        assert!(!o.live(&a, &slot));
        slot.metadata.resource_version = Some("14".into());
        assert!(o.live(&a, &slot), "a mark written since renews it");
    }
}
