//! The campaign's command line.

use crate::nemesis::Kind;
use crate::procs;
use clap::builder::TypedValueParser as _;
use clap::Parser;
use idcar_lease::planted::PlantedBug;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    about = "Randomized fault campaign against idcar sidecars and their store (ZooKeeper or etcd)"
)]
pub struct Args {
    /// Seed of the nemesis and the clients (printed; the same seed replays the same choices).
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// How long faults are injected (healing and the final checks come after).
    #[arg(long, default_value = "90s", value_parser = humantime::parse_duration)]
    pub(crate) duration: Duration,
    /// Sidecars, each in its own network namespace.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(2..=40))]
    pub(crate) sidecars: u32,
    /// Slots in the pool (fewer than sidecars, so some always wait in the queue).
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub(crate) pool_size: u32,
    /// Slots each sidecar holds at once (`idcar serve --slots`).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=8))]
    pub(crate) slots: u32,
    /// Sidecars in an idle pool beside the main one, in a tree of its own in the same store:
    /// two slots more than sidecars, so nobody ever waits and marks reach the idle horizon
    /// (0: none).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(0..=8))]
    pub(crate) idle_pool: u32,
    /// Sidecars in a full pool beside the main one, in a tree of its own: as many slots as
    /// sidecars, every slot held and nobody waiting (the full-kill fault's pool; 0: none).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(0..=8))]
    pub(crate) full_pool: u32,
    /// The ID layout (default parameters).
    #[arg(long, default_value = "lable64")]
    pub(crate) layout: String,
    /// Fault kinds to draw from, comma-separated (default: all).
    #[arg(long, value_delimiter = ',', value_enum)]
    pub(crate) faults: Vec<Kind>,
    /// Mean time between two faults starting (exponential gaps; faults overlap).
    #[arg(long, default_value = "4s", value_parser = humantime::parse_duration)]
    pub(crate) fault_interval: Duration,
    /// The store the pool lives in: a 3-node ZooKeeper ensemble, a 3-member etcd cluster, or
    /// Lease objects through a Kubernetes API server on such an etcd cluster.
    #[arg(long, value_enum, default_value_t = procs::Store::Zookeeper)]
    pub(crate) store: procs::Store,
    /// The sidecars' --zk-session-timeout (with --store etcd: their --etcd-ttl, whole seconds,
    /// at least 2; with --store kubernetes: their --kube-ttl, whole seconds, at least 5).
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    pub(crate) zk_session_timeout: Duration,
    /// The sidecars' --lease-horizon (longer than the session timeout, so that the mark,
    /// not the session, is what fences a cut-off holder).
    #[arg(long, default_value = "4s", value_parser = humantime::parse_duration)]
    pub(crate) lease_horizon: Duration,
    /// The sidecars' --idle-horizon (idcar's default): how far ahead a mark reaches while no one
    /// waits for a slot.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub(crate) idle_horizon: Duration,
    /// The sidecars' --renew-interval.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    pub(crate) renew_interval: Duration,
    /// Run the sidecars with a deliberate lease bug (the checker must catch it).
    #[arg(
        long,
        default_value = "none",
        value_parser = clap::builder::PossibleValuesParser::new(PlantedBug::names())
            .map(|s| s.parse::<PlantedBug>().expect("a name it lists")),
    )]
    pub(crate) plant_bug: PlantedBug,
    /// Pause of each binary client between requests (HTTP clients pause 10 times longer).
    #[arg(long, default_value = "2ms", value_parser = humantime::parse_duration)]
    pub(crate) pace: Duration,
    /// The idcar binary (default: the one built beside this one).
    #[arg(long)]
    pub(crate) idcar: Option<PathBuf>,
    /// The previous version's idcar binary (built with the fault-injection feature): every
    /// sidecar starts on it, the pool is upgraded to `--idcar` one sidecar at a time (SIGTERM,
    /// started again on the new binary) and rolled back the same way, while faults go on; the
    /// checker judges the whole history (docs/campaign.md).
    #[arg(long)]
    pub(crate) previous_idcar: Option<PathBuf>,
    /// Where logs, sockets and the report go (default target/campaign/seed-SEED).
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    /// Also write the whole history (every request with its IDs) to history.jsonl there.
    #[arg(long)]
    pub(crate) save_history: bool,
}
