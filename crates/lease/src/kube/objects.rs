//! The pool's objects: their names, labels and annotations, and what a Lease object says.

use crate::pool::tree::{mark_data, parse_mark_and_token, token_of, Marked};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use std::collections::BTreeMap;

/// The largest pool kept in Lease objects: one object per slot, all created when the pool's
/// identity is recorded.
pub const MAX_POOL: u32 = 1024;

/// The pool size when `--pool-size` is not given and the layout's pool is larger: every slot
/// object is created when the pool is recorded, so a pool is sized, not the layout's by default.
pub const DEFAULT_POOL: u32 = 256;

/// Every object of a pool carries it: `<prefix>.<layout>.<cluster>`.
pub const POOL: &str = "idcar.dev/pool";
/// What the object is: `params`, `slot` or `session`.
pub const ROLE: &str = "idcar.dev/role";
/// params: the pool's parameters (JSON), written once.
pub const PARAMS: &str = "idcar.dev/params";
/// params: the identity record (JSON, `crate::identity::Record`).
pub const IDENTITY: &str = "idcar.dev/identity";
/// params: the session recording the identity, while it does (the others wait for the record
/// instead of stamping every slot too).
pub const RECORDING: &str = "idcar.dev/recording";
/// slot: the identity it was stamped with; only a claim under it takes the slot.
pub const STAMP: &str = "idcar.dev/pool-identity";
/// slot: its time mark, `<ticks> <token>`.
pub const MARK: &str = "idcar.dev/mark";
/// slot: a copy of the mark, written with it: a hand edit of the mark alone does not lower
/// the floor of the slot's next claim.
pub const WITNESS: &str = "idcar.dev/witness";
/// slot and session: the owner record (JSON) of its holder or of a queued contender.
pub const OWNER: &str = "idcar.dev/owner";
/// session: its place in the queue, while it queues.
pub const QUEUED: &str = "idcar.dev/queued";
/// session: `"true"` while it waits for a slot of the exhausted pool.
pub const WANTS: &str = "idcar.dev/wants";

/// The names of one pool's objects.
#[derive(Clone, Debug)]
pub struct Names {
    base: String,
}

impl Names {
    pub fn new(prefix: &str, layout: &str, cluster: u8) -> Names {
        Names {
            base: format!("{prefix}.{layout}.{cluster}"),
        }
    }
    /// The pool label's value, and the params object's name.
    pub fn pool(&self) -> &str {
        &self.base
    }
    pub fn params(&self) -> &str {
        &self.base
    }
    pub fn slot(&self, n: u32) -> String {
        format!("{}.slot-{n}", self.base)
    }
    pub fn session(&self, id: &str) -> String {
        format!("{}.session-{id}", self.base)
    }
    /// The slot number of a slot object's name.
    pub fn slot_of(&self, name: &str) -> Option<u32> {
        name.strip_prefix(&self.base)?
            .strip_prefix(".slot-")?
            .parse()
            .ok()
    }
    /// The label selector of every object of the pool.
    pub fn all(&self) -> String {
        format!("{POOL}={}", self.base)
    }
    /// The label selector of the pool's objects of one role.
    pub fn role(&self, role: &str) -> String {
        format!("{POOL}={},{ROLE}={role}", self.base)
    }
}

/// Whether `prefix` makes valid object names and label values for every layout and cluster.
pub fn check_prefix(prefix: &str) -> Result<(), String> {
    let ok = !prefix.is_empty()
        && prefix.len() <= 40
        && prefix
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !prefix.starts_with('-')
        && !prefix.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "--kube-prefix {prefix:?}: expected 1-40 lowercase letters, digits and '-', starting \
             and ending with a letter or digit (it begins every object's name and the pool label)"
        ))
    }
}

/// A new object of the pool named `name`, with `role` and `annotations`.
pub fn object(
    names: &Names,
    name: &str,
    role: &str,
    annotations: BTreeMap<String, String>,
) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(BTreeMap::from([
                (POOL.to_string(), names.pool().to_string()),
                (ROLE.to_string(), role.to_string()),
            ])),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec::default()),
    }
}

/// The time `now` as Lease objects keep it.
pub fn micro_time(now: std::time::SystemTime) -> MicroTime {
    MicroTime(
        k8s_openapi::jiff::Timestamp::try_from(now)
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    )
}

pub fn name(l: &Lease) -> &str {
    l.metadata.name.as_deref().unwrap_or("")
}

pub fn version(l: &Lease) -> &str {
    l.metadata.resource_version.as_deref().unwrap_or("")
}

/// The resource version as the protocol's compare-and-set version: opaque to us, but a
/// decimal number on every API server (etcd's revision).
pub fn version_number(l: &Lease) -> Result<u64, String> {
    version(l).parse().map_err(|_| {
        format!(
            "{} has resourceVersion {:?}, not a number: this API server is not supported",
            name(l),
            version(l)
        )
    })
}

pub fn annotation<'a>(l: &'a Lease, key: &str) -> Option<&'a str> {
    l.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

pub fn role(l: &Lease) -> Option<&str> {
    l.metadata.labels.as_ref()?.get(ROLE).map(String::as_str)
}

/// The session holding a slot object, if any.
pub fn holder(l: &Lease) -> Option<&str> {
    l.spec
        .as_ref()?
        .holder_identity
        .as_deref()
        .filter(|h| !h.is_empty())
}

/// A slot object's mark: ticks and token (none written: 0); `Err` if unreadable.
pub fn mark(l: &Lease) -> Result<(u64, Option<u64>), String> {
    match annotation(l, MARK) {
        None => Ok((0, None)),
        Some(m) => parse_mark_and_token(m.as_bytes())
            .map(|(m, t)| (m, token_of(t)))
            .ok_or_else(|| format!("{} holds mark {m:?}, not a decimal time mark", name(l))),
    }
}

/// A slot object's witness (none or unreadable: 0).
pub fn witness(l: &Lease) -> u64 {
    annotation(l, WITNESS)
        .and_then(|w| parse_mark_and_token(w.as_bytes()))
        .map_or(0, |(m, _)| m)
}

/// A slot object's mark as a look at the pool reads it.
pub fn marked(slot: u32, l: &Lease) -> Marked {
    match mark(l) {
        Ok((mark, by)) => Marked { slot, mark, by },
        Err(_) => Marked::unreadable(slot),
    }
}

/// The mark annotation's value.
pub fn mark_value(mark: u64, token: &str) -> String {
    String::from_utf8(mark_data(mark, token)).expect("a mark is ASCII")
}

/// A session object's place in the queue, while it queues.
pub fn queued(l: &Lease) -> Option<u64> {
    annotation(l, QUEUED)?.parse().ok()
}

/// How long a session object says it stays held after its last renewal.
pub fn duration(l: &Lease) -> std::time::Duration {
    let secs = l
        .spec
        .as_ref()
        .and_then(|s| s.lease_duration_seconds)
        .unwrap_or(60);
    std::time::Duration::from_secs(secs.clamp(1, 3600) as u64)
}

/// A merge patch that changes only what `annotations` says (`None` removes) if the object is
/// still at `version`.
pub fn annotate(version: &str, annotations: &[(&str, Option<String>)]) -> serde_json::Value {
    let a: serde_json::Map<String, serde_json::Value> = annotations
        .iter()
        .map(|(k, v)| {
            (
                k.to_string(),
                v.clone().map_or(serde_json::Value::Null, Into::into),
            )
        })
        .collect();
    serde_json::json!({"metadata": {"resourceVersion": version, "annotations": a}})
}
