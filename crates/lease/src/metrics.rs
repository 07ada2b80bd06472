//! The lease's metrics (every kind of lease), the pool's, the ZooKeeper session's and etcd's
//! leases: registered in the registry the process exports (the server's, with its `layout` and
//! `cluster` labels), or in one of their own for a test or a benchmark.

use prometheus::{
    Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// The lease's metrics (every kind of lease), the ZooKeeper session's and etcd's leases.
#[derive(Debug)]
pub struct LeaseMetrics {
    pub held: IntGauge,
    pub slot: IntGauge,
    pub remaining_seconds: prometheus::Gauge,
    pub renewals: IntCounterVec,
    pub mark_wait_seconds: Histogram,
    pub claims: IntCounter,
    pub losses: IntCounterVec,
    pub marks_restored: IntCounter,
    pub claim_seconds: Histogram,
    pub renewal_seconds: Histogram,
    pub renewal_headroom: Histogram,
    pub renewals_late: IntCounter,
    pub zk_session_state: IntGaugeVec,
    pub zk_reconnects: IntCounter,
    pub etcd_leases: IntCounter,
    /// Slots this instance may negotiate (ZooKeeper mode).
    pub pool_size: IntGauge,
    /// Slots held in this cluster, by anyone (from a watch on `slots/`).
    pub pool_held: IntGauge,
    /// Contenders queued for a slot in this cluster (children of `queue/`).
    pub pool_waiting: IntGauge,
    /// 1 while this instance waits at the head of the queue with every slot held (set
    /// through [`LeaseMetrics::set_pool_exhausted`]).
    pub pool_exhausted: IntGauge,
    /// The leases (bits by [`crate::Part`] index) that wait with every slot held.
    exhausted_parts: AtomicU64,
    /// Each lease's ZooKeeper session state, by part.
    session_states: Mutex<BTreeMap<u32, &'static str>>,
}

/// The ZooKeeper session states reported by `idcar_zk_session_state{state}`.
pub const SESSION_STATES: [&str; 5] = [
    "connected",
    "disconnected",
    "expired",
    "closed",
    "auth_failed",
];

/// Why a lease was lost, as counted in `idcar_lease_losses_total{reason}`: the ZooKeeper
/// session expired, another holder wrote the mark (stolen), the mark ran out because its
/// store (ZooKeeper, or a static lease's state file) could not be written (unreachable), or
/// the pool's recorded parameters were deleted or recreated under the holder (replaced).
pub const LOSS_REASONS: [&str; 4] = ["expired", "stolen", "unreachable", "replaced"];

const HEADROOM_BUCKETS: [f64; 12] = [
    0.0, 0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 5.0, 10.0, 30.0,
];
const MARK_WAIT_BUCKETS: [f64; 10] = [0.0, 0.001, 0.01, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];
const CLAIM_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 60.0,
];
const WRITE_BUCKETS: [f64; 11] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0, 5.0,
];

/// Registers metrics in one registry; names and label sets are fixed in the code, so a
/// failure here is a programming error, reported once, here. The server registers its own
/// metrics with it too.
pub struct Reg<'a>(pub &'a Registry);

impl Reg<'_> {
    /// Registers `m` (a metric just built).
    pub fn add<T: prometheus::core::Collector + Clone + 'static>(
        &self,
        m: prometheus::Result<T>,
    ) -> T {
        let m = m.expect("metric names, help and labels are valid");
        self.0
            .register(Box::new(m.clone()))
            .expect("metric names are unique");
        m
    }
    pub fn counter(&self, name: &str, help: &str) -> IntCounter {
        self.add(IntCounter::new(name, help))
    }
    pub fn counters(&self, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
        self.add(IntCounterVec::new(Opts::new(name, help), labels))
    }
    pub fn gauge(&self, name: &str, help: &str) -> IntGauge {
        self.add(IntGauge::new(name, help))
    }
    pub fn gauges(&self, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
        self.add(IntGaugeVec::new(Opts::new(name, help), labels))
    }
    pub fn histogram(&self, name: &str, help: &str, buckets: &[f64]) -> Histogram {
        self.add(Histogram::with_opts(
            HistogramOpts::new(name, help).buckets(buckets.to_vec()),
        ))
    }
}

impl Default for LeaseMetrics {
    fn default() -> LeaseMetrics {
        LeaseMetrics::new()
    }
}

impl LeaseMetrics {
    /// The lease's metrics in a registry of their own (tests, benchmarks).
    pub fn new() -> LeaseMetrics {
        LeaseMetrics::register(&Registry::new())
    }

    /// Registers the lease's metrics in `registry`, every labelled series started at zero so
    /// alerts see zeros, not gaps.
    pub fn register(registry: &Registry) -> LeaseMetrics {
        let m = LeaseMetrics::register_in(&Reg(registry));
        for reason in LOSS_REASONS {
            m.losses.with_label_values(&[reason]);
        }
        m.slot.set(-1);
        for state in SESSION_STATES {
            m.zk_session_state.with_label_values(&[state]);
        }
        for result in ["ok", "error"] {
            m.renewals.with_label_values(&[result]);
        }
        m
    }

    fn register_in(r: &Reg<'_>) -> LeaseMetrics {
        let [pool_size, pool_held, pool_waiting, pool_exhausted] = pool_gauges(r);
        LeaseMetrics {
            pool_size,
            pool_held,
            pool_waiting,
            pool_exhausted,
            exhausted_parts: AtomicU64::new(0),
            session_states: Mutex::new(BTreeMap::new()),
            held: r.gauge("idcar_lease_held", "1 while a valid lease is held, else 0"),
            slot: r.gauge(
                "idcar_lease_slot",
                "The generator ID (slot) held, or -1 when none is held",
            ),
            remaining_seconds: r.add(prometheus::Gauge::new(
                "idcar_lease_remaining_seconds",
                "Seconds until the lease's time mark; IDs stop when it reaches 0",
            )),
            renewals: r.counters(
                "idcar_lease_renewals_total",
                "Lease mark renewals, by result",
                &["result"],
            ),
            mark_wait_seconds: r.histogram(
                "idcar_lease_mark_wait_seconds",
                "Time waited after a claim for the clock to pass the slot's mark",
                &MARK_WAIT_BUCKETS,
            ),
            claims: r.counter("idcar_lease_claims_total", "Slots claimed"),
            losses: r.counters(
                "idcar_lease_losses_total",
                "Leases lost, by reason",
                &["reason"],
            ),
            marks_restored: r.counter(
                "idcar_lease_marks_restored_total",
                "Times this holder found its slot's time mark (or its witness) lowered or deleted \
                 by someone else (an operator, a script, a store restored from a snapshot) while the slot was \
                 still its own, and wrote it back up before anything else",
            ),
            claim_seconds: r.histogram(
                "idcar_lease_claim_duration_seconds",
                "Time from joining the queue to holding a slot node",
                &CLAIM_BUCKETS,
            ),
            renewal_seconds: r.histogram(
                "idcar_lease_renewal_duration_seconds",
                "Time taken by one write of the lease's time mark",
                &WRITE_BUCKETS,
            ),
            renewal_headroom: r.histogram(
                "idcar_lease_renewal_headroom_seconds",
                "What was left of the lease's time mark when a renewal landed (how close IDs \
                 came to stopping)",
                &HEADROOM_BUCKETS,
            ),
            renewals_late: r.counter(
                "idcar_lease_renewals_late_total",
                "Renewals that landed with less than a third of the lease horizon left of the \
                 mark (a starved node or a slow store; IDs stop if one lands too late)",
            ),
            zk_session_state: r.gauges(
                "idcar_zk_session_state",
                "1 for the ZooKeeper session's current state",
                &["state"],
            ),
            zk_reconnects: r.counter(
                "idcar_zk_reconnects_total",
                "ZooKeeper reconnections: a session resumed after a disconnect, or a new session",
            ),
            etcd_leases: r.counter(
                "idcar_etcd_leases_total",
                "etcd leases granted to this instance: one at start, and one more each time the \
                 last one ended (etcd said it expired, or etcd refused us mid-lease)",
            ),
        }
    }

    /// Sets `idcar_zk_session_state` for the session of lease `part` (see [`crate::Part`]) to
    /// `state` (one of [`SESSION_STATES`]): each state's gauge counts the instance's sessions in
    /// it (1 for the current state with one slot).
    pub fn session_state(&self, part: u32, state: &'static str) {
        let mut states = self
            .session_states
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        states.insert(part, state);
        for s in SESSION_STATES {
            let n = states.values().filter(|v| **v == s).count();
            self.zk_session_state.with_label_values(&[s]).set(n as i64);
        }
    }

    /// The leases (bits by part) that wait with every slot of the pool held.
    pub fn exhausted_parts(&self) -> u64 {
        self.exhausted_parts.load(Ordering::Acquire)
    }

    /// Sets whether lease `part` waits for a slot with every slot of the pool held:
    /// `idcar_pool_exhausted` is 1 while any of the instance's leases does.
    pub fn set_pool_exhausted(&self, part: u32, exhausted: bool) {
        let bit = 1u64 << (part % 64);
        let was = if exhausted {
            self.exhausted_parts.fetch_or(bit, Ordering::AcqRel) | bit
        } else {
            self.exhausted_parts.fetch_and(!bit, Ordering::AcqRel) & !bit
        };
        self.pool_exhausted.set(i64::from(was != 0));
    }
}

/// `idcar_pool_size`, `_slots_held`, `_contenders_waiting` and `_exhausted`, in that order.
fn pool_gauges(r: &Reg<'_>) -> [IntGauge; 4] {
    [
        r.gauge(
            "idcar_pool_size",
            "Slots this instance may claim in its cluster",
        ),
        r.gauge(
            "idcar_pool_slots_held",
            "Slots held in this cluster by any instance (ZooKeeper mode)",
        ),
        r.gauge(
            "idcar_pool_contenders_waiting",
            "Instances queued for a slot in this cluster (ZooKeeper mode)",
        ),
        r.gauge(
            "idcar_pool_exhausted",
            "1 while this instance holds no slot and waits for one because every slot is held",
        ),
    ]
}
