//! The listeners: the Unix socket (HTTP/1.1 and the binary protocol on the same socket, told
//! apart by the first byte) and the TCP admin listener.
//!
//! Both take their listener and a shutdown token from the caller. On shutdown they stop
//! accepting, let open connections finish their in-flight requests (HTTP connections are
//! closed gracefully, binary ones after the frames already read), and return once every
//! connection task has ended or the grace period is over.

pub mod admin;
pub mod binary;
pub mod frame;
pub mod http;
mod prefixed;
pub mod socket;

use crate::metrics::Interface;
use crate::service::Service;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Connection limits for the Unix socket.
#[derive(Clone, Copy, Debug)]
pub struct ConnLimits {
    /// Connections beyond this wait in the listen backlog.
    pub max_connections: usize,
    /// How long a connection may sit idle: before its first byte, between binary frames,
    /// while sending HTTP headers, or not reading a response.
    pub idle_timeout: Duration,
    /// How long shutdown waits for open connections.
    pub grace: Duration,
}

/// Serves the Unix socket until `shutdown` is cancelled, then drains.
pub async fn run_unix(
    listener: UnixListener,
    svc: Arc<Service>,
    limits: ConnLimits,
    shutdown: CancellationToken,
) {
    let tracker = TaskTracker::new();
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    loop {
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => p.expect("the semaphore is never closed"),
            _ = shutdown.cancelled() => break,
        };
        let Some((stream, _)) = accept_next(|| listener.accept(), &shutdown, "socket").await else {
            break;
        };
        let (svc, shutdown) = (svc.clone(), shutdown.clone());
        tracker.spawn(async move {
            if let Err(e) = connection(stream, svc, limits, shutdown).await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    drain(tracker, limits.grace, "socket").await;
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

async fn connection(
    mut stream: tokio::net::UnixStream,
    svc: Arc<Service>,
    limits: ConnLimits,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let mut first = [0u8; 1];
    let n = tokio::select! {
        r = tokio::time::timeout(limits.idle_timeout, stream.read(&mut first)) => match r {
            Ok(r) => r?,
            Err(_) => return Ok(()),
        },
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
    let gauge = svc
        .metrics()
        .connections
        .with_label_values(&[interface.label()]);
    gauge.inc();
    let result = match interface {
        Interface::Binary => {
            binary::serve(stream, first.to_vec(), svc, limits.idle_timeout, shutdown).await
        }
        Interface::Http => {
            let io = prefixed::Prefixed::new(first.to_vec(), stream);
            serve_http(io, svc, limits.idle_timeout, shutdown, http::handle).await
        }
    };
    gauge.dec();
    result
}

/// Serves HTTP/1.1 on one connection with `handler`, closing gracefully on shutdown.
async fn serve_http<IO, F, Fut>(
    io: IO,
    svc: Arc<Service>,
    header_timeout: Duration,
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
    let service = service_fn(move |req| handler(svc.clone(), req));
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
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

/// Serves the admin endpoints until `shutdown` is cancelled.
pub async fn run_admin(listener: TcpListener, svc: Arc<Service>, shutdown: CancellationToken) {
    let tracker = TaskTracker::new();
    loop {
        let Some((stream, _)) = accept_next(|| listener.accept(), &shutdown, "admin").await else {
            break;
        };
        let (svc, shutdown) = (svc.clone(), shutdown.clone());
        tracker.spawn(async move {
            let _ = serve_http(
                stream,
                svc,
                Duration::from_secs(10),
                shutdown,
                admin::handle,
            )
            .await;
        });
    }
    drain(tracker, Duration::from_secs(2), "admin").await;
}
