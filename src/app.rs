//! What each subcommand does: `serve` (start-up, the run, one place for shutdown), `get`
//! and `decode`.

use crate::cli::{Cli, Command, DecodeArgs, GetArgs, PoolArgs};
use crate::clock::{Clock, SkewedClock, SystemClock};
use crate::config::{self, LeaseSource, ServeConfig, UsageError};
use crate::descriptors;
use crate::layout::{self, TextForm};
use crate::lease::local::{self, LocalConfig};
use crate::lease::runtime::LeaseRuntime;
use crate::lease::zk::{self, ZkConfig};
use crate::metrics::Metrics;
use crate::server;
use crate::service::Service;
use anyhow::Context;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tokio::signal::unix::{signal, SignalKind};
use tokio_util::sync::CancellationToken;

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Serve(a) => {
            let cfg = ServeConfig::from_args(&a)?;
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(cfg.threads)
                .enable_all()
                .build()
                .context("cannot start the async runtime")?;
            rt.block_on(serve(cfg))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Get(a) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?
            .block_on(get(a)),
        Command::Decode(a) => decode(a),
        Command::Pool(a) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?
            .block_on(pool(a)),
        Command::Probe(a) => crate::probe::run(&a),
    }
}

/// Waits for SIGTERM, SIGINT or SIGHUP and cancels `token` (drain and release); a second
/// signal removes the socket file and exits at once (the lease's mark still covers everything
/// issued).
fn watch_signals(token: CancellationToken, socket: PathBuf) -> anyhow::Result<()> {
    let mut term = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    let mut hup = signal(SignalKind::hangup()).context("cannot watch SIGHUP")?;
    tokio::spawn(async move {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
            _ = hup.recv() => "SIGHUP",
        };
        tracing::info!(signal = name, "shutting down");
        token.cancel();
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
            _ = hup.recv() => {}
        }
        tracing::warn!("second signal: exiting now without draining");
        let _ = std::fs::remove_file(&socket);
        std::process::exit(130);
    });
    Ok(())
}

/// Raises the descriptor limit and fits `--max-connections` under it (see [`descriptors`]).
fn budget_descriptors(cfg: &mut ServeConfig) -> anyhow::Result<()> {
    let limit = match descriptors::raise_limit() {
        Ok(r) => {
            if r.after > r.before {
                tracing::debug!(
                    from = r.before,
                    to = r.after,
                    "raised the file-descriptor limit"
                );
            }
            r.after
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the file-descriptor limit; not budgeting");
            return Ok(());
        }
    };
    let admin = if cfg.admin_addr.is_some() {
        cfg.admin.max_connections
    } else {
        0
    };
    match descriptors::fit(cfg.conn.max_connections, admin, limit) {
        Ok(None) => Ok(()),
        Ok(Some(n)) => {
            tracing::warn!(
                asked = cfg.conn.max_connections,
                using = n,
                descriptor_limit = limit,
                "--max-connections lowered to {n}: the file-descriptor limit ({limit}) must also \
                 hold --admin-max-connections ({admin}) and {} descriptors kept for the lease; \
                 raise the limit (ulimit -n) or set --max-connections/IDCAR_MAX_CONNECTIONS to \
                 at most {n}",
                descriptors::RESERVE
            );
            cfg.conn.max_connections = n;
            Ok(())
        }
        Err(why) => Err(UsageError(why).into()),
    }
}

/// Serves until a signal, then drains and releases the lease.
pub async fn serve(mut cfg: ServeConfig) -> anyhow::Result<()> {
    budget_descriptors(&mut cfg)?;
    let shutdown = CancellationToken::new();
    watch_signals(shutdown.clone(), cfg.socket.clone())?;
    let scheme = cfg.layout.scheme();
    let metrics = Arc::new(Metrics::new(cfg.layout.name(), cfg.cluster));
    let clock: Arc<dyn Clock> = match cfg.clock_skew_ns {
        0 => Arc::new(SystemClock),
        skew_ns => {
            tracing::warn!(
                skew_ms = skew_ns / 1_000_000,
                "testing aid: the host clock is simulated off by --clock-skew"
            );
            Arc::new(SkewedClock { skew_ns })
        }
    };
    // Bind everything before taking the lease: a start that fails on a busy socket or port
    // must not have written a time mark.
    let admin = match cfg.admin_addr {
        Some(addr) => Some(tokio::net::TcpListener::bind(addr).await.with_context(|| {
            format!(
                "cannot bind the admin listener on {addr}: choose another address with \
                 --admin-addr/IDCAR_ADMIN_ADDR (or `none`)"
            )
        })?),
        None => None,
    };
    let (listener, socket_file) = server::socket::bind(&cfg.socket, cfg.socket_mode)
        .context("cannot serve on the socket: choose another path with --socket/IDCAR_SOCKET")?;
    // The lease and the task that installs its changes run on their own thread.
    let lease_rt = LeaseRuntime::start().context("cannot start the lease thread")?;
    let entered = lease_rt.handle().enter();
    let lease = match &cfg.lease {
        LeaseSource::Static { slot, state_file } => local::start(
            LocalConfig {
                state_file: state_file.clone(),
                key: cfg.mark_key(*slot),
                slot: *slot,
                horizon: cfg.horizon,
                renew_every: cfg.renew_every,
                max_clock_wait: cfg.max_clock_wait,
            },
            scheme,
            clock.clone(),
            metrics.clone(),
        )
        .context("cannot take the static lease")
        .inspect_err(|_| socket_file.remove())?,
        LeaseSource::Zk(z) => zk::start(
            ZkConfig {
                connect: z.connect.clone(),
                root: z.root.clone(),
                layout: cfg.layout.name(),
                cluster: cfg.cluster,
                pool_size: z.pool_size,
                prefer: z.prefer,
                session_timeout: z.session_timeout,
                horizon: cfg.horizon,
                renew_every: cfg.renew_every,
                max_clock_wait: cfg.max_clock_wait,
                auth: z.auth.clone(),
                pod: z.pod.clone(),
            },
            scheme,
            clock.clone(),
            metrics.clone(),
        ),
    };
    let layout_name = cfg.layout.name();
    let svc = Service::new(cfg.layout, clock, metrics, lease.subscribe(), cfg.limits)
        .context("cannot start the timer thread")?;
    let follower = tokio::spawn(svc.clone().follow_lease());
    drop(entered);

    tracing::info!(
        socket = %cfg.socket.display(),
        admin = %admin
            .as_ref()
            .and_then(|l| l.local_addr().ok())
            .map_or("none".to_string(), |a| a.to_string()),
        layout = layout_name,
        cluster = cfg.cluster,
        lease = %match &cfg.lease {
            LeaseSource::Static { slot, .. } => format!("static slot {slot}"),
            LeaseSource::Zk(z) => format!("zookeeper {} (pool of {})", z.connect, z.pool_size),
        },
        "idcar serving"
    );
    // The admin listener outlives the drain (readiness turns false at once) and stops last.
    let admin_stop = CancellationToken::new();
    let admin_task = admin.map(|l| {
        tokio::spawn(server::run_admin(
            l,
            svc.clone(),
            cfg.admin,
            admin_stop.clone(),
        ))
    });
    let mut lease_state = lease.subscribe();
    let mut unix = tokio::spawn(server::run_unix(
        listener,
        svc.clone(),
        cfg.conn,
        shutdown.clone(),
    ));

    // Run until a signal; or until the lease fails for good, or the socket server ends on its
    // own (then exit non-zero so a supervisor restarts us).
    let mut unix_done = false;
    let failure = tokio::select! {
        biased;
        _ = shutdown.cancelled() => None,
        r = lease_state.wait_for(|s| matches!(s, crate::lease::LeaseState::Failed { .. })) => {
            let why = r.map(|s| s.reason().unwrap_or_default().to_string()).unwrap_or_default();
            Some(format!("lease failed: {why}"))
        }
        r = &mut unix => {
            unix_done = true;
            // It also ends, normally, right after a shutdown request.
            (!shutdown.is_cancelled())
                .then(|| format!("the socket server stopped unexpectedly: {r:?}"))
        }
    };
    svc.drain();
    shutdown.cancel();
    if !unix_done {
        let _ = unix.await;
    }
    socket_file.remove();
    // Stop following the lease, then close for good: `highest` bounds every ID this process
    // issued, whatever connection tasks outlived the grace period.
    follower.abort();
    let _ = follower.await;
    let highest = svc.close();
    let released = lease.release(highest).await;
    admin_stop.cancel();
    if let Some(t) = admin_task {
        let _ = t.await;
    }
    drop(lease_rt);
    if let Some(why) = failure {
        anyhow::bail!(why);
    }
    released.context("could not write the time mark down on release")?;
    tracing::info!("idcar stopped");
    Ok(())
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

async fn pool(a: PoolArgs) -> anyhow::Result<ExitCode> {
    let (root, auth) = config::zk_settings(&a.zk, &a.zk_args)?;
    let layout = layout::by_name(a.layout.name(), a.layout.params(a.cluster_id.unwrap_or(0)))
        .map_err(|e| UsageError(format!("--layout: {e}")))?;
    let client = tokio::time::timeout(
        a.zk_args.zk_session_timeout + Duration::from_secs(5),
        zk::connect(
            &a.zk,
            a.zk_args.zk_session_timeout,
            auth.as_deref(),
            zk::Retry::FailFast,
        ),
    )
    .await
    .map_err(|_| anyhow::anyhow!("timed out connecting to ZooKeeper at {}", a.zk))?
    .with_context(|| {
        format!(
            "cannot connect to ZooKeeper at {} (is it running and reachable?)",
            a.zk
        )
    })?;
    let slots = layout.scheme().slots;
    let pool_size = a.pool_size.unwrap_or(slots);
    if pool_size == 0 || pool_size > slots {
        return Err(UsageError(format!("--pool-size must be between 1 and {slots}")).into());
    }
    let reports = zk::pool::report(&client, &root, layout.name(), a.cluster_id, pool_size)
        .await
        .context("cannot read the pool")?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    } else {
        print!("{}", zk::pool::render(&reports));
    }
    Ok(ExitCode::SUCCESS)
}

fn decode(a: DecodeArgs) -> anyhow::Result<ExitCode> {
    let form = a
        .format
        .as_deref()
        .map(TextForm::parse)
        .transpose()
        .map_err(|e| UsageError(format!("--format: {e}")))?;
    let text = a.id.trim();
    let (layout, raw) = match &a.layout.layout {
        Some(name) => {
            let layout = layout::by_name(name, a.layout.params(0))
                .map_err(|e| UsageError(format!("--layout: {e}")))?;
            let raw = layout
                .parse(text, form)
                .map_err(|e| UsageError(format!("cannot decode {:?}: {e}", a.id)))?;
            (layout, raw)
        }
        None => layout::guess(text, form, a.layout.params(0))
            .map_err(|e| UsageError(format!("cannot decode: {e}")))?,
    };
    let fields = layout
        .decode(&raw)
        .map_err(|e| UsageError(format!("cannot decode {:?}: {e}", a.id)))?;
    if a.json {
        println!("{}", serde_json::Value::Object(fields));
    } else {
        for (k, v) in &fields {
            match v {
                serde_json::Value::String(s) => println!("{k}: {s}"),
                other => println!("{k}: {other}"),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
