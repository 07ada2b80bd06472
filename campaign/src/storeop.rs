//! What an operator does to the pool's store, as the nemesis's operator faults: run inside a
//! store node's network namespace as `idcar-campaign store-op ...` (the store is reachable
//! only there), through idcar's own ZooKeeper, etcd and Kubernetes clients (Kubernetes: as the
//! administrator, on the pool's Lease objects). It prints one line saying
//! what it did (or `skip: why`), which the nemesis records.
//!
//! - `lower-mark` / `delete-mark`: a held slot's mark (of a holder among `--only`) lowered by
//!   ten seconds of ticks, or deleted — only while the slot is held and the mark unchanged
//!   since it was read (a compare-and-set), as a script racing the holder would;
//! - `delete-params`: the pool's `params` deleted (a parameter change, or the restore
//!   procedure's step);
//! - `recreate-params`: `params` deleted and created again with the `name=value` changes
//!   given (in ZooKeeper in one `multi`; in etcd and Kubernetes a delete, then a create), as an
//!   operator changing
//!   the pool's parameters under running instances would;
//! - `holder`: who holds slot `LOWER_BY` (its pod), nothing changed;
//! - `probe`: asks the store, again and again (a new attempt every 100 ms, a few open at
//!   once), until it answers; prints `answered NS`, when the first answer came (ns since the
//!   epoch): when the store answered again after a freeze or an outage.

use anyhow::{bail, Context, Result};
use idcar_etcd_api::etcdserverpb as rpc;
use idcar_lease::etcd::{Etcd, EtcdAccess};
use idcar_lease::kube::{objects, Kube, KubeConfig};
use idcar_lease::pool::tree::{parse_mark, parse_owner, Owner, Paths};
use rand::seq::IndexedRandom;
use rand::SeedableRng;
use std::time::Duration;
use zookeeper_client as zk;

/// The parsed arguments of `store-op`.
pub struct Op {
    pub store: String,
    pub connect: String,
    /// The pool's root in the store (`--zk-root`, `--etcd-prefix`, `--kube-prefix`).
    pub root: String,
    pub layout: String,
    pub cluster: u8,
    pub op: String,
    /// Ticks to lower a mark by.
    pub lower_by: u64,
    /// The holders whose slots may be touched, as `pod:pid` (a slot node left by a process
    /// that died is not theirs: its slot is as good as free).
    pub only: Vec<String>,
    pub seed: u64,
}

impl Op {
    /// `store-op STORE CONNECT ROOT LAYOUT CLUSTER OP LOWER_BY SEED [POD...]`.
    pub fn parse(argv: &[String]) -> Result<Op> {
        let get = |i: usize| argv.get(i).cloned().context("store-op: missing argument");
        Ok(Op {
            store: get(0)?,
            connect: get(1)?,
            root: get(2)?,
            layout: get(3)?,
            cluster: get(4)?.parse()?,
            op: get(5)?,
            lower_by: get(6)?.parse()?,
            seed: get(7)?.parse()?,
            only: argv.iter().skip(8).cloned().collect(),
        })
    }
}

/// Runs the operation (bounded: 10 s, a probe 60 s); what was done, one line.
pub fn run(op: &Op) -> Result<String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let limit = Duration::from_secs(if op.op == "probe" { 60 } else { 10 });
    rt.block_on(async {
        let work = async {
            match (op.store.as_str(), op.op.as_str()) {
                (_, "probe") => probe(op).await,
                ("zookeeper", _) => zookeeper(op).await,
                ("etcd", _) => etcd(op).await,
                ("kubernetes", _) => kubernetes(op).await,
                (other, _) => bail!("unknown store {other}"),
            }
        };
        tokio::time::timeout(limit, work)
            .await
            .context("store-op timed out")?
    })
}

/// Most probe attempts open at once (each bounded to 2 s).
const PROBES_OPEN: usize = 5;

/// `probe`: a new attempt every 100 ms (at most `PROBES_OPEN` open) until one is answered;
/// `answered NS`, when the first answer came.
async fn probe(op: &Op) -> Result<String> {
    let mut open = tokio::task::JoinSet::new();
    let mut every = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = every.tick() => {
                if open.len() < PROBES_OPEN {
                    let (store, connect, root) =
                        (op.store.clone(), op.connect.clone(), op.root.clone());
                    open.spawn(async move {
                        let attempt = probe_once(&store, &connect, &root);
                        tokio::time::timeout(Duration::from_secs(2), attempt).await
                    });
                }
            }
            Some(done) = open.join_next() => {
                if let Ok(Ok(Ok(at))) = done {
                    return Ok(format!("answered {at}"));
                }
            }
        }
    }
}

/// One request the store answers only when it serves (a new ZooKeeper session and a read; a
/// linearizable etcd read, which needs a leader and a quorum): when the answer came.
async fn probe_once(store: &str, connect: &str, root: &str) -> Result<u64> {
    if store == "kubernetes" {
        // A read of one object without a resource version: from etcd, by a quorum.
        let kube = kube_admin(connect).await?;
        kube.get("store-op", root)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        return Ok(crate::procs::now_ns());
    }
    if store == "zookeeper" {
        let client = zk::Client::connector()
            .with_session_timeout(Duration::from_secs(4))
            .with_connection_timeout(Duration::from_secs(1))
            .connect(connect)
            .await?;
        client.check_stat(root).await?;
        let at = crate::procs::now_ns();
        drop(client);
        return Ok(at);
    }
    let access = EtcdAccess::new(connect, None, None).map_err(|e| anyhow::anyhow!("{e}"))?;
    let etcd = Etcd::connect(&access, Duration::from_secs(1))
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let read = rpc::RangeRequest {
        key: root.as_bytes().to_vec(),
        ..Default::default()
    };
    etcd.range("store-op", read)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(crate::procs::now_ns())
}

/// The recorded parameters `data` (a JSON object of strings) with `changes` (`name=value`).
fn changed(data: &[u8], changes: &[String]) -> Result<Vec<u8>> {
    let mut params: std::collections::BTreeMap<String, String> =
        serde_json::from_slice(data).context("unreadable params")?;
    for c in changes {
        let (k, v) = c.split_once('=').context("a change is name=value")?;
        params.insert(k.to_string(), v.to_string());
    }
    Ok(serde_json::to_vec(&params)?)
}

/// Who holds slot `op.lower_by`: `holder SLOT POD`, or `skip: ...`.
fn holder(op: &Op, held: &[(u32, Option<Owner>)]) -> String {
    held.iter()
        .find(|(n, _)| u64::from(*n) == op.lower_by)
        .and_then(|(n, o)| Some(format!("holder {n} {}", o.as_ref()?.pod.as_ref()?)))
        .unwrap_or_else(|| format!("skip: slot {} not held", op.lower_by))
}

/// A held slot of a live holder in `op.only`, at random: (slot, holder's pod).
fn pick(op: &Op, held: Vec<(u32, Option<Owner>)>) -> Option<(u32, String)> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(op.seed);
    let candidates: Vec<(u32, String)> = held
        .into_iter()
        .filter_map(|(n, owner)| {
            let o = owner?;
            let pod = o.pod?;
            op.only
                .contains(&format!("{pod}:{}", o.pid))
                .then_some((n, pod))
        })
        .collect();
    candidates.choose(&mut rng).cloned()
}

async fn zookeeper(op: &Op) -> Result<String> {
    let client = zk::Client::connector()
        .with_session_timeout(Duration::from_secs(4))
        .connect(&op.connect)
        .await?;
    let paths = Paths::new(&op.root, &op.layout, op.cluster);
    if op.op == "delete-params" {
        return Ok(match client.delete(&paths.params(), None).await {
            Ok(()) => format!("deleted {}", paths.params()),
            Err(e) => format!("skip: {e}"),
        });
    }
    if op.op == "recreate-params" {
        let (data, stat) = match client.get_data(&paths.params()).await {
            Ok(r) => r,
            Err(e) => return Ok(format!("skip: {e}")),
        };
        let new = changed(&data, &op.only)?;
        let mut w = client.new_multi_writer();
        w.add_delete(&paths.params(), Some(stat.version))?;
        let mode = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        w.add_create(&paths.params(), &new, &mode)?;
        return Ok(match w.commit().await {
            Ok(_) => format!(
                "recreated {} as {}",
                paths.params(),
                String::from_utf8_lossy(&new)
            ),
            Err(e) => format!("skip: {e}"),
        });
    }
    let mut held = Vec::new();
    for n in client.list_children(&paths.slots()).await? {
        let Ok(slot) = n.parse::<u32>() else { continue };
        if let Ok((data, _)) = client.get_data(&paths.slot(slot)).await {
            held.push((slot, parse_owner(&data)));
        }
    }
    if op.op == "holder" {
        return Ok(holder(op, &held));
    }
    let Some((slot, pod)) = pick(op, held) else {
        return Ok("skip: no slot held by a free sidecar".into());
    };
    let (data, stat) = client.get_data(&paths.mark(slot)).await?;
    let mark = parse_mark(&data).context("unreadable mark")?;
    let mut w = client.new_multi_writer();
    w.add_check_version(&paths.slot(slot), 0)?;
    let lowered = mark.saturating_sub(op.lower_by);
    if op.op == "delete-mark" {
        w.add_delete(&paths.mark(slot), Some(stat.version))?;
    } else {
        let text = format!("{lowered} 00000000000000ff");
        w.add_set_data(&paths.mark(slot), text.as_bytes(), Some(stat.version))?;
    }
    Ok(match w.commit().await {
        Ok(_) => format!("{} slot {slot} of {pod}: mark {mark} -> {lowered}", op.op),
        Err(e) => format!("skip: {e}"),
    })
}

async fn etcd(op: &Op) -> Result<String> {
    let access = EtcdAccess::new(&op.connect, None, None).map_err(|e| anyhow::anyhow!("{e}"))?;
    let etcd = Etcd::connect(&access, Duration::from_secs(3))
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let paths = Paths::new(&op.root, &op.layout, op.cluster);
    if op.op == "recreate-params" {
        return etcd_recreate_params(&etcd, &paths, op).await;
    }
    if op.op == "delete-params" {
        let r = etcd
            .txn("store-op", txn(vec![], vec![del(paths.params())]))
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        return Ok(format!("deleted {} ({})", paths.params(), r.succeeded));
    }
    let held = etcd_held(&etcd, &paths).await?;
    if op.op == "holder" {
        return Ok(holder(op, &held));
    }
    let Some((slot, pod)) = pick(op, held) else {
        return Ok("skip: no slot held by a free sidecar".into());
    };
    etcd_change_mark(&etcd, &paths, op, slot, &pod).await
}

/// An etcd request deleting key `k`.
fn del(k: String) -> rpc::RequestOp {
    rpc::RequestOp {
        request: Some(rpc::request_op::Request::RequestDeleteRange(
            rpc::DeleteRangeRequest {
                key: k.into_bytes(),
                ..Default::default()
            },
        )),
    }
}

/// An etcd transaction: `success` if every `compare` holds, else nothing.
fn txn(compare: Vec<rpc::Compare>, success: Vec<rpc::RequestOp>) -> rpc::TxnRequest {
    rpc::TxnRequest {
        compare,
        success,
        failure: vec![],
    }
}

/// `recreate-params` in etcd: `params` deleted, then put with `op.only`'s changes.
async fn etcd_recreate_params(etcd: &Etcd, paths: &Paths, op: &Op) -> Result<String> {
    let read = rpc::RangeRequest {
        key: paths.params().into_bytes(),
        ..Default::default()
    };
    let r = etcd
        .range("store-op", read)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let Some(kv) = r.kvs.first() else {
        return Ok("skip: no params".into());
    };
    let new = changed(&kv.value, &op.only)?;
    // etcd refuses a delete and a put of one key in one transaction: one, then the other.
    etcd.txn("store-op", txn(vec![], vec![del(paths.params())]))
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let put = rpc::RequestOp {
        request: Some(rpc::request_op::Request::RequestPut(rpc::PutRequest {
            key: paths.params().into_bytes(),
            value: new.clone(),
            ..Default::default()
        })),
    };
    etcd.txn("store-op", txn(vec![], vec![put]))
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(format!(
        "recreated {} as {}",
        paths.params(),
        String::from_utf8_lossy(&new)
    ))
}

/// The pool's slot nodes in etcd: (slot, its owner).
async fn etcd_held(etcd: &Etcd, paths: &Paths) -> Result<Vec<(u32, Option<Owner>)>> {
    let prefix = format!("{}/", paths.slots());
    let range = rpc::RangeRequest {
        key: prefix.clone().into_bytes(),
        range_end: idcar_lease::etcd::client::prefix_end(prefix.as_bytes()),
        ..Default::default()
    };
    let slots = etcd
        .range("store-op", range)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(slots
        .kvs
        .iter()
        .filter_map(|kv| {
            let n = std::str::from_utf8(&kv.key)
                .ok()?
                .strip_prefix(&prefix)?
                .parse()
                .ok()?;
            Some((n, parse_owner(&kv.value)))
        })
        .collect())
}

/// `lower-mark` / `delete-mark` in etcd on `slot` (held by `pod`): only while the slot is
/// held and its mark unchanged since it was read.
async fn etcd_change_mark(
    etcd: &Etcd,
    paths: &Paths,
    op: &Op,
    slot: u32,
    pod: &str,
) -> Result<String> {
    use rpc::compare::{CompareResult, CompareTarget, TargetUnion};
    let read = rpc::RangeRequest {
        key: paths.mark(slot).into_bytes(),
        ..Default::default()
    };
    let r = etcd
        .range("store-op", read)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let kv = r.kvs.first().context("no mark")?;
    let mark = parse_mark(&kv.value).context("unreadable mark")?;
    let lowered = mark.saturating_sub(op.lower_by);
    let held_still = rpc::Compare {
        result: CompareResult::Greater as i32,
        target: CompareTarget::Create as i32,
        key: paths.slot(slot).into_bytes(),
        range_end: vec![],
        target_union: Some(TargetUnion::CreateRevision(0)),
    };
    let unchanged = rpc::Compare {
        result: CompareResult::Equal as i32,
        target: CompareTarget::Mod as i32,
        key: paths.mark(slot).into_bytes(),
        range_end: vec![],
        target_union: Some(TargetUnion::ModRevision(kv.mod_revision)),
    };
    let change = if op.op == "delete-mark" {
        del(paths.mark(slot))
    } else {
        rpc::RequestOp {
            request: Some(rpc::request_op::Request::RequestPut(rpc::PutRequest {
                key: paths.mark(slot).into_bytes(),
                value: format!("{lowered} 00000000000000ff").into_bytes(),
                ..Default::default()
            })),
        }
    };
    let r = etcd
        .txn("store-op", txn(vec![held_still, unchanged], vec![change]))
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(if r.succeeded {
        format!("{} slot {slot} of {pod}: mark {mark} -> {lowered}", op.op)
    } else {
        "skip: the slot or its mark changed".into()
    })
}

/// The administrator's client of the API server of kubeconfig `path` (each call bounded to 3 s).
async fn kube_admin(path: &str) -> Result<Kube> {
    let cfg = KubeConfig {
        kubeconfig: Some(path.into()),
        namespace: Some(crate::procs::KUBE_NAMESPACE.to_string()),
        ttl: Duration::from_secs(15),
        followers: Default::default(),
    };
    Kube::connect(&cfg, Duration::from_secs(3))
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// The operations on a pool's Lease objects (`op.root`: its `--kube-prefix`).
async fn kubernetes(op: &Op) -> Result<String> {
    let kube = kube_admin(&op.connect).await?;
    let err = |e: idcar_lease::kube::KubeError| anyhow::anyhow!("{e}");
    let names = objects::Names::new(&op.root, &op.layout, op.cluster);
    let params = names.params();
    if op.op == "delete-params" {
        kube.delete("store-op", params, None).await.map_err(err)?;
        return Ok(format!("deleted {params}"));
    }
    if op.op == "recreate-params" {
        let Some(found) = kube.get("store-op", params).await.map_err(err)? else {
            return Ok("skip: no params".into());
        };
        let data = objects::annotation(&found, objects::PARAMS).context("no parameters")?;
        let new = String::from_utf8(changed(data.as_bytes(), &op.only)?)?;
        if !kube
            .delete("store-op", params, Some(objects::version(&found)))
            .await
            .map_err(err)?
        {
            return Ok("skip: params changed".into());
        }
        let annotations = std::collections::BTreeMap::from([(objects::PARAMS.to_string(), new)]);
        let lease = objects::object(&names, params, "params", annotations);
        return Ok(match kube.create("store-op", &lease).await {
            Ok(_) => format!(
                "recreated {params} as {}",
                objects::annotation(&lease, objects::PARAMS).unwrap_or("")
            ),
            Err(e) => format!("skip: {e}"),
        });
    }
    let (slots, _) = kube
        .list("store-op", &names.role("slot"))
        .await
        .map_err(err)?;
    let held: Vec<(u32, Option<Owner>)> = slots
        .iter()
        .filter(|l| objects::holder(l).is_some())
        .filter_map(|l| {
            let owner = objects::annotation(l, objects::OWNER);
            Some((
                names.slot_of(objects::name(l))?,
                owner.and_then(|o| parse_owner(o.as_bytes())),
            ))
        })
        .collect();
    if op.op == "holder" {
        return Ok(holder(op, &held));
    }
    let Some((slot, pod)) = pick(op, held) else {
        return Ok("skip: no slot held by a free sidecar".into());
    };
    let name = names.slot(slot);
    let l = slots
        .iter()
        .find(|l| objects::name(l) == name)
        .context("the slot object")?;
    let (mark, _) = objects::mark(l).map_err(|e| anyhow::anyhow!(e))?;
    let lowered = mark.saturating_sub(op.lower_by);
    let value = (op.op != "delete-mark").then(|| objects::mark_value(lowered, "00000000000000ff"));
    // Only while the slot object is as read: still held, its mark unchanged.
    let patch = objects::annotate(objects::version(l), &[(objects::MARK, value)]);
    Ok(match kube.patch("store-op", &name, patch).await {
        Ok(_) => format!("{} slot {slot} of {pod}: mark {mark} -> {lowered}", op.op),
        Err(e) => format!("skip: {e}"),
    })
}
