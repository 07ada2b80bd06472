//! Benchmarks the ZooKeeper negotiator against a running ZooKeeper.
//!
//! ```text
//! bash zk/zk.sh start                        # standalone on 127.0.0.1:2181
//! cargo run --release --example claimbench -- --zk 127.0.0.1:2181
//! ```
//!
//! Each negotiator has its own ZooKeeper session, as separate idcar processes would; all run
//! in this process under a fresh root so earlier runs do not interfere. Reports:
//! 1. uncontended claim: claim duration (queue node to slot node and mark read, i.e. after
//!    the session is established) and start-to-lease, medians over repeated claims;
//! 2. 65 started together: time until all 64 slots are held, and until the 65th reports the
//!    pool exhausted;
//! 3. steady-state ZooKeeper writes per holder (renewals per second).

use clap::Parser;
use idcar::clock::SystemClock;
use idcar::layout::{by_name, LayoutParams};
use idcar::lease::zk::{self, ZkConfig};
use idcar::lease::{LeaseHandle, LeaseState};
use idcar::metrics::Metrics;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
struct Args {
    /// ZooKeeper connect string.
    #[arg(long, default_value = "127.0.0.1:2181")]
    zk: String,
    /// Repetitions of the uncontended claim.
    #[arg(long, default_value_t = 20)]
    repeat: usize,
    /// How long to count renewals.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    renew_window: Duration,
}

fn config(connect: &str, root: &str, cluster: u8) -> ZkConfig {
    ZkConfig {
        connect: connect.to_string(),
        root: root.to_string(),
        layout: "lable64",
        cluster,
        pool_size: 64,
        prefer: None,
        session_timeout: Duration::from_secs(6),
        horizon: Duration::from_secs(3),
        renew_every: Duration::from_secs(1),
        max_clock_wait: Duration::from_secs(10),
        auth: None,
        pod: None,
        pool_params: vec![("layout".into(), "lable64".into())],
    }
}

fn negotiator(cfg: ZkConfig) -> (LeaseHandle, Arc<Metrics>) {
    let scheme = by_name("lable64", LayoutParams::default())
        .unwrap()
        .scheme();
    let metrics = Arc::new(Metrics::new("lable64", cfg.cluster));
    (
        zk::start(cfg, scheme, Arc::new(SystemClock), metrics.clone()),
        metrics,
    )
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
        let (lease, m) = negotiator(config(&args.zk, &root, 0));
        held(&lease, Duration::from_secs(30)).await?;
        totals.push(t.elapsed());
        claims.push(Duration::from_secs_f64(
            m.lease.claim_seconds.get_sample_sum(),
        ));
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
    let all: Vec<_> = (0..65)
        .map(|_| negotiator(config(&args.zk, &root, 1)))
        .collect();
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

    // 3. Renewal writes per holder.
    let m0 = all[0].1.clone();
    let before = m0.lease.renewals.with_label_values(&["ok"]).get();
    tokio::time::sleep(args.renew_window).await;
    let after = m0.lease.renewals.with_label_values(&["ok"]).get();
    println!(
        "steady state: {:.2} mark writes/s per holder (one multi: check slot + set mark) over {:?}",
        (after - before) as f64 / args.renew_window.as_secs_f64(),
        args.renew_window
    );
    for (lease, _) in all {
        lease.release(None).await?;
    }
    Ok(())
}
