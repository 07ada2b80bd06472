//! What each subcommand does: `serve` ([`serve`]: start-up, the run, one place for
//! shutdown), `get`, `decode`, `pool` and `probe`. Arguments arrive checked ([`crate::config`]).

mod serve;

pub use serve::serve;

use crate::cli::{Cli, Command, GetArgs};
use crate::config::{DecodeConfig, PoolConfig, ProbeConfig, ServeConfig, UsageError};
use crate::layout::{self, GuessError};
use anyhow::Context;
use std::process::ExitCode;

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let current_thread = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")
    };
    match cli.command {
        Command::Serve(a) => {
            // Any panic aborts the process at once (see `crate::panics`).
            crate::panics::abort_on_panic();
            let now = crate::clock::Clock::now_unix_ns(&crate::clock::SystemClock);
            let cfg = ServeConfig::from_args(&a, now)?;
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(cfg.threads)
                .enable_all()
                .build()
                .context("cannot start the async runtime")?;
            rt.block_on(serve(cfg))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Get(a) => current_thread()?.block_on(get(a)),
        Command::Decode(a) => decode(DecodeConfig::from_args(&a)?),
        Command::Pool(a) => current_thread()?.block_on(pool(PoolConfig::from_args(&a)?)),
        Command::Probe(a) => Ok(crate::probe::run(&ProbeConfig::from_args(&a)?)),
    }
}

async fn get(a: GetArgs) -> anyhow::Result<ExitCode> {
    let mut q = format!("/ids?count={}", a.count);
    if let Some(f) = &a.format {
        q.push_str("&format=");
        q.push_str(f);
    }
    if let Some(m) = a.meta {
        q.push_str(&format!("&meta={m}"));
    }
    if a.transaction {
        q.push_str("&transaction=true");
    }
    let mut c = crate::client::HttpClient::connect(&a.socket)
        .await
        .with_context(|| format!("cannot connect to idcar at {}", a.socket.display()))?;
    let r = c.get(&q, a.json).await?;
    if r.status == 200 {
        print!("{}", r.body);
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "idcar: error: server answered {}: {}",
            r.status,
            r.body.trim_end()
        );
        Ok(ExitCode::from(if r.status == 400 { 2 } else { 1 }))
    }
}

async fn pool(cfg: PoolConfig) -> anyhow::Result<ExitCode> {
    let name = cfg.layout.name();
    let reports = cfg
        .store
        .report(name, cfg.cluster, cfg.pool_size, cfg.pool_size_given)
        .await?;
    if cfg.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    } else {
        print!("{}", crate::lease::pool::report::render(&reports));
    }
    Ok(ExitCode::SUCCESS)
}

fn decode(cfg: DecodeConfig) -> anyhow::Result<ExitCode> {
    let text = cfg.text.as_str();
    let (layout, raw) = match cfg.layout {
        Some(layout) => {
            let raw = layout
                .parse(text, cfg.form)
                .map_err(|e| UsageError(format!("cannot decode {text:?}: {e}")))?;
            (layout, raw)
        }
        None => layout::guess(text, cfg.form, cfg.params).map_err(|e| {
            let hint = match e {
                GuessError::NoFit { .. } => "pass --layout to see why",
                GuessError::Ambiguous { .. } => "pass --layout to choose",
            };
            UsageError(format!("cannot decode: {e}; {hint}"))
        })?,
    };
    let fields = layout
        .decode(&raw)
        .map(|d| d.to_map())
        .map_err(|e| UsageError(format!("cannot decode {text:?}: {e}")))?;
    if cfg.json {
        // The ID's fields only, as every client library decodes them.
        println!("{}", serde_json::Value::Object(fields));
    } else {
        for (k, v) in &fields {
            match v {
                serde_json::Value::String(s) => println!("{k}: {s}"),
                other => println!("{k}: {other}"),
            }
        }
        if fields.get("issuer").and_then(|v| v.as_str()) == Some("other") {
            println!(
                "note: a version-7 UUID, but not idcar's (its check byte does not match): its time \
                 is the RFC's; its other bits are another generator's"
            );
        }
        // When the layout (with these parameters) runs out of time: no ID is issued after.
        println!("layout_ends: {}", layout::end_date(&layout.scheme()));
    }
    Ok(ExitCode::SUCCESS)
}
