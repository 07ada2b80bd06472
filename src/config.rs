//! Validated configuration: raw [`crate::cli`] arguments turned into typed values, with every
//! inconsistency reported as a [`UsageError`] (exit code 2) naming the flag (and environment
//! variable) to change, before anything starts. The one place that validates: `app` and the
//! subcommands only ever see checked values. Layouts report their own domain errors
//! ([`layout::BuildError`]); this module maps them to flags.

use crate::cli::{DecodeArgs, EtcdArgs, LayoutArgs, PoolArgs, ProbeArgs, ServeArgs, ZkArgs};
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
    /// A slot negotiated in ZooKeeper.
    Zk(ZkSettings),
    /// A slot negotiated in etcd.
    Etcd(EtcdSettings),
}

/// How to reach etcd, checked (shared by `serve` and `pool`).
#[derive(Debug, Clone)]
pub struct EtcdConn {
    pub access: crate::lease::etcd::EtcdAccess,
    pub prefix: String,
    pub ttl: Duration,
}

/// Checked etcd settings of `serve`.
#[derive(Debug, Clone)]
pub struct EtcdSettings {
    pub conn: EtcdConn,
    pub pool_size: u32,
    /// The slot the first lease prefers (the next ones prefer the slots after it).
    pub prefer: Option<u32>,
    /// The pod name for the slot's owner record.
    pub pod: Option<String>,
    /// How many slots the instance holds at once (`--slots`).
    pub slots: u32,
}

impl EtcdConn {
    /// Checks the etcd flags shared by `serve` and `pool`.
    pub fn from_args(endpoints: &str, e: &EtcdArgs) -> Result<EtcdConn, UsageError> {
        let prefix = e.etcd_prefix.trim_end_matches('/');
        if !prefix.starts_with('/') || prefix.split('/').skip(1).any(str::is_empty) {
            return usage(format!(
                "--etcd-prefix {:?}: expected an absolute path such as /idcar",
                e.etcd_prefix
            ));
        }
        let ttl = e.etcd_ttl;
        if ttl.subsec_nanos() != 0 || ttl < Duration::from_secs(2) || ttl > Duration::from_secs(600)
        {
            return usage(format!(
                "--etcd-ttl must be whole seconds between 2s (etcd's minimum) and 10m, got {ttl:?}"
            ));
        }
        let tls = match (&e.etcd_tls_ca, &e.etcd_tls_cert, &e.etcd_tls_key) {
            (None, None, None) => None,
            (None, _, _) => {
                return usage("--etcd-tls-cert and --etcd-tls-key need --etcd-tls-ca (TLS to etcd)")
            }
            (Some(ca), cert, key) => Some(crate::lease::tls::TlsFiles {
                ca: ca.clone(),
                identity: cert.clone().zip(key.clone()),
            }),
        };
        let access = crate::lease::etcd::EtcdAccess::new(endpoints, tls, e.etcd_auth_file.clone())
            .map_err(|e| UsageError(e.0))?;
        Ok(EtcdConn {
            access,
            prefix: prefix.to_string(),
            ttl,
        })
    }
}

/// How to reach ZooKeeper, checked (shared by `serve` and `pool`).
#[derive(Debug, Clone)]
pub struct ZkConn {
    pub connect: String,
    pub root: String,
    pub session_timeout: Duration,
    /// TLS and credentials (files read and checked).
    pub access: crate::lease::zk::Access,
}

/// Checked ZooKeeper settings of `serve`.
#[derive(Debug, Clone)]
pub struct ZkSettings {
    pub conn: ZkConn,
    pub pool_size: u32,
    /// The slot the first lease prefers (the next ones prefer the slots after it).
    pub prefer: Option<u32>,
    /// The pod name for the slot's owner record.
    pub pod: Option<String>,
    /// How many slots the instance holds at once (`--slots`).
    pub slots: u32,
}

impl ZkConn {
    /// Checks the ZooKeeper flags shared by `serve` and `pool`.
    pub fn from_args(connect: &str, z: &ZkArgs) -> Result<ZkConn, UsageError> {
        if connect.trim().is_empty() {
            return usage(
                "--zk: empty connect string (expected host:port[,host:port...][/chroot])",
            );
        }
        let root = z.zk_root.trim_end_matches('/');
        if !root.starts_with('/') || root.split('/').skip(1).any(str::is_empty) {
            return usage(format!(
                "--zk-root {:?}: expected an absolute path such as /idcar",
                z.zk_root
            ));
        }
        if z.zk_session_timeout < Duration::from_millis(400)
            || z.zk_session_timeout > Duration::from_secs(600)
        {
            return usage("--zk-session-timeout must be between 400ms and 10m");
        }
        let tls = match (&z.zk_tls_ca, &z.zk_tls_cert, &z.zk_tls_key) {
            (None, None, None) => None,
            (None, _, _) => {
                return usage("--zk-tls-cert and --zk-tls-key need --zk-tls-ca (TLS to ZooKeeper)")
            }
            (Some(ca), cert, key) => Some(crate::lease::tls::TlsFiles {
                ca: ca.clone(),
                identity: cert.clone().zip(key.clone()),
            }),
        };
        let access = crate::lease::zk::Access::new(z.zk_auth.clone(), z.zk_auth_file.clone(), tls)
            .map_err(|e| UsageError(e.0))?;
        access.check_connect(connect).map_err(|e| UsageError(e.0))?;
        Ok(ZkConn {
            connect: connect.to_string(),
            root: root.to_string(),
            session_timeout: z.zk_session_timeout,
            access,
        })
    }
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
    a.starve_renewals.min(HOUR)
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

/// A static slot, or the ZooKeeper settings to negotiate one.
fn lease_source(a: &ServeArgs, layout: &dyn Layout) -> Result<LeaseSource, UsageError> {
    let slots = layout.scheme().slots;
    if let Some(g) = a.generator_id.filter(|g| *g >= slots) {
        return usage(format!(
            "--generator-id {g} is out of range: layout {} has {slots} generator IDs (0-{})",
            layout.name(),
            slots - 1
        ));
    }
    if a.zk.is_some() && a.etcd.is_some() {
        return usage("--zk and --etcd are exclusive: the pool lives in one store");
    }
    if a.zk.is_none() && a.etcd.is_none() {
        if a.pool_size.is_some() {
            return usage("--pool-size needs --zk or --etcd");
        }
        if a.slots != 1 {
            return usage(
                "--slots needs --zk or --etcd: a static instance has its one --generator-id \
                 (run more instances, or negotiate slots in a store)",
            );
        }
        if a.prefer_ordinal {
            return usage(
                "--prefer-ordinal needs --zk or --etcd (without a store, give --generator-id)",
            );
        }
        return Ok(LeaseSource::Static {
            slot: a.generator_id.unwrap_or(0),
            state_file: a.state_file.clone(),
        });
    }
    let pool_size = a.pool_size.unwrap_or(slots);
    if pool_size == 0 || pool_size > slots {
        return usage(format!(
            "--pool-size must be between 1 and {slots} for layout {}",
            layout.name()
        ));
    }
    if let Some(g) = a.generator_id.filter(|g| *g >= pool_size) {
        return usage(format!(
            "--generator-id {g} is outside the negotiated pool 0-{}",
            pool_size - 1
        ));
    }
    if a.slots == 0 || a.slots > MAX_SLOTS.min(pool_size) {
        return usage(format!(
            "--slots must be between 1 and {} (the pool's size, at most {MAX_SLOTS}), got {}",
            MAX_SLOTS.min(pool_size),
            a.slots
        ));
    }
    let pod = a
        .pod_name
        .clone()
        .or_else(|| std::env::var("POD_NAME").ok())
        .filter(|p| !p.is_empty());
    let prefer = match a.prefer_ordinal {
        false => a.generator_id,
        true => ordinal_slot(pod_index(a)?, pod.as_deref(), a.slots, pool_size)?,
    };
    if let Some(endpoints) = &a.etcd {
        return Ok(LeaseSource::Etcd(EtcdSettings {
            conn: EtcdConn::from_args(endpoints, &a.etcd_args)?,
            pool_size,
            prefer,
            pod,
            slots: a.slots,
        }));
    }
    let connect = a.zk.as_deref().unwrap_or_default();
    Ok(LeaseSource::Zk(ZkSettings {
        conn: ZkConn::from_args(connect, &a.zk_args)?,
        pool_size,
        prefer,
        pod,
        slots: a.slots,
    }))
}

/// The most slots one instance may hold (`--slots`): each is a ZooKeeper session (an etcd
/// lease) of its own, and ZooKeeper allows 60 connections per client address by default.
pub const MAX_SLOTS: u32 = 16;

/// `--pod-index`: empty is unset (the downward API gives an empty value for a missing label).
fn pod_index(a: &ServeArgs) -> Result<Option<u32>, UsageError> {
    match a.pod_index.as_deref().map(str::trim) {
        None | Some("") => Ok(None),
        Some(n) => n.parse().map(Some).map_err(|_| {
            UsageError(format!(
                "--pod-index/IDCAR_POD_INDEX: {n:?} is not a pod ordinal (a whole number)"
            ))
        }),
    }
}

/// The pod's StatefulSet ordinal: `--pod-index`, else the number ending the pod's name.
pub fn pod_ordinal(pod_index: Option<u32>, pod: Option<&str>) -> Option<u32> {
    pod_index.or_else(|| {
        let (_, n) = pod?.rsplit_once('-')?;
        (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .then(|| n.parse().ok())
            .flatten()
    })
}

/// The slot `--prefer-ordinal` prefers first: the ordinal times `--slots` (so each pod's
/// slots are its own block), or none when that block is outside the pool (a StatefulSet
/// larger than the pool: those pods take any free slot).
fn ordinal_slot(
    pod_index: Option<u32>,
    pod: Option<&str>,
    slots: u32,
    pool_size: u32,
) -> Result<Option<u32>, UsageError> {
    let Some(ordinal) = pod_ordinal(pod_index, pod) else {
        return usage(format!(
            "--prefer-ordinal: no ordinal: set --pod-index/IDCAR_POD_INDEX (from the label \
             apps.kubernetes.io/pod-index) or a pod name ending in -N (--pod-name/POD_NAME), \
             got pod name {pod:?}"
        ));
    };
    let first = ordinal
        .checked_mul(slots)
        .filter(|f| f.checked_add(slots).is_some_and(|end| end <= pool_size));
    if first.is_none() {
        tracing::warn!(
            ordinal,
            slots,
            pool_size,
            "--prefer-ordinal: the ordinal's slots are outside the pool; taking any free slot"
        );
    }
    Ok(first)
}

const HOUR: Duration = Duration::from_secs(3600);

/// `--lease-horizon`, or its default for the mode: 3 s in static mode; with `--zk`, the
/// session timeout (with `--etcd`, the etcd lease's TTL) less a second, within 3-5 s (a successor waits for the session to expire
/// anyway, so a horizon below it costs no wait, and a longer one rides out longer stalls of
/// ZooKeeper's own log writes on a busy node), and not above an explicit `--max-clock-wait`
/// (which must be at least the horizon: a setting that was valid with 3 s stays valid).
fn lease_horizon(a: &ServeArgs) -> Duration {
    const STATIC: Duration = Duration::from_secs(3);
    let expiry = match (&a.zk, &a.etcd) {
        (Some(_), _) => a.zk_args.zk_session_timeout,
        (None, Some(_)) => a.etcd_args.etcd_ttl,
        (None, None) => return a.lease_horizon.unwrap_or(STATIC),
    };
    a.lease_horizon.unwrap_or_else(|| {
        expiry
            .saturating_sub(Duration::from_secs(1))
            .clamp(STATIC, Duration::from_secs(5))
            .min(a.max_clock_wait.max(STATIC))
    })
}

/// Every duration at most an hour; the lease's timings consistent with each other.
fn timings(a: &ServeArgs) -> Result<Timing, UsageError> {
    let horizon = lease_horizon(a);
    for (flag, d) in [
        ("--lease-horizon", horizon),
        ("--renew-interval", a.renew_interval),
        ("--max-clock-wait", a.max_clock_wait),
        ("--request-timeout", a.request_timeout),
        ("--idle-timeout", a.idle_timeout),
        ("--admin-timeout", a.admin_timeout),
        ("--shutdown-grace", a.shutdown_grace),
    ] {
        if d > HOUR {
            return usage(format!("{flag} must be at most 1h, got {d:?}"));
        }
    }
    if a.renew_interval < Duration::from_millis(10) {
        return usage("--renew-interval must be at least 10ms");
    }
    if a.renew_interval * 2 > horizon {
        return usage(format!(
            "--renew-interval ({:?}) must be at most half of --lease-horizon ({horizon:?}) so a \
             renewal can fail once without the lease running out",
            a.renew_interval
        ));
    }
    if a.max_clock_wait < horizon {
        return usage(format!(
            "--max-clock-wait ({:?}) must be at least --lease-horizon ({horizon:?}): after a \
             crash the stored mark is up to one horizon ahead, and start-up must be able to wait \
             it out",
            a.max_clock_wait
        ));
    }
    Ok(Timing {
        horizon,
        renew_every: a.renew_interval,
        max_clock_wait: a.max_clock_wait,
        starve: starve(a),
    })
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

/// The store `pool` reads.
#[derive(Debug)]
pub enum PoolStore {
    Zk(ZkConn),
    Etcd(EtcdConn),
}

/// Everything `pool` needs, checked.
#[derive(Debug)]
pub struct PoolConfig {
    pub store: PoolStore,
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
        let store = match (&a.zk, &a.etcd) {
            (Some(_), Some(_)) => return usage("--zk and --etcd are exclusive"),
            (Some(zk), None) => PoolStore::Zk(ZkConn::from_args(zk, &a.zk_args)?),
            (None, Some(etcd)) => PoolStore::Etcd(EtcdConn::from_args(etcd, &a.etcd_args)?),
            (None, None) => return usage("give --zk or --etcd: the store the pool lives in"),
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

#[cfg(test)]
mod tests;
