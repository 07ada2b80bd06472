//! A fleet of real idcar processes on one store: what a fleet costs the store, and how fast it
//! starts, rolls and recovers. Start a 3-node store first, then:
//!
//! ```text
//! ZK_PORT=32181 bash zk/zk.sh start ensemble /tmp/zkens
//! cargo build --release --bin idcar --example fleetbench
//! target/release/examples/fleetbench --idcar target/release/idcar --store-dir /tmp/zkens \
//!   --zk 127.0.0.1:32181,127.0.0.1:32182,127.0.0.1:32183 --instances 300
//! bash etcd/etcd.sh start cluster /tmp/etcd3
//! target/release/examples/fleetbench --idcar target/release/idcar --store-dir /tmp/etcd3 \
//!   --etcd 127.0.0.1:2379,127.0.0.1:2380,127.0.0.1:2381 --instances 300
//! ```
//!
//! Phases, each at idcar's default flags (each instance with its own session or etcd lease,
//! socket and admin port, under a fresh root so runs do not interfere):
//!
//! 1. cold start: N instances over `--clusters` pools of 64 (no pool full: no one waits) —
//!    time until all serve;
//! 2. steady state over `--steady`: store writes per holder (counted by the store: ZooKeeper's
//!    zxid, etcd's revision), the store servers' CPU, idcar's RSS per process;
//! 3. rolling restart, `--surge` at a time (each replacement starts, the batch's old instances
//!    get SIGTERM together): its
//!    duration, each replacement's start-to-serving and claim latency (its
//!    `idcar_lease_claim_seconds`), store writes during it;
//! 4. successor waits after kill -9 in a full pool of 4 (its own cluster): with a contender
//!    already waiting (the holders' marks are then short), and with none (the contender starts
//!    just after the kill: the holder's mark is the idle horizon ahead — the worst case).

#[path = "common/store_counters.rs"]
mod store_counters;

use clap::Parser;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use store_counters::{cpu_seconds, rss_kib, Counter};

#[derive(Parser, Debug)]
struct Args {
    /// The idcar binary.
    #[arg(long)]
    idcar: PathBuf,
    /// ZooKeeper connect string (the store benchmarked unless --etcd).
    #[arg(long, default_value = "127.0.0.1:2181")]
    zk: String,
    /// etcd endpoints: benchmark etcd instead of ZooKeeper.
    #[arg(long)]
    etcd: Option<String>,
    /// Where the store's servers keep their pid files (DIR/*/pid), for their CPU.
    #[arg(long)]
    store_dir: Option<PathBuf>,
    /// idcar processes.
    #[arg(long, default_value_t = 300)]
    instances: usize,
    /// Pools (clusters) they are spread over; at most 63 per pool keeps every pool below full.
    #[arg(long, default_value_t = 5)]
    clusters: u8,
    /// Replaced at a time in the rolling restart.
    #[arg(long, default_value_t = 25)]
    surge: usize,
    /// How long the steady state is measured (longer than the renewal period of idle marks).
    #[arg(long, default_value = "90s", value_parser = humantime::parse_duration)]
    steady: Duration,
    /// Extra flags for every instance (e.g. "--idle-horizon 5s" to compare).
    #[arg(long, allow_hyphen_values = true, num_args = 0..)]
    extra: Vec<String>,
}

/// One running instance.
struct Instance {
    child: Child,
    admin: u16,
    started: Instant,
    log: PathBuf,
}

/// An instance still running when the benchmark ends (or fails) is killed with it.
impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Fleet<'a> {
    args: &'a Args,
    root: String,
    dir: tempfile::TempDir,
}

impl Fleet<'_> {
    fn spawn(&mut self, cluster: u8, extra: &[&str]) -> anyhow::Result<Instance> {
        let a = self.args;
        let admin = free_port()?;
        let socket = self.dir.path().join(format!("{admin}.sock"));
        let (flag, target, root_flag) = match &a.etcd {
            Some(e) => ("--etcd", e.as_str(), "--etcd-prefix"),
            None => ("--zk", a.zk.as_str(), "--zk-root"),
        };
        let log_path = self.dir.path().join(format!("{admin}.log"));
        let log = std::fs::File::create(&log_path)?;
        let child = Command::new(&a.idcar)
            .args(["serve", flag, target, root_flag, &self.root])
            .args(["--cluster-id", &cluster.to_string()])
            .args(["--socket", &socket.to_string_lossy()])
            .args(["--admin-addr", &format!("127.0.0.1:{admin}")])
            .args(extra)
            .args(&a.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        Ok(Instance {
            child,
            admin,
            started: Instant::now(),
            log: log_path,
        })
    }
}

/// A loopback port free now: the kernel's pick (fixed ports collide with the ephemeral ports
/// of the fleet's own connections to the store).
fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// An admin GET: status and body (`None` when nothing answers).
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let status = out.split_whitespace().nth(1)?.parse().ok()?;
    let body = out
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    Some((status, body))
}

fn ready(i: &Instance) -> bool {
    matches!(get(i.admin, "/readyz"), Some((200, _)))
}

/// Waits until every instance of `set` serves: each one's start-to-serving time.
fn wait_all(set: &[&Instance], limit: Duration) -> anyhow::Result<Vec<Duration>> {
    let deadline = Instant::now() + limit;
    let mut took: Vec<Option<Duration>> = vec![None; set.len()];
    while took.iter().any(Option::is_none) {
        if Instant::now() >= deadline {
            let late: Vec<String> = set
                .iter()
                .zip(&took)
                .filter(|(_, t)| t.is_none())
                .map(|(i, _)| {
                    let log = std::fs::read_to_string(&i.log).unwrap_or_default();
                    let tail: Vec<&str> = log.lines().rev().take(20).collect();
                    let tail: Vec<&str> = tail.into_iter().rev().collect();
                    format!("instance on admin port {}:\n{}", i.admin, tail.join("\n"))
                })
                .collect();
            anyhow::bail!(
                "{} of {} not serving after {limit:?}\n{}",
                late.len(),
                set.len(),
                late.join("\n")
            );
        }
        for (i, inst) in set.iter().enumerate() {
            if took[i].is_none() && ready(inst) {
                took[i] = Some(inst.started.elapsed());
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(took.into_iter().flatten().collect())
}

/// A metric's value from an instance's /metrics (the first sample named `name`).
fn metric(i: &Instance, name: &str) -> Option<f64> {
    let (_, body) = get(i.admin, "/metrics")?;
    body.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))?
        .rsplit(' ')
        .next()?
        .parse()
        .ok()
}

fn sigterm(i: &Instance) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i.child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
}

fn stop(mut i: Instance) {
    sigterm(&i);
    let _ = i.child.wait();
}

fn kill9(mut i: Instance) {
    let _ = i.child.kill();
    let _ = i.child.wait();
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    match v.len() {
        0 => Duration::ZERO,
        n => v[((n - 1) as f64 * p).round() as usize],
    }
}

fn store_pids(args: &Args) -> Vec<u32> {
    let Some(dir) = &args.store_dir else {
        return Vec::new();
    };
    let mut pids = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if let Ok(p) = std::fs::read_to_string(e.path().join("pid")) {
            pids.extend(p.trim().parse::<u32>().ok());
        }
    }
    pids
}

/// Store writes and store CPU over `d`.
fn measure(
    rt: &tokio::runtime::Runtime,
    counter: &Counter,
    pids: &[u32],
    d: Duration,
) -> anyhow::Result<(u64, f64)> {
    let (w0, c0) = (rt.block_on(counter.writes())?, cpu_seconds(pids));
    std::thread::sleep(d);
    let (w1, c1) = (rt.block_on(counter.writes())?, cpu_seconds(pids));
    Ok((w1 - w0, c1 - c0))
}

/// What every phase shares.
struct Bench<'a> {
    fleet: Fleet<'a>,
    rt: tokio::runtime::Runtime,
    counter: Counter,
    pids: Vec<u32>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let counter = rt.block_on(Counter::new(&args.zk, args.etcd.as_deref()))?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis();
    let mut b = Bench {
        fleet: Fleet {
            args: &args,
            root: format!("/idcar-fleet/{stamp}"),
            dir: tempfile::tempdir()?,
        },
        rt,
        counter,
        pids: store_pids(&args),
    };
    let store = if args.etcd.is_some() {
        "etcd"
    } else {
        "ZooKeeper"
    };
    let t = Instant::now();
    let mut all = b.cold_start()?;
    println!(
        "{store}: {} idcar processes over {} pools: all serving after {:.1?}",
        args.instances,
        args.clusters,
        t.elapsed()
    );
    b.steady(&all)?;
    b.rolling(&mut all)?;
    for i in all {
        stop(i);
    }
    for waiting in [true, false] {
        b.successor(waiting)?;
    }
    Ok(())
}

impl Bench<'_> {
    fn cluster(&self, i: usize) -> u8 {
        (i % usize::from(self.fleet.args.clusters.max(1))) as u8
    }

    /// Phase 1: every instance started at once, until all serve.
    fn cold_start(&mut self) -> anyhow::Result<Vec<Instance>> {
        let n = self.fleet.args.instances;
        let mut all = Vec::with_capacity(n);
        for i in 0..n {
            let c = self.cluster(i);
            all.push(self.fleet.spawn(c, &[])?);
        }
        wait_all(&all.iter().collect::<Vec<_>>(), Duration::from_secs(300))?;
        Ok(all)
    }

    /// Phase 2: store writes per holder, store CPU and idcar's RSS at steady state.
    fn steady(&mut self, all: &[Instance]) -> anyhow::Result<()> {
        let args = self.fleet.args;
        let n = all.len();
        // The claims' first marks are written; no idle renewal is due for a while.
        std::thread::sleep(Duration::from_secs(3));
        let (writes, cpu) = measure(&self.rt, &self.counter, &self.pids, args.steady)?;
        let secs = args.steady.as_secs_f64();
        let mut rss: Vec<u64> = all.iter().filter_map(|i| rss_kib(i.child.id())).collect();
        rss.sort_unstable();
        let pings = match args.etcd {
            Some(_) => format!(
                "{:.0} etcd keep-alives/s (one per lease per 2 s at --etcd-ttl 6s)",
                n as f64 / 2.0
            ),
            None => format!(
                "{:.0} ZooKeeper pings/s (one per session per 2 s at --zk-session-timeout 6s)",
                n as f64 / 2.0
            ),
        };
        println!(
            "  steady state over {secs:.0} s: {writes} store writes = {:.4} writes/s per holder (counted by the store); {pings}, not writes",
            writes as f64 / secs / n as f64
        );
        if !self.pids.is_empty() {
            println!(
                "  store CPU: {:.1}% of one core for the {} servers together",
                100.0 * cpu / secs,
                self.pids.len()
            );
        }
        println!(
            "  idcar RSS per process: median {:.1} MiB, max {:.1} MiB",
            rss[rss.len() / 2] as f64 / 1024.0,
            *rss.last().unwrap_or(&0) as f64 / 1024.0
        );
        Ok(())
    }

    /// Phase 3: every instance replaced, `--surge` at a time (SIGTERM, then its replacement).
    fn rolling(&mut self, all: &mut [Instance]) -> anyhow::Result<()> {
        let (n, surge) = (all.len(), self.fleet.args.surge.max(1));
        let t = Instant::now();
        let (w0, c0) = (
            self.rt.block_on(self.counter.writes())?,
            cpu_seconds(&self.pids),
        );
        let (mut serving, mut claims) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for start in (0..n).step_by(surge) {
            let end = (start + surge).min(n);
            // The batch is told to stop at once, as a rollout terminates `surge` pods together.
            let mut old = Vec::with_capacity(surge);
            for (i, slot) in all.iter_mut().enumerate().take(end).skip(start) {
                let c = self.cluster(i);
                let fresh = self.fleet.spawn(c, &[])?;
                let gone = std::mem::replace(slot, fresh);
                sigterm(&gone);
                old.push(gone);
            }
            for mut gone in old {
                let _ = gone.child.wait();
            }
            let batch: Vec<&Instance> = all[start..end].iter().collect();
            serving.extend(wait_all(&batch, Duration::from_secs(120))?);
            for i in &batch {
                if let Some(c) = metric(i, "idcar_lease_claim_duration_seconds_sum") {
                    claims.push(Duration::from_secs_f64(c));
                }
            }
        }
        let took = t.elapsed();
        let (w1, c1) = (
            self.rt.block_on(self.counter.writes())?,
            cpu_seconds(&self.pids),
        );
        let cpu = if self.pids.is_empty() {
            String::new()
        } else {
            format!(
                "; store CPU {:.0}% of one core",
                100.0 * (c1 - c0) / took.as_secs_f64()
            )
        };
        println!(
            "  rolling restart, {surge} at a time: {took:.1?}; start to serving p50 {:.0?}, p99 {:.0?}; claim p50 {:.1?}, p99 {:.1?}, max {:.1?}; {} store writes ({:.1} per replacement){cpu}",
            pct(&mut serving, 0.5),
            pct(&mut serving, 0.99),
            pct(&mut claims, 0.5),
            pct(&mut claims, 0.99),
            claims.iter().max().copied().unwrap_or_default(),
            w1 - w0,
            (w1 - w0) as f64 / n as f64,
        );
        Ok(())
    }

    /// Phase 4: a holder of a full pool of 4 (cluster 15) killed with -9, with a contender
    /// already waiting (`waiting`) or one started just after the kill: how long until the
    /// contender serves.
    fn successor(&mut self, waiting: bool) -> anyhow::Result<()> {
        let pool = ["--pool-size", "4"];
        let mut holders: Vec<Instance> = (0..4)
            .map(|_| self.fleet.spawn(15, &pool))
            .collect::<anyhow::Result<_>>()?;
        wait_all(&holders.iter().collect::<Vec<_>>(), Duration::from_secs(60))?;
        // The holders' first marks written (the idle horizon ahead).
        std::thread::sleep(Duration::from_secs(2));
        let waiter = if waiting {
            let w = self.fleet.spawn(15, &pool)?;
            // Queued, and the holders told (within a second).
            std::thread::sleep(Duration::from_secs(3));
            anyhow::ensure!(!ready(&w), "the fifth instance of a pool of 4 serves");
            Some(w)
        } else {
            None
        };
        let killed = Instant::now();
        kill9(holders.remove(0));
        let mut w = match waiter {
            Some(w) => w,
            None => self.fleet.spawn(15, &pool)?,
        };
        w.started = killed;
        let took = wait_all(&[&w], Duration::from_secs(180))?[0];
        let how = if waiting {
            "a contender already waiting"
        } else {
            "no one waiting until just after (worst case)"
        };
        println!("  successor after kill -9 of a holder, {how}: serving {took:.1?} after the kill");
        stop(w);
        for h in holders {
            stop(h);
        }
        // The next round's pool starts clean.
        self.fleet.root.push_str("-x");
        Ok(())
    }
}
