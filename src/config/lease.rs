//! The lease's flags: a static slot or a negotiated pool (`--zk`, `--etcd`), the preferred
//! slot (`--generator-id`, `--pod-index`), `--slots`, and the lease's timings.

use super::{starve, usage, LeaseSource, PoolSettings, UsageError};
use crate::cli::ServeArgs;
use crate::layout::Layout;
use crate::lease::protocol::Timing;
use std::time::Duration;

/// A static slot, or the settings to negotiate slots in a store.
pub(super) fn lease_source(a: &ServeArgs, layout: &dyn Layout) -> Result<LeaseSource, UsageError> {
    let slots = layout.scheme().slots;
    if let Some(g) = a.generator_id.filter(|g| *g >= slots) {
        return usage(format!(
            "--generator-id {g} is out of range: layout {} has {slots} generator IDs (0-{})",
            layout.name(),
            slots - 1
        ));
    }
    let Some(store) = a.store.spec()? else {
        return static_slot(a);
    };
    // A store that keeps an object per slot caps the pool (and its default).
    let most = store.max_pool().map_or(slots, |m| m.min(slots));
    let pool_size = a
        .pool_size
        .unwrap_or(store.default_pool().map_or(most, |d| d.min(most)));
    if pool_size == 0 || pool_size > most {
        let cap = match most < slots {
            true => format!(" with {} (one object per slot)", store.describe()),
            false => String::new(),
        };
        return usage(format!(
            "--pool-size must be between 1 and {most} for layout {}{cap}",
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
    Ok(LeaseSource::Pool(PoolSettings {
        store,
        pool_size,
        prefer,
        pod,
        slots: a.slots,
    }))
}

/// Without a store: the one slot `--generator-id` names, its mark in the state file.
fn static_slot(a: &ServeArgs) -> Result<LeaseSource, UsageError> {
    if a.pool_size.is_some() {
        return usage("--pool-size needs --zk, --etcd or --kube");
    }
    if a.slots != 1 {
        return usage(
            "--slots needs --zk, --etcd or --kube: a static instance has its one --generator-id \
             (run more instances, or negotiate slots in a store)",
        );
    }
    if a.prefer_ordinal {
        return usage(
            "--prefer-ordinal needs --zk, --etcd or --kube (without a store, give --generator-id)",
        );
    }
    Ok(LeaseSource::Static {
        slot: a.generator_id.unwrap_or(0),
        state_file: a.state_file.clone(),
    })
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

pub(super) const HOUR: Duration = Duration::from_secs(3600);

/// `--max-clock-wait`, or its default: 10 s in static mode; with a store, 70 s (a crashed
/// holder's mark may be the idle horizon ahead, and start-up must be able to wait it out).
fn max_clock_wait(a: &ServeArgs) -> Duration {
    let store = a.store.given();
    a.max_clock_wait
        .unwrap_or(Duration::from_secs(if store { 70 } else { 10 }))
}

/// `--lease-horizon`, or its default for the mode: 3 s in static mode; with `--zk`, the
/// session timeout (with `--etcd`, the etcd lease's TTL) less a second, within 3-5 s (a successor waits for the session to expire
/// anyway, so a horizon below it costs no wait, and a longer one rides out longer stalls of
/// ZooKeeper's own log writes on a busy node), and not above an explicit `--max-clock-wait`
/// (which must be at least the horizon: a setting that was valid with 3 s stays valid).
fn lease_horizon(a: &ServeArgs) -> Duration {
    const STATIC: Duration = Duration::from_secs(3);
    let Some(expiry) = a.store.expiry() else {
        return a.lease_horizon.unwrap_or(STATIC);
    };
    a.lease_horizon.unwrap_or_else(|| {
        expiry
            .saturating_sub(Duration::from_secs(1))
            .clamp(STATIC, Duration::from_secs(5))
            .min(max_clock_wait(a).max(STATIC))
    })
}

/// `--idle-horizon`, or its default: with a store, 60 s, within the horizon and
/// `--max-clock-wait` (a setting that was valid before it existed stays valid); in static mode
/// the horizon itself (no one ever waits for a static slot, and a restart waits out its mark).
fn idle_horizon(a: &ServeArgs, horizon: Duration) -> Result<Duration, UsageError> {
    if !a.store.given() {
        if a.idle_horizon.is_some() {
            return usage(
                "--idle-horizon needs --zk, --etcd or --kube (a static slot's mark follows \
                 --lease-horizon: a restart waits it out)",
            );
        }
        return Ok(horizon);
    }
    Ok(a.idle_horizon
        .unwrap_or_else(|| Duration::from_secs(60).min(max_clock_wait(a)).max(horizon)))
}

/// Every duration at most an hour; the lease's timings consistent with each other.
pub(super) fn timings(a: &ServeArgs) -> Result<Timing, UsageError> {
    let horizon = lease_horizon(a);
    let idle = idle_horizon(a, horizon)?;
    let max_clock_wait = max_clock_wait(a);
    for (flag, d) in [
        ("--lease-horizon", horizon),
        ("--idle-horizon", idle),
        ("--renew-interval", a.renew_interval),
        ("--max-clock-wait", max_clock_wait),
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
    if idle < horizon {
        return usage(format!(
            "--idle-horizon ({idle:?}) must be at least --lease-horizon ({horizon:?})"
        ));
    }
    if max_clock_wait < idle {
        let which = if idle > horizon {
            "--idle-horizon"
        } else {
            "--lease-horizon"
        };
        return usage(format!(
            "--max-clock-wait ({max_clock_wait:?}) must be at least {which} ({idle:?}): after a \
             crash the stored mark is up to that far ahead, and start-up must be able to wait \
             it out"
        ));
    }
    Ok(Timing {
        horizon,
        idle_horizon: idle,
        renew_every: a.renew_interval,
        max_clock_wait,
        starve: starve(a),
    })
}
