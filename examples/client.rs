//! A minimal client of idcar's binary protocol, reusing one connection.
//!
//! ```text
//! cargo run --release -- serve &             # in one terminal
//! cargo run --release --example client -- /tmp/idcar.sock 5
//! ```
//!
//! Prints one ID per line (hex), then a pipelined burst's count.

use idcar::client::BinaryClient;
use std::path::PathBuf;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let socket = PathBuf::from(args.next().unwrap_or_else(|| "/tmp/idcar.sock".into()));
    let n: u32 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(5);

    let mut c = BinaryClient::connect(&socket).await?;
    // One ID per request, same connection.
    for _ in 0..n {
        let ids = c.ids(1).await?;
        let hex: String = ids.bytes.iter().map(|b| format!("{b:02x}")).collect();
        println!("{hex}");
    }
    // Pipelining: send several requests, then read the answers in order.
    for _ in 0..4 {
        c.send(16).await?;
    }
    let mut total = 0;
    for _ in 0..4 {
        total += c.recv().await?.len();
    }
    println!("pipelined: {total} IDs in 4 responses");
    Ok(())
}
