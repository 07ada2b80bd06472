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
    _tasks: JoinSet<()>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards every connection to `target`.
    pub async fn start(target: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let blackhole = Arc::new(AtomicBool::new(false));
        let mut tasks = JoinSet::new();
        let bh = blackhole.clone();
        tasks.spawn(async move {
            // Each connection's copies live in this set and end with the proxy.
            let mut conns = JoinSet::new();
            while let Ok((down, _)) = listener.accept().await {
                let Ok(up) = TcpStream::connect(&target).await else {
                    continue;
                };
                let (dr, dw) = down.into_split();
                let (ur, uw) = up.into_split();
                conns.spawn(copy(dr, uw, bh.clone()));
                conns.spawn(copy(ur, dw, bh.clone()));
            }
        });
        Proxy {
            port,
            blackhole,
            _tasks: tasks,
        }
    }

    /// While on, bytes in both directions are dropped and closed connections are held open.
    pub fn blackhole(&self, on: bool) {
        self.blackhole.store(on, Ordering::SeqCst);
    }
}

async fn copy(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    blackhole: Arc<AtomicBool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = from.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            // A partitioned peer sees no close either: hold the other side open, silently,
            // until the partition ends (then close) or the proxy is dropped.
            while blackhole.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let _ = to.shutdown().await;
            return;
        }
        if blackhole.load(Ordering::SeqCst) {
            continue;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
