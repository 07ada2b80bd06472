//! A loopback TCP proxy that can black-hole traffic: a network partition between one idcar
//! and ZooKeeper, without touching anyone else's connections.
#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

pub struct Proxy {
    pub port: u16,
    blackhole: Arc<AtomicBool>,
    drop_replies: Arc<AtomicBool>,
    /// Bumped to cut every open connection.
    epoch: Arc<std::sync::atomic::AtomicU64>,
    _tasks: JoinSet<()>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards every connection to `target`.
    pub async fn start(target: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let blackhole = Arc::new(AtomicBool::new(false));
        let drop_replies = Arc::new(AtomicBool::new(false));
        let epoch = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let mut tasks = JoinSet::new();
        let bh = blackhole.clone();
        let (dr, ep) = (drop_replies.clone(), epoch.clone());
        tasks.spawn(async move {
            // Each connection's copies live in this set and end with the proxy.
            let mut conns = JoinSet::new();
            while let Ok((down, _)) = listener.accept().await {
                let Ok(up) = TcpStream::connect(&target).await else {
                    continue;
                };
                let (dr_, dw) = down.into_split();
                let (ur, uw) = up.into_split();
                let born = ep.load(Ordering::SeqCst);
                conns.spawn(copy(dr_, uw, bh.clone(), None, ep.clone(), born));
                conns.spawn(copy(ur, dw, bh.clone(), Some(dr.clone()), ep.clone(), born));
            }
        });
        Proxy {
            port,
            blackhole,
            drop_replies,
            epoch,
            _tasks: tasks,
        }
    }

    /// While on, bytes in both directions are dropped and closed connections are held open.
    pub fn blackhole(&self, on: bool) {
        self.blackhole.store(on, Ordering::SeqCst);
    }

    /// While on, requests reach the server but its replies are dropped.
    pub fn drop_replies(&self, on: bool) {
        self.drop_replies.store(on, Ordering::SeqCst);
    }

    /// Cuts every open connection (new ones are forwarded normally).
    pub fn reset(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }
}

async fn copy(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    blackhole: Arc<AtomicBool>,
    drop_these: Option<Arc<AtomicBool>>,
    epoch: Arc<std::sync::atomic::AtomicU64>,
    born: u64,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = tokio::select! {
            r = from.read(&mut buf) => r.unwrap_or(0),
            _ = async {
                while epoch.load(Ordering::SeqCst) == born {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            } => {
                let _ = to.shutdown().await;
                return;
            }
        };
        if n == 0 {
            // A partitioned peer sees no close either: hold the other side open, silently,
            // until the partition ends (then close) or the proxy is dropped.
            while blackhole.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let _ = to.shutdown().await;
            return;
        }
        if blackhole.load(Ordering::SeqCst)
            || drop_these
                .as_ref()
                .is_some_and(|d| d.load(Ordering::SeqCst))
        {
            continue;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
