//! Phase 2, single requests: one connection each, sequential single-ID requests from a
//! blocking std client, binary and HTTP, interleaved in blocks with the floor; then the first
//! request after an idle pause. The request kinds here are shared with the other phases.

use crate::{cpu_ns, key, key_of, median, percentile, Args};
use std::path::Path;
use std::time::{Duration, Instant};

/// What the latency phase needs from the arguments (it runs on a blocking thread).
pub struct LatencyArgs {
    requests: usize,
    /// The least time from one request's start to the next's.
    interval: Duration,
    http_path: String,
    idle_probes: usize,
    idle_pause: Duration,
}

pub fn args_latency(a: &Args) -> LatencyArgs {
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

/// A blocking client of one kind of server: one request.
pub trait OneRequest {
    /// The key of the ID served (`None` from the echo), or the server's refusal.
    fn ask(&mut self) -> anyhow::Result<Result<Option<u64>, String>>;

    /// [`OneRequest::ask`], a refusal being an error.
    fn once(&mut self) -> anyhow::Result<Option<u64>> {
        self.ask()?.map_err(anyhow::Error::msg)
    }
}

pub struct Echo(pub std::os::unix::net::UnixStream);

impl OneRequest for Echo {
    fn ask(&mut self) -> anyhow::Result<Result<Option<u64>, String>> {
        use std::io::{Read, Write};
        let mut buf = [0u8; 16];
        self.0.write_all(&SINGLE_ID)?;
        self.0.read_exact(&mut buf)?;
        Ok(Ok(None))
    }
}

/// idcar's binary request for one ID (the echo gets the same 8 bytes).
pub const SINGLE_ID: [u8; 8] = [0xD1, 1, 0, 4, 0, 0, 0, 1];

/// idcar's binary protocol from a client that reads what has arrived into a buffer: a
/// single-ID answer (header and ID, 16 bytes) costs one `read`, as the echo's does. Reading the
/// header and then the body with `read_exact` each would cost the client a second system call
/// per request that the floor's client does not make.
pub struct Binary(pub std::os::unix::net::UnixStream, pub Vec<u8>);

impl OneRequest for Binary {
    fn ask(&mut self) -> anyhow::Result<Result<Option<u64>, String>> {
        use idcar::server::frame::{parse_response_header, Status, RESPONSE_HEADER};
        use std::io::{Read, Write};
        self.0.write_all(&SINGLE_ID)?;
        let buf = &mut self.1;
        buf.clear();
        let mut chunk = [0u8; 64];
        // One request is in flight, so everything read belongs to its answer.
        let (status, total) = loop {
            let n = self.0.read(&mut chunk)?;
            anyhow::ensure!(n > 0, "idcar closed the connection");
            buf.extend_from_slice(&chunk[..n]);
            if let Some(h) = parse_response_header(buf).map_err(anyhow::Error::msg)? {
                anyhow::ensure!(h.len <= 1 << 20, "an answer of {} bytes", h.len);
                let total = RESPONSE_HEADER + h.len as usize;
                if buf.len() >= total {
                    break (h.status, total);
                }
            }
        };
        let body = &buf[RESPONSE_HEADER..total];
        if status != Status::Ok {
            let why = String::from_utf8_lossy(body);
            return Ok(Err(format!("status {status:?}: {why}")));
        }
        Ok(Ok(Some(key(body))))
    }
}

struct Http {
    s: std::os::unix::net::UnixStream,
    req: Vec<u8>,
    buf: Vec<u8>,
}

impl OneRequest for Http {
    fn ask(&mut self) -> anyhow::Result<Result<Option<u64>, String>> {
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
                return Ok(Ok(Some(key_of(u128::from_str_radix(body.trim(), 16)?))));
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
pub fn latency(
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
        "binary single-ID vs floor: p50 {:.2}x (target <= 1.1x), p99 {:.2}x (target <= 1.1x), \
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
