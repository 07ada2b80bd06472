//! `fetch --socket S --count N [--prefetch K] [--retry-deadline SECONDS]`: prints N IDs, one per line, in the server's
//! default text form. On any failure: one line `error: <reason>` on stderr, exit status 1.
//! The socket falls back to `IDCAR_SOCKET`, then `/tmp/idcar.sock`.

mod args;

use idcar_client::Client;
use std::io::Write;

fn run() -> Result<(), String> {
    let a = args::Args::parse(&["count", "prefetch"])?;
    let count = a.number("count").unwrap_or(1);
    if count == 0 {
        return Err("--count must be at least 1".into());
    }
    let mut b = Client::builder();
    if let Some(s) = a.socket.clone() {
        b = b.socket(s);
    }
    if let Some(d) = a.retry_deadline {
        b = b.retry_deadline(d);
    }
    if let Some(k) = a.number("prefetch") {
        b = b.prefetch(usize::try_from(k).map_err(|e| e.to_string())?);
    }
    let client = b.build().map_err(|e| e.to_string())?;
    let mut out = std::io::stdout().lock();
    for _ in 0..count {
        let id = client.next_id().map_err(|e| e.to_string())?;
        writeln!(out, "{id}").map_err(|e| e.to_string())?;
    }
    out.flush().map_err(|e| e.to_string())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {}", e.replace('\n', " "));
        std::process::exit(1);
    }
}
