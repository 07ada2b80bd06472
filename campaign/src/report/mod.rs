//! Probing the sidecars (warm-up, liveness at the end) and the report: a JSON file for
//! machines and a short text summary for people.

use crate::args::Args;
use crate::check::{self, Setup, Verdict};
use crate::liveness::Liveness;
use crate::load::{ClientLog, Op, Outcome};
use crate::nemesis::Nemesis;
use crate::procs::{Incarnation, Pool};
use anyhow::Result;
use idcar_core::layout::Layout;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

mod summary;
use summary::summary;

/// Per-sidecar availability.
#[derive(Debug, Default, Serialize)]
struct Availability {
    requests: usize,
    ok: usize,
    /// Share of requests answered with IDs.
    ok_share: f64,
    /// Share of the run's seconds in which the sidecar answered at least once with IDs.
    seconds_with_ids: f64,
    incarnations: usize,
}

/// What one idcar version did in the run.
#[derive(Debug, Default, Serialize)]
struct Version {
    incarnations: usize,
    ids: usize,
}

/// Incarnations and IDs issued per idcar version.
fn versions(ops: &[Op], incarnations: &[Incarnation]) -> BTreeMap<&'static str, Version> {
    let which: BTreeMap<(usize, u32), &'static str> = incarnations
        .iter()
        .map(|i| ((i.sidecar, i.number), i.version))
        .collect();
    let mut m: BTreeMap<&'static str, Version> = BTreeMap::new();
    for i in incarnations {
        m.entry(i.version).or_default().incarnations += 1;
    }
    for o in ops.iter().filter(|o| o.outcome == Outcome::Ok) {
        let v = which
            .get(&(o.sidecar, o.incarnation))
            .copied()
            .unwrap_or("this");
        m.entry(v).or_default().ids += o.count;
    }
    m
}

#[derive(Debug, Default, Serialize)]
struct Requests {
    total: usize,
    ok: usize,
    refused: usize,
    timeout: usize,
    failed: usize,
    binary: usize,
    http: usize,
}

#[derive(Serialize)]
struct Report<'a> {
    verdict: &'static str,
    seed: u64,
    layout: &'a str,
    cluster: u8,
    sidecars: u32,
    pool_size: u32,
    plant_bug: String,
    store: crate::procs::Store,
    /// The main pool and those beside it, each in its own tree.
    pools: &'a [Pool],
    duration_s: f64,
    zk_session_timeout_ms: u128,
    lease_horizon_ms: u128,
    idle_horizon_ms: u128,
    renew_interval_ms: u128,
    faults_by_kind: BTreeMap<String, usize>,
    requests: Requests,
    #[serde(flatten)]
    verdict_detail: &'a Verdict,
    availability: BTreeMap<usize, Availability>,
    /// Per idcar version run (`this`, and `previous` with `--previous-idcar`): incarnations
    /// and the IDs they issued.
    versions: BTreeMap<&'static str, Version>,
    liveness: Option<Liveness>,
    unexpected_exits: Vec<String>,
    faults: &'a [crate::nemesis::Fault],
    incarnations: &'a [Incarnation],
}

/// Everything about the run the report needs.
pub struct Run<'a> {
    pub args: &'a Args,
    pub seed: u64,
    pub layout: &'a dyn Layout,
    pub cluster: u8,
    pub started_ns: u64,
    pub faults_end_ns: u64,
    pub out: &'a Path,
    /// The pool's other parameters (the reconfigure fault).
    pub other: &'a crate::procs::Reconfig,
    pub pools: &'a [Pool],
    /// The sidecars' session timeout, or with etcd their lease TTL, as they were given it.
    pub expiry: Duration,
}

impl Run<'_> {
    /// Judges the history, writes the report, prints the summary: `Ok(true)` when it passed.
    pub fn judge(
        &self,
        logs: Vec<ClientLog>,
        incarnations: &[Incarnation],
        nem: &Nemesis,
        liveness: Option<Liveness>,
    ) -> Result<bool> {
        let (ops, ids) = merge(logs);
        let holds: Vec<check::Hold> = incarnations.iter().flat_map(check::holds).collect();
        let setup = self.setup(incarnations);
        let mut verdict = check::check(&setup, &ops, &ids, &holds, &nem.done, incarnations);
        add_findings(&mut verdict, nem, liveness.as_ref());
        let passed = verdict.violations.is_empty();
        let report = self.report(&ops, &verdict, nem, liveness, incarnations);
        if self.args.save_history {
            self.save_history(&ops, &ids)?;
        }
        let json = self.out.join("report.json");
        std::fs::write(&json, serde_json::to_string_pretty(&report)?)?;
        let text = summary(&report);
        std::fs::write(self.out.join("report.txt"), &text)?;
        print!("{text}");
        println!("campaign: report {} (logs beside it)", json.display());
        Ok(passed)
    }

    /// What the checker needs to know of the run.
    fn setup(&self, incarnations: &[Incarnation]) -> Setup<'_> {
        let a = self.args;
        Setup {
            layout: self.layout,
            scheme: self.layout.scheme(),
            cluster: u64::from(self.cluster),
            medallion_base: 0x100_0000_0000,
            pools: self.pools,
            session_timeout_ns: self.expiry.as_nanos() as u64,
            horizon_ns: a.lease_horizon.as_nanos() as u64,
            idle_horizon_ns: a.idle_horizon.as_nanos() as u64,
            faults_end_ns: self.faults_end_ns,
            other: Some(check::Other {
                layout: self.other.layout.as_ref(),
                medallion_base: self.other.medallion_base,
                incarnations: incarnations
                    .iter()
                    .filter(|i| i.reconfigured)
                    .map(|i| (i.sidecar, i.number))
                    .collect(),
            }),
        }
    }

    /// The report on the judged history.
    fn report<'r>(
        &'r self,
        ops: &[Op],
        verdict: &'r Verdict,
        nem: &'r Nemesis,
        liveness: Option<Liveness>,
        incarnations: &'r [Incarnation],
    ) -> Report<'r> {
        let a = self.args;
        let passed = verdict.violations.is_empty();
        let end_ns = ops
            .iter()
            .map(|o| o.end_ns)
            .max()
            .unwrap_or(self.started_ns);
        Report {
            verdict: if passed { "pass" } else { "fail" },
            seed: self.seed,
            layout: self.layout.name(),
            cluster: self.cluster,
            sidecars: a.sidecars,
            pool_size: a.pool_size,
            plant_bug: format!("{:?}", a.plant_bug),
            store: a.store,
            pools: self.pools,
            duration_s: (end_ns.saturating_sub(self.started_ns)) as f64 / 1e9,
            zk_session_timeout_ms: self.expiry.as_millis(),
            lease_horizon_ms: a.lease_horizon.as_millis(),
            idle_horizon_ms: a.idle_horizon.as_millis(),
            renew_interval_ms: a.renew_interval.as_millis(),
            faults_by_kind: nem.done.iter().fold(BTreeMap::new(), |mut m, f| {
                *m.entry(f.kind.name().to_string()).or_default() += 1;
                m
            }),
            requests: requests(ops),
            verdict_detail: verdict,
            availability: availability(ops, incarnations, self.started_ns, end_ns),
            versions: versions(ops, incarnations),
            liveness,
            unexpected_exits: nem
                .unexpected_exits
                .iter()
                .map(|(s, n, how)| format!("sidecar {s} incarnation {n}: {how}"))
                .collect(),
            faults: &nem.done,
            incarnations,
        }
    }
}

/// Every client's requests in one history: the requests, and the IDs they index into.
fn merge(logs: Vec<ClientLog>) -> (Vec<Op>, Vec<u128>) {
    let mut ops: Vec<Op> = Vec::new();
    let mut ids: Vec<u128> = Vec::new();
    for log in logs {
        let base = ids.len();
        ids.extend_from_slice(&log.ids);
        ops.extend(log.ops.into_iter().map(|mut o| {
            o.first += base;
            o
        }));
    }
    (ops, ids)
}

/// What the checker cannot see in the history: sidecars that exited by themselves, what a
/// fault found wrong by itself, liveness at the end.
fn add_findings(verdict: &mut Verdict, nem: &Nemesis, liveness: Option<&Liveness>) {
    for (s, n, how) in &nem.unexpected_exits {
        verdict.violations.push(check::Violation {
            check: "liveness: no sidecar exits by itself",
            detail: format!("sidecar {s} incarnation {n} exited: {how}"),
        });
    }
    for (check, detail) in &nem.violations {
        verdict.violations.push(check::Violation {
            check,
            detail: detail.clone(),
        });
    }
    if let Some(l) = liveness.filter(|l| !l.passed) {
        verdict.violations.push(check::Violation {
            check: "liveness at the end",
            detail: format!(
                "{:.1} s after healing: {} serving, {} exhausted; {}",
                l.seconds,
                l.serving,
                l.exhausted,
                l.other.join("; ")
            ),
        });
    }
}

impl Run<'_> {
    /// One JSON line per request, its IDs in hex (`history.jsonl` beside the report).
    fn save_history(&self, ops: &[Op], ids: &[u128]) -> Result<()> {
        use std::io::Write;
        let f = std::fs::File::create(self.out.join("history.jsonl"))?;
        let mut w = std::io::BufWriter::new(f);
        for op in ops {
            let mut v = serde_json::to_value(op)?;
            let hex: Vec<String> = ids[op.first..op.first + op.count]
                .iter()
                .map(|id| format!("{id:x}"))
                .collect();
            v["ids"] = serde_json::json!(hex);
            serde_json::to_writer(&mut w, &v)?;
            w.write_all(b"\n")?;
        }
        w.flush()?;
        Ok(())
    }
}

fn requests(ops: &[Op]) -> Requests {
    let mut r = Requests::default();
    for o in ops {
        r.total += 1;
        match o.outcome {
            Outcome::Ok => r.ok += 1,
            Outcome::Refused(_) => r.refused += 1,
            Outcome::Timeout => r.timeout += 1,
            Outcome::Failed(_) => r.failed += 1,
        }
        if o.http {
            r.http += 1;
        } else {
            r.binary += 1;
        }
    }
    r
}

fn availability(
    ops: &[Op],
    incarnations: &[Incarnation],
    start_ns: u64,
    end_ns: u64,
) -> BTreeMap<usize, Availability> {
    let seconds = ((end_ns.saturating_sub(start_ns)) / 1_000_000_000).max(1) as usize;
    let mut m: BTreeMap<usize, (Availability, Vec<bool>)> = BTreeMap::new();
    for o in ops {
        let (a, secs) = m
            .entry(o.sidecar)
            .or_insert_with(|| (Availability::default(), vec![false; seconds + 1]));
        a.requests += 1;
        if o.outcome == Outcome::Ok {
            a.ok += 1;
            let i = (o.end_ns.saturating_sub(start_ns) / 1_000_000_000) as usize;
            if let Some(b) = secs.get_mut(i) {
                *b = true;
            }
        }
    }
    m.into_iter()
        .map(|(s, (mut a, secs))| {
            a.ok_share = a.ok as f64 / a.requests.max(1) as f64;
            a.seconds_with_ids =
                secs[..seconds].iter().filter(|b| **b).count() as f64 / seconds as f64;
            a.incarnations = incarnations.iter().filter(|i| i.sidecar == s).count();
            (s, a)
        })
        .collect()
}
