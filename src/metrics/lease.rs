//! The lease's metrics (every kind of lease), the ZooKeeper session's and etcd's leases.

use super::Reg;
use prometheus::{Histogram, IntCounter, IntCounterVec, IntGauge, IntGaugeVec};

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

impl LeaseMetrics {
    pub(super) fn register(r: &Reg<'_>) -> LeaseMetrics {
        LeaseMetrics {
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
}
