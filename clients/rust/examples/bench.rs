//! `bench --socket S --seconds T`: IDs per second through sequential `next_id()` calls, without
//! prefetch (`single`) and with prefetch 1,000 (`prefetch`), one line each.

mod args;

use idcar_client::Client;
use std::time::{Duration, Instant};

fn rate(client: &Client, seconds: f64) -> Result<f64, idcar_client::Error> {
    let start = Instant::now();
    let limit = Duration::from_secs_f64(seconds);
    let mut n = 0u64;
    while start.elapsed() < limit {
        for _ in 0..64 {
            std::hint::black_box(client.next_id()?);
        }
        n += 64;
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

fn run() -> Result<(), String> {
    let a = args::Args::parse(&["seconds"])?;
    let seconds = a.number("seconds").unwrap_or(3).clamp(1, 600) as f64;
    let builder = match a.socket {
        Some(s) => Client::builder().socket(s),
        None => Client::builder(),
    };
    let single = builder.clone().build().map_err(|e| e.to_string())?;
    println!(
        "single {:.0}",
        rate(&single, seconds).map_err(|e| e.to_string())?
    );
    let pre = builder.prefetch(1_000).build().map_err(|e| e.to_string())?;
    println!(
        "prefetch {:.0}",
        rate(&pre, seconds).map_err(|e| e.to_string())?
    );
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
