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
use tokio::net::UnixStream;

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
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let Some(path) = &args.echo_server {
        return echo_server(path);
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(run(args))
}

/// The floor: a blocking, thread-per-connection echo with std. An 8-byte request gets a
/// 16-byte answer, as idcar's single-ID binary frame does.
fn echo_server(path: &Path) -> anyhow::Result<()> {
    use std::io::{Read, Write};
    let _ = std::fs::remove_file(path);
    let l = std::os::unix::net::UnixListener::bind(path)?;
    for s in l.incoming() {
        let mut s = s?;
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            let mut out = [0u8; 8192];
            loop {
                let n = match s.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                out[..n].copy_from_slice(&buf[..n]);
                out[n..2 * n].copy_from_slice(&buf[..n]);
                if s.write_all(&out[..2 * n]).is_err() {
                    return;
                }
            }
        });
    }
    Ok(())
}

/// Nanoseconds the process's threads have run on a CPU (first field of each thread's
/// `/proc/PID/task/TID/schedstat`), summed; `None` where the kernel does not say.
fn cpu_ns(pid: u32) -> Option<u64> {
    let mut total = 0;
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let s = std::fs::read_to_string(t.ok()?.path().join("schedstat")).ok()?;
        total += s.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(total)
}

/// Pins every thread of `pids` and the calling thread to `cpu`, or lets them run anywhere
/// again (`None`).
fn pin_threads(pids: &[u32], cpu: Option<usize>) -> anyhow::Result<()> {
    use nix::sched::{sched_setaffinity, CpuSet};
    use nix::unistd::Pid;
    let mut set = CpuSet::new();
    match cpu {
        Some(c) => set.set(c)?,
        None => {
            let n = std::thread::available_parallelism().map_or(1, |n| n.get());
            for c in 0..n.min(CpuSet::count()) {
                set.set(c)?;
            }
        }
    }
    sched_setaffinity(Pid::from_raw(0), &set)?;
    for pid in pids {
        for t in std::fs::read_dir(format!("/proc/{pid}/task"))? {
            if let Some(tid) = t?.file_name().to_str().and_then(|s| s.parse().ok()) {
                // A thread that ended meanwhile is fine.
                let _ = sched_setaffinity(Pid::from_raw(tid), &set);
            }
        }
    }
    Ok(())
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
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
    let pids = (echo.id(), child.as_ref().map(|c| c.id()));
    let lat = {
        let (la, socket, echo_path) = (args_latency(&args), socket.clone(), echo_path.clone());
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
            throughput(&args, &socket, http, &mut seen).await?;
        }
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

/// What the latency phase needs from the arguments (it runs on a blocking thread).
struct LatencyArgs {
    requests: usize,
    /// The least time from one request's start to the next's.
    interval: Duration,
    http_path: String,
    idle_probes: usize,
    idle_pause: Duration,
}

fn args_latency(a: &Args) -> LatencyArgs {
    LatencyArgs {
        requests: a.latency_requests,
        interval: Duration::from_secs_f64(1.0 / a.pace.unwrap_or(a.cap * 0.8).max(1.0)),
        http_path: a
            .http_format
            .as_ref()
            .map_or("/id".into(), |f| format!("/id?format={f}")),
        idle_probes: a.idle_probes,
        idle_pause: a.idle_pause,
    }
}

/// A blocking client of one kind of server, for the latency phase: one request, its key.
trait OneRequest {
    fn once(&mut self) -> anyhow::Result<Option<u64>>;
}

struct Echo(std::os::unix::net::UnixStream);

impl OneRequest for Echo {
    fn once(&mut self) -> anyhow::Result<Option<u64>> {
        use std::io::{Read, Write};
        let mut buf = [0u8; 16];
        self.0.write_all(&SINGLE_ID)?;
        self.0.read_exact(&mut buf)?;
        Ok(None)
    }
}

/// idcar's binary request for one ID (the echo gets the same 8 bytes).
const SINGLE_ID: [u8; 8] = [0xD1, 1, 0, 4, 0, 0, 0, 1];

struct Binary(std::os::unix::net::UnixStream, Vec<u8>);

impl OneRequest for Binary {
    fn once(&mut self) -> anyhow::Result<Option<u64>> {
        use idcar::server::frame::{parse_response_header, RESPONSE_HEADER};
        use std::io::{Read, Write};
        self.0.write_all(&SINGLE_ID)?;
        let mut head = [0u8; RESPONSE_HEADER];
        self.0.read_exact(&mut head)?;
        let h = parse_response_header(&head)
            .map_err(anyhow::Error::msg)?
            .ok_or_else(|| anyhow::anyhow!("short header"))?;
        self.1.resize(h.len as usize, 0);
        self.0.read_exact(&mut self.1)?;
        anyhow::ensure!(
            h.status == idcar::server::frame::Status::Ok,
            "status {:?}: {}",
            h.status,
            String::from_utf8_lossy(&self.1)
        );
        Ok(Some(key(&self.1)))
    }
}

struct Http {
    s: std::os::unix::net::UnixStream,
    req: Vec<u8>,
    buf: Vec<u8>,
}

impl OneRequest for Http {
    fn once(&mut self) -> anyhow::Result<Option<u64>> {
        use std::io::{Read, Write};
        self.s.write_all(&self.req)?;
        self.buf.clear();
        let mut chunk = [0u8; 1024];
        loop {
            let n = self.s.read(&mut chunk)?;
            anyhow::ensure!(n > 0, "HTTP connection closed");
            self.buf.extend_from_slice(&chunk[..n]);
            let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                continue;
            };
            let head = String::from_utf8_lossy(&self.buf[..end]).to_ascii_lowercase();
            anyhow::ensure!(head.starts_with("http/1.1 200"), "HTTP: {head}");
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .ok_or_else(|| anyhow::anyhow!("no content-length"))?;
            if self.buf.len() >= end + 4 + len {
                let body = std::str::from_utf8(&self.buf[end + 4..end + 4 + len])?;
                return Ok(Some(key_of(u128::from_str_radix(body.trim(), 16)?)));
            }
        }
    }
}

/// Per-block figures of one server: p50, p99 and CPU per request, each a list over blocks.
#[derive(Default)]
struct Blocks {
    p50: Vec<f64>,
    p99: Vec<f64>,
    cpu: Vec<f64>,
    all: Vec<Duration>,
}

impl Blocks {
    fn run(
        &mut self,
        c: &mut dyn OneRequest,
        (n, interval): (usize, Duration),
        pid: Option<u32>,
        keys: &mut Vec<u64>,
    ) -> anyhow::Result<()> {
        let mut lat = Vec::with_capacity(n);
        let cpu0 = pid.and_then(cpu_ns);
        let mut next = Instant::now();
        for _ in 0..n {
            while Instant::now() < next {
                std::hint::spin_loop();
            }
            let s = Instant::now();
            next = s + interval;
            let k = c.once()?;
            lat.push(s.elapsed());
            keys.extend(k);
        }
        if let (Some(a), Some(b)) = (cpu0, pid.and_then(cpu_ns)) {
            self.cpu.push(b.saturating_sub(a) as f64 / n as f64 / 1e3);
        }
        lat.sort();
        self.p50.push(percentile(&lat, 0.5).as_secs_f64() * 1e6);
        self.p99.push(percentile(&lat, 0.99).as_secs_f64() * 1e6);
        self.all.extend(lat);
        Ok(())
    }

    /// Medians over the blocks: (p50, p99, CPU per request), µs.
    fn medians(&mut self) -> (f64, f64, f64) {
        (
            median(&mut self.p50),
            median(&mut self.p99),
            median(&mut self.cpu),
        )
    }
}

/// Phase 2: one connection to each server, sequential single requests in interleaved blocks;
/// medians over the blocks of p50, p99 and CPU per request, and the ratios to the floor. Then
/// the first request after an idle pause. Returns the keys of the IDs received.
fn latency(
    args: &LatencyArgs,
    socket: &Path,
    echo_path: &Path,
    (echo_pid, idcar_pid): (u32, Option<u32>),
) -> anyhow::Result<Vec<u64>> {
    use std::os::unix::net::UnixStream as Std;
    let mut echo = Echo(Std::connect(echo_path)?);
    let mut bin = Binary(Std::connect(socket)?, Vec::new());
    let mut http = Http {
        s: Std::connect(socket)?,
        req: format!("GET {} HTTP/1.1\r\nHost: idcar\r\n\r\n", args.http_path).into_bytes(),
        buf: Vec::new(),
    };
    let mut keys = Vec::new();
    let block = 500usize.min(args.requests.max(1));
    let mut st: [Blocks; 3] = Default::default();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut done = 0;
    while done < args.requests && Instant::now() < deadline {
        let b = (block, args.interval);
        st[0].run(&mut echo, b, Some(echo_pid), &mut keys)?;
        st[1].run(&mut bin, b, idcar_pid, &mut keys)?;
        st[2].run(&mut http, b, idcar_pid, &mut keys)?;
        done += block;
    }
    println!(
        "single requests, {done} each in blocks of {block}, one at most every {:?} \
         (medians over the blocks, µs):",
        args.interval,
    );
    println!(
        "{:<26} {:>8} {:>8} {:>8} {:>12}",
        "", "p50", "p99", "p999", "CPU/request"
    );
    let mut m = Vec::new();
    for (name, s) in ["echo, std threads (floor)", "binary, 1 ID", "http, 1 ID"]
        .iter()
        .zip(st.iter_mut())
    {
        s.all.sort();
        let p999 = percentile(&s.all, 0.999).as_secs_f64() * 1e6;
        let (p50, p99, cpu) = s.medians();
        println!("{name:<26} {p50:>8.1} {p99:>8.1} {p999:>8.1} {cpu:>12.2}");
        m.push((p50, p99, cpu));
    }
    println!(
        "binary single-ID vs floor: p50 {:.2}x (target <= 1.3x), p99 {:.2}x (target <= 2x), \
         CPU {:.2}x (target <= 1.5x)",
        m[1].0 / m[0].0,
        m[1].1 / m[0].1,
        m[1].2 / m[0].2
    );
    let mut idle: [Vec<f64>; 2] = Default::default();
    for _ in 0..args.idle_probes {
        for (i, c) in [&mut echo as &mut dyn OneRequest, &mut bin]
            .into_iter()
            .enumerate()
        {
            std::thread::sleep(args.idle_pause);
            let s = Instant::now();
            keys.extend(c.once()?);
            idle[i].push(s.elapsed().as_secs_f64() * 1e6);
        }
    }
    let (e, b) = (median(&mut idle[0]), median(&mut idle[1]));
    let p90 = |v: &[f64]| v.get(v.len() * 9 / 10).copied().unwrap_or(f64::NAN);
    let (e90, b90) = (p90(&idle[0]), p90(&idle[1]));
    println!(
        "first request after {:?} idle ({} each, µs): floor median {e:.1} p90 {e90:.1}; \
         binary median {b:.1} p90 {b90:.1}; ratios {:.2}x / {:.2}x (target <= 2x)",
        args.idle_pause,
        args.idle_probes,
        b / e,
        b90 / e90
    );
    Ok(keys)
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
