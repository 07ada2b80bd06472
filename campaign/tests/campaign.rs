//! The randomized fault campaign (`idcar-campaign`, whose checker's unit tests live beside it
//! in `src/check/`), short runs: it passes on main with a
//! fixed seed (lable64) and a random one (sno80), with etcd as the store (uuid7, in order) and
//! with Kubernetes (sidecars cut from the API server, the control plane down), every kind of
//! fault drawn (the operator's faults on the store, planted panics, a release that times out
//! and instances that disagree among them), and it catches the lease bugs planted behind the
//! `fault-injection` feature (one with etcd too): a successor that skips the mark, a renewal
//! that stores a lower one, a holder that does not write a lowered mark back, an abandoned
//! release that writes the floor, a pool that ignores its identity. The runs that must pass
//! have an idle pool and a full pool beside the main one (the store frozen past the sessions,
//! its history compacted with etcd, and a full pool's holder replaced are among the faults
//! drawn, each held to its availability bound); those with a planted bug the main pool alone,
//! where successors take slots over. Each run is 30 to 40 s; they run one at a
//! time. Needs root (network namespaces, nftables), as CI has: see docs/campaign.md. They run the
//! `idcar` binary built beside the campaign's with the testing aids, as the workspace's
//! `cargo test` builds it (alone: `cargo build --features fault-injection --bin idcar` first).

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

/// One campaign at a time: each saturates the machine on its own.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn campaign_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_idcar-campaign"))
}

/// The `idcar` binary built beside the campaign's (the campaign checks it carries the testing
/// aids, and says how to build it if not).
fn idcar_bin() -> PathBuf {
    campaign_bin().with_file_name("idcar")
}

/// Runs a campaign; its exit code and report.
fn campaign(args: &[&str]) -> (i32, Value) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let out = tempfile::tempdir().expect("temporary directory");
    let status = Command::new(campaign_bin())
        .args(args)
        .arg("--idcar")
        .arg(idcar_bin())
        .arg("--out")
        .arg(out.path())
        .status()
        .expect("campaign runs");
    let code = status.code().unwrap_or(-1);
    assert_ne!(code, 2, "the campaign could not run (see its error above)");
    let report = std::fs::read_to_string(out.path().join("report.json"))
        .unwrap_or_else(|e| panic!("no report ({e}); exit {code}"));
    (code, serde_json::from_str(&report).expect("report is JSON"))
}

fn num(r: &Value, key: &str) -> u64 {
    r[key]
        .as_u64()
        .unwrap_or_else(|| panic!("report lacks {key}"))
}

/// What every finished run shows: load in both protocols, faults of several kinds.
fn ran_for_real(r: &Value) {
    assert!(num(r, "ids_checked") > 50_000, "too few IDs: {r:#}");
    assert!(num(&r["requests"], "binary") > 1_000);
    assert!(num(&r["requests"], "http") > 100);
    let kinds = r["faults_by_kind"].as_object().expect("faults by kind");
    assert!(kinds.len() >= 2, "too few kinds of fault: {kinds:?}");
}

/// The pools a run had, by name.
fn pools(r: &Value) -> Vec<&str> {
    r["pools"]
        .as_array()
        .expect("pools")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect()
}

/// Runs a campaign that must pass; its report.
fn passes(args: &[&str]) -> Value {
    let (code, r) = campaign(args);
    assert_eq!(
        (code, r["verdict"].as_str()),
        (0, Some("pass")),
        "violations: {:#}",
        r["violations"]
    );
    assert_eq!(num(&r, "duplicates"), 0);
    assert_eq!(r["liveness"]["passed"], Value::Bool(true));
    ran_for_real(&r);
    assert_eq!(pools(&r), ["main", "idle", "full"]);
    r
}

/// A short run (`duration`) with the planted `bug`, drawing faults from `faults` (those that
/// reach the bug: a successor taking a slot over, an operator lowering a mark), twice as often
/// as by default, so that a short run sees several. The main pool
/// alone: in the idle and full pools no successor waits to take a slot over, so faults drawn
/// there would only dilute those that reach the bug.
fn catches(bug: &str, duration: &str, faults: &str, extra: &[&str]) {
    catches_every(bug, duration, "2s", faults, extra)
}

/// As [`catches`], with faults starting `every` so often on average.
fn catches_every(bug: &str, duration: &str, every: &str, faults: &str, extra: &[&str]) {
    let mut args = vec![
        "--seed",
        "7",
        "--duration",
        duration,
        "--faults",
        faults,
        "--fault-interval",
        every,
        "--plant-bug",
        bug,
        "--idle-pool",
        "0",
        "--full-pool",
        "0",
    ];
    args.extend_from_slice(extra);
    let (code, r) = campaign(&args);
    assert_eq!(code, 1, "the planted bug {bug} went unnoticed: {r:#}");
    assert_eq!(r["verdict"], "fail");
    let checks: Vec<&str> = r["violations"]
        .as_array()
        .expect("violations")
        .iter()
        .filter_map(|v| v["check"].as_str())
        .collect();
    assert!(
        checks.iter().any(|c| c.starts_with("fence")) || num(&r, "duplicates") > 0,
        "{bug}: expected fence violations or duplicates, got {checks:?}"
    );
    println!(
        "{bug}: {} duplicates; violations {checks:?}",
        num(&r, "duplicates")
    );
    ran_for_real(&r);
}

/// Also a rolling upgrade and rollback: every sidecar starts on the "previous" binary (here
/// the same build: the machinery is what is tested; a real previous release is a documented
/// long run), is moved to this one and back, one at a time, under faults.
#[test]
fn lable64_campaign_with_a_fixed_seed_and_an_upgrade_and_rollback_passes() {
    let previous = idcar_bin();
    let r = passes(&[
        "--seed",
        "7",
        "--duration",
        "30s",
        "--previous-idcar",
        previous.to_str().unwrap(),
    ]);
    for v in ["previous", "this"] {
        assert!(
            num(&r["versions"][v], "ids") > 1_000,
            "{v}: {:#}",
            r["versions"]
        );
    }
    let moved = |how: &str| {
        r["incarnations"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["ended_by"].as_str().is_some_and(|e| e.contains(how)))
            .count()
    };
    assert!(moved("(upgrade)") >= 4, "{:#}", r["incarnations"]);
    assert!(moved("(rollback)") >= 4, "{:#}", r["incarnations"]);
}

/// sno80 with a random seed, and two slots per sidecar (`--slots 2`): sixteen leases for eight
/// slots, each sidecar issuing under several slots and losing them one at a time.
#[test]
fn sno80_campaign_with_a_random_seed_and_two_slots_per_sidecar_passes() {
    let seed: u64 = rand::random::<u64>() % 1_000_000;
    println!("sno80 campaign seed {seed}");
    passes(&[
        "--seed",
        &seed.to_string(),
        "--duration",
        "30s",
        "--layout",
        "sno80",
        "--slots",
        "2",
        "--pool-size",
        "8",
    ]);
}

/// Takeovers: the faults after which a successor claims a slot its holder lost.
const TAKEOVERS: &str = "kill,stop,term,partition";

#[test]
fn a_successor_that_ignores_the_mark_is_caught() {
    catches("skip-mark-wait", "25s", TAKEOVERS, &[]);
}

/// With etcd as the store and the uuid7 layout, whose checker also judges order per slot.
#[test]
fn etcd_campaign_of_uuid7_with_a_fixed_seed_passes_in_order() {
    let r = passes(&[
        "--seed",
        "7",
        "--duration",
        "30s",
        "--store",
        "etcd",
        "--layout",
        "uuid7",
    ]);
    assert_eq!(r["order_checked"], Value::Bool(true));
    assert_eq!(num(&r, "order_violations"), 0);
}

/// With Lease objects through a Kubernetes API server on a control-plane node's namespace:
/// sidecars cut from it in their network namespaces, the whole control plane killed and
/// frozen, its etcd's history compacted, an operator's hands on the Lease objects, a full
/// pool's holder replaced.
#[test]
fn kubernetes_campaign_with_sidecars_cut_from_the_api_server_passes() {
    let r = passes(&[
        "--seed",
        "7",
        "--duration",
        "30s",
        "--store",
        "kubernetes",
        "--layout",
        "uuid7",
        "--fault-interval",
        "2s",
        "--faults",
        "partition,release,outage,freeze,compact,mark,params,kill,full-kill",
    ]);
    assert_eq!(r["store"], "kubernetes");
    let cut = r["faults_by_kind"]["partition"].as_u64().unwrap_or(0)
        + r["faults_by_kind"]["release"].as_u64().unwrap_or(0);
    assert!(cut >= 1, "no sidecar was cut: {:#}", r["faults_by_kind"]);
}

#[test]
fn a_successor_that_ignores_the_mark_is_caught_with_etcd() {
    catches("skip-mark-wait", "25s", TAKEOVERS, &["--store", "etcd"]);
}

#[test]
fn a_renewal_that_stores_a_lower_mark_is_caught() {
    catches("lower-mark", "25s", TAKEOVERS, &[]);
}

/// An operator lowers or deletes a held slot's mark (the `mark` fault): a holder that gave the
/// slot up instead of writing the mark back hands its successor a floor below its own ticks.
#[test]
fn a_holder_that_does_not_write_a_lowered_mark_back_is_caught() {
    // No one waits long in this pool: marks follow the window, so that a slot whose holder a
    // kill took while no one waited does not hold the run's liveness check for the idle horizon.
    catches(
        "no-write-back",
        "25s",
        "mark,kill",
        &["--idle-horizon", "4s"],
    );
}

/// As many sidecars as slots: a restarted sidecar takes its slot back at once (none queues
/// ahead of it), so the faults below reach a slot the sidecar held. No one ever waits in such a
/// pool, so marks would reach the idle horizon and hold a killed sidecar's restart for all of
/// it: the marks follow the window instead, so that a short run sees many takeovers.
const EVERY_SIDECAR_HOLDS: [&str; 6] = [
    "--sidecars",
    "6",
    "--pool-size",
    "6",
    "--idle-horizon",
    "4s",
];

/// A sidecar drops its leases' release handles without a release and lives on (the `abandon`
/// fault): a lease that then writes the claim's floor hands its successor a floor below its
/// own ticks.
#[test]
fn an_abandoned_release_that_writes_the_floor_is_caught() {
    catches(
        "abandon-to-floor",
        "25s",
        "abandon,kill",
        &EVERY_SIDECAR_HOLDS,
    );
}

/// An operator recreates `params` with other MID bits and restarts one si53 sidecar with them
/// (the `reconfigure` fault): a pool that ignores its identity lets it serve beside the others,
/// whose IDs it then issues too.
#[test]
fn a_pool_that_ignores_its_identity_is_caught() {
    let mut extra = vec!["--layout", "si53"];
    extra.extend_from_slice(&EVERY_SIDECAR_HOLDS);
    // A reconfigure waits for the pool to settle: at the default pace, the run sees two.
    catches_every(
        "ignore-pool-identity",
        "40s",
        "4s",
        "reconfigure,mark",
        &extra,
    );
}

#[test]
fn bad_flags_are_refused_before_anything_starts() {
    for (args, says) in [
        (&["--layout", "nope"][..], "--layout"),
        (&["--sidecars", "1"][..], "--sidecars"),
        (&["--faults", "meteor"][..], "--faults"),
        (&["--duration", "soon"][..], "--duration"),
    ] {
        let out = Command::new(campaign_bin())
            .args(args)
            .output()
            .expect("campaign runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            matches!(out.status.code(), Some(2)),
            "{args:?}: {:?}",
            out.status
        );
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
