//! Every Prometheus metric idcar exports, registered once in one typed struct.
//!
//! Hot-path metrics are resolved to their label values at start-up, so recording one is an
//! atomic add. Names follow Prometheus conventions: `idcar_` prefix, `_total` for counters,
//! seconds and bytes as base units.

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

/// Which API a request came through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interface {
    Http,
    Binary,
}

impl Interface {
    pub const ALL: [Interface; 2] = [Interface::Http, Interface::Binary];

    pub fn label(self) -> &'static str {
        match self {
            Interface::Http => "http",
            Interface::Binary => "binary",
        }
    }
}

/// Which listener a connection came through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listener {
    Socket,
    Admin,
}

impl Listener {
    pub fn label(self) -> &'static str {
        match self {
            Listener::Socket => "socket",
            Listener::Admin => "admin",
        }
    }
}

/// Why a connection was closed by idcar, as counted in
/// `idcar_connections_closed_total{listener,reason}`: one of its deadlines passed
/// ([`crate::server::deadline::Expiry`]), or (admin) a newer connection evicted it.
pub const CLOSE_REASONS: [&str; 4] = ["idle", "slow_request", "slow_reader", "evicted"];

/// How a request ended, as counted in `idcar_requests_total{outcome}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    BadRequest,
    NotFound,
    Unavailable,
}

impl Outcome {
    pub const ALL: [Outcome; 4] = [
        Outcome::Ok,
        Outcome::BadRequest,
        Outcome::NotFound,
        Outcome::Unavailable,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::BadRequest => "bad_request",
            Outcome::NotFound => "not_found",
            Outcome::Unavailable => "unavailable",
        }
    }
}

/// The process's metrics.
#[derive(Debug)]
pub struct Metrics {
    /// The `idcar_*` metrics, with `layout` and `cluster` labels.
    pub registry: Registry,
    /// `idcar_build_info` and the process collector, unlabelled.
    process: Registry,
    pub ids_issued: IntCounter,
    /// `idcar_requests_total` resolved per `[interface][outcome]`.
    requests: [[IntCounter; 4]; 2],
    /// `idcar_request_duration_seconds` resolved per interface.
    latency: [Histogram; 2],
    pub batch_size: Histogram,
    pub sequence_waits: IntCounter,
    pub sequence_overflow_ticks: IntCounter,
    pub clock_regressions: IntCounter,
    pub refusals: IntCounterVec,
    pub lease_held: IntGauge,
    pub lease_slot: IntGauge,
    pub lease_remaining_seconds: prometheus::Gauge,
    pub lease_renewals: IntCounterVec,
    pub lease_mark_wait_seconds: Histogram,
    pub connections: IntGaugeVec,
    connections_closed: IntCounterVec,
    /// Slots this instance may negotiate (ZooKeeper mode).
    pub pool_size: IntGauge,
    /// Slots held in this cluster, by anyone (from a watch on `slots/`).
    pub pool_held: IntGauge,
    /// Contenders queued for a slot in this cluster (children of `queue/`).
    pub pool_waiting: IntGauge,
    /// 1 while this instance waits at the head of the queue with every slot held.
    pub pool_exhausted: IntGauge,
    pub lease_claims: IntCounter,
    pub lease_losses: IntCounterVec,
    pub lease_claim_seconds: Histogram,
    pub lease_renewal_seconds: Histogram,
    pub zk_session_state: IntGaugeVec,
    pub zk_reconnects: IntCounter,
}

/// The ZooKeeper session states reported by `idcar_zk_session_state{state}`.
pub const SESSION_STATES: [&str; 5] = [
    "connected",
    "disconnected",
    "expired",
    "closed",
    "auth_failed",
];

/// Why a request was refused, as counted in `idcar_refusals_total{reason}`.
pub const REFUSAL_REASONS: [&str; 5] = [
    "no_lease",
    "mark_reached",
    "clock_behind",
    "time_overflow",
    "timed_out",
];

/// Why a lease was lost, as counted in `idcar_lease_losses_total{reason}`: the ZooKeeper
/// session expired, another holder wrote the mark (stolen), or the mark ran out because its
/// store (ZooKeeper, or a static lease's state file) could not be written (unreachable).
pub const LOSS_REASONS: [&str; 3] = ["expired", "stolen", "unreachable"];

fn reg<T: prometheus::core::Collector + Clone + 'static>(r: &Registry, m: T) -> T {
    r.register(Box::new(m.clone()))
        .expect("metric names are unique and valid");
    m
}

impl Metrics {
    /// Registers every metric. Every `idcar_*` series but `idcar_build_info` carries
    /// `layout` and `cluster` labels, so operators can aggregate many sidecars by pool; the
    /// process collector (`process_*`: memory, CPU, open descriptors) is registered beside.
    pub fn new(layout: &str, cluster: u8) -> Metrics {
        let pool_labels = [
            ("layout".to_string(), layout.to_string()),
            ("cluster".to_string(), cluster.to_string()),
        ];
        let r = Registry::new_custom(None, Some(pool_labels.into_iter().collect()))
            .expect("valid constant labels");
        let process = Registry::new();
        let build = reg(
            &process,
            IntGaugeVec::new(
                Opts::new("idcar_build_info", "The version of this idcar (always 1)"),
                &["version"],
            )
            .unwrap(),
        );
        build.with_label_values(&[env!("CARGO_PKG_VERSION")]).set(1);
        #[cfg(target_os = "linux")]
        process
            .register(Box::new(
                prometheus::process_collector::ProcessCollector::for_self(),
            ))
            .expect("the process collector registers once");
        let latency_buckets = vec![
            10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3,
            0.1, 0.25, 0.5, 1.0, 2.5,
        ];
        let requests = reg(
            &r,
            IntCounterVec::new(
                Opts::new(
                    "idcar_requests_total",
                    "Requests served, by interface and outcome",
                ),
                &["interface", "outcome"],
            )
            .unwrap(),
        );
        let latency = reg(
            &r,
            HistogramVec::new(
                HistogramOpts::new(
                    "idcar_request_duration_seconds",
                    "Time from a request's arrival to its response, by interface",
                )
                .buckets(latency_buckets),
                &["interface"],
            )
            .unwrap(),
        );
        let m = Metrics {
            ids_issued: reg(
                &r,
                IntCounter::new("idcar_ids_issued_total", "IDs handed out to clients").unwrap(),
            ),
            requests: std::array::from_fn(|i| {
                std::array::from_fn(|o| {
                    requests
                        .with_label_values(&[Interface::ALL[i].label(), Outcome::ALL[o].label()])
                })
            }),
            latency: std::array::from_fn(|i| {
                latency.with_label_values(&[Interface::ALL[i].label()])
            }),
            batch_size: reg(
                &r,
                Histogram::with_opts(
                    HistogramOpts::new("idcar_batch_size", "IDs asked for per request")
                        .buckets(vec![1.0, 2.0, 8.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0]),
                )
                .unwrap(),
            ),
            sequence_waits: reg(
                &r,
                IntCounter::new(
                    "idcar_sequence_exhausted_waits_total",
                    "Times a tick's sequence was spent and a request waited for the next tick",
                )
                .unwrap(),
            ),
            sequence_overflow_ticks: reg(
                &r,
                IntCounter::new(
                    "idcar_sequence_overflow_ticks_total",
                    "Ticks whose sequence range was spent while requests still wanted IDs (sequence overflow: demand above the layout's capacity per tick)",
                )
                .unwrap(),
            ),
            clock_regressions: reg(
                &r,
                IntCounter::new(
                    "idcar_clock_regressions_total",
                    "Times the wall clock was seen stepping back behind the last issued time",
                )
                .unwrap(),
            ),
            refusals: reg(
                &r,
                IntCounterVec::new(
                    Opts::new(
                        "idcar_refusals_total",
                        "Requests refused for lack of a usable lease, by reason",
                    ),
                    &["reason"],
                )
                .unwrap(),
            ),
            lease_held: reg(
                &r,
                IntGauge::new("idcar_lease_held", "1 while a valid lease is held, else 0").unwrap(),
            ),
            lease_slot: reg(
                &r,
                IntGauge::new(
                    "idcar_lease_slot",
                    "The generator ID (slot) held, or -1 when none is held",
                )
                .unwrap(),
            ),
            lease_remaining_seconds: reg(
                &r,
                prometheus::Gauge::new(
                    "idcar_lease_remaining_seconds",
                    "Seconds until the lease's time mark; IDs stop when it reaches 0",
                )
                .unwrap(),
            ),
            lease_renewals: reg(
                &r,
                IntCounterVec::new(
                    Opts::new(
                        "idcar_lease_renewals_total",
                        "Lease mark renewals, by result",
                    ),
                    &["result"],
                )
                .unwrap(),
            ),
            lease_mark_wait_seconds: reg(
                &r,
                Histogram::with_opts(
                    HistogramOpts::new(
                        "idcar_lease_mark_wait_seconds",
                        "Time waited after a claim for the clock to pass the slot's mark",
                    )
                    .buckets(vec![0.0, 0.001, 0.01, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0]),
                )
                .unwrap(),
            ),
            connections: reg(
                &r,
                IntGaugeVec::new(
                    Opts::new(
                        "idcar_open_connections",
                        "Open client connections on the socket, from accept to close, by interface \
                         (pending: accepted, protocol not known yet)",
                    ),
                    &["interface"],
                )
                .unwrap(),
            ),
            connections_closed: reg(
                &r,
                IntCounterVec::new(
                    Opts::new(
                        "idcar_connections_closed_total",
                        "Connections idcar closed, by listener and reason: a deadline passed \
                         (idle, slow_request, slow_reader) or a newer admin connection evicted it",
                    ),
                    &["listener", "reason"],
                )
                .unwrap(),
            ),
            pool_size: reg(
                &r,
                IntGauge::new("idcar_pool_size", "Slots this instance may claim in its cluster").unwrap(),
            ),
            pool_held: reg(
                &r,
                IntGauge::new(
                    "idcar_pool_slots_held",
                    "Slots held in this cluster by any instance (ZooKeeper mode)",
                )
                .unwrap(),
            ),
            pool_waiting: reg(
                &r,
                IntGauge::new(
                    "idcar_pool_contenders_waiting",
                    "Instances queued for a slot in this cluster (ZooKeeper mode)",
                )
                .unwrap(),
            ),
            pool_exhausted: reg(
                &r,
                IntGauge::new(
                    "idcar_pool_exhausted",
                    "1 while this instance waits for a slot because every slot is held",
                )
                .unwrap(),
            ),
            lease_claims: reg(
                &r,
                IntCounter::new("idcar_lease_claims_total", "Slots claimed").unwrap(),
            ),
            lease_losses: reg(
                &r,
                IntCounterVec::new(
                    Opts::new("idcar_lease_losses_total", "Leases lost, by reason"),
                    &["reason"],
                )
                .unwrap(),
            ),
            lease_claim_seconds: reg(
                &r,
                Histogram::with_opts(
                    HistogramOpts::new(
                        "idcar_lease_claim_duration_seconds",
                        "Time from joining the queue to holding a slot node",
                    )
                    .buckets(vec![0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 60.0]),
                )
                .unwrap(),
            ),
            lease_renewal_seconds: reg(
                &r,
                Histogram::with_opts(
                    HistogramOpts::new(
                        "idcar_lease_renewal_duration_seconds",
                        "Time taken by one write of the lease's time mark",
                    )
                    .buckets(vec![0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0, 5.0]),
                )
                .unwrap(),
            ),
            zk_session_state: reg(
                &r,
                IntGaugeVec::new(
                    Opts::new("idcar_zk_session_state", "1 for the ZooKeeper session's current state"),
                    &["state"],
                )
                .unwrap(),
            ),
            zk_reconnects: reg(
                &r,
                IntCounter::new(
                    "idcar_zk_reconnects_total",
                    "ZooKeeper reconnections: a session resumed after a disconnect, or a new session",
                )
                .unwrap(),
            ),
            registry: r,
            process,
        };
        for reason in LOSS_REASONS {
            m.lease_losses.with_label_values(&[reason]);
        }
        // Every labelled series exists from the start, so alerts see zeros, not gaps.
        for reason in REFUSAL_REASONS {
            m.refusals.with_label_values(&[reason]);
        }
        m.lease_slot.set(-1);
        for i in ["pending", "http", "binary"] {
            m.connections.with_label_values(&[i]);
        }
        for reason in &CLOSE_REASONS[..3] {
            m.connections_closed.with_label_values(&["socket", reason]);
        }
        for reason in CLOSE_REASONS {
            m.connections_closed.with_label_values(&["admin", reason]);
        }
        for state in SESSION_STATES {
            m.zk_session_state.with_label_values(&[state]);
        }
        for result in ["ok", "error"] {
            m.lease_renewals.with_label_values(&[result]);
        }
        m
    }

    /// Sets `idcar_zk_session_state` to `state` (one of [`SESSION_STATES`]).
    pub fn session_state(&self, state: &str) {
        for s in SESSION_STATES {
            self.zk_session_state
                .with_label_values(&[s])
                .set(i64::from(s == state));
        }
    }

    /// Counts a connection idcar closed (`reason` one of [`CLOSE_REASONS`]).
    pub fn connection_closed(&self, l: Listener, reason: &str) {
        self.connections_closed
            .with_label_values(&[l.label(), reason])
            .inc();
    }

    pub fn connections_closed(&self, l: Listener, reason: &str) -> u64 {
        self.connections_closed
            .with_label_values(&[l.label(), reason])
            .get()
    }

    /// Records one finished request.
    pub fn request(&self, i: Interface, o: Outcome, seconds: f64) {
        self.requests[i as usize][o as usize].inc();
        self.latency[i as usize].observe(seconds);
    }

    pub fn requests(&self, i: Interface, o: Outcome) -> u64 {
        self.requests[i as usize][o as usize].get()
    }

    /// The registry in Prometheus text exposition format.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        TextEncoder::new()
            .encode(&self.process.gather(), &mut buf)
            .and_then(|()| TextEncoder::new().encode(&self.registry.gather(), &mut buf))
            .expect("text encoding of gathered metrics cannot fail");
        String::from_utf8(buf).expect("Prometheus text format is UTF-8")
    }
}
