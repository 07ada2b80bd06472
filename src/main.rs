//! The `idcar` binary: parse arguments, set up logging, run, map the outcome to an exit code
//! (0 success, 1 runtime failure, 2 usage or configuration error).

use clap::Parser;
use idcar::cli::{Cli, LogFormat};
use idcar::config::UsageError;
use std::io::IsTerminal;
use std::process::ExitCode;
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    idcar::lease::tls::install_crypto_provider();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    // --log/IDCAR_LOG first, then RUST_LOG, then the default.
    let (source, spec) = match (&cli.log, std::env::var("RUST_LOG")) {
        (Some(s), _) => ("--log/IDCAR_LOG", s.clone()),
        (None, Ok(s)) if !s.trim().is_empty() => ("RUST_LOG", s),
        _ => ("default", idcar::cli::DEFAULT_LOG.to_string()),
    };
    let filter = match EnvFilter::try_new(&spec) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("idcar: error: {source} {spec:?}: {e}");
            return ExitCode::from(2);
        }
    };
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match cli.log_format {
        // One JSON object per line with the message and fields at the top level.
        LogFormat::Json => logs.json().flatten_event(true).init(),
        LogFormat::Text => logs.init(),
    }
    match idcar::app::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("idcar: error: {e:#}");
            if e.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
