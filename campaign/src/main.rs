//! A randomized fault campaign with a checker over the whole history (in the manner of Jepsen).
//!
//! A 3-node ZooKeeper ensemble (or, with `--store etcd`, a 3-member etcd cluster) and N idcar
//! sidecars competing for a smaller pool (beside it, an idle pool with slots to spare and a
//! full one, every slot held), each in its own network namespace on a bridge; clients ask
//! every sidecar for IDs all the time and record every request; a seeded nemesis injects
//! random, overlapping faults; afterwards a checker judges the whole history (see `check/`)
//! and writes a report. Exit status: 0 when every check passed, 1 on any violation (a bound
//! on the time to IDs again broken too), 2 when the campaign could not run.
//!
//! ```sh
//! cargo build --features fault-injection --bins
//! sudo target/debug/idcar-campaign --duration 90s
//! ```
//!
//! It needs root (network namespaces, nftables), ZooKeeper (`zk/ensure-zookeeper.sh`) or etcd,
//! `nft` and libfaketime: `tests/ensure-deps.sh` installs them. docs/campaign.md has the rest.
//! Traffic stays inside the namespaces it creates; every namespace and process is removed at
//! the end, also on failure or Ctrl-C (and a later run removes what a killed one left).

mod args;
mod check;
mod liveness;
mod load;
mod nemesis;
mod net;
mod preflight;
mod probe;
mod procs;
mod report;
mod rollout;
mod storeop;

use anyhow::{bail, Context, Result};
use args::Args;
use clap::Parser;
use idcar_core::layout::{self, LayoutParams};
use idcar_lease::planted::PlantedBug;
use nemesis::Kind;
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Set by Ctrl-C or SIGTERM: the campaign stops injecting, heals, and cleans up.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("busy") {
        // The busy neighbour: `campaign busy --threads N --seconds S`.
        let threads = argv.get(3).and_then(|t| t.parse().ok()).unwrap_or(16);
        let seconds = argv.get(5).and_then(|t| t.parse().ok()).unwrap_or(10.0);
        nemesis::busy(threads, seconds);
        return ExitCode::SUCCESS;
    }
    if argv.get(1).map(String::as_str) == Some("store-op") {
        // An operator's operation on the store, run inside a store node's namespace.
        return match storeop::Op::parse(&argv[2..]).and_then(|op| storeop::run(&op)) {
            Ok(said) => {
                println!("{said}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("store-op: {e:#}");
                ExitCode::from(2)
            }
        };
    }
    let args = Args::parse();
    // ip and nft live in /usr/sbin, which a non-login PATH may lack.
    if let Some(path) = std::env::var_os("PATH") {
        let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
        for d in ["/usr/sbin", "/sbin"] {
            if !dirs.iter().any(|p| p == std::path::Path::new(d)) {
                dirs.push(d.into());
            }
        }
        if let Ok(joined) = std::env::join_paths(dirs) {
            std::env::set_var("PATH", joined);
        }
    }
    match run(args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("campaign: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn catch_signals() {
    std::thread::spawn(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a signal runtime");
        rt.block_on(async {
            use tokio::signal::unix::{signal, SignalKind};
            let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
            let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            eprintln!("campaign: interrupted; healing and cleaning up");
            INTERRUPTED.store(true, Ordering::SeqCst);
        });
    });
}

/// Runs the campaign: `Ok(true)` when every check passed, `Ok(false)` on any violation.
fn run(args: Args) -> Result<bool> {
    let seed = args.seed.unwrap_or_else(rand::random);
    println!("campaign: seed {seed} (replay with --seed {seed})");
    let Prepared {
        kinds,
        layout,
        cluster,
        idcar,
        out,
    } = prepare(&args, seed)?;
    let (mut cl, spec) = start_cluster(&args, idcar, &out, layout.as_ref(), cluster)?;
    let holders: usize = spec.pools.iter().map(procs::Pool::holders).sum();
    let warm = liveness::wait_until_served(&cl, holders, Duration::from_secs(60));
    println!(
        "campaign: {} of {} sidecars serve after {:.1} s; injecting faults for {:?}",
        warm.0,
        cl.sidecars.len(),
        warm.1.as_secs_f64(),
        args.duration
    );

    let stop = Arc::new(AtomicBool::new(false));
    let hard_end = Instant::now() + args.duration + Duration::from_secs(120);
    let clients = start_clients(&args, &cl, &layout, seed, &stop, hard_end);

    let started = Instant::now();
    let started_ns = procs::now_ns();
    let timing = nemesis::Timing {
        session_timeout: expiry(&args),
        settle: expiry(&args) + args.lease_horizon + Duration::from_secs(1),
        storm: Duration::from_secs(20),
        interval: args.fault_interval,
        busy_max: args.duration.mul_f64(0.4).max(Duration::from_secs(5)),
    };
    let mut nem = nemesis::Nemesis::new(StdRng::seed_from_u64(seed), kinds, timing);
    let result = inject(&args, started, &mut nem, &mut cl, &spec);
    let healed = nem.heal_all(&mut cl, &spec);
    let faults_end_ns = procs::now_ns();
    println!(
        "campaign: {} faults injected; all healed; checking liveness",
        nem.done.len()
    );
    // A holder lost with its mark at the idle horizon (no one waited) may hold its slot's
    // successor that long: the documented worst case. With Kubernetes its session, declared
    // while no one waited, is judged over a minute after a claimant first sees it.
    let longest = match args.store {
        procs::Store::Kubernetes => idcar_lease::kube::idle_duration(expiry(&args)),
        _ => expiry(&args),
    };
    let settle = longest + args.lease_horizon.max(args.idle_horizon) + Duration::from_secs(1);
    let liveness = if result.is_ok() && healed.is_ok() && !INTERRUPTED.load(Ordering::SeqCst) {
        Some(liveness::liveness(&mut cl, &mut nem, &spec, settle))
    } else {
        None
    };
    stop.store(true, Ordering::SeqCst);
    let joined: Vec<_> = clients.into_iter().map(|c| c.join()).collect();
    // End every process now (their logs are complete), then judge.
    for s in &mut cl.sidecars {
        s.kill9("campaign ended");
    }
    let incarnations: Vec<procs::Incarnation> =
        cl.sidecars.iter().flat_map(|s| s.history.clone()).collect();
    drop(cl);
    result?;
    healed?;
    // A client that panicked lost its history: judging the rest could hide a duplicate.
    let logs: Vec<load::ClientLog> = joined
        .into_iter()
        .collect::<Result<_, _>>()
        .map_err(|_| anyhow::anyhow!("a load client panicked; its history is lost"))?;
    let r = report::Run {
        args: &args,
        seed,
        layout: layout.as_ref(),
        cluster,
        started_ns,
        faults_end_ns,
        out: &out,
        other: &spec.other,
        pools: &spec.pools,
        expiry: expiry(&args),
    };
    let passed = r.judge(logs, &incarnations, &nem, liveness)?;
    if passed && INTERRUPTED.load(Ordering::SeqCst) {
        bail!("interrupted: the history so far passed, but the run is not complete");
    }
    Ok(passed)
}

/// What the campaign settles before it starts anything.
struct Prepared {
    /// The fault kinds to draw from.
    kinds: Vec<Kind>,
    layout: Arc<dyn layout::Layout>,
    /// The cluster ID the sidecars are given (0 for layouts without one).
    cluster: u8,
    /// The idcar binary.
    idcar: PathBuf,
    /// Where logs, sockets and the report go (created empty).
    out: PathBuf,
}

/// Checks the arguments and what the campaign needs (`preflight`), creates the output
/// directory, removes what a killed campaign left, and catches Ctrl-C and SIGTERM.
fn prepare(args: &Args, seed: u64) -> Result<Prepared> {
    if args.slots > args.pool_size {
        anyhow::bail!("--slots must be at most --pool-size");
    }
    if args.pool_size >= args.sidecars * args.slots {
        eprintln!("campaign: note: --pool-size >= --sidecars, so no sidecar waits in the queue");
    }
    let kinds = if args.faults.is_empty() {
        Kind::ALL.to_vec()
    } else {
        args.faults.clone()
    };
    if args.store == procs::Store::Zookeeper && args.faults.contains(&Kind::Compact) {
        eprintln!("campaign: note: compact is etcd's fault: not drawn with ZooKeeper");
    }
    if args.full_pool == 0 && args.faults.contains(&Kind::FullKill) {
        eprintln!("campaign: note: full-kill needs a full pool (--full-pool): not drawn");
    }
    let layout: Arc<dyn layout::Layout> = layout::by_name(&args.layout, LayoutParams::default())
        .map_err(|e| anyhow::anyhow!("--layout: {e}"))?
        .into();
    let cluster: u8 = if layout.has_cluster() { 3 } else { 0 };
    let idcar = match &args.idcar {
        Some(p) => p.clone(),
        None => std::env::current_exe()?
            .parent()
            .context("where is this binary?")?
            .join("idcar"),
    };
    preflight::preflight(&idcar, args.plant_bug)?;
    if let Some(p) = &args.previous_idcar {
        preflight::preflight(p, args.plant_bug)?;
        for (which, bin) in [("previous", p), ("this", &idcar)] {
            let v = std::process::Command::new(bin)
                .arg("--version")
                .output()
                .with_context(|| format!("running {} --version", bin.display()))?;
            println!(
                "campaign: {which} idcar: {} ({})",
                String::from_utf8_lossy(&v.stdout).trim(),
                bin.display()
            );
        }
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| procs::workspace().join(format!("target/campaign/seed-{seed}")));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let stale = net::remove_stale();
    if stale > 0 {
        eprintln!("campaign: removed {stale} namespaces left by a campaign that was killed");
    }
    catch_signals();
    Ok(Prepared {
        kinds,
        layout,
        cluster,
        idcar,
        out,
    })
}

/// Creates the network, starts the store and every sidecar: the cluster, and what every
/// sidecar is started with.
fn start_cluster(
    args: &Args,
    idcar: PathBuf,
    out: &std::path::Path,
    layout: &dyn layout::Layout,
    cluster: u8,
) -> Result<(procs::Cluster, procs::SidecarSpec)> {
    let node = match args.store {
        procs::Store::Zookeeper => "zk",
        procs::Store::Etcd => "etcd",
        procs::Store::Kubernetes => "cp",
    };
    let pools = procs::Pool::layout(
        args.sidecars,
        args.pool_size,
        args.slots,
        args.idle_pool,
        args.full_pool,
    );
    let sidecars = pools.last().map_or(0, |p| p.sidecars.end);
    let mut names: Vec<String> = (1..=3).map(|i| format!("{node}{i}")).collect();
    names.extend((0..sidecars).map(|s| format!("sc{s}")));
    let net = net::Net::create(&names)?;
    let hosts = net.hosts.clone();
    let zk = procs::Ensemble::start(args.store, &hosts[..3], out)?;
    let spec = procs::SidecarSpec {
        idcar,
        previous: args.previous_idcar.clone(),
        dir: out.to_path_buf(),
        args: serve_args(args, &zk.connect(), cluster),
        store: args.store,
        layout: args.layout.clone(),
        cluster,
        scheme: layout.scheme(),
        other: procs::Reconfig::for_layout(&args.layout, args.pool_size)?,
        pool_size: args.pool_size,
        pools,
    };
    let sidecars = (0..sidecars)
        .map(|s| {
            let pool = procs::pool_of(&spec.pools, s);
            procs::Sidecar::new(s, pool, hosts[3 + s].clone(), out)
        })
        .collect();
    let mut cl = procs::Cluster { sidecars, zk, net };
    for s in &mut cl.sidecars {
        s.on_previous = spec.previous.is_some();
        s.spawn(&spec, 0)?;
    }
    Ok((cl, spec))
}

/// The sidecars' session timeout, with etcd their lease TTL (whole seconds, at least 2), with
/// Kubernetes their sessions' declared duration when someone waits (`--kube-ttl`, whole
/// seconds, at least 5: renewed every third of it through an API server that shares the two
/// cores with everything else, each call given a sixth), as they are given it
/// (`--zk-session-timeout`): what the bounds count with.
fn expiry(args: &Args) -> Duration {
    match args.store {
        procs::Store::Zookeeper => args.zk_session_timeout,
        procs::Store::Etcd => Duration::from_secs(args.zk_session_timeout.as_secs().max(2)),
        procs::Store::Kubernetes => Duration::from_secs(args.zk_session_timeout.as_secs().max(5)),
    }
}

/// The flags every sidecar is served with (`connect`: the store's addresses); each pool adds
/// its own (its tree, size and slots per sidecar: `procs::Pool::args`).
fn serve_args(args: &Args, connect: &str, cluster: u8) -> Vec<String> {
    let secs = |d: Duration| format!("{}ms", d.as_millis());
    let whole = format!("{}s", expiry(args).as_secs());
    let store: &[&str] = match args.store {
        procs::Store::Zookeeper => &["--zk", connect, "--zk-session-timeout"],
        procs::Store::Etcd => &["--etcd", connect, "--etcd-ttl"],
        procs::Store::Kubernetes => &["--kube", "--kubeconfig", connect, "--kube-ttl"],
    };
    let expiry = match args.store {
        procs::Store::Zookeeper => secs(expiry(args)),
        _ => whole,
    };
    let mut serve_args: Vec<String> = store
        .iter()
        .copied()
        .chain([
            expiry.as_str(),
            "--layout",
            &args.layout,
            "--cluster-id",
            &cluster.to_string(),
            "--lease-horizon",
            &secs(args.lease_horizon),
            "--idle-horizon",
            &secs(args.idle_horizon),
            "--renew-interval",
            &secs(args.renew_interval),
            "--shutdown-grace",
            "3s",
            "--log-format",
            "json",
            "--admin-addr",
            "127.0.0.1:9750",
        ])
        .map(|s| s.to_string())
        .collect();
    if args.plant_bug != PlantedBug::None {
        serve_args.push("--plant-bug".into());
        serve_args.push(args.plant_bug.name().to_string());
    }
    serve_args
}

/// Starts a binary and an HTTP load client for every sidecar, each recording its history.
fn start_clients(
    args: &Args,
    cl: &procs::Cluster,
    layout: &Arc<dyn layout::Layout>,
    seed: u64,
    stop: &Arc<AtomicBool>,
    hard_end: Instant,
) -> Vec<std::thread::JoinHandle<load::ClientLog>> {
    let mut clients = Vec::new();
    for s in &cl.sidecars {
        // The pools beside the main one are asked less often (the machine is small): often
        // enough to time their recoveries to tens of milliseconds.
        let pace = if s.pool == 0 {
            args.pace
        } else {
            args.pace * 4
        };
        for http in [false, true] {
            let c = load::Client {
                sidecar: s.index,
                socket: s.socket.clone(),
                incarnation: s.incarnation.clone(),
                http,
                layout: layout.clone(),
                seed: seed ^ ((s.index as u64) << 8 | u64::from(http)),
                pace: if http { pace * 10 } else { pace },
                timeout: Duration::from_secs(3),
                stop: stop.clone(),
                deadline: hard_end,
                max_ops: 5_000_000,
            };
            clients.push(std::thread::spawn(move || c.run()));
        }
    }
    clients
}

/// Steps the nemesis until `--duration` has passed since `started` (or an interruption).
fn inject(
    args: &Args,
    started: Instant,
    nem: &mut nemesis::Nemesis,
    cl: &mut procs::Cluster,
    spec: &procs::SidecarSpec,
) -> Result<()> {
    let mut moved = 0;
    while started.elapsed() < args.duration && !INTERRUPTED.load(Ordering::SeqCst) {
        nem.step(cl, spec, true)?;
        if spec.previous.is_some() {
            moved += rollout::upgrade_step(started.elapsed(), args.duration, nem, cl, spec)?;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if spec.previous.is_some() {
        println!("campaign: {moved} sidecar restarts between versions");
    }
    Ok(())
}
