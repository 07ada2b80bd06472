//! The pool as seen from ZooKeeper: gauges for metrics (watches on `slots/` and `queue/`,
//! re-read at most once a second; while the session is down they keep their last values, and
//! `idcar_zk_session_state` says so), and the report behind `idcar pool`.

use super::tree::{parse_mark, parse_owner};
use super::{session_gone, Owner, Paths};
use crate::lease::holding::Looked;
use crate::metrics::Metrics;
use prometheus::IntGauge;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use zookeeper_client as zk;

/// Keeps `idcar_pool_slots_held` and `idcar_pool_contenders_waiting` current until aborted or
/// the session ends.
pub fn spawn_gauges(
    client: zk::Client,
    paths: Paths,
    pool_size: u32,
    metrics: Arc<Metrics>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let held = |c: &[String]| {
            c.iter()
                .filter(|n| n.parse::<u32>().is_ok_and(|n| n < pool_size))
                .count()
        };
        let waiting = |c: &[String]| c.iter().filter(|n| n.starts_with("claim-")).count();
        tokio::join!(
            follow(&client, paths.slots(), held, metrics.pool_held.clone()),
            follow(
                &client,
                paths.queue(),
                waiting,
                metrics.pool_waiting.clone()
            ),
        );
    })
}

/// One look at the pool for `give_back_when_asked`: whether every slot of the pool is held,
/// and the head of the queue (node name, owner record); `None` when ZooKeeper did not answer.
pub(crate) async fn look(client: zk::Client, paths: Paths, pool_size: u32) -> Option<Looked> {
    let mut queue = client.list_children(&paths.queue()).await.ok()?;
    queue.retain(|c| c.starts_with("claim-"));
    let Some(head) = queue.into_iter().min() else {
        return Some((false, None));
    };
    let path = format!("{}/{head}", paths.queue());
    let Some((data, _)) = data_or_none(&client, &path).await.ok()? else {
        return Some((false, None));
    };
    let held = client
        .list_children(&paths.slots())
        .await
        .ok()?
        .iter()
        .filter(|n| n.parse::<u32>().is_ok_and(|n| n < pool_size))
        .count();
    Some((held as u32 >= pool_size, Some((head, parse_owner(&data)))))
}

async fn follow(
    client: &zk::Client,
    path: String,
    count: impl Fn(&[String]) -> usize,
    gauge: IntGauge,
) {
    loop {
        match client.list_and_watch_children(&path).await {
            Ok((children, watcher)) => {
                gauge.set(count(&children) as i64);
                watcher.changed().await;
                // At most one re-list a second per instance: 65 instances starting together
                // must not turn every change into a herd of reads.
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) if session_gone(&e) => return,
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

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

/// A pool's identity and what its instances agreed on (see [`crate::lease::identity`]).
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
}

impl IdentityReport {
    /// From a `params` record and the identity record read for it (named `id`).
    pub fn new(params: &[u8], id: &str, record: Option<&[u8]>) -> IdentityReport {
        let rec = record.and_then(crate::lease::identity::Record::parse);
        IdentityReport {
            id: rec.as_ref().map(|_| id.to_string()),
            parameters: serde_json::from_slice(params).unwrap_or_default(),
            pool_size: rec.as_ref().map(|r| r.pool_size),
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

fn rfc3339_ms(ms: i64) -> String {
    crate::layout::rfc3339_millis(u64::try_from(ms).unwrap_or(0).saturating_mul(1_000_000))
}

pub(crate) async fn data_or_none(
    client: &zk::Client,
    path: &str,
) -> Result<Option<(Vec<u8>, zk::Stat)>, zk::Error> {
    match client.get_data(path).await {
        Ok(d) => Ok(Some(d)),
        Err(zk::Error::NoNode) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The pool size a report counts free slots in: `--pool-size` if given, else the recorded one,
/// else the layout's (`pool_size`).
pub fn effective_pool_size(pool_size: u32, given: bool, identity: Option<&IdentityReport>) -> u32 {
    match identity.and_then(|i| i.pool_size) {
        Some(recorded) if !given => recorded,
        _ => pool_size,
    }
}

/// Reads the pool of `layout` for `cluster` (or every cluster found) under `root`; free
/// slots counted in `pool_size` if `given`, else in the pool's recorded size.
pub async fn report(
    client: &zk::Client,
    root: &str,
    layout: &str,
    cluster: Option<u8>,
    pool_size: u32,
    given: bool,
) -> Result<Vec<ClusterReport>, zk::Error> {
    let clusters: Vec<u8> = match cluster {
        Some(c) => vec![c],
        None => {
            let base = format!("{}/{layout}", root.trim_end_matches('/'));
            let mut cs: Vec<u8> = match client.list_children(&base).await {
                Ok(c) => c.iter().filter_map(|c| c.parse().ok()).collect(),
                Err(zk::Error::NoNode) => Vec::new(),
                Err(e) => return Err(e),
            };
            cs.sort_unstable();
            cs
        }
    };
    let mut out = Vec::new();
    for c in clusters {
        let paths = Paths::new(root, layout, c);
        let children = match client.list_children(&paths.slots()).await {
            Ok(ch) => ch,
            Err(zk::Error::NoNode) => Vec::new(),
            Err(e) => return Err(e),
        };
        let mut slots: Vec<u32> = children.iter().filter_map(|n| n.parse().ok()).collect();
        slots.sort_unstable();
        let mut held = Vec::new();
        for n in slots {
            let Some((data, stat)) = data_or_none(client, &paths.slot(n)).await? else {
                continue;
            };
            let mark = data_or_none(client, &paths.mark(n))
                .await?
                .and_then(|(d, _)| parse_mark(&d));
            held.push(SlotReport {
                slot: n,
                owner: parse_owner(&data),
                session: format!("{:#x}", stat.ephemeral_owner),
                since: rfc3339_ms(stat.ctime),
                mark,
            });
        }
        let mut queue = match client.list_children(&paths.queue()).await {
            Ok(q) => q,
            Err(zk::Error::NoNode) => Vec::new(),
            Err(e) => return Err(e),
        };
        queue.sort();
        let mut waiting = Vec::new();
        for node in queue {
            let owner = data_or_none(client, &format!("{}/{node}", paths.queue()))
                .await?
                .and_then(|(d, _)| parse_owner(&d));
            waiting.push(Waiter { node, owner });
        }
        let identity = match data_or_none(client, &paths.params()).await? {
            None => None,
            Some((params, stat)) => {
                let id = crate::lease::identity::id_of(stat.czxid, i64::from(stat.version));
                let mut records = match client.list_children(&paths.identities()).await {
                    Ok(r) => r,
                    Err(zk::Error::NoNode) => Vec::new(),
                    Err(e) => return Err(e),
                };
                records.sort();
                let first = records
                    .into_iter()
                    .find(|r| r.starts_with(&format!("{id}-")));
                let rec = match &first {
                    Some(name) => data_or_none(client, &paths.identity(name)).await?,
                    None => None,
                };
                Some(IdentityReport::new(
                    &params,
                    first.as_deref().unwrap_or(&id),
                    rec.as_ref().map(|(d, _)| d.as_slice()),
                ))
            }
        };
        let size = effective_pool_size(pool_size, given, identity.as_ref());
        let mut r = ClusterReport::new(layout, c, size, held, waiting);
        r.identity = identity;
        out.push(r);
    }
    Ok(out)
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
                    (Some(id), Some(size), Some(at)) => writeln!(
                        s,
                        "  pool identity {id} recorded {at}: pool size {size}, {}",
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
            let who = h.owner.as_ref().map_or("?".to_string(), describe);
            let mark = h.mark.map_or("-".to_string(), |m| m.to_string());
            let _ = writeln!(
                s,
                "  {:>5}  {:<32} {:<20} {:<25} {mark}",
                h.slot, who, h.session, h.since
            );
        }
        for w in &r.waiting {
            let who = w.owner.as_ref().map_or("?".to_string(), describe);
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

fn describe(o: &Owner) -> String {
    match &o.pod {
        Some(p) => format!("{p} ({} pid {})", o.host, o.pid),
        None => format!("{} pid {}", o.host, o.pid),
    }
}
