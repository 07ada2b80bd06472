//! Validated configuration: raw [`crate::cli`] arguments turned into typed values, with every
//! inconsistency reported as a [`UsageError`] (exit code 2) naming the flag (and environment
//! variable) to change, before anything starts. The one place that validates: `app` and the
//! subcommands only ever see checked values. Layouts report their own domain errors
//! ([`layout::BuildError`]); this module maps them to flags.

use crate::cli::{DecodeArgs, LayoutArgs, PoolArgs, ProbeArgs, ServeArgs};
use crate::layout::{self, BuildError, Layout, Param, TextForm};
use crate::lease::protocol::Timing;
use crate::server::{AdminLimits, ConnLimits};
use crate::service::Limits;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// A configuration error: the user asked for something idcar cannot do.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

fn usage<T>(msg: impl Into<String>) -> Result<T, UsageError> {
    Err(UsageError(msg.into()))
}

/// The flag (and variable) that sets a layout parameter.
fn flag(p: Param) -> &'static str {
    match p {
        Param::Cluster => "--cluster-id/IDCAR_CLUSTER_ID",
        Param::BaseClock => "--base-clock/IDCAR_BASE_CLOCK",
        Param::MidBits => "--mid-bits/IDCAR_MID_BITS",
        Param::SequenceMin => "--sequence-min/IDCAR_SEQUENCE_MIN",
        Param::SequenceMax => "--sequence-max/IDCAR_SEQUENCE_MAX",
        Param::MedallionBase => "--medallion-base/IDCAR_MEDALLION_BASE",
    }
}

/// What shapes a pool's ID space, as recorded in its ZooKeeper namespace: the layout and
/// each of its parameters, keyed by the flag that sets it.
fn pool_params(a: &LayoutArgs, cluster: u8) -> Vec<(String, String)> {
    let params = a.params(cluster);
    let mut v = vec![("layout".to_string(), a.name().to_string())];
    if let Some(e) = layout::entry(a.name()) {
        for p in e.params {
            let name = flag(*p).split('/').next().unwrap_or_default();
            v.push((name.trim_start_matches('-').to_string(), params.value(*p)));
        }
    }
    v
}

/// Builds the layout the flags name, mapping its errors to the flag to change.
fn build_layout(a: &LayoutArgs, cluster: u8) -> Result<Box<dyn Layout>, UsageError> {
    layout::by_name(a.name(), a.params(cluster)).map_err(|e| match e {
        BuildError::UnknownLayout { .. } => UsageError(format!("--layout/IDCAR_LAYOUT: {e}")),
        BuildError::Param { param, why } => UsageError(format!("{}: {why}", flag(param))),
    })
}

/// Parses a text form's name (`--format`).
fn text_form(f: Option<&str>) -> Result<Option<TextForm>, UsageError> {
    f.map(TextForm::parse)
        .transpose()
        .map_err(|e| UsageError(format!("--format: {e}")))
}

/// Everything `serve` needs, checked.
#[derive(Debug)]
pub struct ServeConfig {
    pub socket: PathBuf,
    pub socket_mode: u32,
    pub admin_addr: Option<SocketAddr>,
    pub admin: AdminLimits,
    pub layout: Box<dyn Layout>,
    pub cluster: u8,
    /// Where the slot comes from.
    pub lease: LeaseSource,
    pub timings: Timing,
    pub limits: Limits,
    pub conn: ConnLimits,
    pub threads: usize,
    /// Testing aid (cargo feature `fault-injection`): offset of the simulated host clock, ns.
    pub clock_skew_ns: i64,
    /// Testing aid (cargo feature `fault-injection`): a deliberate lease bug for the campaign.
    pub planted: crate::lease::planted::PlantedBug,
    /// Testing aid (feature `fault-injection`): a deliberate panic.
    pub planted_panic: crate::panics::PlantedPanic,
    /// What shapes the layout's IDs (`flag name`, value): for clients' describe requests,
    /// and recorded with a ZooKeeper pool.
    pub params: Vec<(String, String)>,
}

/// Where the slot comes from.
#[derive(Debug, Clone)]
pub enum LeaseSource {
    /// A slot given on the command line, its mark in a state file.
    Static { slot: u32, state_file: PathBuf },
    /// Slots negotiated in a pool.
    Pool(PoolSettings),
}

/// Checked settings of `serve`'s negotiated slots.
#[derive(Debug, Clone)]
pub struct PoolSettings {
    /// The store the pool lives in.
    pub store: crate::lease::StoreSpec,
    pub pool_size: u32,
    /// The slot the first lease prefers (the next ones prefer the slots after it).
    pub prefer: Option<u32>,
    /// The pod name for the slot's owner record.
    pub pod: Option<String>,
    /// How many slots the instance holds at once (`--slots`).
    pub slots: u32,
}

/// Parses an admin listener address: `HOST:PORT`, or `none`/`off`/empty for no listener.
pub fn admin_addr(s: &str) -> Result<Option<SocketAddr>, UsageError> {
    match s {
        "none" | "off" | "" => Ok(None),
        s => s.parse().map(Some).map_err(|_| {
            UsageError(format!(
                "--admin-addr/IDCAR_ADMIN_ADDR {s:?}: expected IP:PORT such as 127.0.0.1:9750, \
                 or none"
            ))
        }),
    }
}

/// Parses an octal file mode such as `660` or `0o600`.
fn mode(s: &str) -> Result<u32, UsageError> {
    let digits = s.trim_start_matches("0o");
    match u32::from_str_radix(digits, 8) {
        Ok(m) if m <= 0o777 && !digits.is_empty() => Ok(m),
        _ => usage(format!(
            "--socket-mode {s:?}: expected octal permissions such as 660"
        )),
    }
}

impl ServeConfig {
    /// Checks `serve`'s arguments; `now_unix_ns` is the wall clock (a layout whose epoch is
    /// in the future cannot serve).
    pub fn from_args(a: &ServeArgs, now_unix_ns: u64) -> Result<ServeConfig, UsageError> {
        let layout = serve_layout(a, now_unix_ns)?;
        let lease = lease_source(a, layout.as_ref())?;
        let timings = timings(a)?;
        let limits = request_limits(a, layout.as_ref())?;
        let conn = connection_limits(a)?;
        if a.threads == 0 || a.threads > 256 {
            return usage("--threads must be between 1 and 256");
        }
        Ok(ServeConfig {
            socket: a.socket.clone(),
            socket_mode: mode(&a.socket_mode)?,
            admin_addr: admin_addr(&a.admin_addr)?,
            admin: AdminLimits {
                max_connections: a.admin_max_connections,
                timeout: a.admin_timeout,
            },
            cluster: a.cluster_id,
            lease,
            timings,
            limits,
            conn,
            threads: a.threads,
            clock_skew_ns: clock_skew(a),
            planted: planted(a),
            planted_panic: planted_panic(a),
            params: pool_params(&a.layout, a.cluster_id),
            layout,
        })
    }

    /// The key of a static slot's mark in the state file: `layout/cluster/slot`, the same
    /// shape as ZooKeeper paths.
    pub fn mark_key(&self, slot: u32) -> String {
        format!("{}/{}/{slot}", self.layout.name(), self.cluster)
    }
}

#[cfg(feature = "fault-injection")]
fn clock_skew(a: &ServeArgs) -> i64 {
    a.clock_skew.unwrap_or(0)
}

#[cfg(not(feature = "fault-injection"))]
fn clock_skew(_: &ServeArgs) -> i64 {
    0
}

#[cfg(feature = "fault-injection")]
fn planted(a: &ServeArgs) -> crate::lease::planted::PlantedBug {
    a.plant_bug
}

#[cfg(not(feature = "fault-injection"))]
fn planted(_: &ServeArgs) -> crate::lease::planted::PlantedBug {
    crate::lease::planted::PlantedBug::None
}

#[cfg(feature = "fault-injection")]
fn planted_panic(a: &ServeArgs) -> crate::panics::PlantedPanic {
    a.plant_panic
}

#[cfg(not(feature = "fault-injection"))]
fn planted_panic(_: &ServeArgs) -> crate::panics::PlantedPanic {
    crate::panics::PlantedPanic::None
}

#[cfg(feature = "fault-injection")]
fn starve(a: &ServeArgs) -> Duration {
    a.starve_renewals.min(lease::HOUR)
}

#[cfg(not(feature = "fault-injection"))]
fn starve(_: &ServeArgs) -> Duration {
    Duration::ZERO
}

/// The layout, checked against the cluster ID and the clock.
fn serve_layout(a: &ServeArgs, now_unix_ns: u64) -> Result<Box<dyn Layout>, UsageError> {
    let layout = build_layout(&a.layout, a.cluster_id)?;
    if a.cluster_id != 0 && !layout.has_cluster() {
        return usage(format!(
            "--cluster-id {}: layout {}'s IDs carry no cluster field, so instances in \
             different clusters would issue the same IDs; leave it at 0 (give deployments \
             that must not collide disjoint slots instead)",
            a.cluster_id,
            layout.name()
        ));
    }
    if layout.scheme().tick_at(now_unix_ns).is_none() {
        return usage(format!(
            "--base-clock {} is in the future: layout {} cannot issue IDs before it",
            a.layout.base_clock,
            layout.name()
        ));
    }
    Ok(layout)
}

/// The largest batch, servable within the request timeout at the layout's cap.
fn request_limits(a: &ServeArgs, layout: &dyn Layout) -> Result<Limits, UsageError> {
    if a.request_timeout.is_zero() || a.idle_timeout.is_zero() || a.admin_timeout.is_zero() {
        return usage("--request-timeout, --idle-timeout and --admin-timeout must be above zero");
    }
    let scheme = layout.scheme();
    let per_second = scheme.ids_per_tick() as f64 * 1e9 / scheme.tick_ns as f64;
    let servable = per_second * a.request_timeout.as_secs_f64();
    let max_batch = a
        .max_batch
        .unwrap_or_else(|| (servable / 2.0).clamp(1.0, 10_000.0) as u32);
    if max_batch == 0 || max_batch > 1_000_000 {
        return usage("--max-batch must be between 1 and 1000000");
    }
    if f64::from(max_batch) > servable {
        return usage(format!(
            "--max-batch {} cannot be served within --request-timeout {:?}: layout {} issues \
             at most {per_second:.0} IDs/s per slot",
            max_batch,
            a.request_timeout,
            layout.name()
        ));
    }
    Ok(Limits {
        max_batch,
        max_wait: a.request_timeout,
    })
}

/// The socket's and the admin listener's connection caps.
fn connection_limits(a: &ServeArgs) -> Result<ConnLimits, UsageError> {
    if a.max_connections == 0 || a.max_connections > 65_536 {
        return usage("--max-connections must be between 1 and 65536");
    }
    if a.admin_max_connections == 0 || a.admin_max_connections > 4_096 {
        return usage("--admin-max-connections must be between 1 and 4096");
    }
    Ok(ConnLimits {
        max_connections: a.max_connections,
        idle_timeout: a.idle_timeout,
        grace: a.shutdown_grace,
    })
}

/// Everything `pool` needs, checked.
#[derive(Debug)]
pub struct PoolConfig {
    pub store: crate::lease::StoreSpec,
    pub layout: Box<dyn Layout>,
    /// Only this cluster, or every cluster found.
    pub cluster: Option<u8>,
    pub pool_size: u32,
    /// `--pool-size` was given: free slots are counted in it, not in the recorded size.
    pub pool_size_given: bool,
    pub json: bool,
}

impl PoolConfig {
    pub fn from_args(a: &PoolArgs) -> Result<PoolConfig, UsageError> {
        let Some(store) = a.store.spec()? else {
            return usage("give --zk, --etcd or --kube: the store the pool lives in");
        };
        let layout = build_layout(&a.layout, a.cluster_id.unwrap_or(0))?;
        let slots = layout.scheme().slots;
        let pool_size = a.pool_size.unwrap_or(slots);
        if pool_size == 0 || pool_size > slots {
            return usage(format!("--pool-size must be between 1 and {slots}"));
        }
        Ok(PoolConfig {
            store,
            layout,
            cluster: a.cluster_id,
            pool_size,
            pool_size_given: a.pool_size.is_some(),
            json: a.json,
        })
    }
}

/// Everything `decode` needs, checked: the layout when named (else it is guessed from the
/// text with `params`).
#[derive(Debug)]
pub struct DecodeConfig {
    pub text: String,
    pub layout: Option<Box<dyn Layout>>,
    pub params: layout::LayoutParams,
    pub form: Option<TextForm>,
    pub json: bool,
}

impl DecodeConfig {
    pub fn from_args(a: &DecodeArgs) -> Result<DecodeConfig, UsageError> {
        let layout = match &a.layout.layout {
            Some(_) => Some(build_layout(&a.layout, 0)?),
            None => None,
        };
        Ok(DecodeConfig {
            text: a.id.trim().to_string(),
            layout,
            params: a.layout.params(0),
            form: text_form(a.format.as_deref())?,
            json: a.json,
        })
    }
}

/// Everything `probe` needs, checked.
#[derive(Debug, Clone, Copy)]
pub struct ProbeConfig {
    /// The admin listener's address as configured (an unspecified IP is probed on loopback).
    pub admin: SocketAddr,
    /// Alive (`/healthz`) rather than ready (`/readyz`).
    pub live: bool,
    pub timeout: Duration,
}

impl ProbeConfig {
    pub fn from_args(a: &ProbeArgs) -> Result<ProbeConfig, UsageError> {
        let Some(admin) = admin_addr(&a.admin_addr)? else {
            return usage(
                "the admin listener is off (--admin-addr/IDCAR_ADMIN_ADDR is none): probe has \
                 nothing to opts",
            );
        };
        if a.timeout.is_zero() || a.timeout > Duration::from_secs(60) {
            return usage("--timeout must be between 1ms and 60s");
        }
        Ok(ProbeConfig {
            admin,
            live: a.live,
            timeout: a.timeout,
        })
    }
}

mod lease;
mod store;

use lease::{lease_source, timings};
pub use lease::{pod_ordinal, MAX_SLOTS};

#[cfg(test)]
mod tests;
