//! The namespace every negotiating store keeps, one per layout and cluster (ZooKeeper nodes
//! under `--zk-root`, etcd keys under `--etcd-prefix`), and what its entries hold:
//!
//! ```text
//! <root>/<layout>/<cluster>/params          the pool's parameters (JSON), written once
//! <root>/<layout>/<cluster>/identity/<id>   the pool's identity record (see crate::identity)
//! <root>/<layout>/<cluster>/queue/<place>   a contender waiting its turn (JSON owner; the session's)
//! <root>/<layout>/<cluster>/slots/<N>       the slot's holder (JSON owner; the session's)
//! <root>/<layout>/<cluster>/marks/<N>       the slot's time mark: "<ticks> <token>"
//! <root>/<layout>/<cluster>/witness/<N>     a copy of it, written in the same transaction
//! ```
//!
//! "The session's": gone with the store session that wrote it (ZooKeeper: ephemeral nodes;
//! etcd: keys attached to the instance's etcd lease).
//!
//! The witness is what a successor's floor also comes from (the higher of the two): a mark
//! lowered or deleted by someone else while no holder is there to write it back up (a hand
//! edit, a deleted `marks/`) does not lower it.
//!
//! A mark is decimal ticks in the layout's time unit, then a space and the 16-hex-digit token
//! of the claim that wrote it (marks written by older versions, or created at 0, have none).
//!
//! All of it is store format `crate::identity::FORMAT` (1), recorded in the identity
//! record and in every owner record (`format`; none in records of idcar 0.1, which wrote format
//! 1): a reader refuses a newer format rather than read past its number (see
//! `crate::identity`).

/// The paths of one layout and cluster's namespace.
#[derive(Clone, Debug)]
pub struct Paths {
    base: String,
}

impl Paths {
    pub fn new(root: &str, layout: &str, cluster: u8) -> Paths {
        Paths {
            base: format!("{}/{layout}/{cluster}", root.trim_end_matches('/')),
        }
    }
    /// The pool's own node (`<root>/<layout>/<cluster>`).
    pub fn base(&self) -> &str {
        &self.base
    }
    pub fn queue(&self) -> String {
        format!("{}/queue", self.base)
    }
    pub fn slots(&self) -> String {
        format!("{}/slots", self.base)
    }
    pub fn marks(&self) -> String {
        format!("{}/marks", self.base)
    }
    /// The pool's parameters (JSON), written once when the pool is created.
    pub fn params(&self) -> String {
        format!("{}/params", self.base)
    }
    /// The pool's identity records: one child per recorded `params` (see
    /// `crate::identity`).
    pub fn identities(&self) -> String {
        format!("{}/identity", self.base)
    }
    /// The identity record of the `params` recorded as `id`.
    pub fn identity(&self, id: &str) -> String {
        format!("{}/identity/{id}", self.base)
    }
    /// Contenders waiting for a slot of the exhausted pool, one entry each: while any is
    /// there, holders keep their marks short.
    pub fn wanted(&self) -> String {
        format!("{}/wanted", self.base)
    }
    pub fn slot(&self, n: u32) -> String {
        format!("{}/slots/{n}", self.base)
    }
    pub fn mark(&self, n: u32) -> String {
        format!("{}/marks/{n}", self.base)
    }
    /// The copies of the marks, written with them (see the module documentation).
    pub fn witnesses(&self) -> String {
        format!("{}/witness", self.base)
    }
    pub fn witness(&self, n: u32) -> String {
        format!("{}/witness/{n}", self.base)
    }
}

/// Who holds a slot: the JSON data of a slot node (and of a queue node).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Owner {
    /// The store format of the writer (`crate::identity::FORMAT`; 1 when absent, as
    /// idcar 0.1 wrote it). A record of a newer format is not read (see [`parse_owner`]).
    #[serde(default = "crate::identity::format_1")]
    pub format: u32,
    pub host: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    pub pid: u32,
    /// Random per lease (each of an instance's `--slots` leases has its own): tells the
    /// lease's own expired sessions from other leases.
    pub instance: String,
    /// The ZooKeeper session that created the node (or the etcd lease of the key), in hex.
    pub session: String,
    /// When the node was written, milliseconds since the Unix epoch.
    pub since_ms: u64,
    /// How many slots the instance holds at once (`--slots`), when more than one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots: Option<u32>,
    /// With `--slots` above 1: random per process, shared by its leases (`idcar pool` groups
    /// an instance's slots by it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<String>,
    /// Written `true` by a spare lease (another lease of its instance held a slot when it
    /// queued): spares at the head of the queue give way only to contenders that are not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spare: Option<bool>,
}

impl Owner {
    pub(crate) fn for_this_process(
        session: String,
        instance: &str,
        pod: Option<&str>,
        part: &crate::part::Part,
        now_ms: u64,
    ) -> Owner {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .or_else(|_| std::env::var("HOSTNAME"))
            .unwrap_or_else(|_| "unknown".into());
        Owner {
            format: crate::identity::FORMAT,
            host,
            pod: pod.map(str::to_string),
            pid: std::process::id(),
            instance: instance.to_string(),
            session,
            since_ms: now_ms,
            slots: (part.of > 1).then_some(part.of),
            process: (part.of > 1).then(|| part.process.to_string()),
            spare: part.is_spare().then_some(true),
        }
    }
}

/// The owner record (JSON) of a node or key created for `session` by this process.
pub(crate) fn owner_record(
    session: String,
    instance: &str,
    pod: Option<&str>,
    part: &crate::part::Part,
    now_ms: u64,
) -> Vec<u8> {
    let o = Owner::for_this_process(session, instance, pod, part, now_ms);
    serde_json::to_vec(&o).expect("owner serialises")
}

/// Parses a slot node's owner data, if it is idcar's and of a format this idcar reads.
pub fn parse_owner(data: &[u8]) -> Option<Owner> {
    serde_json::from_slice(data)
        .ok()
        .filter(|o: &Owner| crate::identity::reads(o.format))
}

/// Parses a mark node's data: decimal ticks, optionally followed by a space and the token
/// of the claim that wrote it (see `fence`).
pub fn parse_mark(data: &[u8]) -> Option<u64> {
    parse_mark_and_token(data).map(|(m, _)| m)
}

/// A mark node's ticks and writer's token (`None` for marks written without one).
pub fn parse_mark_and_token(data: &[u8]) -> Option<(u64, Option<&str>)> {
    let text = std::str::from_utf8(data).ok()?.trim();
    let mut parts = text.split(' ');
    let mark = parts.next()?.parse().ok()?;
    let token = parts.next();
    if parts.next().is_some() {
        return None;
    }
    Some((mark, token))
}

/// A slot's mark as a look at the pool read it, to choose which free slot to try.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Marked {
    pub slot: u32,
    /// Its ticks: a missing mark reads 0, an unreadable one `u64::MAX` (tried last, by the
    /// head only).
    pub mark: u64,
    /// The token of the claim that wrote it, if it says.
    pub by: Option<u64>,
}

impl Marked {
    /// Slot `slot` with no mark.
    pub fn missing(slot: u32) -> Marked {
        Marked {
            slot,
            mark: 0,
            by: None,
        }
    }

    /// Slot `slot` with the mark node's `data`.
    pub fn read(slot: u32, data: &[u8]) -> Marked {
        let (mark, by) =
            parse_mark_and_token(data).map_or((u64::MAX, None), |(m, t)| (m, token_of(t)));
        Marked { slot, mark, by }
    }

    /// Slot `slot` whose mark could not be read.
    pub fn unreadable(slot: u32) -> Marked {
        Marked {
            slot,
            mark: u64::MAX,
            by: None,
        }
    }
}

/// A writing claim's token as marks hold it (16 hex digits), as a number.
pub fn token_of(text: Option<&str>) -> Option<u64> {
    u64::from_str_radix(text?, 16).ok()
}

/// A mark node's data: the ticks and the writing claim's token.
pub fn mark_data(mark: u64, token: &str) -> Vec<u8> {
    format!("{mark} {token}").into_bytes()
}
