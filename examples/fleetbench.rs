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
//! bash kube/kube.sh start /tmp/kube
//! target/release/examples/fleetbench --idcar target/release/idcar --store-dir /tmp/kube \
//!   --kubeconfig /tmp/kube/idcar.kubeconfig \
//!   --kube-etcd 127.0.0.1:2379,127.0.0.1:2380,127.0.0.1:2381 --instances 300
//! ```
//!
//! and the same with `--full` for pools that are full with no one waiting.
//!
//! Phases, each at idcar's default flags (each instance with its own session or etcd lease,
//! socket and admin port, under a fresh root so runs do not interfere):
//!
//! 1. cold start: N instances over `--clusters` pools — of 64 (room to spare: the holders'
//!    marks reach the idle horizon), or with `--full` each of exactly the instances in it
//!    (every slot held and no one waiting: the marks reach twice the short horizon) — time
//!    until all serve;
//! 2. steady state over `--steady`: store writes per holder (counted by the store: ZooKeeper's
//!    zxid, etcd's revision; and idcar's own count of mark writes beside it), how far the
//!    holders' marks reach (their logs say), the store servers' CPU, idcar's RSS per process;
//! 3. rolling restart, `--surge` at a time (each replacement starts, the batch's old instances
//!    get SIGTERM together): its duration, each replacement's start-to-serving and claim
//!    latency (its `idcar_lease_claim_duration_seconds`), store writes during it (with
//!    `--full`, each replacement waits in its pool's queue for a predecessor's slot);
//! 4. successor waits after kill -9 of a holder of a full pool of 4 (its own cluster): with a
//!    contender already waiting (the holders' marks are then at the short horizon), and with
//!    none until just after the kill, the holder killed right after it wrote its mark (twice
//!    the short horizon ahead: the worst case).

#[path = "common/fleet.rs"]
mod fleet;
#[path = "common/store_counters.rs"]
mod store_counters;

use clap::Parser;
use fleet::{kill9, logged_reach, mark_writes, metric, pct, ready, sigterm, stop, wait_all};
use fleet::{Fleet, Instance};
use std::path::PathBuf;
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
    /// A kubeconfig: benchmark Lease objects through that API server (in its context's
    /// namespace, as the service account `kube/kube.sh` writes one for).
    #[arg(long)]
    kubeconfig: Option<String>,
    /// With --kubeconfig: the API server's etcd, where its writes are counted (the API
    /// server's own, a lease renewal every 10 s, included).
    #[arg(long)]
    kube_etcd: Option<String>,
    /// Where the store's servers keep their pid files (DIR/*/pid, DIR/*.pid, DIR/*/*/pid), for
    /// their CPU.
    #[arg(long)]
    store_dir: Option<PathBuf>,
    /// idcar processes.
    #[arg(long, default_value_t = 300)]
    instances: usize,
    /// Pools (clusters 0 to 14) they are spread over; at most 63 per pool keeps every pool of
    /// 64 below full.
    #[arg(long, default_value_t = 5)]
    clusters: u8,
    /// Every pool sized to exactly the instances in it (`--pool-size`): every slot held and no
    /// one waiting. Without it, pools of 64 with room to spare.
    #[arg(long)]
    full: bool,
    /// Replaced at a time in the rolling restart.
    #[arg(long, default_value_t = 25)]
    surge: usize,
    /// How long the steady state is measured (longer than the renewal period of idle marks).
    #[arg(long, default_value = "90s", value_parser = humantime::parse_duration)]
    steady: Duration,
    /// Keep the instances' logs (and sockets) in this directory, named by admin port.
    #[arg(long)]
    logs: Option<PathBuf>,
    /// Extra flags for every instance (e.g. "--idle-horizon 5s" to compare).
    #[arg(long, allow_hyphen_values = true, num_args = 0..)]
    extra: Vec<String>,
}

/// The cluster of phase 4's pool of 4, apart from the fleet's.
const KILL_POOL: u8 = 15;

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
    Ok((written(w0, w1)?, c1 - c0))
}

/// Writes between two counts: an error if the count went back (ZooKeeper counts within a
/// leader's epoch: an election in between spoils the measurement).
fn written(w0: u64, w1: u64) -> anyhow::Result<u64> {
    w1.checked_sub(w0)
        .ok_or_else(|| anyhow::anyhow!("the store's count went back (a new leader?): run again"))
}

fn store_pids(args: &Args) -> Vec<u32> {
    let Some(dir) = &args.store_dir else {
        return Vec::new();
    };
    let mut pids = Vec::new();
    let mut read = |path: PathBuf| {
        if let Ok(p) = std::fs::read_to_string(path) {
            pids.extend(p.trim().parse::<u32>().ok());
        }
    };
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = e.path();
        if path.extension().is_some_and(|x| x == "pid") {
            read(path.clone());
        }
        read(path.join("pid"));
        for inner in std::fs::read_dir(&path).into_iter().flatten().flatten() {
            read(inner.path().join("pid"));
        }
    }
    pids
}

/// Idcar's own count of mark writes, summed over `all`.
fn all_mark_writes(all: &[Instance]) -> f64 {
    all.iter().filter_map(mark_writes).sum()
}

/// What every phase shares.
struct Bench<'a> {
    args: &'a Args,
    fleet: Fleet,
    rt: tokio::runtime::Runtime,
    counter: Counter,
    pids: Vec<u32>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        (1..KILL_POOL).contains(&args.clusters),
        "--clusters: 1 to {}",
        KILL_POOL - 1
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let counted = match (&args.kubeconfig, &args.kube_etcd) {
        (Some(_), Some(etcd)) => Some(etcd.as_str()),
        (Some(_), None) => {
            anyhow::bail!("--kubeconfig needs --kube-etcd: where writes are counted")
        }
        (None, _) => args.etcd.as_deref(),
    };
    let counter = rt.block_on(Counter::new(&args.zk, counted))?;
    let fleet = Fleet::new(
        args.idcar.clone(),
        &args.zk,
        args.etcd.as_deref(),
        args.kubeconfig.as_deref(),
        &args.extra,
        args.logs.clone(),
    )?;
    let mut b = Bench {
        args: &args,
        fleet,
        rt,
        counter,
        pids: store_pids(&args),
    };
    anyhow::ensure!(
        !args.full || (0..args.clusters).all(|c| (1..=64).contains(&b.pool_size(c))),
        "--full: 1 to 64 instances per pool"
    );
    let store = match (&args.etcd, &args.kubeconfig) {
        (_, Some(_)) => "Kubernetes",
        (Some(_), None) => "etcd",
        (None, None) => "ZooKeeper",
    };
    let pools = if args.full {
        let sizes: Vec<String> = (0..args.clusters)
            .map(|c| b.pool_size(c).to_string())
            .collect();
        format!("full pools of {} (no one waiting)", sizes.join("/"))
    } else {
        "pools of 64 (room to spare)".to_string()
    };
    let t = Instant::now();
    let mut all = b.cold_start()?;
    println!(
        "{store}: {} idcar processes over {} {pools}: all serving after {:.1?}",
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
        (i % usize::from(self.args.clusters)) as u8
    }

    /// How many of the fleet's instances pool `c` has.
    fn pool_size(&self, c: u8) -> usize {
        (0..self.args.instances)
            .filter(|&i| self.cluster(i) == c)
            .count()
    }

    /// Starts the fleet's `i`th instance (or its replacement).
    fn spawn(&mut self, i: usize) -> anyhow::Result<Instance> {
        let c = self.cluster(i);
        let flags = if self.args.full {
            vec!["--pool-size".to_string(), self.pool_size(c).to_string()]
        } else {
            Vec::new()
        };
        self.fleet.spawn(c, &flags)
    }

    /// Phase 1: every instance started at once, until all serve.
    fn cold_start(&mut self) -> anyhow::Result<Vec<Instance>> {
        let n = self.args.instances;
        let all = (0..n)
            .map(|i| self.spawn(i))
            .collect::<anyhow::Result<Vec<_>>>()?;
        wait_all(&all.iter().collect::<Vec<_>>(), Duration::from_secs(300))?;
        Ok(all)
    }

    /// Phase 2: store writes per holder, how far the marks reach, store CPU and idcar's RSS at
    /// steady state.
    fn steady(&mut self, all: &[Instance]) -> anyhow::Result<()> {
        let args = self.args;
        let n = all.len();
        // The claims' first marks are written (and, in full pools, written down to the full
        // reach once the last slot is taken).
        std::thread::sleep(Duration::from_secs(3));
        let own0 = all_mark_writes(all);
        let (writes, cpu) = measure(&self.rt, &self.counter, &self.pids, args.steady)?;
        let own = all_mark_writes(all) - own0;
        let secs = args.steady.as_secs_f64();
        let reach =
            ["idle", "full", "short"].map(|r| all.iter().filter(|i| logged_reach(i, r)).count());
        let mut rss: Vec<u64> = all.iter().filter_map(|i| rss_kib(i.child.id())).collect();
        rss.sort_unstable();
        let per = writes as f64 / secs / n as f64;
        println!(
            "  steady state over {secs:.0} s: {writes} store writes = {per:.4} writes/s per holder \
             (one per {:.1} s; counted by the store); idcar's own count: {:.4} mark writes/s per holder",
            1.0 / per,
            own / secs / n as f64
        );
        println!(
            "  marks, as the holders' logs say (since their start): {} reached the idle horizon, {} the full reach, {} the short horizon",
            reach[0], reach[1], reach[2]
        );
        self.pools(all);
        let what = match (&args.etcd, &args.kubeconfig) {
            (_, Some(_)) => None,
            (Some(_), None) => Some("etcd keep-alives/s (one per lease per 2 s at --etcd-ttl 6s)"),
            (None, None) => {
                Some("ZooKeeper pings/s (one per session per 2 s at --zk-session-timeout 6s)")
            }
        };
        match what {
            Some(what) => println!("  {:.0} {what}, not writes", n as f64 / 2.0),
            None => println!(
                "  Kubernetes has no pings: the session renewals are writes, counted above \
                 (mark writes subtracted: {:.4} session renewals/s per holder)",
                (writes as f64 - own) / secs / n as f64
            ),
        }
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

    /// Per pool: the slots held as its instances' gauges say (min-max) and how many of their
    /// logs say their marks reached the full reach.
    fn pools(&self, all: &[Instance]) {
        let per: Vec<String> = (0..self.args.clusters)
            .map(|c| {
                let pool: Vec<&Instance> = (0..all.len())
                    .filter(|&i| self.cluster(i) == c)
                    .map(|i| &all[i])
                    .collect();
                let held: Vec<i64> = pool
                    .iter()
                    .filter_map(|i| metric(i, "idcar_pool_slots_held", ""))
                    .map(|h| h as i64)
                    .collect();
                let full = pool.iter().filter(|i| logged_reach(i, "full")).count();
                let (lo, hi) = (held.iter().min(), held.iter().max());
                format!(
                    "{c}: {}-{} held, {full} of {} full",
                    lo.unwrap_or(&-1),
                    hi.unwrap_or(&-1),
                    pool.len()
                )
            })
            .collect();
        println!(
            "  per pool (slots held as its instances' gauges say; marks logged at the full reach): {}",
            per.join("; ")
        );
    }

    /// Phase 3: every instance replaced, `--surge` at a time (SIGTERM, then its replacement).
    fn rolling(&mut self, all: &mut [Instance]) -> anyhow::Result<()> {
        let (n, surge) = (all.len(), self.args.surge.max(1));
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
                let fresh = self.spawn(i)?;
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
                if let Some(c) = metric(i, "idcar_lease_claim_duration_seconds_sum", "") {
                    claims.push(Duration::from_secs_f64(c));
                }
            }
        }
        let took = t.elapsed();
        let (w1, c1) = (
            self.rt.block_on(self.counter.writes())?,
            cpu_seconds(&self.pids),
        );
        let writes = written(w0, w1)?;
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
            writes,
            writes as f64 / n as f64,
        );
        Ok(())
    }

    /// Phase 4: a holder of a full pool of 4 killed with -9, with a contender already waiting
    /// (`waiting`) or one started just after the kill: how long until the contender serves.
    fn successor(&mut self, waiting: bool) -> anyhow::Result<()> {
        let pool = ["--pool-size", "4"];
        let mut holders: Vec<Instance> = (0..4)
            .map(|_| self.fleet.spawn(KILL_POOL, &pool))
            .collect::<anyhow::Result<_>>()?;
        wait_all(&holders.iter().collect::<Vec<_>>(), Duration::from_secs(60))?;
        // The holders' first marks written, then written down to the full reach.
        std::thread::sleep(Duration::from_secs(2));
        let (waiter, after) = if waiting {
            let w = self.fleet.spawn(KILL_POOL, &pool)?;
            // Queued, and the holders told (within a second).
            std::thread::sleep(Duration::from_secs(3));
            anyhow::ensure!(!ready(&w), "the fifth instance of a pool of 4 serves");
            (Some(w), None)
        } else {
            (None, Some(just_written(&holders[0])?))
        };
        let killed = Instant::now();
        kill9(holders.remove(0));
        let mut w = match waiter {
            Some(w) => w,
            None => self.fleet.spawn(KILL_POOL, &pool)?,
        };
        w.started = killed;
        let took = wait_all(&[&w], Duration::from_secs(180))?[0];
        let how = match after {
            None => "a contender already waiting".to_string(),
            Some(d) => format!(
                "no one waiting until just after (the holder killed within {d:.0?} of writing its mark at the full reach: the worst case)"
            ),
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

/// Waits until holder `h` of a full pool has written its mark at the full reach and then writes
/// it once more (so it reaches twice the short horizon past now, as far as it ever does): at
/// most how long ago that write went through (since the poll before the one that saw it).
fn just_written(h: &Instance) -> anyhow::Result<Duration> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !logged_reach(h, "full") {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the mark never reached the full reach"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let before = mark_writes(h).ok_or_else(|| anyhow::anyhow!("no mark writes metric"))?;
    let mut prev = Instant::now();
    loop {
        let poll = Instant::now();
        if mark_writes(h).is_some_and(|w| w > before) {
            return Ok(prev.elapsed());
        }
        anyhow::ensure!(Instant::now() < deadline, "no mark write within 20 s");
        prev = poll;
        std::thread::sleep(Duration::from_millis(5));
    }
}
