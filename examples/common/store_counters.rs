//! What a store says it did, independently of idcar's own counters: ZooKeeper's last zxid (its
//! `srvr` command: every transaction — a write, a session opened or closed — takes the next
//! zxid; pings take none) and etcd's revision (every write of a key takes the next revision;
//! lease keep-alives take none). And how much CPU a store's server processes used.

use std::io::{Read, Write};
use std::time::Duration;

/// Where the store benchmarked counts its writes.
pub enum Counter {
    /// The ZooKeeper servers' client addresses (`host:port`), asked in turn.
    Zk(Vec<String>),
    /// An etcd client (its endpoints).
    Etcd(idcar::lease::etcd::client::Etcd),
}

impl Counter {
    /// For `--zk CONNECT` (its servers) or `--etcd ENDPOINTS`.
    pub async fn new(zk: &str, etcd: Option<&str>) -> anyhow::Result<Counter> {
        Ok(match etcd {
            None => Counter::Zk(zk.split(',').map(str::to_string).collect()),
            Some(endpoints) => {
                let access = idcar::lease::etcd::EtcdAccess::new(endpoints, None, None)?;
                let client =
                    idcar::lease::etcd::client::Etcd::connect(&access, Duration::from_secs(5))
                        .await
                        .map_err(|e| anyhow::anyhow!("{e}"))?;
                Counter::Etcd(client)
            }
        })
    }

    /// The store's write count now: ZooKeeper's zxid counter (within its epoch), etcd's revision.
    pub async fn writes(&self) -> anyhow::Result<u64> {
        match self {
            Counter::Zk(servers) => {
                let servers = servers.clone();
                tokio::task::spawn_blocking(move || any_zxid(&servers)).await?
            }
            Counter::Etcd(client) => {
                let req = idcar_etcd_api::etcdserverpb::RangeRequest {
                    key: b"/idcar-bench-revision".to_vec(),
                    count_only: true,
                    ..Default::default()
                };
                let r = client
                    .range("reading the revision", req)
                    .await
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                Ok(r.header.map_or(0, |h| h.revision) as u64)
            }
        }
    }
}

/// The last zxid of the first server that serves (a follower re-syncing after an election says
/// it does not), asked in turn for up to 30 s. Servers of one ensemble agree but for the
/// transactions still in flight.
fn any_zxid(servers: &[String]) -> anyhow::Result<u64> {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut errors = Vec::new();
        for s in servers {
            match zxid(s) {
                Ok(z) => return Ok(z),
                Err(e) => errors.push(e.to_string()),
            }
        }
        if std::time::Instant::now() >= deadline {
            anyhow::bail!("no ZooKeeper server serves: {}", errors.join("; "));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A ZooKeeper server's last zxid (low 32 bits: the transactions of the current epoch).
fn zxid(addr: &str) -> anyhow::Result<u64> {
    let mut s = std::net::TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(b"srvr")?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    let hex = out
        .lines()
        .find_map(|l| l.strip_prefix("Zxid: 0x"))
        .ok_or_else(|| anyhow::anyhow!("no Zxid in {addr}'s srvr answer: {out:?}"))?;
    Ok(u64::from_str_radix(hex.trim(), 16)? & 0xffff_ffff)
}

/// CPU seconds (user + system) used so far by the processes whose pids are in `pid_files`.
pub fn cpu_seconds(pids: &[u32]) -> f64 {
    let tick = 100.0; // USER_HZ on Linux
    pids.iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
        .filter_map(|stat| {
            // Fields after the command's closing parenthesis: utime and stime are 14 and 15.
            let rest = stat.rsplit_once(')')?.1;
            let f: Vec<&str> = rest.split_whitespace().collect();
            Some(f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?)
        })
        .sum::<f64>()
        / tick
}

/// Resident memory of `pid` in KiB (VmRSS), if it runs.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}
