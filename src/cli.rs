//! Command-line arguments (clap). Every flag also reads an `IDCAR_*` environment variable.
//! These are raw values; [`crate::config`] validates them into typed configuration.

#[cfg(feature = "fault-injection")]
use clap::builder::TypedValueParser as _;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

/// This build's version and the commit it was built from (`idcar --version`).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("IDCAR_COMMIT"),
    ")"
);

/// The default socket path, shared by `serve` and `get`.
pub const DEFAULT_SOCKET: &str = "/tmp/idcar.sock";

#[derive(Debug, Parser)]
#[command(
    name = "idcar",
    version = VERSION,
    about = "A unique-ID sidecar",
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Log format.
    #[arg(long, env = "IDCAR_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
    /// Log filter in tracing's EnvFilter syntax, e.g. `info` or `idcar=debug,warn`. When
    /// neither this nor IDCAR_LOG is given, RUST_LOG is honoured; the default is
    /// `info,zookeeper_client=warn,kube_client=off` (the Kubernetes client's own errors are
    /// reported by idcar, once and summarised).
    #[arg(long, env = "IDCAR_LOG", global = true)]
    pub log: Option<String>,
}

/// The log filter when neither `--log`, `IDCAR_LOG` nor `RUST_LOG` says otherwise.
pub const DEFAULT_LOG: &str = "info,zookeeper_client=warn,kube_client=off";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve IDs on a Unix socket.
    Serve(Box<ServeArgs>),
    /// Ask a running idcar for IDs and print them, one per line.
    Get(GetArgs),
    /// Print the fields of an ID.
    Decode(DecodeArgs),
    /// Show who holds which slot in ZooKeeper, etcd or Kubernetes, each slot's mark, free
    /// slots and waiters.
    Pool(Box<PoolArgs>),
    /// Ask a running idcar's admin listener whether it is ready (or alive, with --live); exit
    /// 0 if so, 1 if not, with a one-line reason. Never consumes an ID: for exec probes and
    /// container healthchecks.
    Probe(ProbeArgs),
}

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// The admin listener of the idcar to ask (as given to `serve`: an unspecified address
    /// such as 0.0.0.0 means this host's loopback).
    #[arg(long, env = "IDCAR_ADMIN_ADDR", default_value = DEFAULT_ADMIN_ADDR)]
    pub admin_addr: String,
    /// Ask whether the process is alive (`/healthz`) instead of ready (`/readyz`).
    #[arg(long)]
    pub live: bool,
    /// How long to wait for the answer.
    #[arg(long, env = "IDCAR_PROBE_TIMEOUT", default_value = "2s", value_parser = duration)]
    pub timeout: Duration,
}

/// The admin listener's default address, shared by `serve` and `probe`.
pub const DEFAULT_ADMIN_ADDR: &str = "127.0.0.1:9750";

/// Which layout, with its parameters; shared by `serve`, `decode` and `pool`.
#[derive(Debug, Args, Clone)]
pub struct LayoutArgs {
    /// ID layout: lable64 (default), ugd60, si53, sno80, muid128 or uuid7 (RFC 9562
    /// version-7 UUIDs). `decode` without it guesses the layout from the text's shape. Each
    /// runs out of time (then issues nothing): lable64 2109-05-15T07:35:11.104Z, ugd60
    /// 2154-04-07T06:28:16.000Z, si53 34.8 years after --base-clock (2054-11-03T19:53:47.776Z
    /// by default), sno80 2079-09-07T15:47:35.552Z, muid128 2112-09-17T23:53:47.370Z, uuid7
    /// 2554-07-21T23:34:33.709Z.
    #[arg(long, env = "IDCAR_LAYOUT")]
    pub layout: Option<String>,
    /// si53: the base clock, Unix milliseconds (default 2020-01-01T00:00:00Z).
    #[arg(long, env = "IDCAR_BASE_CLOCK", default_value_t = crate::layout::si53::DEFAULT_BASE_CLOCK_MS)]
    pub base_clock: u64,
    /// si53: machine-ID bits of the low 13 (the pool has 2^N slots; 0 = one instance).
    #[arg(long, env = "IDCAR_MID_BITS", default_value_t = 5)]
    pub mid_bits: u8,
    /// sno80: the lowest sequence number this instance issues per 4 ms (sequence sharding).
    #[arg(long, env = "IDCAR_SEQUENCE_MIN", default_value_t = 0)]
    pub sequence_min: u16,
    /// sno80: the highest sequence number this instance issues per 4 ms (sequence sharding).
    #[arg(long, env = "IDCAR_SEQUENCE_MAX", default_value_t = u16::MAX)]
    pub sequence_max: u16,
    /// muid128: the first medallion of the pool, a multiple of 2^32; slot N's medallion is
    /// this plus N (default 0x10000000000, the start of the seed's range). Decimal, or hex
    /// with 0x.
    #[arg(long, env = "IDCAR_MEDALLION_BASE", default_value = "0x10000000000", value_parser = medallion_base)]
    pub medallion_base: u64,
}

fn medallion_base(s: &str) -> Result<u64, String> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    }
    .map_err(|_| format!("{s:?}: expected a whole number, decimal or 0x-prefixed hex"))
}

impl LayoutArgs {
    /// The layout parameters, with `cluster` for lable64 and the namespace.
    pub fn params(&self, cluster: u8) -> crate::layout::LayoutParams {
        crate::layout::LayoutParams {
            cluster,
            base_clock_ms: self.base_clock,
            mid_bits: self.mid_bits,
            sequence_min: self.sequence_min,
            sequence_max: self.sequence_max,
            medallion_base: self.medallion_base,
            ..Default::default()
        }
    }

    /// The layout's name (lable64 when none is given).
    pub fn name(&self) -> &str {
        self.layout.as_deref().unwrap_or("lable64")
    }
}

/// ZooKeeper connection flags, shared by `serve` and `pool`. `Debug` hides the credential.
#[derive(Args, Clone)]
pub struct ZkArgs {
    /// Root of idcar's tree in ZooKeeper.
    #[arg(long, env = "IDCAR_ZK_ROOT", default_value = "/idcar")]
    pub zk_root: String,
    /// ZooKeeper session timeout (the server may adjust it to its min/max).
    #[arg(long, env = "IDCAR_ZK_SESSION_TIMEOUT", default_value = "6s", value_parser = duration)]
    pub zk_session_timeout: Duration,
    /// Digest authentication as `user:password`; znodes idcar creates are then creator-only.
    /// Visible to every local user on a command line: prefer --zk-auth-file.
    #[arg(
        long,
        env = "IDCAR_ZK_AUTH",
        hide_env_values = true,
        conflicts_with = "zk_auth_file"
    )]
    pub zk_auth: Option<String>,
    /// Digest authentication read from FILE (one line `user:password`, e.g. a mounted
    /// Kubernetes Secret), read again at every new connection.
    #[arg(long, env = "IDCAR_ZK_AUTH_FILE", value_name = "FILE")]
    pub zk_auth_file: Option<PathBuf>,
    /// TLS to ZooKeeper: the CA certificate(s) (PEM) that signed the servers' certificates;
    /// each server's certificate must name the host or IP given in --zk. Every server is then
    /// reached over TLS (never plaintext).
    #[arg(long, env = "IDCAR_ZK_TLS_CA", value_name = "FILE")]
    pub zk_tls_ca: Option<PathBuf>,
    /// With --zk-tls-ca: a client certificate (PEM) for mutual TLS; the znodes idcar creates
    /// are then restricted to its identity (ZooKeeper's x509 scheme). Needs --zk-tls-key.
    #[arg(
        long,
        env = "IDCAR_ZK_TLS_CERT",
        value_name = "FILE",
        requires = "zk_tls_key"
    )]
    pub zk_tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --zk-tls-cert.
    #[arg(
        long,
        env = "IDCAR_ZK_TLS_KEY",
        value_name = "FILE",
        requires = "zk_tls_cert"
    )]
    pub zk_tls_key: Option<PathBuf>,
}

impl std::fmt::Debug for ZkArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkArgs")
            .field("zk_root", &self.zk_root)
            .field("zk_session_timeout", &self.zk_session_timeout)
            .field("zk_auth", &self.zk_auth.as_ref().map(|_| "(hidden)"))
            .field("zk_auth_file", &self.zk_auth_file)
            .field("zk_tls_ca", &self.zk_tls_ca)
            .field("zk_tls_cert", &self.zk_tls_cert)
            .field("zk_tls_key", &self.zk_tls_key)
            .finish()
    }
}

/// The store a pool lives in, shared by `serve` (without one: a static slot) and `pool`.
#[derive(Debug, Args)]
pub struct StoreArgs {
    /// ZooKeeper connect string (`host:port[,host:port...][/chroot]`): the pool lives there
    /// (`serve`: negotiate the slot there instead of using a static one).
    #[arg(long, env = "IDCAR_ZK", conflicts_with = "etcd")]
    pub zk: Option<String>,
    #[command(flatten)]
    pub zk_args: ZkArgs,
    /// etcd endpoints (`host:port` or `http(s)://host:port`, comma-separated): the pool lives
    /// there, as with --zk (exclusive with it).
    #[arg(
        long,
        env = "IDCAR_ETCD",
        value_name = "URL[,URL...]",
        conflicts_with = "kube"
    )]
    pub etcd: Option<String>,
    #[command(flatten)]
    pub etcd_args: EtcdArgs,
    /// Kubernetes: the pool lives in Lease objects of a namespace, through the API server
    /// (in a pod, its service account; else --kubeconfig, KUBECONFIG or ~/.kube/config),
    /// as with --zk (exclusive with it and --etcd).
    #[arg(long, env = "IDCAR_KUBE", conflicts_with = "zk")]
    pub kube: bool,
    #[command(flatten)]
    pub kube_args: KubeArgs,
}

/// Kubernetes flags, shared by `serve` and `pool`.
#[derive(Args, Clone, Debug)]
pub struct KubeArgs {
    /// The namespace of the pool's Lease objects (default: the pod's own, or the kubeconfig
    /// context's).
    #[arg(long, env = "IDCAR_KUBE_NAMESPACE")]
    pub kube_namespace: Option<String>,
    /// A kubeconfig file to reach the API server with, instead of the pod's service account
    /// (or KUBECONFIG, then ~/.kube/config).
    #[arg(long, env = "IDCAR_KUBECONFIG", value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// What the pool's Lease objects' names begin with (as --zk-root is for ZooKeeper).
    #[arg(long, env = "IDCAR_KUBE_PREFIX", default_value = "idcar")]
    pub kube_prefix: String,
    /// How long a slot stays held after its holder's last renewal, as other instances see
    /// it, while every slot of its pool is held (renewed every third of it); with room in
    /// the pool a session declares a minute instead, and renews every 20 s.
    #[arg(long, env = "IDCAR_KUBE_TTL", default_value = "15s", value_parser = duration)]
    pub kube_ttl: Duration,
}

/// etcd connection flags, shared by `serve` and `pool`.
#[derive(Args, Clone, Debug)]
pub struct EtcdArgs {
    /// Prefix of idcar's keys in etcd (as --zk-root is for ZooKeeper).
    #[arg(long, env = "IDCAR_ETCD_PREFIX", default_value = "/idcar")]
    pub etcd_prefix: String,
    /// TTL of this instance's etcd lease, in whole seconds (etcd's minimum is 2s): how long
    /// its slot stays held after it stops answering, as --zk-session-timeout is for ZooKeeper.
    #[arg(long, env = "IDCAR_ETCD_TTL", default_value = "6s", value_parser = duration)]
    pub etcd_ttl: Duration,
    /// User and password for etcd from FILE (one line `user:password`, e.g. a mounted
    /// Kubernetes Secret), read again for every new etcd lease.
    #[arg(long, env = "IDCAR_ETCD_AUTH_FILE", value_name = "FILE")]
    pub etcd_auth_file: Option<PathBuf>,
    /// TLS to etcd: the CA certificate(s) (PEM) that signed etcd's certificates; each must
    /// name the host or IP given in --etcd. Every endpoint is then reached over TLS.
    #[arg(long, env = "IDCAR_ETCD_TLS_CA", value_name = "FILE")]
    pub etcd_tls_ca: Option<PathBuf>,
    /// With --etcd-tls-ca: a client certificate (PEM) for mutual TLS (with etcd's
    /// --client-cert-auth its common name is the etcd user). Needs --etcd-tls-key.
    #[arg(
        long,
        env = "IDCAR_ETCD_TLS_CERT",
        value_name = "FILE",
        requires = "etcd_tls_key"
    )]
    pub etcd_tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --etcd-tls-cert.
    #[arg(
        long,
        env = "IDCAR_ETCD_TLS_KEY",
        value_name = "FILE",
        requires = "etcd_tls_cert"
    )]
    pub etcd_tls_key: Option<PathBuf>,
}

pub(crate) fn duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{e} (examples: 500ms, 3s, 1m)"))
}

/// A duration with an optional leading `-`, in nanoseconds.
#[cfg(feature = "fault-injection")]
pub(crate) fn signed_duration(s: &str) -> Result<i64, String> {
    let (neg, rest) = s.strip_prefix('-').map_or((false, s), |r| (true, r));
    let d = duration(rest)?;
    let ns = i64::try_from(d.as_nanos()).map_err(|_| "too large".to_string())?;
    Ok(if neg { -ns } else { ns })
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Path of the Unix socket to serve on.
    #[arg(long, env = "IDCAR_SOCKET", default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Permissions of the socket file, in octal.
    #[arg(long, env = "IDCAR_SOCKET_MODE", default_value = "660")]
    pub socket_mode: String,
    /// Address of the admin listener (/metrics, /healthz, /readyz), or `none`. In a pod, bind
    /// it to the pod's address (e.g. `$(POD_IP):9750`) for kubelet probes and Prometheus.
    #[arg(long, env = "IDCAR_ADMIN_ADDR", default_value = DEFAULT_ADMIN_ADDR)]
    pub admin_addr: String,
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// Cluster ID (static; 0-15 for lable64 and uuid7, which carry it in their IDs).
    #[arg(long, env = "IDCAR_CLUSTER_ID", default_value_t = 0)]
    pub cluster_id: u8,
    /// Generator ID (slot: lable64's generator, ugd60's worker, si53's MID, sno80's partition,
    /// muid128's medallion index, uuid7's slot): the static slot without a store (default 0); with --zk or
    /// --etcd, the slot to take when it is free.
    #[arg(long, env = "IDCAR_GENERATOR_ID")]
    pub generator_id: Option<u32>,
    #[command(flatten)]
    pub store: StoreArgs,
    /// With a store (--zk, --etcd, --kube): the pod this instance runs in, shown as the slot's holder by `idcar pool`
    /// (set it from the downward API's metadata.name). POD_NAME is read when it is not set.
    #[arg(long, env = "IDCAR_POD_NAME")]
    pub pod_name: Option<String>,
    /// With a store (--zk, --etcd, --kube): hold up to K slots of the pool at once and spread requests over
    /// them, for K times the layout's rate per instance. Each slot is its own lease (claimed,
    /// fenced, renewed and released as one slot is); while the pool cannot give all K, the
    /// instance serves with the slots it has and keeps queueing for the rest.
    #[arg(long, env = "IDCAR_SLOTS", default_value_t = 1, value_name = "K")]
    pub slots: u32,
    /// With a store (--zk, --etcd, --kube): prefer the slot equal to this pod's StatefulSet ordinal (times
    /// --slots), still claimed and fenced in the store: a preference, never a static
    /// assignment. The ordinal comes from --pod-index, else from the number ending the pod's
    /// name (--pod-name/POD_NAME, e.g. `ids-3`). Exclusive with --generator-id.
    #[arg(long, env = "IDCAR_PREFER_ORDINAL", value_parser = clap::builder::BoolishValueParser::new(), action = clap::ArgAction::SetTrue, conflicts_with = "generator_id")]
    pub prefer_ordinal: bool,
    /// The pod's StatefulSet ordinal for --prefer-ordinal (set it from the downward API's
    /// `metadata.labels['apps.kubernetes.io/pod-index']`, Kubernetes 1.28+).
    /// Empty counts as unset (the label is missing before 1.28).
    #[arg(long, env = "IDCAR_POD_INDEX", value_name = "N")]
    pub pod_index: Option<String>,
    /// With a store (--zk, --etcd, --kube): negotiate only slots 0..N (default: the layout's whole pool), e.g. to keep
    /// the rest for static instances.
    #[arg(long, env = "IDCAR_POOL_SIZE")]
    pub pool_size: Option<u32>,
    /// State file holding the static slot's time mark (survives restarts; keep it on a
    /// volume that outlives the process). Not used with a store.
    #[arg(long, env = "IDCAR_STATE_FILE", default_value = "idcar.state")]
    pub state_file: PathBuf,
    /// How far ahead of the clock IDs may be issued, and the time mark reaches while someone
    /// waits for a slot [default: 3s; with --zk, the session timeout less 1s, within 3s..5s:
    /// 5s for the default session; with --etcd, the same from --etcd-ttl]. In ZooKeeper mode
    /// a horizon below the session timeout costs a successor no wait (the session expires
    /// first) and rides out longer stalls of ZooKeeper's own disk.
    #[arg(long, env = "IDCAR_LEASE_HORIZON", value_parser = duration)]
    pub lease_horizon: Option<Duration>,
    /// With a store (--zk, --etcd, --kube): how far ahead of the clock the time mark reaches while no one
    /// waits for a slot of the pool [default: 60s, or --max-clock-wait if that is less]. The
    /// mark is written again when half of it is left (one store write per holder every ~30s);
    /// a contender waiting for a slot brings it down to --lease-horizon within a second. Set
    /// it to the horizon to renew the mark every --renew-interval.
    #[arg(long, env = "IDCAR_IDLE_HORIZON", value_parser = duration)]
    pub idle_horizon: Option<Duration>,
    /// How often IDs' window (and, while someone waits, the time mark) is pushed forward (at
    /// most half the horizon).
    #[arg(long, env = "IDCAR_RENEW_INTERVAL", default_value = "1s", value_parser = duration)]
    pub renew_interval: Duration,
    /// How long start-up may wait for the clock to pass a stored time mark before giving up
    /// [default: 10s; with --zk or --etcd, 70s: a crashed holder's mark may be --idle-horizon
    /// ahead].
    #[arg(long, env = "IDCAR_MAX_CLOCK_WAIT", value_parser = duration)]
    pub max_clock_wait: Option<Duration>,
    /// Largest number of IDs one request may ask for (default: 10000, or what the layout
    /// can issue in half the request timeout if that is less).
    #[arg(long, env = "IDCAR_MAX_BATCH")]
    pub max_batch: Option<u32>,
    /// Longest a request may wait for sequence numbers before it is refused (503).
    #[arg(long, env = "IDCAR_REQUEST_TIMEOUT", default_value = "5s", value_parser = duration)]
    pub request_timeout: Duration,
    /// Most client connections served at once; at the cap, a new connection evicts the
    /// idle one quiet the longest (waiting for a request, trickling one, or not reading). Lowered
    /// (with a warning) when the process's file-descriptor limit cannot hold this many plus
    /// the admin listener's and the lease's reserve.
    #[arg(long, env = "IDCAR_MAX_CONNECTIONS", default_value_t = 1024)]
    pub max_connections: usize,
    /// Bounds each phase of a socket connection: the wait for a request's first byte, the
    /// time from a request's first byte to its last, and the time a response waits for the
    /// client to read it. A connection past any of these is closed.
    #[arg(long, env = "IDCAR_IDLE_TIMEOUT", default_value = "30s", value_parser = duration)]
    pub idle_timeout: Duration,
    /// Most admin connections held at once; a new one beyond this evicts the longest-quiet idle one.
    #[arg(long, env = "IDCAR_ADMIN_MAX_CONNECTIONS", default_value_t = 64)]
    pub admin_max_connections: usize,
    /// The deadlines of admin connections (as --idle-timeout for the socket).
    #[arg(long, env = "IDCAR_ADMIN_TIMEOUT", default_value = "5s", value_parser = duration)]
    pub admin_timeout: Duration,
    /// How long shutdown waits for in-flight requests.
    #[arg(long, env = "IDCAR_SHUTDOWN_GRACE", default_value = "10s", value_parser = duration)]
    pub shutdown_grace: Duration,
    /// Testing aid (builds with the cargo feature `fault-injection` only): pretend the host
    /// clock is off by this much (e.g. `3s`, `-2s`).
    #[cfg(feature = "fault-injection")]
    #[arg(long, env = "IDCAR_CLOCK_SKEW", hide = true, allow_hyphen_values = true, value_parser = signed_duration)]
    pub clock_skew: Option<i64>,
    /// Testing aid (builds with the cargo feature `fault-injection` only): run the ZooKeeper
    /// lease with a deliberate bug, so the fault campaign can show its checker finds it.
    #[cfg(feature = "fault-injection")]
    #[arg(
        long,
        hide = true,
        default_value = "none",
        value_parser = clap::builder::PossibleValuesParser::new(crate::lease::planted::PlantedBug::names())
            .map(|s| s.parse::<crate::lease::planted::PlantedBug>().expect("a name it lists")),
    )]
    pub plant_bug: crate::lease::planted::PlantedBug,
    /// Testing aid (builds with the cargo feature `fault-injection` only): a deliberate panic
    /// in a connection's handler (`request:N`, at the N-th HTTP request) or on the lease
    /// thread (`lease:DURATION` after start); or `abandon:DURATION`: the leases' release
    /// handles dropped without a release, then exit 1 after the shutdown grace.
    #[cfg(feature = "fault-injection")]
    #[arg(long, hide = true, default_value = "none")]
    pub plant_panic: crate::panics::PlantedPanic,
    /// Testing aid (builds with the cargo feature `fault-injection` only): hold every mark
    /// write back this long after its mark was chosen, as a starved renewal path would (e.g.
    /// `1200ms`).
    #[cfg(feature = "fault-injection")]
    #[arg(long, hide = true, default_value = "0s", value_parser = duration)]
    pub starve_renewals: Duration,
    /// Worker threads of the async runtime.
    #[arg(long, env = "IDCAR_THREADS", default_value_t = 2)]
    pub threads: usize,
}

#[derive(Debug, Args)]
pub struct GetArgs {
    /// Path of the running idcar's Unix socket.
    #[arg(long, env = "IDCAR_SOCKET", default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// How many IDs.
    #[arg(long, short = 'n', env = "IDCAR_COUNT", default_value_t = 1)]
    pub count: u64,
    /// Text form (hex, dec, i64, b64, b32, muid, uuid, ulid: each layout has some); the
    /// layout's default when not given.
    #[arg(long, short = 'f', env = "IDCAR_FORMAT")]
    pub format: Option<String>,
    /// sno80: the metabyte (0-255) for these IDs.
    #[arg(long, env = "IDCAR_META")]
    pub meta: Option<u8>,
    /// muid128: the IDs of one transaction (one timestamp and medallion, offsets 1..N).
    #[arg(long, env = "IDCAR_TRANSACTION", value_parser = clap::builder::BoolishValueParser::new(), action = clap::ArgAction::SetTrue)]
    pub transaction: bool,
    /// Print the server's JSON instead of one ID per line.
    #[arg(long, env = "IDCAR_JSON", value_parser = clap::builder::BoolishValueParser::new(), action = clap::ArgAction::SetTrue)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("store").required(true).args(["zk", "etcd", "kube"])))]
pub struct PoolArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// Only this cluster (default: every cluster found).
    #[arg(long, env = "IDCAR_CLUSTER_ID")]
    pub cluster_id: Option<u8>,
    /// The pool size the cluster's instances negotiate (`serve --pool-size`; default: the
    /// layout's whole pool), for counting free slots.
    #[arg(long, env = "IDCAR_POOL_SIZE")]
    pub pool_size: Option<u32>,
    /// Print JSON.
    #[arg(long, env = "IDCAR_JSON", value_parser = clap::builder::BoolishValueParser::new(), action = clap::ArgAction::SetTrue)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DecodeArgs {
    /// The ID, in any of the layout's text forms (a negative i64 is fine as it is).
    #[arg(allow_hyphen_values = true)]
    pub id: String,
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// Text form of the ID (hex, dec, i64, b64, b32, muid, uuid, ulid); guessed from its shape
    /// when not given.
    #[arg(long, short = 'f', env = "IDCAR_FORMAT")]
    pub format: Option<String>,
    /// Print JSON.
    #[arg(long, env = "IDCAR_JSON", value_parser = clap::builder::BoolishValueParser::new(), action = clap::ArgAction::SetTrue)]
    pub json: bool,
}
