//! Phase 4, many clients at once: N connections, one single-ID request in flight on each,
//! from blocking std threads, against the floor (the std thread-per-connection echo) and
//! against an idcar of its own (sno80 by default, so the layout's cap is never the limit), in
//! alternating windows; medians over the rounds of requests per second and of the server's
//! CPU per request, and their ratios to the floor.

use crate::{cpu_ns, median, Binary, Echo, OneRequest};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// What the phase runs.
pub struct Crowd {
    /// Connection counts, each measured in every round.
    pub conns: Vec<usize>,
    /// Each window's length.
    pub window: Duration,
    pub rounds: usize,
}

/// One server under test: where it listens, its pid (for its CPU time), and whether its
/// answers are idcar's (checked, keys kept) or the echo's.
#[derive(Clone, Copy)]
pub struct Server<'a> {
    pub path: &'a Path,
    pub pid: u32,
    pub idcar: bool,
}

/// Requests per second and CPU per request (µs) of one window.
struct Window {
    /// Requests answered with an ID, per second.
    rps: f64,
    cpu_us: f64,
    /// Requests refused.
    refused: u64,
}

/// Runs one window: `n` connections asking as fast as answers come for `len`.
fn window(s: Server<'_>, n: usize, len: Duration, keys: &mut Vec<u64>) -> anyhow::Result<Window> {
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicU64::new(0));
    let ready = Arc::new(Barrier::new(n + 1));
    let mut threads = Vec::with_capacity(n);
    for _ in 0..n {
        let conn = UnixStream::connect(s.path)?;
        // A server that stops answering ends the window with an error, never a hang.
        conn.set_read_timeout(Some(len + Duration::from_secs(30)))?;
        let (stop, count, ready) = (stop.clone(), count.clone(), ready.clone());
        let refused = refused.clone();
        let idcar = s.idcar;
        threads.push(std::thread::spawn(move || -> anyhow::Result<Vec<u64>> {
            let mut c: Box<dyn OneRequest> = if idcar {
                Box::new(Binary(conn, Vec::new()))
            } else {
                Box::new(Echo(conn))
            };
            let mut keys = Vec::new();
            let mut done = 0u64;
            ready.wait();
            // Bounded by the window (the main thread sets `stop` after it) and a hard cap.
            let cap = Instant::now() + len + Duration::from_secs(30);
            while !stop.load(Ordering::Relaxed) && Instant::now() < cap {
                match c.ask()? {
                    Ok(k) => {
                        keys.extend(k);
                        done += 1;
                    }
                    // idcar said no (e.g. its lease lapsed): counted, not served.
                    Err(_) => {
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            count.fetch_add(done, Ordering::Relaxed);
            Ok(keys)
        }));
    }
    ready.wait();
    let (t0, cpu0) = (Instant::now(), cpu_ns(s.pid));
    std::thread::sleep(len);
    let cpu1 = cpu_ns(s.pid);
    stop.store(true, Ordering::Relaxed);
    let elapsed = t0.elapsed();
    for t in threads {
        keys.extend(
            t.join()
                .map_err(|_| anyhow::anyhow!("client thread panicked"))??,
        );
    }
    let requests = count.load(Ordering::Relaxed) as f64;
    let cpu = match (cpu0, cpu1) {
        (Some(a), Some(b)) => b.saturating_sub(a) as f64 / 1e3,
        _ => f64::NAN,
    };
    Ok(Window {
        rps: requests / elapsed.as_secs_f64(),
        cpu_us: cpu / requests.max(1.0),
        refused: refused.load(Ordering::Relaxed),
    })
}

/// Runs the phase and prints its table; returns the keys of idcar's IDs.
pub fn run(c: &Crowd, floor: Server<'_>, idcar: Server<'_>) -> anyhow::Result<Vec<u64>> {
    let mut keys = Vec::new();
    // [conns][server] -> windows over the rounds.
    let mut got: Vec<[Vec<Window>; 2]> = c.conns.iter().map(|_| Default::default()).collect();
    for round in 0..c.rounds {
        for (i, &n) in c.conns.iter().enumerate() {
            // Alternate which goes first, so neither always runs on a warmer machine.
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for which in order {
                let s = [floor, idcar][which];
                let w = window(s, n, c.window, &mut keys)?;
                got[i][which].push(w);
            }
        }
    }
    println!(
        "many connections, one single-ID request in flight on each, {} rounds of {:?} windows \
         (medians over the rounds):",
        c.rounds, c.window
    );
    println!(
        "{:>5} {:>12} {:>12} {:>8} {:>16} {:>14} {:>14} {:>8} {:>8}",
        "conns",
        "floor req/s",
        "idcar req/s",
        "ratio",
        "ratio per round",
        "floor CPU/req",
        "idcar CPU/req",
        "ratio",
        "refused"
    );
    for (i, n) in c.conns.iter().enumerate() {
        let [f, d] = &got[i];
        let mut per_round: Vec<f64> = f.iter().zip(d).map(|(f, d)| d.rps / f.rps).collect();
        let (lo, hi) = per_round
            .iter()
            .fold((f64::MAX, f64::MIN), |(l, h), r| (l.min(*r), h.max(*r)));
        let fr = median(&mut f.iter().map(|w| w.rps).collect::<Vec<_>>());
        let dr = median(&mut d.iter().map(|w| w.rps).collect::<Vec<_>>());
        let fc = median(&mut f.iter().map(|w| w.cpu_us).collect::<Vec<_>>());
        let dc = median(&mut d.iter().map(|w| w.cpu_us).collect::<Vec<_>>());
        let _ = median(&mut per_round);
        println!(
            "{n:>5} {fr:>12.0} {dr:>12.0} {:>7.2}x {:>16} {:>11.2} µs {:>11.2} µs {:>7.2}x {:>8}",
            dr / fr,
            format!("{lo:.2}-{hi:.2}"),
            fc,
            dc,
            dc / fc,
            d.iter().map(|w| w.refused).sum::<u64>()
        );
    }
    println!("targets: idcar req/s >= 0.9x the floor's at every count; CPU/request <= 1.2x at 64");
    Ok(keys)
}
