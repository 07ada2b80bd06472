//! A minimal client of idcar's binary protocol with the `idcar-client` crate (clients/rust/):
//! IDs one at a time, then a pipelined burst on one connection.
//!
//! ```text
//! cargo run --release -- serve &             # in one terminal
//! cargo run --release --example client -- /tmp/idcar.sock 5
//! ```
//!
//! Prints one ID per line (the server's default text form), then a pipelined burst's count.

use idcar_client::{Client, Connection};
use std::path::PathBuf;
use std::time::Duration;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let socket = PathBuf::from(args.next().unwrap_or_else(|| "/tmp/idcar.sock".into()));
    let n: u32 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(5);

    // The client: retries across restarts, the server's text form.
    let client = Client::connect(&socket)?;
    for _ in 0..n {
        println!("{}", client.next_id()?);
    }
    // Pipelining on one connection: send several requests, then read the answers in order.
    let mut c = Connection::connect(&socket, Some(Duration::from_secs(5)))?;
    for _ in 0..4 {
        c.send(16)?;
    }
    let mut total = 0;
    for _ in 0..4 {
        total += c.recv()?.len();
    }
    println!("pipelined: {total} IDs in 4 responses");
    Ok(())
}
