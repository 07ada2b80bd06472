//! Load generator for a running idcar, with a raw Unix-socket echo as the floor.
//!
//! ```text
//! cargo build --release --bin idcar --example loadgen
//! target/release/examples/loadgen                 # spawns target/release/idcar itself
//! target/release/examples/loadgen --crowd-only    # phase 4 alone
//! target/release/examples/loadgen --neighbour [--zk 127.0.0.1:2181]   # phase 5 alone
//! target/release/examples/loadgen --socket /tmp/idcar.sock --no-spawn
//! ```
//!
//! Phases, all in one run so they share the machine's noise:
//! 1. start-up (spawn mode): time from spawning idcar to the first IDs, and idle RSS;
//! 2. latency: one connection each, sequential single-ID requests from a blocking std client,
//!    binary and HTTP, interleaved in blocks with the floor: a blocking, thread-per-connection
//!    echo written with std in a separate process (8 bytes in, 16 out, as idcar's single-ID
//!    frame). Per block: p50/p99, and CPU per request from the server's threads' run time
//!    (`/proc/PID/task/*/schedstat`); reported as medians over the blocks, with ratios to the
//!    floor. Then the first request after an idle pause, for the floor and for idcar;
//! 3. throughput: C connections asking for batches, binary then HTTP: a warm-up, then a
//!    window of D seconds; IDs/s counts the responses completed inside the window (the
//!    whole-run figure, ramp and tail included, is printed too), and the share of the
//!    layout's cap;
//! 4. many clients at once (`crowd.rs`): 8, 16 and 64 connections, one single-ID request in
//!    flight on each, against the floor and an idcar of its own (sno80: its cap is never the
//!    limit), in alternating windows; medians and ratios of requests/s and CPU per request;
//! 5. a busy neighbour (`neighbour.rs`, `--neighbour`, run alone): idcar with default lease
//!    flags beside a process saturating the CPUs, a light client asking every 50 ms;
//!    refusals, lease losses and renewal headroom, static and (with `--zk`) ZooKeeper mode.
//!
//! Every ID received is checked for duplicates across all phases. To keep hundreds of millions
//! of IDs checkable in memory, each ID (up to 16 bytes) is reduced to a 64-bit key — exact for
//! 8-byte IDs, a bijective mix of the high half XORed with the low half for longer ones — and
//! the keys are sorted once at the end. A key collision can only report a duplicate that is
//! not one; it can never hide a real duplicate.

mod crowd;
mod latency;
mod neighbour;
mod procs;
mod spawn;
mod stats;

use clap::Parser;
use idcar::client::HttpClient;
use idcar_client::tokio::Connection as BinaryClient;
use latency::{args_latency, latency, Binary, Echo, OneRequest};
use neighbour::Spawned;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::net::UnixStream;

use procs::*;
use spawn::*;
use stats::*;

#[derive(Parser, Debug)]
struct Args {
    /// idcar's socket (a temporary one in spawn mode).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Use an idcar already running on --socket instead of spawning one.
    #[arg(long)]
    no_spawn: bool,
    /// The idcar binary to spawn (default: beside this example's directory).
    #[arg(long)]
    idcar: Option<PathBuf>,
    /// Extra arguments for the spawned `idcar serve`, e.g. "--layout lable64".
    #[arg(long, default_value = "")]
    serve_args: String,
    /// Concurrent connections in the throughput phases.
    #[arg(long, default_value_t = 8)]
    connections: usize,
    /// Length of each throughput phase's measurement window.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Load before the measurement window starts (not counted in IDs/s).
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    warmup: Duration,
    /// IDs per request in the throughput phases.
    #[arg(long, default_value_t = 64)]
    batch: u32,
    /// Sequential requests per interface in the latency phase.
    #[arg(long, default_value_t = 20_000)]
    latency_requests: usize,
    /// Text form asked for over HTTP (`format=`); it must parse as hex or decimal digits
    /// (e.g. `hex` for ugd60). Default: the layout's own.
    #[arg(long)]
    http_format: Option<String>,
    /// The layout's cap in IDs per second (64,000 for lable64).
    #[arg(long, default_value_t = 64_000.0)]
    cap: f64,
    /// Internal: run as the echo server on this path.
    #[arg(long, hide = true)]
    echo_server: Option<PathBuf>,
    /// Only the latency phase (for repeated runs of the single-ID comparison).
    #[arg(long)]
    latency_only: bool,
    /// First requests after an idle pause measured per server in the latency phase.
    #[arg(long, default_value_t = 40)]
    idle_probes: usize,
    /// Single requests start at most this often (per second) in the latency phase, for every
    /// server alike (the client spins between them): below the layout's cap, so the figures
    /// are latency, not waits for the next tick. Default: 80 % of --cap.
    #[arg(long)]
    pace: Option<f64>,
    /// Run the latency phase unpinned. By default the client thread and every thread of the
    /// echo and of idcar share CPU 0 during it: on a VM a wake-up across CPUs costs tens of
    /// microseconds and whether one happens is the scheduler's lottery, which would swamp
    /// what is measured (throughput phases are never pinned).
    #[arg(long)]
    no_pin: bool,
    /// The idle pause before each of those requests.
    #[arg(long, default_value = "20ms", value_parser = humantime::parse_duration)]
    idle_pause: Duration,
    /// Connection counts of the many-clients phase (empty: skip it).
    #[arg(long, value_delimiter = ',', default_value = "8,16,64")]
    crowd: Vec<usize>,
    /// Each window of the many-clients phase.
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
    crowd_window: Duration,
    /// Rounds of the many-clients phase (each measures every count on both servers). A shared
    /// machine moves the floor by several percent from window to window: five rounds keep one
    /// slow window out of the medians.
    #[arg(long, default_value_t = 5)]
    crowd_rounds: usize,
    /// Arguments for the many-clients phase's own idcar.
    #[arg(long, default_value = "--layout sno80")]
    crowd_serve_args: String,
    /// Only the many-clients phase.
    #[arg(long)]
    crowd_only: bool,
    /// Only the busy-neighbour phase (idcar with default lease flags, plus --serve-args).
    #[arg(long)]
    neighbour: bool,
    /// How long the neighbour is busy while the light client asks.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    neighbour_duration: Duration,
    /// The neighbour's request loop: connections against its own std echo.
    #[arg(long, default_value_t = 64)]
    neighbour_connections: usize,
    /// The neighbour's threads that only burn CPU.
    #[arg(long, default_value_t = 0)]
    neighbour_spinners: usize,
    /// ZooKeeper (host:port) for the neighbour phase's ZooKeeper mode (else static only).
    #[arg(long)]
    zk: Option<String>,
    /// Internal: run as the busy neighbour in this directory.
    #[arg(long, hide = true)]
    busy_neighbour: Option<PathBuf>,
    /// Internal: how long the busy neighbour runs.
    #[arg(long, hide = true, default_value = "70s", value_parser = humantime::parse_duration)]
    busy_for: Duration,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let Some(path) = &args.echo_server {
        return echo_server(path);
    }
    if let Some(dir) = &args.busy_neighbour {
        let (c, s) = (args.neighbour_connections, args.neighbour_spinners);
        return neighbour::busy(dir, c, s, args.busy_for);
    }
    if args.neighbour {
        return neighbour::run(&neighbour::Neighbour {
            idcar: idcar_binary(&args)?,
            duration: args.neighbour_duration,
            connections: args.neighbour_connections,
            spinners: args.neighbour_spinners,
            every: Duration::from_millis(50),
            zk: args.zk.clone(),
            serve_args: args.serve_args.clone(),
        });
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(run(args))
}

fn key(id: &[u8]) -> u64 {
    key_of(id.iter().fold(0u128, |acc, b| acc << 8 | u128::from(*b)))
}

/// A 64-bit key of an ID's integer value (see the module documentation).
fn key_of(v: u128) -> u64 {
    let (hi, lo) = ((v >> 64) as u64, v as u64);
    if hi == 0 {
        return lo;
    }
    // splitmix64's finaliser: a bijection on u64, so IDs that differ only in `hi` never collide.
    let mut z = hi.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    lo ^ z ^ (z >> 31)
}

/// The phases in order, all in one run so they share the machine's noise.
async fn run(args: Args) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let socket = args
        .socket
        .clone()
        .unwrap_or_else(|| dir.path().join("idcar.sock"));
    // Both end when dropped, on an error too (SIGTERM, then SIGKILL after 15 s).
    let child = if args.no_spawn || args.crowd_only {
        None
    } else {
        Some(Spawned(
            spawn_idcar(&args, &args.serve_args, dir.path(), &socket).await?,
        ))
    };
    let echo_path = dir.path().join("echo.sock");
    let echo = Spawned(start_echo(&echo_path).await?);
    let mut seen: Vec<u64> = Vec::new();
    println!(
        "{:<22} {:>5} {:>9} {:>12} {:>10} {:>10} {:>10}",
        "phase", "conns", "requests", "IDs/s", "p50", "p99", "p999"
    );
    let pids = (echo.0.id(), child.as_ref().map(|c| c.0.id()));
    if !args.crowd_only {
        seen.extend(single_and_batches(&args, &socket, &echo_path, pids).await?);
    }
    if !args.crowd.is_empty() && !args.latency_only {
        seen.extend(many_clients(&args, dir.path(), &echo_path, echo.0.id()).await?);
    }
    seen.sort_unstable();
    let dups = seen.windows(2).filter(|w| w[0] == w[1]).count();
    println!("IDs checked: {}, duplicates: {dups}", seen.len());

    drop((echo, child));
    anyhow::ensure!(dups == 0, "{dups} duplicate IDs");
    Ok(())
}

/// Phases 2 and 3: single requests against the floor, then batches; the keys of the IDs.
async fn single_and_batches(
    args: &Args,
    socket: &Path,
    echo_path: &Path,
    pids: (u32, Option<u32>),
) -> anyhow::Result<Vec<u64>> {
    let mut seen = Vec::new();
    let lat = {
        let (la, socket, echo_path) = (
            args_latency(args),
            socket.to_path_buf(),
            echo_path.to_path_buf(),
        );
        let pin = !args.no_pin;
        tokio::task::spawn_blocking(move || {
            let pinned: Vec<u32> = [Some(pids.0), pids.1].into_iter().flatten().collect();
            if pin {
                pin_threads(&pinned, Some(0))?;
            }
            let r = latency(&la, &socket, &echo_path, pids);
            if pin {
                pin_threads(&pinned, None)?;
            }
            r
        })
        .await??
    };
    seen.extend(lat);
    if !args.latency_only {
        for http in [false, true] {
            throughput(args, socket, http, &mut seen).await?;
        }
    }
    Ok(seen)
}

/// Phase 4: many clients at once, against the floor and an idcar of its own.
async fn many_clients(
    args: &Args,
    dir: &Path,
    echo_path: &Path,
    echo_pid: u32,
) -> anyhow::Result<Vec<u64>> {
    let cdir = dir.join("crowd");
    std::fs::create_dir_all(&cdir)?;
    let csock = cdir.join("idcar.sock");
    let c = Spawned(spawn_idcar(args, &args.crowd_serve_args, &cdir, &csock).await?);
    let crowd = crowd::Crowd {
        conns: args.crowd.clone(),
        window: args.crowd_window,
        rounds: args.crowd_rounds.max(1),
    };
    let (echo_path, pid) = (echo_path.to_path_buf(), c.0.id());
    let keys = tokio::task::spawn_blocking(move || {
        let floor = crowd::Server {
            path: &echo_path,
            pid: echo_pid,
            idcar: false,
        };
        let idcar = crowd::Server {
            path: &csock,
            pid,
            idcar: true,
        };
        crowd::run(&crowd, floor, idcar)
    })
    .await?;
    drop(c);
    keys
}

/// Phase 3: C connections asking for batches (binary, or HTTP): a warm-up, then a window of
/// D seconds; IDs/s counts the responses completed inside the window, and the share of the
/// layout's cap.
async fn throughput(
    args: &Args,
    socket: &Path,
    http: bool,
    seen: &mut Vec<u64>,
) -> anyhow::Result<()> {
    let fmt_q = args
        .http_format
        .as_ref()
        .map_or(String::new(), |f| format!("&format={f}"));
    let t0 = Instant::now();
    let (from, end) = (t0 + args.warmup, t0 + args.warmup + args.duration);
    let mut tasks = Vec::new();
    for _ in 0..args.connections {
        let socket = socket.to_path_buf();
        let batch = args.batch;
        let fmt_q = fmt_q.clone();
        tasks.push(tokio::spawn(async move {
            // (completion time, IDs) per response, and every ID for the duplicate check.
            let mut done: Vec<(Instant, usize)> = Vec::new();
            let mut ids: Vec<u64> = Vec::new();
            let mut lat = Vec::new();
            let mut http_c = if http {
                Some(HttpClient::connect(&socket).await?)
            } else {
                None
            };
            let mut bin_c = if http {
                None
            } else {
                Some(BinaryClient::connect(&socket).await?)
            };
            while Instant::now() < end {
                let s = Instant::now();
                let before = ids.len();
                if let Some(c) = http_c.as_mut() {
                    let r = c.get(&format!("/ids?count={batch}{fmt_q}"), false).await?;
                    anyhow::ensure!(r.status == 200, "HTTP {}: {}", r.status, r.body);
                    for l in r.body.lines() {
                        ids.push(key_of(u128::from_str_radix(l, 16)?));
                    }
                } else if let Some(c) = bin_c.as_mut() {
                    ids.extend(c.ids(batch).await?.iter().map(key));
                }
                let t = Instant::now();
                lat.push(t - s);
                done.push((t, ids.len() - before));
            }
            anyhow::Ok((done, ids, lat))
        }));
    }
    let mut s = Stats {
        name: format!(
            "{}, batch {}",
            if http { "http" } else { "binary" },
            args.batch
        ),
        conns: args.connections,
        requests: 0,
        ids: 0,
        elapsed: args.duration,
        lat: vec![],
    };
    let mut whole = 0usize;
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await??);
    }
    let total = t0.elapsed();
    for (done, ids, lat) in results {
        s.requests += done.iter().filter(|(t, _)| *t >= from && *t < end).count();
        s.ids += done
            .iter()
            .filter(|(t, _)| *t >= from && *t < end)
            .map(|(_, n)| n)
            .sum::<usize>();
        whole += ids.len();
        s.lat.extend(lat);
        seen.extend(ids);
    }
    s.print();
    println!(
        "  window {:.1?}: {:.2}% of the layout cap ({:.0} IDs/s); whole run incl. warm-up and tail: {:.0} IDs/s over {:.1?}",
        args.duration,
        100.0 * s.ids as f64 / args.duration.as_secs_f64() / args.cap,
        args.cap,
        whole as f64 / total.as_secs_f64(),
        total
    );
    Ok(())
}
