//! The listeners: the Unix socket (HTTP/1.1 and the binary protocol on the same socket, told
//! apart by the first byte) and the TCP admin listener.
//!
//! Both take their listener and a shutdown token from the caller. On shutdown they stop
//! accepting, let open connections finish their in-flight requests (HTTP connections are
//! closed gracefully, binary ones after the frames already read), and return once every
//! connection task has ended or the grace period is over.
//!
//! Every resource a client can hold has a cap and a clock: the socket serves at most
//! `--max-connections` at once, the admin listener at most `--admin-max-connections`; at the
//! cap a new connection evicts the longest-quiet idle one ([`roster`]), and every connection lives
//! under the [`deadline`]s of its listener.

pub mod admin;
pub mod binary;
pub mod deadline;
pub use idcar_core::frame;
pub mod http;
mod prefixed;
mod roster;
pub mod socket;

use crate::metrics::{Interface, Listener, Metrics};
use crate::service::Service;
use deadline::{Deadlined, Phases};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Connection limits for the Unix socket.
#[derive(Clone, Copy, Debug)]
pub struct ConnLimits {
    /// Connections served at once; at the cap a new one evicts the longest-quiet idle one.
    pub max_connections: usize,
    /// Bounds each phase of a connection: the wait for a request's first byte, the time from
    /// a request's first byte to its last, and a response's wait for the client to read it.
    pub idle_timeout: Duration,
    /// How long shutdown waits for open connections.
    pub grace: Duration,
}

/// Connection limits for the admin listener.
#[derive(Clone, Copy, Debug)]
pub struct AdminLimits {
    /// Connections held at once; a new one beyond this evicts the longest-quiet idle one.
    pub max_connections: usize,
    /// The deadlines of every admin connection (see [`deadline`]).
    pub timeout: Duration,
}

/// Serves the Unix socket until `shutdown` is cancelled, then drains.
pub async fn run_unix(
    listener: UnixListener,
    svc: Arc<Service>,
    limits: ConnLimits,
    shutdown: CancellationToken,
) {
    let accept = || async { listener.accept().await.map(|(s, _)| s) };
    let caps = (limits.max_connections, limits.idle_timeout, limits.grace);
    run_listener(Listener::Socket, accept, svc, caps, shutdown, connection).await;
}

/// Serves the admin endpoints until `shutdown` is cancelled.
pub async fn run_admin(
    listener: TcpListener,
    svc: Arc<Service>,
    limits: AdminLimits,
    shutdown: CancellationToken,
) {
    let accept = || async { listener.accept().await.map(|(s, _)| s) };
    let caps = (
        limits.max_connections,
        limits.timeout,
        Duration::from_secs(2),
    );
    let serve = |stream: tokio::net::TcpStream, svc, phases: Arc<Phases>, shutdown| async move {
        let _ = stream.set_nodelay(true);
        let io = Deadlined::new(stream, phases.clone());
        serve_http(io, svc, phases, shutdown, admin::handle).await
    };
    run_listener(Listener::Admin, accept, svc, caps, shutdown, serve).await;
}

/// Accepts connections until shutdown, each under the listener's cap ([`roster`]) and
/// deadlines (`caps`: cap, timeout, drain grace), served by `serve`; then drains.
async fn run_listener<S, A, AFut, F, Fut>(
    what: Listener,
    accept: A,
    svc: Arc<Service>,
    (cap, timeout, grace): (usize, Duration, Duration),
    shutdown: CancellationToken,
    serve: F,
) where
    S: Send + 'static,
    A: FnMut() -> AFut,
    AFut: std::future::Future<Output = std::io::Result<S>>,
    F: Fn(S, Arc<Service>, Arc<Phases>, CancellationToken) -> Fut + Copy + Send + 'static,
    Fut: std::future::Future<Output = std::io::Result<()>> + Send + 'static,
{
    let tracker = TaskTracker::new();
    let roster = roster::Roster::new(cap);
    let mut accept = accept;
    loop {
        let Some(stream) = accept_next(&mut accept, &shutdown, what.label()).await else {
            break;
        };
        let phases = Phases::new(timeout);
        let (entry, evicted) = tokio::select! {
            admitted = roster.admit(phases.clone()) => admitted,
            _ = shutdown.cancelled() => break,
        };
        if evicted {
            svc.metrics().connection_closed(what, "evicted");
        }
        let (svc, shutdown) = (svc.clone(), shutdown.clone());
        tracker.spawn(async move {
            tokio::select! {
                r = serve(stream, svc.clone(), phases.clone(), shutdown) => {
                    if let Err(e) = r {
                        tracing::debug!(listener = what.label(), error = %e, "connection ended with an error");
                    }
                }
                _ = entry.evicted() => {}
            }
            if let Some(why) = phases.expired() {
                svc.metrics().connection_closed(what, why.label());
            }
            drop(entry);
        });
    }
    drain(tracker, grace, what.label()).await;
}

/// The next accepted connection, or `None` once shutdown is requested. Accept errors (out of
/// file descriptors and the like) are logged and retried after a pause instead of spinning.
async fn accept_next<S, F, Fut>(
    mut accept: F,
    shutdown: &CancellationToken,
    what: &str,
) -> Option<S>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = std::io::Result<S>>,
{
    loop {
        tokio::select! {
            r = accept() => match r {
                Ok(s) => return Some(s),
                Err(e) => {
                    tracing::warn!(listener = what, error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = shutdown.cancelled() => return None,
        }
    }
}

async fn drain(tracker: TaskTracker, grace: Duration, what: &str) {
    tracker.close();
    if tokio::time::timeout(grace, tracker.wait()).await.is_err() {
        tracing::warn!(
            listener = what,
            open = tracker.len(),
            ?grace,
            "grace period over; dropping open connections"
        );
    }
}

/// One open socket connection in `idcar_open_connections`, from accept to close: counted as
/// `pending` until its first byte tells the protocol.
struct OpenConnection {
    metrics: Arc<Metrics>,
    label: &'static str,
}

impl OpenConnection {
    fn new(metrics: Arc<Metrics>) -> OpenConnection {
        metrics.connections.with_label_values(&["pending"]).inc();
        OpenConnection {
            metrics,
            label: "pending",
        }
    }

    fn identified(&mut self, i: Interface) {
        self.metrics
            .connections
            .with_label_values(&[self.label])
            .dec();
        self.label = i.label();
        self.metrics
            .connections
            .with_label_values(&[self.label])
            .inc();
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.metrics
            .connections
            .with_label_values(&[self.label])
            .dec();
    }
}

async fn connection(
    stream: tokio::net::UnixStream,
    svc: Arc<Service>,
    phases: Arc<Phases>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let mut open = OpenConnection::new(svc.metrics_arc());
    let mut stream = Deadlined::new(stream, phases.clone());
    async {
        let mut first = [0u8; 1];
        let n = tokio::select! {
            r = stream.read(&mut first) => r?,
            _ = shutdown.cancelled() => return Ok(()),
        };
        if n == 0 {
            return Ok(());
        }
        let interface = if first[0] == frame::MAGIC {
            Interface::Binary
        } else {
            Interface::Http
        };
        open.identified(interface);
        match interface {
            Interface::Binary => {
                binary::serve_on_thread(
                    stream.into_inner(),
                    first.to_vec(),
                    svc.clone(),
                    phases.clone(),
                    shutdown,
                )
                .await
            }
            Interface::Http => {
                let io = prefixed::Prefixed::new(first.to_vec(), stream);
                serve_http(io, svc.clone(), phases.clone(), shutdown, http::handle).await
            }
        }
    }
    .await
}

/// Serves HTTP/1.1 on one connection with `handler`, closing gracefully on shutdown. `phases`
/// learns when each request is dispatched and answered, for the connection's deadlines.
async fn serve_http<IO, F, Fut>(
    io: IO,
    svc: Arc<Service>,
    phases: Arc<Phases>,
    shutdown: CancellationToken,
    handler: F,
) -> std::io::Result<()>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    F: Fn(Arc<Service>, hyper::Request<hyper::body::Incoming>) -> Fut
        + Copy
        + Send
        + Sync
        + 'static,
    Fut: std::future::Future<
            Output = Result<
                hyper::Response<http_body_util::Full<bytes::Bytes>>,
                std::convert::Infallible,
            >,
        > + Send
        + 'static,
{
    let service = service_fn(move |req| {
        let answering = phases.begin();
        let reply = handler(svc.clone(), req);
        async move {
            let r = reply.await;
            drop(answering);
            r
        }
    });
    // The connection's deadlines are enforced by the `Deadlined` stream beneath (hyper's
    // own header timeout would restart on every request and race ours).
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(None)
        .max_buf_size(64 * 1024)
        .serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    let result = tokio::select! {
        r = conn.as_mut() => r,
        _ = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    result.map_err(std::io::Error::other)
}
