//! Every Prometheus metric idcar exports, registered once in one typed struct.
//!
//! Hot-path metrics (what every request records) are resolved to their label values at
//! start-up and sharded per thread ([`HotCounter`], [`HotHistogram`]), so recording one is an
//! uncontended atomic add on a cache line no other core is writing. Names follow Prometheus conventions: `idcar_` prefix, `_total` for counters,
//! seconds and bytes as base units.

use prometheus::{
    Encoder, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};

mod hot;
pub use hot::{HotCounter, HotHistogram};
use idcar_lease::metrics::Reg;
pub use idcar_lease::metrics::{LeaseMetrics, LOSS_REASONS, SESSION_STATES};
use std::sync::Arc;

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
    pub ids_issued: HotCounter,
    /// `idcar_requests_total` resolved per `[interface][outcome]`.
    requests: [[HotCounter; 4]; 2],
    /// `idcar_request_duration_seconds` resolved per interface.
    latency: [HotHistogram; 2],
    pub batch_size: HotHistogram,
    pub sequence_waits: IntCounter,
    pub sequence_overflow_ticks: IntCounter,
    pub clock_regressions: IntCounter,
    /// 1 while a clock is found stalled, by `clock` (`wall`, `monotonic`).
    pub clock_stalled: IntGaugeVec,
    pub refusals: IntCounterVec,
    /// The lease's, the pool's, the ZooKeeper session's and etcd's metrics (registered in
    /// the same registry).
    pub lease: Arc<LeaseMetrics>,
    pub connections: IntGaugeVec,
    connections_closed: IntCounterVec,
    /// Slots this instance holds at once (`--slots`).
    pub slots_wanted: IntGauge,
    /// Slots this instance holds and may issue from now.
    pub slots_held: IntGauge,
    /// Seconds until each held slot's mark, by `slot` (set when scraped).
    pub slot_remaining_seconds: prometheus::GaugeVec,
    /// Seconds until the layout's time field runs out (set when scraped).
    pub layout_seconds_remaining: prometheus::Gauge,
}

/// Why a request was refused, as counted in `idcar_refusals_total{reason}`.
pub const REFUSAL_REASONS: [&str; 5] = [
    "no_lease",
    "mark_reached",
    "clock_behind",
    "time_overflow",
    "timed_out",
];

/// A hot-path metric just built and registered by its own constructor: its names and labels
/// are fixed in the code, so a failure is a programming error, reported here.
fn hot<T>(m: prometheus::Result<T>) -> T {
    m.expect("metric names, help and labels are valid and unique")
}

const LATENCY_BUCKETS: [f64; 17] = [
    10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 0.1,
    0.25, 0.5, 1.0, 2.5,
];
const BATCH_BUCKETS: [f64; 8] = [1.0, 2.0, 8.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0];
/// The series every request records, resolved at start-up: sharded, so threads on different
/// cores do not share a cache line (see `hot`).
struct PerRequest {
    requests: std::vec::IntoIter<HotCounter>,
    latency: Vec<HotHistogram>,
    hot_counter: fn(&Reg<'_>, &str, &str) -> HotCounter,
}

impl PerRequest {
    fn register(r: &Reg<'_>) -> PerRequest {
        // Recorded by every request: sharded, so threads on different cores do not share a
        // cache line (see `hot`).
        let interfaces: Vec<Vec<&str>> = Interface::ALL.iter().map(|i| vec![i.label()]).collect();
        let requests = hot(HotCounter::register(
            r.0,
            "idcar_requests_total",
            "Requests served, by interface and outcome",
            &["interface", "outcome"],
            &Interface::ALL
                .iter()
                .flat_map(|i| Outcome::ALL.iter().map(|o| vec![i.label(), o.label()]))
                .collect::<Vec<_>>(),
        ))
        .into_iter();
        let latency = hot(HotHistogram::register(
            r.0,
            "idcar_request_duration_seconds",
            "Time from a request's arrival to its response, by interface",
            (&LATENCY_BUCKETS, 1e-9),
            &["interface"],
            &interfaces,
        ));
        PerRequest {
            requests,
            latency,
            hot_counter: |r, name, help| {
                hot(HotCounter::register(r.0, name, help, &[], &[vec![]])).remove(0)
            },
        }
    }
}

/// `idcar_clock_stalled`, with both clocks' series at 0.
fn clock_stalled(r: &Reg<'_>) -> IntGaugeVec {
    let g = r.gauges(
        "idcar_clock_stalled",
        "1 while a clock is not advancing against the kernel's monotonic clock \
             (IDs cannot be timed; not ready), by clock",
        &["clock"],
    );
    for c in ["wall", "monotonic"] {
        g.with_label_values(&[c]).set(0);
    }
    g
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
        let registry = Registry::new_custom(None, Some(pool_labels.into_iter().collect()))
            .expect("valid constant labels");
        let process = Registry::new();
        let build = Reg(&process).gauges(
            "idcar_build_info",
            "The version of this idcar and the commit it was built from (always 1)",
            &["version", "commit"],
        );
        build
            .with_label_values(&[env!("CARGO_PKG_VERSION"), env!("IDCAR_COMMIT")])
            .set(1);
        #[cfg(target_os = "linux")]
        process
            .register(Box::new(
                prometheus::process_collector::ProcessCollector::for_self(),
            ))
            .expect("the process collector registers once");
        let m = Metrics::register(&Reg(&registry), registry.clone(), process);
        m.start_every_series();
        m
    }

    fn register(r: &Reg<'_>, registry: Registry, process: Registry) -> Metrics {
        let PerRequest {
            mut requests,
            latency,
            hot_counter,
        } = PerRequest::register(r);
        Metrics {
            ids_issued: hot_counter(r, "idcar_ids_issued_total", "IDs handed out to clients"),
            requests: std::array::from_fn(|_| {
                std::array::from_fn(|_| requests.next().expect("one series per pair"))
            }),
            latency: std::array::from_fn(|i| latency[i].clone()),
            batch_size: hot(HotHistogram::register(
                    r.0,
                    "idcar_batch_size",
                    "IDs asked for per request",
                    (&BATCH_BUCKETS, 1.0),
                    &[],
                    &[vec![]],
                ))
                .remove(0),
            sequence_waits: r.counter(
                "idcar_sequence_exhausted_waits_total",
                "Times a tick's sequence was spent and a request waited for the next tick",
            ),
            sequence_overflow_ticks: r.counter(
                "idcar_sequence_overflow_ticks_total",
                "Ticks whose sequence range was spent while requests still wanted IDs (sequence overflow: demand above the layout's capacity per tick)",
            ),
            clock_regressions: r.counter(
                "idcar_clock_regressions_total",
                "Times the wall clock was seen stepping back behind the last issued time",
            ),
            clock_stalled: clock_stalled(r),
            refusals: r.counters(
                "idcar_refusals_total",
                "Requests refused for lack of a usable lease, by reason",
                &["reason"],
            ),
            connections: r.gauges(
                "idcar_open_connections",
                "Open client connections on the socket, from accept to close, by interface \
                 (pending: accepted, protocol not known yet)",
                &["interface"],
            ),
            connections_closed: r.counters(
                "idcar_connections_closed_total",
                "Connections idcar closed, by listener and reason: a deadline passed \
                 (idle, slow_request, slow_reader) or a newer connection evicted it",
                &["listener", "reason"],
            ),
            slots_wanted: r.gauge(
                "idcar_lease_slots_wanted",
                "Slots this instance holds at once when the pool can give them (--slots)",
            ),
            slots_held: r.gauge(
                "idcar_lease_slots_held",
                "Slots this instance holds and may issue from now (below \
                 idcar_lease_slots_wanted while the pool cannot give them all)",
            ),
            slot_remaining_seconds: r.add(prometheus::GaugeVec::new(
                Opts::new(
                    "idcar_lease_slot_remaining_seconds",
                    "Seconds until each held slot's time mark, by slot",
                ),
                &["slot"],
            )),
            layout_seconds_remaining: r.add(prometheus::Gauge::new(
                "idcar_layout_seconds_remaining",
                "Seconds until the layout's time field runs out with its parameters (no ID \
                 can be issued after that)",
            )),
            lease: Arc::new(LeaseMetrics::register(r.0)),
            registry,
            process,
        }
    }

    /// Every labelled series exists from the start, so alerts see zeros, not gaps.
    fn start_every_series(&self) {
        for reason in REFUSAL_REASONS {
            self.refusals.with_label_values(&[reason]);
        }
        for i in ["pending", "http", "binary"] {
            self.connections.with_label_values(&[i]);
        }
        for reason in &CLOSE_REASONS[..3] {
            self.connections_closed
                .with_label_values(&["socket", reason]);
        }
        for reason in CLOSE_REASONS {
            self.connections_closed
                .with_label_values(&["admin", reason]);
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
