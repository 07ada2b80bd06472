//! A listener's connection cap: at most `cap` connections are served at once, and a new
//! connection arriving at the cap evicts the one that has been quiet longest among those not
//! answering a request: idle since longest, trickling a request begun longest ago, or not
//! reading its response — first among connections that never sent a complete request. A
//! client that keeps making requests is never the one evicted by a flood of connections that
//! say nothing, however fast they arrive.
//!
//! Why evict instead of letting the newcomer wait in the listen backlog: a flood of idle
//! connections queued ahead of it would be served one cap-full at a time, each held up to its
//! deadline, so a well-behaved client (or a kubelet probe on the admin listener) could wait many
//! deadlines. Evicting the quietest idle connection serves the newcomer at once, and a flood only
//! ever costs the flooder's own connections. When every connection is answering a request,
//! the newcomer waits for one to finish (requests are bounded by the request timeout).

use super::deadline::Phases;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

#[derive(Clone, Debug)]
pub struct Roster {
    permits: Arc<Semaphore>,
    open: Arc<Mutex<Open>>,
}

#[derive(Debug, Default)]
struct Open {
    next_id: u64,
    /// Oldest first.
    list: VecDeque<(u64, Arc<Phases>, CancellationToken)>,
}

/// A connection's place; it is given back when dropped. [`Entry::evicted`] resolves when a
/// newer connection took it.
#[derive(Debug)]
pub struct Entry {
    id: u64,
    evict: CancellationToken,
    open: Arc<Mutex<Open>>,
    _permit: OwnedSemaphorePermit,
}

impl Entry {
    pub async fn evicted(&self) {
        self.evict.cancelled().await
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        lock(&self.open).list.retain(|(id, _, _)| *id != self.id);
    }
}

fn lock(m: &Mutex<Open>) -> std::sync::MutexGuard<'_, Open> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Roster {
    pub fn new(cap: usize) -> Roster {
        Roster {
            permits: Arc::new(Semaphore::new(cap.max(1))),
            open: Arc::default(),
        }
    }

    /// Gives a newly accepted connection its place, evicting the quietest connection not
    /// answering a request if the cap is reached (then `true`), or waiting for one to end if
    /// every connection is answering.
    pub async fn admit(&self, phases: Arc<Phases>) -> (Entry, bool) {
        let mut evicted = false;
        let permit = loop {
            if let Ok(p) = self.permits.clone().try_acquire_owned() {
                break p;
            }
            // At the cap: evict the quietest connection not answering a request, if any; then
            // wait for a place, looking again now and then, since a connection that is
            // answering now may be stuck on its response a moment later.
            if !evicted {
                evicted = self.evict_quietest();
            }
            let wait = self.permits.clone().acquire_owned();
            match tokio::time::timeout(std::time::Duration::from_millis(20), wait).await {
                Ok(p) => break p.expect("the semaphore is never closed"),
                Err(_) => continue,
            }
        };
        let mut g = lock(&self.open);
        let id = g.next_id;
        g.next_id += 1;
        let evict = CancellationToken::new();
        g.list.push_back((id, phases, evict.clone()));
        let entry = Entry {
            id,
            evict,
            open: self.open.clone(),
            _permit: permit,
        };
        (entry, evicted)
    }

    /// Evicts the connection quiet longest among those not answering; `true` if there was one.
    fn evict_quietest(&self) -> bool {
        let mut g = lock(&self.open);
        let quietest = g
            .list
            .iter()
            .enumerate()
            .filter(|(_, (_, _, token))| !token.is_cancelled())
            .filter_map(|(i, (_, p, _))| Some((p.quiet_since()?, i)))
            .min()
            .map(|(_, i)| i);
        match quietest {
            Some(i) => {
                let (_, _, token) = g.list.remove(i).expect("index from position");
                token.cancel();
                true
            }
            None => false,
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.open).list.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn the_quietest_connection_goes_not_the_oldest() {
        let r = Roster::new(2);
        let active = Phases::new(Duration::from_secs(9));
        let (a, _) = r.admit(active.clone()).await;
        tokio::time::advance(Duration::from_secs(1)).await;
        let (b, _) = r.admit(Phases::new(Duration::from_secs(9))).await;
        tokio::time::advance(Duration::from_secs(1)).await;
        // The older connection just finished a request: it is the active one.
        drop(active.begin());
        let third = tokio::spawn({
            let r = r.clone();
            async move { r.admit(Phases::new(Duration::from_secs(9))).await }
        });
        tokio::time::timeout(Duration::from_secs(5), b.evicted())
            .await
            .expect("the silent connection is evicted");
        assert!(!a.evict.is_cancelled());
        drop(b);
        let (_c, evicted) = third.await.unwrap();
        assert!(evicted);
    }

    /// A client between requests has been quiet longer than a flood's newest connections,
    /// which never sent a request: the flood's go first, however fresh.
    #[tokio::test(start_paused = true)]
    async fn connections_that_never_asked_go_before_a_client_between_requests() {
        let r = Roster::new(2);
        let client = Phases::new(Duration::from_secs(9));
        let (a, _) = r.admit(client.clone()).await;
        drop(client.begin());
        tokio::time::advance(Duration::from_millis(5)).await;
        let (b, _) = r.admit(Phases::new(Duration::from_secs(9))).await;
        let third = tokio::spawn({
            let r = r.clone();
            async move { r.admit(Phases::new(Duration::from_secs(9))).await }
        });
        tokio::time::timeout(Duration::from_secs(5), b.evicted())
            .await
            .expect("the silent newcomer is evicted");
        assert!(!a.evict.is_cancelled());
        drop(b);
        assert!(third.await.unwrap().1);
    }

    #[tokio::test]
    async fn full_roster_evicts_the_oldest_idle_connection() {
        let r = Roster::new(2);
        let p = || Phases::new(Duration::from_secs(1));
        let busy = p();
        let (a, e) = r.admit(busy.clone()).await;
        assert!(!e);
        let answering = busy.begin();
        let (b, _) = r.admit(p()).await;
        // The third waits until the evicted one gives its place back.
        let third = tokio::spawn({
            let r = r.clone();
            async move { r.admit(p()).await }
        });
        tokio::time::timeout(Duration::from_secs(5), b.evicted())
            .await
            .expect("the oldest idle connection is evicted");
        assert!(!a.evict.is_cancelled(), "the one answering a request stays");
        assert!(
            !third.is_finished(),
            "no third place while the evicted one is open"
        );
        drop(b);
        let (c, e) = third.await.unwrap();
        assert!(e);
        assert_eq!(r.len(), 2);
        drop(answering);
        drop(a);
        drop(c);
        assert_eq!(r.len(), 0);
    }
}
