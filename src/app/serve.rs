//! `idcar serve`: bind, take the lease, serve until a signal (or a failed lease), then drain
//! and release — one place for start-up and one for shutdown.

use crate::clock::{Clock, SkewedClock, SystemClock};
use crate::config::{LeaseSource, PoolSettings, ServeConfig, UsageError};
use crate::descriptors;
use crate::lease::local::{self, LocalConfig};
use crate::lease::pool::PoolConfig;
use crate::lease::runtime::LeaseRuntime;
use crate::lease::{Leases, Part};
use crate::metrics::{LeaseMetrics, Metrics};
use crate::server::{self, socket::SocketFile};
use crate::service::{Describe, Service};
use anyhow::Context;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::net::{TcpListener, UnixListener};
use tokio::signal::unix::{signal, SignalKind};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

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

/// The wall clock, or (testing aid, feature `fault-injection`) one simulated off by a skew.
fn clock(cfg: &ServeConfig) -> Arc<dyn Clock> {
    if cfg.planted != crate::lease::planted::PlantedBug::None {
        tracing::warn!(bug = ?cfg.planted, "testing aid: the lease carries a deliberate bug (--plant-bug)");
    }
    match cfg.clock_skew_ns {
        0 => Arc::new(SystemClock),
        skew_ns => {
            tracing::warn!(
                skew_ms = skew_ns / 1_000_000,
                "testing aid: the host clock is simulated off by --clock-skew"
            );
            Arc::new(SkewedClock { skew_ns })
        }
    }
}

/// The layout's end of life (see docs/layouts.md): a refusal to start when less than the
/// lease horizon is left of its time field (no lease could be written), a warning when less
/// than a year is left.
fn check_layout_end(cfg: &ServeConfig, clock: &dyn Clock) -> anyhow::Result<()> {
    const YEAR: f64 = 365.0 * 86_400.0;
    let scheme = cfg.layout.scheme();
    let left = crate::layout::seconds_left(&scheme, clock.now_unix_ns());
    let end = crate::layout::end_date(&scheme);
    let name = cfg.layout.name();
    let what_to_do = match name {
        "si53" => {
            "a later --base-clock/IDCAR_BASE_CLOCK starts a new ID space (IDs from different base \
             clocks can collide: move every instance and the consumers together), or move to a \
             layout that lasts longer"
        }
        _ => "move to a layout that lasts longer (docs/layouts.md lists each layout's end)",
    };
    let horizon = cfg.timings.horizon.as_secs_f64();
    if left < horizon {
        return Err(UsageError(format!(
            "layout {name} runs out of time at {end} ({left:.0}s from now by this host's clock), \
             less than the lease horizon ({horizon}s): no ID could be issued. {what_to_do}"
        ))
        .into());
    }
    if left < YEAR {
        let days = (left / 86_400.0).floor();
        tracing::warn!(
            layout = name,
            ends = %end,
            days_left = days,
            "layout {name} runs out of time at {end}, in {days} days: after that idcar issues \
             no IDs and refuses to start; {what_to_do}"
        );
    }
    Ok(())
}

/// The listeners, bound before the lease is taken: a start that fails on a busy socket or
/// port must not have written a time mark.
struct Bound {
    admin: Option<TcpListener>,
    socket: UnixListener,
    file: SocketFile,
}

async fn bind(cfg: &ServeConfig) -> anyhow::Result<Bound> {
    let admin = match cfg.admin_addr {
        Some(addr) => Some(TcpListener::bind(addr).await.with_context(|| {
            format!(
                "cannot bind the admin listener on {addr}: choose another address with \
                 --admin-addr/IDCAR_ADMIN_ADDR (or `none`)"
            )
        })?),
        None => None,
    };
    let (socket, file) =
        server::socket::bind(&cfg.socket, cfg.socket_mode).map_err(|e| -> anyhow::Error {
            if e.is_usage() {
                let fix = match e {
                    server::socket::BindError::NoDirectory { .. } => {
                        "create the directory, or choose another path"
                    }
                    _ => "choose another path",
                };
                UsageError(format!("--socket/IDCAR_SOCKET: {e}; {fix}")).into()
            } else {
                anyhow::Error::new(e).context(
                    "cannot serve on the socket: choose another path with --socket/IDCAR_SOCKET",
                )
            }
        })?;
    Ok(Bound {
        admin,
        socket,
        file,
    })
}

/// Starts the static lease, or one ZooKeeper or etcd lease per slot held at once (on the
/// caller's runtime: the lease thread's).
fn start_leases(
    cfg: &ServeConfig,
    clock: Arc<dyn Clock>,
    metrics: Arc<LeaseMetrics>,
) -> anyhow::Result<Leases> {
    let scheme = cfg.layout.scheme();
    Ok(Leases::new(match &cfg.lease {
        LeaseSource::Static { slot, state_file } => local::start(
            LocalConfig {
                state_file: state_file.clone(),
                key: cfg.mark_key(*slot),
                slot: *slot,
                timing: cfg.timings,
                planted: cfg.planted,
            },
            scheme,
            clock,
            metrics,
        )
        .map(|l| vec![l])
        .context("cannot take the static lease")?,
        LeaseSource::Pool(p) => Part::all(p.slots)
            .map(|part| {
                let pool = pool_config(cfg, p, part);
                p.store.start(pool, scheme, clock.clone(), metrics.clone())
            })
            .collect(),
    }))
}

/// What one lease of a negotiated pool needs to know, whatever the store.
fn pool_config(cfg: &ServeConfig, p: &PoolSettings, part: Part) -> PoolConfig {
    PoolConfig {
        root: p.store.root().to_string(),
        layout: cfg.layout.name(),
        cluster: cfg.cluster,
        pool_size: p.pool_size,
        prefer: part.prefer(p.prefer, p.pool_size),
        timing: cfg.timings,
        pod: p.pod.clone(),
        pool_params: cfg.params.clone(),
        planted: cfg.planted,
        part,
    }
}

/// Logs each change between ready and not ready (`/readyz`): `idcar ready` when IDs can be
/// issued, `idcar not ready` with the reason when they no longer can. Polled, four times a
/// second, until shutdown.
async fn log_readiness(svc: Arc<Service>, shutdown: CancellationToken) {
    let mut was_ready = false;
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(250));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = shutdown.cancelled() => return,
        }
        match svc.ready() {
            Ok(()) if !was_ready => {
                was_ready = true;
                tracing::info!("idcar ready");
            }
            Err(why) if was_ready => {
                was_ready = false;
                let why = why.lines().next().unwrap_or_default().to_string();
                tracing::warn!(reason = %why, "idcar not ready");
            }
            _ => {}
        }
    }
}

fn log_serving(cfg: &ServeConfig, bound: &Bound) {
    tracing::info!(
        socket = %cfg.socket.display(),
        admin = %bound.admin
            .as_ref()
            .and_then(|l| l.local_addr().ok())
            .map_or("none".to_string(), |a| a.to_string()),
        layout = cfg.layout.name(),
        cluster = cfg.cluster,
        lease = %match &cfg.lease {
            LeaseSource::Static { slot, .. } => format!("static slot {slot}"),
            LeaseSource::Pool(p) => format!("{} (pool of {}, {} slot(s) at once)", p.store.describe(), p.pool_size, p.slots),
        },
        "idcar listening; ready once a lease is held"
    );
}

/// What a static instance issues for, said at start and by `/readyz`: nothing negotiates
/// its generator, so nothing stops a negotiated pool of the same layout and cluster from
/// handing the same generator to another instance.
fn static_generator(cfg: &ServeConfig, slot: u32) -> String {
    format!(
        "static generator {slot} of cluster {} ({}): no store negotiates it, so keep it outside \
         every ZooKeeper or etcd pool of this layout and cluster (give static instances a \
         cluster ID of their own)",
        cfg.cluster,
        cfg.layout.name()
    )
}

/// Serves until a signal, then drains and releases the lease.
pub async fn serve(mut cfg: ServeConfig) -> anyhow::Result<()> {
    budget_descriptors(&mut cfg)?;
    let shutdown = CancellationToken::new();
    watch_signals(shutdown.clone(), cfg.socket.clone())?;
    let metrics = Arc::new(Metrics::new(cfg.layout.name(), cfg.cluster));
    let clock = clock(&cfg);
    check_layout_end(&cfg, &*clock)?;
    let bound = bind(&cfg).await?;
    // The lease and the task that installs its changes run on their own thread.
    let lease_rt = LeaseRuntime::start().context("cannot start the lease thread")?;
    let entered = lease_rt.handle().enter();
    let lease = start_leases(&cfg, clock.clone(), metrics.lease.clone())
        .inspect_err(|_| bound.file.remove())?;
    crate::panics::arm(cfg.planted_panic);
    log_serving(&cfg, &bound);
    let issues_for = match &cfg.lease {
        LeaseSource::Static { slot, .. } => Some(static_generator(&cfg, *slot)),
        _ => None,
    };
    let stalled = metrics.clock_stalled.clone();
    if let Some(what) = &issues_for {
        tracing::warn!("{what}");
    }
    let describe = Describe {
        params: cfg.params.clone(),
        issues_for,
    };
    let svc = Service::new(
        cfg.layout,
        clock.clone(),
        metrics,
        lease.subscribe(),
        cfg.limits,
        describe,
    )
    .context("cannot start the timer thread")?;
    crate::clock::watch_clocks(svc.clock_faults(), clock, stalled)
        .context("cannot start the clock watchdog thread")?;
    let follower = tokio::spawn(svc.clone().follow_lease(lease.issuances()));
    drop(entered);
    tokio::spawn(log_readiness(svc.clone(), shutdown.clone()));

    // The admin listener outlives the drain (readiness turns false at once) and stops last.
    let admin_stop = CancellationToken::new();
    let admin = bound.admin.map(|l| {
        let (svc, stop) = (svc.clone(), admin_stop.clone());
        tokio::spawn(server::run_admin(l, svc, cfg.admin, stop))
    });
    let unix = tokio::spawn(server::run_unix(
        bound.socket,
        svc.clone(),
        cfg.conn,
        shutdown.clone(),
    ));
    let abandon = crate::panics::abandon(cfg.planted_panic);
    let (failure, stopping) = tokio::select! {
        r = run_until_stop(&lease, &svc, unix, &shutdown) => r,
        () = abandon => {
            // Testing aid only (`--plant-panic abandon:..`): what the lease does if its owner
            // goes away without a release while the process lives on.
            bound.file.remove();
            svc.close();
            drop(lease);
            tokio::time::sleep(cfg.conn.grace).await;
            drop(lease_rt);
            anyhow::bail!("testing aid: the leases were abandoned without a release");
        }
    };
    bound.file.remove();
    // Stop following the lease, then close for good: `highest` bounds every ID this process
    // issued, whatever connection tasks outlived the grace period.
    follower.abort();
    let _ = follower.await;
    let highest = svc.close();
    // Bounded: during a ZooKeeper outage the release cannot be written, and the mark already
    // in force simply stays (a successor waits past it).
    let grace = cfg.conn.grace;
    let left = grace
        .saturating_sub(stopping.elapsed())
        .max(std::time::Duration::from_millis(500));
    let released = match tokio::time::timeout(left, lease.release(highest)).await {
        Ok(r) => r.context("could not write the time mark down on release"),
        Err(_) => Err(anyhow::anyhow!(
            "could not release the lease within --shutdown-grace ({grace:?}); its time mark \
             stays in force and a successor waits past it"
        )),
    };
    admin_stop.cancel();
    if let Some(t) = admin {
        let _ = t.await;
    }
    drop(lease_rt);
    if let Some(why) = failure {
        anyhow::bail!(why);
    }
    released?;
    tracing::info!("idcar stopped");
    Ok(())
}

/// Runs until a signal, or until the lease fails for good or the socket server ends on its
/// own (then the reason, so the process exits non-zero and a supervisor restarts it). Then
/// readiness turns false at once and the socket server drains; it has stopped on return.
/// Also returns when stopping began: the release gets what is left of the grace period.
async fn run_until_stop(
    lease: &Leases,
    svc: &Service,
    mut unix: JoinHandle<()>,
    shutdown: &CancellationToken,
) -> (Option<String>, std::time::Instant) {
    let mut unix_done = false;
    let failure = tokio::select! {
        biased;
        _ = shutdown.cancelled() => None,
        why = lease.failed() => Some(format!("lease failed: {why}")),
        r = &mut unix => {
            unix_done = true;
            // It also ends, normally, right after a shutdown request.
            (!shutdown.is_cancelled())
                .then(|| format!("the socket server stopped unexpectedly: {r:?}"))
        }
    };
    let stopping = std::time::Instant::now();
    svc.drain();
    shutdown.cancel();
    if !unix_done {
        let _ = unix.await;
    }
    (failure, stopping)
}
