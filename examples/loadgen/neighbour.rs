//! Phase 5, a busy neighbour: idcar with default lease flags beside a process that saturates
//! the CPUs (a 64-connection request loop against a std echo — about 130 busy threads — plus
//! optional spinners), while one light client asks for an ID every 50 ms. Reported per mode
//! (static, and ZooKeeper with `--zk`): refusals, lease losses, and how close the renewals
//! came to the mark (idcar's own metrics, scraped at the end).

use crate::{cpu_ns, percentile, Binary, Echo, OneRequest};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// What the phase runs.
pub struct Neighbour {
    pub idcar: PathBuf,
    pub duration: Duration,
    pub connections: usize,
    pub spinners: usize,
    /// The light client's period.
    pub every: Duration,
    /// ZooKeeper to run the second mode against.
    pub zk: Option<String>,
    /// Extra arguments for `idcar serve` (none by default: default flags are the point).
    pub serve_args: String,
}

/// The busy process: an echo served by a thread per connection, `connections` clients
/// asking it as fast as it answers, `spinners` threads burning CPU; ends after `limit`.
pub fn busy(
    dir: &Path,
    connections: usize,
    spinners: usize,
    limit: Duration,
) -> anyhow::Result<()> {
    let path = dir.join("busy.sock");
    let _ = std::fs::remove_file(&path);
    let l = std::os::unix::net::UnixListener::bind(&path)?;
    std::thread::spawn(move || crate::serve_echo(l));
    let end = Instant::now() + limit;
    for _ in 0..connections {
        let mut c = Echo(UnixStream::connect(&path)?);
        std::thread::spawn(move || while Instant::now() < end && c.once().is_ok() {});
    }
    for _ in 0..spinners {
        std::thread::spawn(move || {
            let mut x = 0u64;
            while Instant::now() < end {
                for i in 0..10_000u64 {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
                }
            }
        });
    }
    std::thread::sleep(limit);
    Ok(())
}

/// A free loopback TCP port for idcar's admin listener.
fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// idcar's metrics, as text.
fn scrape(port: u16) -> anyhow::Result<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: idcar\r\nConnection: close\r\n\r\n")?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    Ok(text)
}

/// The sum of a metric's series (every label set) in `text`.
fn total(text: &str, name: &str) -> f64 {
    total_where(text, name, "")
}

/// The sum of a metric's series whose labels contain `label` (e.g. `result="ok"`).
fn total_where(text: &str, name: &str, label: &str) -> f64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|r| r.starts_with('{') || r.starts_with(' '))
                && l.contains(label)
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .fold(0.0, |a, v| a + v)
}

/// The least bucket bound of a histogram with a sample at or below it ("smallest seen").
fn least_bucket(text: &str, name: &str) -> Option<String> {
    let bucket = format!("{name}_bucket{{");
    text.lines()
        .filter(|l| l.starts_with(&bucket))
        .filter(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) > Some(0.0))
        .filter_map(|l| Some(l.split("le=\"").nth(1)?.split('"').next()?.to_string()))
        .next()
}

/// A child process that is ended when this is dropped (SIGTERM, then SIGKILL after 15 s).
pub struct Spawned(pub Child);

impl Drop for Spawned {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs the phase for each mode and prints one line per mode; `Err` if a mode saw refusals
/// or lease losses (the target is none).
pub fn run(n: &Neighbour) -> anyhow::Result<()> {
    let modes: Vec<(&str, Vec<String>)> = std::iter::once(("static", vec![]))
        .chain(n.zk.iter().map(|zk| {
            let root = format!("/loadgen-{}", std::process::id());
            (
                "zookeeper",
                vec!["--zk".into(), zk.clone(), "--zk-root".into(), root],
            )
        }))
        .collect();
    println!(
        "busy neighbour: {} connections against a std echo + {} spinners beside idcar for {:?}, \
         one light client every {:?}:",
        n.connections, n.spinners, n.duration, n.every
    );
    let mut failed = Vec::new();
    for (mode, extra) in modes {
        let line = one_mode(n, &extra)?;
        println!("  {mode:<10} {}", line.0);
        if !line.1 {
            failed.push(mode);
        }
    }
    anyhow::ensure!(
        failed.is_empty(),
        "refusals or lease losses under the busy neighbour in: {failed:?} (target: none)"
    );
    Ok(())
}

/// The first connection that answers a request (within 30 s of idcar's start).
fn first_answer(connect: &dyn Fn() -> anyhow::Result<Binary>) -> anyhow::Result<Binary> {
    let t0 = Instant::now();
    loop {
        if let Ok(mut c) = connect() {
            if matches!(c.ask(), Ok(Ok(_))) {
                return Ok(c);
            }
        }
        anyhow::ensure!(
            t0.elapsed() < Duration::from_secs(30),
            "idcar not ready in 30 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One mode: the line to print, and whether it met the target.
fn one_mode(n: &Neighbour, extra: &[String]) -> anyhow::Result<(String, bool)> {
    let dir = tempfile::tempdir()?;
    let socket = dir.path().join("idcar.sock");
    let port = free_port()?;
    let idcar = Spawned(
        Command::new(&n.idcar)
            .arg("serve")
            .arg("--socket")
            .arg(&socket)
            .arg("--state-file")
            .arg(dir.path().join("state"))
            .args([
                "--admin-addr",
                &format!("127.0.0.1:{port}"),
                "--log",
                "warn",
            ])
            .args(extra)
            .args(n.serve_args.split_whitespace())
            .spawn()?,
    );
    let connect = || -> anyhow::Result<Binary> {
        let c = UnixStream::connect(&socket)?;
        c.set_read_timeout(Some(Duration::from_secs(10)))?;
        Ok(Binary(c, Vec::new()))
    };
    let mut conn = first_answer(&connect)?;
    let busy = Spawned(
        Command::new(std::env::current_exe()?)
            .arg("--busy-neighbour")
            .arg(dir.path())
            .args(["--neighbour-connections", &n.connections.to_string()])
            .args(["--neighbour-spinners", &n.spinners.to_string()])
            .args(["--busy-for", &format!("{}s", n.duration.as_secs() + 10)])
            .spawn()?,
    );
    std::thread::sleep(Duration::from_secs(1));
    let cpu0 = cpu_ns(busy.0.id());
    let (start, mut next) = (Instant::now(), Instant::now());
    let (mut served, mut refused, mut errors) = (0u64, 0u64, 0u64);
    let mut first_refusal = None;
    let mut lat = Vec::new();
    while start.elapsed() < n.duration {
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        next += n.every;
        let s = Instant::now();
        match conn.ask() {
            Ok(Ok(_)) => served += 1,
            Ok(Err(why)) => {
                refused += 1;
                first_refusal.get_or_insert(why);
            }
            Err(_) => {
                errors += 1;
                conn = connect()?;
            }
        }
        lat.push(s.elapsed());
    }
    let busy_cpus = match (cpu0, cpu_ns(busy.0.id())) {
        (Some(a), Some(b)) => b.saturating_sub(a) as f64 / 1e9 / start.elapsed().as_secs_f64(),
        _ => f64::NAN,
    };
    drop(busy);
    let m = scrape(port)?;
    drop(idcar);
    lat.sort();
    let losses = total(&m, "idcar_lease_losses_total");
    let ok = refused == 0 && errors == 0 && losses == 0.0;
    let line = format!(
        "requests {} served {served} refused {refused} errors {errors} (latency p50 {:.1?} p99 \
         {:.1?} max {:.1?}); lease losses {losses}; renewals ok {} error {}, late {} (less than \
         a third of the horizon left), least headroom <= {} s; neighbour used {busy_cpus:.2} \
         CPUs{}",
        served + refused + errors,
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        lat.last().copied().unwrap_or_default(),
        total_where(&m, "idcar_lease_renewals_total", "result=\"ok\""),
        total_where(&m, "idcar_lease_renewals_total", "result=\"error\""),
        total(&m, "idcar_lease_renewals_late_total"),
        least_bucket(&m, "idcar_lease_renewal_headroom_seconds").unwrap_or("-".into()),
        first_refusal.map_or(String::new(), |w| format!("; first refusal: {w}")),
    );
    Ok((line, ok))
}
