//! `idcar pool`'s report, the same for every negotiating store: who holds which slot, who
//! waits, what the pool's instances agreed on; and how it is rendered for a terminal.

use super::tree::Owner;

/// One held slot.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SlotReport {
    pub slot: u32,
    /// The holder's owner data (`None` if the node holds something else).
    pub owner: Option<Owner>,
    /// The ZooKeeper session holding the node, in hex.
    pub session: String,
    /// When the slot node was created (RFC 3339).
    pub since: String,
    /// The slot's time mark, in the layout's time unit.
    pub mark: Option<u64>,
}

/// A contender in the queue.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Waiter {
    pub node: String,
    pub owner: Option<Owner>,
}

/// A pool's identity and what its instances agreed on (see [`crate::identity`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct IdentityReport {
    /// The identity (16 hex digits), or `None` while no instance has recorded it yet.
    pub id: Option<String>,
    /// The recorded parameters that shape the pool's IDs (flag name without dashes, value).
    pub parameters: std::collections::BTreeMap<String, String>,
    /// The pool size recorded with the identity.
    pub pool_size: Option<u32>,
    /// Claims under this identity start above this mark.
    pub not_before: Option<u64>,
    /// When the identity was recorded (RFC 3339).
    pub recorded: Option<String>,
    /// The pool's store format (1 for pools recorded before formats were written).
    pub format: Option<u32>,
}

impl IdentityReport {
    /// From a `params` record and the identity record read for it (named `id`).
    pub fn new(params: &[u8], id: &str, record: Option<&[u8]>) -> IdentityReport {
        let parsed = record.and_then(crate::identity::Record::parse);
        let format = parsed.as_ref().map(|r| r.format);
        // Nothing past the format of a record this idcar does not read.
        let rec = parsed.filter(|r| crate::identity::reads(r.format));
        IdentityReport {
            id: format.map(|_| id.to_string()),
            parameters: serde_json::from_slice(params).unwrap_or_default(),
            pool_size: rec.as_ref().map(|r| r.pool_size),
            format,
            not_before: rec.as_ref().map(|r| r.not_before),
            recorded: rec
                .as_ref()
                .map(|r| rfc3339_ms(i64::try_from(r.recorded_ms).unwrap_or(0))),
        }
    }
}

/// One layout and cluster's pool.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ClusterReport {
    pub layout: String,
    pub cluster: u8,
    /// What its instances agreed on, if any instance recorded it.
    pub identity: Option<IdentityReport>,
    /// `--pool-size` if given, else the size recorded with the pool's identity, else the
    /// layout's.
    pub pool_size: u32,
    pub held: Vec<SlotReport>,
    pub free: u32,
    pub waiting: Vec<Waiter>,
    /// Every instance that holds more than one slot at once (`--slots`): what it wants,
    /// holds and still queues for.
    pub multi: Vec<MultiSlot>,
}

/// An instance with `--slots` above 1.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MultiSlot {
    /// Who it is (pod, host, pid).
    pub holder: String,
    /// Its process ID in owner records (random per process).
    pub process: String,
    /// Its `--slots`.
    pub wants: u32,
    /// The slots it holds.
    pub slots: Vec<u32>,
    /// Its contenders in the queue.
    pub waiting: u32,
}

impl ClusterReport {
    /// The report of a pool: the free count and the instances holding several slots
    /// worked out from what is held and queued.
    pub fn new(
        layout: &str,
        cluster: u8,
        pool_size: u32,
        held: Vec<SlotReport>,
        waiting: Vec<Waiter>,
    ) -> ClusterReport {
        let in_pool = held.iter().filter(|s| s.slot < pool_size).count() as u32;
        let mut multi: Vec<MultiSlot> = Vec::new();
        let owners = held
            .iter()
            .map(|h| (h.owner.as_ref(), Some(h.slot)))
            .chain(waiting.iter().map(|w| (w.owner.as_ref(), None)));
        for (owner, slot) in owners {
            let Some((o, wants)) = owner.and_then(|o| Some((o, o.slots?))) else {
                continue;
            };
            let process = o.process.clone().unwrap_or_else(|| describe(o));
            let i = match multi.iter().position(|m| m.process == process) {
                Some(i) => i,
                None => {
                    multi.push(MultiSlot {
                        holder: describe(o),
                        process,
                        wants,
                        slots: Vec::new(),
                        waiting: 0,
                    });
                    multi.len() - 1
                }
            };
            match slot {
                Some(n) => multi[i].slots.push(n),
                None => multi[i].waiting += 1,
            }
        }
        ClusterReport {
            layout: layout.to_string(),
            cluster,
            identity: None,
            pool_size,
            free: pool_size.saturating_sub(in_pool),
            held,
            waiting,
            multi,
        }
    }
}

pub(crate) fn rfc3339_ms(ms: i64) -> String {
    idcar_core::layout::rfc3339_millis(u64::try_from(ms).unwrap_or(0).saturating_mul(1_000_000))
}

/// The pool size a report counts free slots in: `--pool-size` if given, else the recorded one,
/// else the layout's (`pool_size`).
pub fn effective_pool_size(pool_size: u32, given: bool, identity: Option<&IdentityReport>) -> u32 {
    match identity.and_then(|i| i.pool_size) {
        Some(recorded) if !given => recorded,
        _ => pool_size,
    }
}

/// The report as text for a terminal.
pub fn render(reports: &[ClusterReport]) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    if reports.is_empty() {
        s.push_str("no clusters found\n");
    }
    for r in reports {
        let _ = writeln!(
            s,
            "{} cluster {}: {}/{} slots held, {} free, {} waiting",
            r.layout,
            r.cluster,
            r.held.len(),
            r.pool_size,
            r.free,
            r.waiting.len()
        );
        if !r.held.is_empty() {
            let _ = writeln!(
                s,
                "  {:>5}  {:<32} {:<20} {:<25} mark",
                "slot", "holder", "session", "since"
            );
        }
        match &r.identity {
            Some(i) => {
                let params: Vec<String> = i
                    .parameters
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                let _ = match (&i.id, i.pool_size, &i.recorded) {
                    _ if i.format.is_some_and(|f| !crate::identity::reads(f)) => {
                        writeln!(
                            s,
                            "  pool identity {}: store format {}, newer than this idcar reads \
                             ({}): use a version that reads it",
                            i.id.as_deref().unwrap_or("?"),
                            i.format.unwrap_or_default(),
                            crate::identity::FORMAT
                        )
                    }
                    (Some(id), Some(size), Some(at)) => writeln!(
                        s,
                        "  pool identity {id} recorded {at}: store format {}, pool size {size}, {}",
                        i.format.unwrap_or(1),
                        params.join(" ")
                    ),
                    _ => writeln!(s, "  pool identity not recorded yet: {}", params.join(" ")),
                };
            }
            None => {
                let _ = writeln!(s, "  no parameters recorded (no instance has joined)");
            }
        }
        for h in &r.held {
            let who = h.owner.as_ref().map_or(UNREAD.to_string(), describe);
            let mark = h.mark.map_or("-".to_string(), |m| m.to_string());
            let _ = writeln!(
                s,
                "  {:>5}  {:<32} {:<20} {:<25} {mark}",
                h.slot, who, h.session, h.since
            );
        }
        for w in &r.waiting {
            let who = w.owner.as_ref().map_or(UNREAD.to_string(), describe);
            let _ = writeln!(s, "  waiting: {} {who}", w.node);
        }
        for m in &r.multi {
            let short = match m.slots.len() < m.wants as usize {
                true => format!(", short of {}", m.wants as usize - m.slots.len()),
                false => String::new(),
            };
            let _ = writeln!(
                s,
                "  {} holds {} of its {} slots {:?}{short}",
                m.holder,
                m.slots.len(),
                m.wants,
                m.slots
            );
        }
    }
    s
}

/// A holder whose record this idcar does not read (another program's, or a newer format).
const UNREAD: &str = "? (not readable by this idcar)";

fn describe(o: &Owner) -> String {
    match &o.pod {
        Some(p) => format!("{p} ({} pid {})", o.host, o.pid),
        None => format!("{} pid {}", o.host, o.pid),
    }
}
