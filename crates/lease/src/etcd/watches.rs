//! etcd's watches, all on one stream per client: every wait of the queue, of the held slots, of
//! the pool's waiters and of a holder's own mark is one watch added to (and cancelled from) the
//! same HTTP/2 stream, instead of a stream opened and torn down per wait. A broken stream (or
//! one etcd stops taking watches on: a token gone stale) wakes every waiter — each reads again,
//! as after any change — and the next wait opens another.
//!
//! Compaction: a watch from a revision etcd has compacted is cancelled at once, so every waiter
//! reads again after a wake and watches next from the revision of that read (its answer's
//! header), never again from the revision it started with — nothing is missed between the read
//! and the watch, and a compaction costs each waiter one read, not a poll. A key's read is kept
//! for the next wait on it ([`super::Etcd::wait_until`]): a holder watches `params`, written once, from
//! where it last read it, not from its `mod_revision`.

use super::conn::Conn;
use super::error::{classify, EtcdError};
use idcar_etcd_api::etcdserverpb as rpc;
use idcar_etcd_api::etcdserverpb::watch_client::WatchClient;
use rpc::watch_request::RequestUnion;
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// What the stream's task is asked.
enum Cmd {
    /// Watch from `create` on; `fired` when a change (or the watch's end) arrives.
    Watch {
        create: rpc::WatchCreateRequest,
        fired: oneshot::Sender<()>,
    },
    /// The waiter stopped waiting.
    Cancel(i64),
}

/// A client's one watch stream (opened on the first wait).
pub(super) struct Watches {
    conn: Arc<Conn>,
    stream: Mutex<Option<mpsc::UnboundedSender<Cmd>>>,
    next_id: AtomicI64,
    /// Keys as [`super::Etcd::wait_until`] last read them.
    seen: Mutex<HashMap<Vec<u8>, Seen>>,
}

/// A key as read: its `mod_revision` (`None`: absent), and the revision of the read.
pub(super) type Seen = (Option<i64>, i64);

/// Keys remembered in [`Watches::seen`] (a holder's mark, slot key and `params`, per slot).
pub(super) const SEEN: usize = 64;

impl Watches {
    pub(super) fn new(conn: Arc<Conn>) -> Watches {
        Watches {
            conn,
            stream: Mutex::default(),
            next_id: AtomicI64::default(),
            seen: Mutex::default(),
        }
    }

    /// Waits until a key in `[key, range_end)` changes after `revision`, or `max` passes, or
    /// the watch ends (the caller reads again in every case: a watch only saves polling).
    pub(super) async fn wait_change(
        &self,
        key: &[u8],
        range_end: &[u8],
        revision: i64,
        max: Duration,
    ) {
        let started = Instant::now();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let (fired, rx) = oneshot::channel();
        let create = rpc::WatchCreateRequest {
            key: key.to_vec(),
            range_end: range_end.to_vec(),
            start_revision: revision + 1,
            watch_id: id,
            ..Default::default()
        };
        self.send(Cmd::Watch { create, fired });
        // However this wait ends (a change, `max`, or the waiter dropping it), the watch goes.
        let _cancel = Cancel { watches: self, id };
        let _ = tokio::time::timeout(max, rx).await;
        // Not a busy loop against an etcd that ends or refuses watches at once: the callers
        // read again after every return.
        let min = Duration::from_millis(100);
        if let Some(rest) = min.checked_sub(started.elapsed()) {
            tokio::time::sleep(rest).await;
        }
    }

    /// Keys as last read by a wait.
    pub(super) fn seen(&self) -> std::sync::MutexGuard<'_, HashMap<Vec<u8>, Seen>> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands `cmd` to the stream's task, starting one if there is none (or it ended).
    fn send(&self, cmd: Cmd) {
        let mut stream = self.stream.lock().unwrap_or_else(|p| p.into_inner());
        let cmd = match stream.as_ref() {
            Some(tx) => match tx.send(cmd) {
                Ok(()) => return,
                Err(mpsc::error::SendError(cmd)) => cmd,
            },
            None => cmd,
        };
        if let Cmd::Cancel(_) = cmd {
            return;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(cmd);
        *stream = Some(tx);
        tokio::spawn(run(self.conn.clone(), rx));
    }
}

/// Cancels a watch when its wait ends (a fired or unknown one is ignored by the task).
struct Cancel<'a> {
    watches: &'a Watches,
    id: i64,
}

impl Drop for Cancel<'_> {
    fn drop(&mut self) {
        self.watches.send(Cmd::Cancel(self.id));
    }
}

/// The stream's task: adds and cancels watches as asked, fires each waiter once, and ends
/// (waking every waiter) when the stream breaks or etcd refuses a watch.
async fn run(conn: Arc<Conn>, mut cmds: mpsc::UnboundedReceiver<Cmd>) {
    let (i, ch) = conn.pick();
    let (req_tx, req_rx) = mpsc::unbounded_channel::<rpc::WatchRequest>();
    let mut waiting: HashMap<i64, oneshot::Sender<()>> = HashMap::new();
    // The watch that started this task goes out with the stream: etcd answers a stream's
    // headers only with its first answer, and the open waits for them.
    while let Ok(cmd) = cmds.try_recv() {
        if let Cmd::Watch { create, fired } = cmd {
            waiting.insert(create.watch_id, fired);
            let create = RequestUnion::CreateRequest(create);
            let _ = req_tx.send(rpc::WatchRequest {
                request_union: Some(create),
            });
        }
    }
    let req = conn.streaming(tokio_stream::wrappers::UnboundedReceiverStream::new(req_rx));
    let opened = tokio::time::timeout(conn.timeout, WatchClient::new(ch).watch(req)).await;
    let mut answers = match opened {
        Ok(Ok(r)) => r.into_inner(),
        Ok(Err(s)) => {
            if matches!(classify(&s, "", ""), EtcdError::Unavailable(_)) {
                conn.move_on(i);
            }
            return;
        }
        Err(_) => {
            conn.move_on(i);
            return;
        }
    };
    let cancel = |id| rpc::WatchRequest {
        request_union: Some(RequestUnion::CancelRequest(rpc::WatchCancelRequest {
            watch_id: id,
        })),
    };
    loop {
        tokio::select! {
            cmd = cmds.recv() => match cmd {
                Some(Cmd::Watch { create, fired }) => {
                    waiting.insert(create.watch_id, fired);
                    let create = RequestUnion::CreateRequest(create);
                    let _ = req_tx.send(rpc::WatchRequest { request_union: Some(create) });
                }
                Some(Cmd::Cancel(id)) => {
                    if waiting.remove(&id).is_some() {
                        let _ = req_tx.send(cancel(id));
                    }
                }
                None => return,
            },
            answer = answers.message() => {
                let m = match answer {
                    Ok(Some(m)) => m,
                    Ok(None) => return,
                    Err(s) => {
                        if matches!(classify(&s, "", ""), EtcdError::Unavailable(_)) {
                            conn.move_on(i);
                        }
                        return;
                    }
                };
                if m.canceled {
                    // Our own cancel is answered so too: only a watch still waited on matters.
                    if let Some(fired) = waiting.remove(&m.watch_id) {
                        let _ = fired.send(());
                        if m.compact_revision == 0 {
                            // Refused (a token gone stale, a permission): a new stream next
                            // time.
                            return;
                        }
                    }
                    continue;
                }
                if !m.events.is_empty() || m.compact_revision != 0 {
                    if let Some(fired) = waiting.remove(&m.watch_id) {
                        let _ = fired.send(());
                        let _ = req_tx.send(cancel(m.watch_id));
                    }
                }
            }
        }
    }
}
