//! Benchmarks the pool negotiation against a running ZooKeeper, or etcd with `--etcd`, or a
//! Kubernetes API server with `--kubeconfig` (Lease objects).
//!
//! ```text
//! bash zk/zk.sh start                        # standalone on 127.0.0.1:2181
//! cargo run --release --example claimbench -- --zk 127.0.0.1:2181
//! bash etcd/etcd.sh start                    # one member on 127.0.0.1:2379
//! cargo run --release --example claimbench -- --etcd 127.0.0.1:2379
//! bash kube/kube.sh start /tmp/kube          # an API server, its etcd on 127.0.0.1:2379-2381
//! cargo run --release --example claimbench -- --kubeconfig /tmp/kube/idcar.kubeconfig \
//!   --kube-etcd 127.0.0.1:2379,127.0.0.1:2380,127.0.0.1:2381
//! ```
//!
//! Each negotiator has its own ZooKeeper session (or etcd lease and connection, or Kubernetes
//! session object), as separate idcar processes would; all run in this process under a fresh
//! root so earlier runs do not interfere. With Kubernetes they share one follower of each pool
//! (one list and one watch), as the `--slots` parts of one idcar process do. Reports:
//! 1. uncontended claim: claim duration (queue node to slot node and mark read, i.e. after
//!    the session is established) and start-to-lease, medians over repeated claims;
//! 2. 65 started together: time until all 64 slots are held, and until the 65th reports the
//!    pool exhausted;
//! 3. steady-state store writes per holder with one contender waiting (the 65th): marks kept
//!    at the short horizon, renewed every interval;
//! 4. with `--sidecars N` (e.g. 1000) over `--clusters C` (16): a rolling restart, as a
//!    Deployment does it — all N start and hold; then every sidecar is replaced, `--surge` at
//!    a time: the batch's replacements start and its old sidecars are released together. Reports the time until all N held at first,
//!    the rolling restart's duration, claim latency p50/p99 of the replacements, and
//!    store writes/s per holder at steady state with no one waiting (counted by the store:
//!    ZooKeeper's zxid, etcd's revision; session pings and etcd keep-alives are not writes and
//!    are reported beside them).

#[path = "common/store_counters.rs"]
#[allow(dead_code)]
mod store_counters;
use store_counters::Counter;

use clap::Parser;
use idcar::clock::SystemClock;
use idcar::layout::{by_name, LayoutParams};
use idcar::lease::etcd::{self, EtcdAccess, EtcdConfig};
use idcar::lease::pool::PoolConfig;
use idcar::lease::protocol::Timing;
use idcar::lease::zk::{self, ZkConfig};
use idcar::lease::{LeaseHandle, LeaseState};
use idcar::metrics::LeaseMetrics;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
struct Args {
    /// ZooKeeper connect string.
    #[arg(long, default_value = "127.0.0.1:2181")]
    zk: String,
    /// etcd endpoints: benchmark etcd instead of ZooKeeper.
    #[arg(long)]
    etcd: Option<String>,
    /// Every negotiator's --renew-interval (store writes/s = negotiators / interval).
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    renew_interval: Duration,
    /// Every negotiator's --lease-horizon (at least twice the renew interval).
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    horizon: Duration,
    /// Every negotiator's --idle-horizon (idcar's default).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    idle_horizon: Duration,
    /// A kubeconfig: benchmark Lease objects in its context's namespace through that API
    /// server (as the service account `kube/kube.sh` writes one for).
    #[arg(long)]
    kubeconfig: Option<std::path::PathBuf>,
    /// With --kubeconfig: the API server's etcd, where its writes are counted.
    #[arg(long)]
    kube_etcd: Option<String>,
    /// With --kubeconfig: every negotiator's --kube-ttl.
    #[arg(long, default_value = "15s", value_parser = humantime::parse_duration)]
    kube_ttl: Duration,
    /// The etcd leases' TTL (with --etcd).
    #[arg(long, default_value = "6s", value_parser = humantime::parse_duration)]
    etcd_ttl: Duration,
    /// Repetitions of the uncontended claim.
    #[arg(long, default_value_t = 20)]
    repeat: usize,
    /// How long to count renewals.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    renew_window: Duration,
    /// Sidecars for the rolling-restart phase (0: skip it).
    #[arg(long, default_value_t = 0)]
    sidecars: usize,
    /// Clusters the sidecars are spread over (each pool has 64 slots).
    #[arg(long, default_value_t = 16)]
    clusters: u8,
    /// Sidecars replaced at a time in the rolling restart.
    #[arg(long, default_value_t = 25)]
    surge: usize,
}

/// The timings of every negotiator (idcar's defaults unless given).
fn timing(args: &Args) -> Timing {
    Timing {
        horizon: args.horizon,
        idle_horizon: args.idle_horizon.max(args.horizon),
        renew_every: args.renew_interval,
        max_clock_wait: args.idle_horizon.max(args.horizon) + Duration::from_secs(10),
        starve: Duration::ZERO,
    }
}

/// The Kubernetes followers of this process's leases.
fn followers() -> &'static idcar::lease::kube::Followers {
    static F: std::sync::OnceLock<idcar::lease::kube::Followers> = std::sync::OnceLock::new();
    F.get_or_init(Default::default)
}

/// Starts one negotiator of `cluster` under `root` in the store benchmarked.
fn negotiator(args: &Args, root: &str, cluster: u8) -> (LeaseHandle, Arc<LeaseMetrics>) {
    let scheme = by_name("lable64", LayoutParams::default())
        .unwrap()
        .scheme();
    let metrics = Arc::new(LeaseMetrics::new());
    let params = vec![("layout".to_string(), "lable64".to_string())];
    let clock = Arc::new(SystemClock);
    let pool = PoolConfig {
        root: root.to_string(),
        layout: "lable64",
        cluster,
        pool_size: 64,
        prefer: None,
        timing: timing(args),
        pod: None,
        pool_params: params,
        planted: Default::default(),
        part: Default::default(),
    };
    if let Some(kubeconfig) = &args.kubeconfig {
        let store = idcar::lease::kube::KubeConfig {
            kubeconfig: Some(kubeconfig.clone()),
            namespace: None,
            ttl: args.kube_ttl,
            // One process: its leases share one follower per pool, as an instance's `--slots`
            // parts do (fleetbench runs one process per instance).
            followers: followers().clone(),
        };
        // Object names: the root as a DNS label.
        let mut pool = pool;
        pool.root = root.trim_start_matches('/').replace('/', "-");
        let lease = idcar::lease::kube::start(store, pool, scheme, clock, metrics.clone());
        return (lease, metrics);
    }
    let lease = match &args.etcd {
        None => {
            let store = ZkConfig {
                connect: args.zk.clone(),
                session_timeout: Duration::from_secs(6),
                access: idcar::lease::zk::Access::none(),
            };
            zk::start(store, pool, scheme, clock, metrics.clone())
        }
        Some(endpoints) => {
            let store = EtcdConfig {
                access: EtcdAccess::new(endpoints, None, None).expect("--etcd endpoints"),
                ttl: args.etcd_ttl,
            };
            etcd::start(store, pool, scheme, clock, metrics.clone())
        }
    };
    (lease, metrics)
}

async fn held(lease: &LeaseHandle, limit: Duration) -> anyhow::Result<()> {
    let mut rx = lease.subscribe();
    tokio::time::timeout(limit, rx.wait_for(|s| matches!(s, LeaseState::Held(_))))
        .await
        .map_err(|_| anyhow::anyhow!("no lease within {limit:?}"))??;
    Ok(())
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis();
    let root = format!("/idcar-bench/{stamp}");

    // 1. Uncontended claims.
    let (mut claims, mut totals) = (Vec::new(), Vec::new());
    for _ in 0..args.repeat {
        let t = Instant::now();
        let (lease, m) = negotiator(&args, &root, 0);
        held(&lease, Duration::from_secs(30)).await?;
        totals.push(t.elapsed());
        claims.push(Duration::from_secs_f64(m.claim_seconds.get_sample_sum()));
        lease.release(None).await?;
    }
    println!(
        "uncontended claim ({} runs): claim median {:.1?} (max {:.1?}); start to lease median {:.1?} (connect + claim + first mark write)",
        args.repeat,
        median(claims.clone()),
        claims.iter().max().unwrap(),
        median(totals)
    );

    // 2. 65 started together for 64 slots.
    let t = Instant::now();
    let all: Vec<_> = (0..65).map(|_| negotiator(&args, &root, 1)).collect();
    let (mut all_held_at, mut exhausted_at) = (None, None);
    let mut held_count = 0;
    let deadline = t + Duration::from_secs(60);
    while (all_held_at.is_none() || exhausted_at.is_none()) && Instant::now() < deadline {
        held_count = all
            .iter()
            .filter(|(lease, _)| matches!(*lease.subscribe().borrow(), LeaseState::Held(_)))
            .count();
        if held_count == 64 && all_held_at.is_none() {
            all_held_at = Some(t.elapsed());
        }
        if exhausted_at.is_none() && all.iter().any(|(_, m)| m.pool_exhausted.get() == 1) {
            exhausted_at = Some(t.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let show = |d: Option<Duration>| d.map_or("never (60 s bound)".into(), |d| format!("{d:.0?}"));
    println!(
        "65 started together: all 64 slots held after {} ({held_count} held at the end); the 65th reported the pool exhausted after {}",
        show(all_held_at),
        show(exhausted_at)
    );

    // 3. Store writes per holder, one contender waiting.
    let counter = counter(&args).await?;
    // The waiter's word reaches the holders, and their marks come down, first.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = counter.writes().await?;
    tokio::time::sleep(args.renew_window).await;
    let after = counter.writes().await?;
    println!(
        "steady state, one contender waiting: {:.2} store writes/s per holder over {:?} (counted by the store)",
        (after - before) as f64 / 64.0 / args.renew_window.as_secs_f64(),
        args.renew_window
    );
    for (lease, _) in all {
        lease.release(None).await?;
    }
    if args.sidecars > 0 {
        rolling_restart(&args, &format!("{root}/rolling")).await?;
    }
    Ok(())
}

/// Where the store benchmarked counts its writes: ZooKeeper's zxid, etcd's revision, or the
/// revision of the API server's etcd (its own writes, one lease renewal every 10 s, included:
/// a hundredth of a 1,000-holder fleet's).
async fn counter(args: &Args) -> anyhow::Result<Counter> {
    match (&args.kubeconfig, &args.kube_etcd) {
        (Some(_), Some(etcd)) => Counter::new("", Some(etcd)).await,
        (Some(_), None) => {
            anyhow::bail!("--kubeconfig needs --kube-etcd: where the writes are counted")
        }
        (None, _) => Counter::new(&args.zk, args.etcd.as_deref()).await,
    }
}

fn percentile(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// Phase 4: N sidecars over C clusters, then every one replaced, `surge` at a time.
async fn rolling_restart(args: &Args, root: &str) -> anyhow::Result<()> {
    let n = args.sidecars;
    let cluster = |i: usize| (i % usize::from(args.clusters.max(1))) as u8;
    let counter = counter(args).await?;
    let (t, w0) = (Instant::now(), counter.writes().await?);
    let mut fleet: Vec<_> = (0..n).map(|i| negotiator(args, root, cluster(i))).collect();
    for (lease, _) in &fleet {
        held(lease, Duration::from_secs(300)).await?;
    }
    let (took, w1) = (t.elapsed(), counter.writes().await?);
    println!(
        "rolling restart: {n} sidecars over {} clusters all held after {took:.1?} ({} store \
         writes, {:.1} per sidecar)",
        args.clusters,
        w1 - w0,
        (w1 - w0) as f64 / n as f64
    );
    let before = counter.writes().await?;
    tokio::time::sleep(args.renew_window).await;
    let per_s = (counter.writes().await? - before) as f64 / args.renew_window.as_secs_f64();
    let (pings, what) = match (&args.etcd, &args.kubeconfig) {
        (_, Some(_)) => (
            0.0,
            "pings (Kubernetes has none: session renewals are writes, counted)",
        ),
        (None, None) => (
            n as f64 / 2.0,
            "session pings (one per third of the 6 s session)",
        ),
        (Some(_), None) => (
            n as f64 / (args.etcd_ttl.as_secs_f64() / 3.0),
            "lease keep-alives (one per third of the TTL)",
        ),
    };
    println!(
        "  steady state, no one waiting: {per_s:.1} store writes/s for {n} holders = {:.4} per \
         holder over {:?} (counted by the store); plus {pings:.0} {what}/s, not writes",
        per_s / n as f64,
        args.renew_window
    );
    let (t, w1) = (Instant::now(), counter.writes().await?);
    let (mut latencies, mut releasing) = (Vec::with_capacity(n), Duration::ZERO);
    for start in (0..n).step_by(args.surge.max(1)) {
        let batch = Instant::now();
        let end = (start + args.surge).min(n);
        // The batch is told to stop at once, as a rollout terminates `surge` pods together:
        // each replacement starts, then its predecessor releases (SIGTERM).
        let mut releases = Vec::with_capacity(args.surge);
        for (i, slot) in fleet.iter_mut().enumerate().take(end).skip(start) {
            let fresh = negotiator(args, root, cluster(i));
            let (old, _) = std::mem::replace(slot, fresh);
            releases.push(old.release(None));
        }
        for release in releases {
            release.await?;
        }
        releasing += batch.elapsed();
        for (lease, m) in &fleet[start..end] {
            held(lease, Duration::from_secs(120)).await?;
            let claim = Duration::from_secs_f64(m.claim_seconds.get_sample_sum());
            latencies.push(claim.max(Duration::ZERO));
        }
    }
    let (took, w2) = (t.elapsed(), counter.writes().await?);
    println!(
        "  rolling restart of {n} ({} at a time): {took:.1?} ({releasing:.1?} of it until each \
         batch had released; {} store writes); claim latency p50 {:.1?}, p99 {:.1?}, max {:.1?}",
        args.surge,
        w2 - w1,
        percentile(&mut latencies, 0.5),
        percentile(&mut latencies, 0.99),
        latencies.iter().max().unwrap()
    );
    for (lease, _) in fleet {
        lease.release(None).await?;
    }
    Ok(())
}
