//! The Rust client's side of the client benchmark (`clients/bench.sh`): IDs per second from
//! sequential single-ID requests, and from requests of 1,000 (what a prefetching client's
//! refills cost), on one connection of the `idcar-client` crate (clients/rust/).
//!
//! ```text
//! cargo run --release --example clientbench -- --socket /tmp/idcar.sock --seconds 3
//! ```

use clap::Parser;
use idcar_client::Connection;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Parser)]
struct Args {
    #[arg(long, default_value = "/tmp/idcar.sock")]
    socket: PathBuf,
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
}

fn rate(c: &mut Connection, per_request: u32, seconds: f64) -> anyhow::Result<f64> {
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(seconds);
    let mut n = 0u64;
    while Instant::now() < end {
        n += c.ids(per_request)?.len() as u64;
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let mut c = Connection::connect(&a.socket, Some(Duration::from_secs(5)))?;
    println!("single {:.0}", rate(&mut c, 1, a.seconds)?);
    println!("batch1000 {:.0}", rate(&mut c, 1000, a.seconds)?);
    Ok(())
}
