//! Load generator for a running idcar, with a raw Unix-socket echo as the floor.
//!
//! ```text
//! cargo build --release --bin idcar --example loadgen
//! target/release/examples/loadgen                 # spawns target/release/idcar itself
//! target/release/examples/loadgen --socket /tmp/idcar.sock --no-spawn
//! ```
//!
//! Phases, all in one run so they share the machine's noise:
//! 1. start-up (spawn mode): time from spawning idcar to the first IDs, and idle RSS;
//! 2. latency: one connection, sequential single-ID requests, binary and HTTP, interleaved in
//!    blocks with an echo server (a separate process, same runtime shape, same frame sizes:
//!    8 bytes in, 16 out) so the ratio to the floor is fair; p50/p99/p999;
//! 3. throughput: C connections asking for batches, binary then HTTP: a warm-up, then a
//!    window of D seconds; IDs/s counts the responses completed inside the window (the
//!    whole-run figure, ramp and tail included, is printed too), and the share of the
//!    layout's cap;
//!
//! Every ID received is checked for duplicates across all phases. To keep hundreds of millions
//! of IDs checkable in memory, each ID (up to 16 bytes) is reduced to a 64-bit key — exact for
//! 8-byte IDs, a bijective mix of the high half XORed with the low half for longer ones — and
//! the keys are sorted once at the end. A key collision can only report a duplicate that is
//! not one; it can never hide a real duplicate.

use clap::Parser;
use idcar::client::{BinaryClient, HttpClient};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

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
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let Some(path) = &args.echo_server {
        // Same shape as idcar's default runtime: two worker threads.
        return tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?
            .block_on(echo_server(path));
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(run(args))
}

async fn echo_server(path: &Path) -> anyhow::Result<()> {
    let _ = std::fs::remove_file(path);
    let l = UnixListener::bind(path)?;
    loop {
        let (mut s, _) = l.accept().await?;
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            let mut out = Vec::with_capacity(8192);
            loop {
                let n = match s.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                // Reply twice the bytes: an 8-byte request gets a 16-byte answer, as from idcar.
                out.clear();
                out.extend_from_slice(&buf[..n]);
                out.extend_from_slice(&buf[..n]);
                if s.write_all(&out).await.is_err() {
                    return;
                }
            }
        });
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

struct Stats {
    name: String,
    conns: usize,
    requests: usize,
    ids: usize,
    elapsed: Duration,
    lat: Vec<Duration>,
}

impl Stats {
    fn print(&mut self) {
        self.lat.sort();
        let rate = self.ids as f64 / self.elapsed.as_secs_f64();
        println!(
            "{:<22} {:>5} {:>9} {:>12.0} {:>10.1?} {:>10.1?} {:>10.1?}",
            self.name,
            self.conns,
            self.requests,
            rate,
            percentile(&self.lat, 0.5),
            percentile(&self.lat, 0.99),
            percentile(&self.lat, 0.999),
        );
    }
}

fn rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
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
    let child = if args.no_spawn {
        None
    } else {
        Some(spawn_idcar(&args, dir.path(), &socket).await?)
    };
    let echo_path = dir.path().join("echo.sock");
    let mut echo = start_echo(&echo_path).await?;
    let mut seen: Vec<u64> = Vec::new();
    println!(
        "{:<22} {:>5} {:>9} {:>12} {:>10} {:>10} {:>10}",
        "phase", "conns", "requests", "IDs/s", "p50", "p99", "p999"
    );
    latency(&args, &socket, &echo_path, &mut seen).await?;
    for http in [false, true] {
        throughput(&args, &socket, http, &mut seen).await?;
    }
    seen.sort_unstable();
    let dups = seen.windows(2).filter(|w| w[0] == w[1]).count();
    println!("IDs checked: {}, duplicates: {dups}", seen.len());

    let _ = echo.kill();
    let _ = echo.wait();
    if let Some(mut c) = child {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(c.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = c.wait();
    }
    anyhow::ensure!(dups == 0, "{dups} duplicate IDs");
    Ok(())
}

/// Phase 1 (spawn mode): start idcar; report the time to its first IDs and its idle RSS.
async fn spawn_idcar(
    args: &Args,
    dir: &Path,
    socket: &Path,
) -> anyhow::Result<std::process::Child> {
    let bin = match &args.idcar {
        Some(b) => b.clone(),
        None => std::env::current_exe()?
            .parent()
            .and_then(Path::parent)
            .map(|d| d.join("idcar"))
            .ok_or_else(|| anyhow::anyhow!("cannot locate idcar; pass --idcar"))?,
    };
    let t0 = Instant::now();
    let c = std::process::Command::new(&bin)
        .arg("serve")
        .arg("--socket")
        .arg(socket)
        .arg("--state-file")
        .arg(dir.join("state"))
        .args(["--admin-addr", "none", "--log", "warn"])
        .args(args.serve_args.split_whitespace())
        .spawn()
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot spawn {}: {e} (build it with cargo build --release)",
                bin.display()
            )
        })?;
    let pid = c.id();
    let ready = loop {
        if let Ok(mut b) = BinaryClient::connect(socket).await {
            if b.ids(1).await.is_ok() {
                break t0.elapsed();
            }
        }
        anyhow::ensure!(
            t0.elapsed() < Duration::from_secs(10),
            "idcar not ready in 10 s"
        );
        tokio::time::sleep(Duration::from_micros(500)).await;
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    println!(
        "start-up: first IDs {ready:.1?} after spawn; idle RSS {} KiB",
        rss_kib(pid).unwrap_or(0)
    );
    Ok(c)
}

/// The floor: an echo server in a separate process, started and awaited.
async fn start_echo(echo_path: &Path) -> anyhow::Result<std::process::Child> {
    let echo = std::process::Command::new(std::env::current_exe()?)
        .arg("--echo-server")
        .arg(echo_path)
        .spawn()?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while UnixStream::connect(echo_path).await.is_err() {
        anyhow::ensure!(Instant::now() < deadline, "echo server did not start");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(echo)
}

/// Phase 2: one connection each, sequential single-ID requests, interleaved in blocks with
/// the echo floor; p50/p99/p999 and the ratios to the floor.
async fn latency(
    args: &Args,
    socket: &Path,
    echo_path: &Path,
    seen: &mut Vec<u64>,
) -> anyhow::Result<()> {
    // Latency: interleave blocks of echo, binary and HTTP single requests.
    let mut e = UnixStream::connect(echo_path).await?;
    let mut b = BinaryClient::connect(socket).await?;
    let mut h = HttpClient::connect(socket).await?;
    let block = 500usize.min(args.latency_requests.max(1));
    let fmt_q = args
        .http_format
        .as_ref()
        .map_or(String::new(), |f| format!("&format={f}"));
    let mut st = [
        Stats {
            name: "echo (floor)".into(),
            conns: 1,
            requests: 0,
            ids: 0,
            elapsed: Duration::ZERO,
            lat: vec![],
        },
        Stats {
            name: "binary, 1 ID".into(),
            conns: 1,
            requests: 0,
            ids: 0,
            elapsed: Duration::ZERO,
            lat: vec![],
        },
        Stats {
            name: "http, 1 ID".into(),
            conns: 1,
            requests: 0,
            ids: 0,
            elapsed: Duration::ZERO,
            lat: vec![],
        },
    ];
    let lat_deadline = Instant::now() + Duration::from_secs(60);
    let mut buf = [0u8; 16];
    while st[0].requests < args.latency_requests && Instant::now() < lat_deadline {
        let t = Instant::now();
        for _ in 0..block {
            let s = Instant::now();
            e.write_all(&[0xD1, 1, 0, 4, 0, 0, 0, 1]).await?;
            e.read_exact(&mut buf).await?;
            st[0].lat.push(s.elapsed());
        }
        st[0].elapsed += t.elapsed();
        st[0].requests += block;
        let t = Instant::now();
        for _ in 0..block {
            let s = Instant::now();
            let ids = b.ids(1).await?;
            st[1].lat.push(s.elapsed());
            for id in ids.iter() {
                seen.push(key(id));
            }
        }
        st[1].elapsed += t.elapsed();
        st[1].requests += block;
        st[1].ids += block;
        let t = Instant::now();
        for _ in 0..block {
            let s = Instant::now();
            let r = h
                .get(&format!("/id{}", fmt_q.replace('&', "?")), false)
                .await?;
            st[2].lat.push(s.elapsed());
            anyhow::ensure!(r.status == 200, "HTTP {}: {}", r.status, r.body);
            seen.push(key_of(u128::from_str_radix(r.body.trim(), 16)?));
        }
        st[2].elapsed += t.elapsed();
        st[2].requests += block;
        st[2].ids += block;
    }
    st[0].ids = st[0].requests;
    for s in st.iter_mut() {
        s.print();
    }
    let (e50, e99) = (percentile(&st[0].lat, 0.5), percentile(&st[0].lat, 0.99));
    let (b50, b99) = (percentile(&st[1].lat, 0.5), percentile(&st[1].lat, 0.99));
    println!(
        "binary single-ID vs echo: p50 {:.2}x (target <= 1.5x), p99 {:.2}x (target <= 2x)",
        b50.as_secs_f64() / e50.as_secs_f64(),
        b99.as_secs_f64() / e99.as_secs_f64()
    );
    drop((e, b, h));

    Ok(())
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
