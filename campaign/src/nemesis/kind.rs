//! The kinds of fault the nemesis draws from, and a fault as it happened (what the checker
//! judges the history against).

/// The kinds of fault, by their flag names.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, clap::ValueEnum, serde::Serialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Cut one sidecar from every ZooKeeper server (silent drops).
    Partition,
    /// Cut one ZooKeeper server (and up to two sidecars) from the rest.
    Split,
    /// kill -9 a sidecar, restart it.
    Kill,
    /// SIGSTOP a sidecar past its session timeout, then SIGCONT.
    Stop,
    /// kill -9 the ZooKeeper leader, restart it.
    Leader,
    /// kill -9 every ZooKeeper server, restart them.
    Outage,
    /// Restart a sidecar with its clock stepped ±3 s (libfaketime), later restart it true.
    Clock,
    /// SIGTERM a sidecar (graceful hand-over), restart it.
    Term,
    /// A CPU-saturating process beside the sidecars for tens of seconds.
    Busy,
    /// An operator deletes the pool's `params` (a parameter change, a restore's procedure):
    /// every holder stops and the pool records a new identity.
    Params,
    /// An operator lowers a held slot's mark by 10 s, or deletes it: its holder writes it back;
    /// or its holder is killed at once, and its successor's floor comes from the witness.
    Mark,
    /// Restart a sidecar with a panic planted in a request handler or on the lease thread: it
    /// aborts, and is restarted plain.
    Panic,
    /// Restart a sidecar with a longer --lease-horizon and --max-clock-wait than the others
    /// (an instance that disagrees), later restart it plain (SIGTERM).
    Disagree,
    /// Cut a sidecar from the store and SIGTERM it: its release times out (`--shutdown-grace`);
    /// the cut healed near the end of the grace, then it is restarted.
    Release,
    /// Restore the store from a snapshot taken during an earlier outage, by the documented
    /// procedure: every sidecar frozen, the store's data replaced and the store restarted,
    /// `params` deleted, the sidecars thawed.
    Restore,
    /// Restart a sidecar so that it drops its leases' release handles without a release a
    /// few seconds later, living on until its shutdown grace ends (what an unwinding panic
    /// would do; `--plant-panic abandon:..`), then restart it plain.
    Abandon,
    /// An operator changes the pool's parameters: `params` deleted and recreated with other
    /// ones (see `procs::Reconfig`), one sidecar restarted with them; the others stop and
    /// disagree. Healed by restarting it plain and deleting `params` again.
    Reconfigure,
    /// A static instance (a state file, generator = the pool's size + 1: outside the pool, even one a reconfigure made larger) is
    /// started beside the sidecars; an operator deletes its lock file and starts a second one
    /// on the same state file, which must be refused while the first serves on.
    Lock,
    /// SIGSTOP every store node past the sidecars' session timeout (etcd: lease TTL), then
    /// SIGCONT: the store comes back with every session expired.
    Freeze,
    /// etcd only: compact the store's history at its current revision (watches of older
    /// revisions are cancelled).
    Compact,
    /// In the full pool (every slot held, nobody waiting, each holder checked to serve):
    /// kill -9 a holder and start its replacement at once.
    FullKill,
    /// A sidecar moved between idcar versions (`--previous-idcar`): a graceful restart on the
    /// other binary. Scheduled by the campaign, never drawn.
    #[value(skip)]
    Upgrade,
}

impl Kind {
    pub const ALL: [Kind; 21] = [
        Kind::Partition,
        Kind::Split,
        Kind::Kill,
        Kind::Stop,
        Kind::Leader,
        Kind::Outage,
        Kind::Clock,
        Kind::Term,
        Kind::Busy,
        Kind::Params,
        Kind::Mark,
        Kind::Panic,
        Kind::Disagree,
        Kind::Release,
        Kind::Restore,
        Kind::Abandon,
        Kind::Reconfigure,
        Kind::Lock,
        Kind::Freeze,
        Kind::Compact,
        Kind::FullKill,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Partition => "partition",
            Kind::Split => "split",
            Kind::Kill => "kill",
            Kind::Stop => "stop",
            Kind::Leader => "leader",
            Kind::Outage => "outage",
            Kind::Clock => "clock",
            Kind::Term => "term",
            Kind::Busy => "busy",
            Kind::Params => "params",
            Kind::Mark => "mark",
            Kind::Panic => "panic",
            Kind::Disagree => "disagree",
            Kind::Release => "release",
            Kind::Restore => "restore",
            Kind::Abandon => "abandon",
            Kind::Reconfigure => "reconfigure",
            Kind::Lock => "lock",
            Kind::Freeze => "freeze",
            Kind::Compact => "compact",
            Kind::FullKill => "full-kill",
            Kind::Upgrade => "upgrade",
        }
    }

    /// At most one of these at a time. An operator's fault on the store counts too: a lowered
    /// mark is written back by a holder that can reach the store, so it never overlaps a fault
    /// that could cost its holder the session before then (outage, split, busy neighbour).
    pub fn ensemble(self) -> bool {
        matches!(
            self,
            Kind::Split
                | Kind::Leader
                | Kind::Outage
                | Kind::Freeze
                | Kind::Compact
                | Kind::Params
                | Kind::Mark
                | Kind::Restore
                | Kind::Reconfigure
        )
    }

    /// Whether the fault may cost any sidecar its lease, not only the one it targets: an
    /// outage or a freeze, the busy neighbour, and a split (a silent cut of a server costs the
    /// clients connected to it their session when the session timeout is short: see
    /// docs/zookeeper.md#bounds; which sidecars those were, the campaign does not know). A
    /// compaction must cost none: it counts here so that the availability check, which holds
    /// it to that, judges the holders around it, not the check of untouched holders.
    pub fn touches_all(self) -> bool {
        matches!(
            self,
            Kind::Outage
                | Kind::Freeze
                | Kind::Compact
                | Kind::Busy
                | Kind::Split
                | Kind::Params
                | Kind::Restore
                | Kind::Reconfigure
        )
    }
}

/// A fault as it happened.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Fault {
    pub kind: Kind,
    /// The sidecar it targets.
    pub sidecar: Option<usize>,
    /// The ZooKeeper server it targets (1-based as in `myid`).
    pub zk: Option<usize>,
    /// Sidecars on the minority side of a split.
    pub minority: Vec<usize>,
    /// What an operator's fault did (the store-op's word), or how a sidecar was restarted.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub did: String,
    pub skew_s: i64,
    /// Taken just before the action.
    pub start_ns: u64,
    /// When the action was done (a cut in force: a write that completed before it was the
    /// holder's last; 0 if not recorded).
    pub in_force_ns: u64,
    pub end_ns: u64,
    /// When the store first answered a probe after the fault healed (a freeze, an outage):
    /// what the availability bounds count from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answered_ns: Option<u64>,
}

impl Fault {
    /// Whether sidecar `s` is in this fault's reach.
    pub fn touches(&self, s: usize) -> bool {
        self.kind.touches_all() || self.sidecar == Some(s) || self.minority.contains(&s)
    }
}
