//! Probing the sidecars (warm-up, liveness at the end) and the report: a JSON file for
//! machines and a short text summary for people.

use crate::check::{self, Setup, Verdict};
use crate::load::{exchange, ClientLog, Op, Outcome};
use crate::nemesis::Nemesis;
use crate::procs::{Cluster, Incarnation, Pool, SidecarSpec};
use crate::Args;
use anyhow::Result;
use idcar_core::layout::Layout;
use serde::Serialize;
use std::collections::BTreeMap;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// What one probe of a sidecar found.
#[derive(Debug, PartialEq, Eq)]
enum Probe {
    Serves,
    Exhausted,
    Other(String),
}

fn probe(socket: &Path) -> Probe {
    let Ok(mut s) = UnixStream::connect(socket) else {
        return Probe::Other("no socket".into());
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
    match exchange(&mut s, 1) {
        Ok(Ok(_)) => Probe::Serves,
        // The queue's head reports the exhausted pool; the others wait behind it.
        Ok(Err((_, reason)))
            if reason.contains("pool exhausted")
                || reason.contains("waiting in the slot queue") =>
        {
            Probe::Exhausted
        }
        Ok(Err((_, reason))) => Probe::Other(reason),
        Err(e) => Probe::Other(e.to_string()),
    }
}

/// Whether the sidecar on `socket` answers a request with IDs now.
pub fn serves(socket: &Path) -> bool {
    probe(socket) == Probe::Serves
}

/// Waits (bounded) until `want` sidecars serve: how many did, and when.
pub fn wait_until_served(cl: &Cluster, want: usize, limit: Duration) -> (usize, Duration) {
    let t = Instant::now();
    loop {
        let n = cl
            .sidecars
            .iter()
            .filter(|s| probe(&s.socket) == Probe::Serves)
            .count();
        if n >= want || t.elapsed() > limit {
            return (n, t.elapsed());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Liveness once everything is healed.
#[derive(Debug, Serialize)]
pub struct Liveness {
    pub passed: bool,
    /// Seconds from the last heal until every sidecar that can hold a slot served and the
    /// others reported exhaustion (or the last state seen).
    pub seconds: f64,
    pub limit_seconds: f64,
    pub serving: usize,
    pub exhausted: usize,
    pub other: Vec<String>,
}

/// After healing: within `settle` (what a successor may need by the docs) + 5 s, in every
/// pool the holders (`min(pool, sidecars)`) serve and the others report exhaustion.
pub fn liveness(
    cl: &mut Cluster,
    nem: &mut Nemesis,
    spec: &SidecarSpec,
    settle: Duration,
) -> Liveness {
    let t = Instant::now();
    let limit = settle + Duration::from_secs(5);
    loop {
        let _ = nem.step(cl, spec, false);
        let probes: Vec<Probe> = cl.sidecars.iter().map(|s| probe(&s.socket)).collect();
        let serving = probes.iter().filter(|p| **p == Probe::Serves).count();
        let exhausted = probes.iter().filter(|p| **p == Probe::Exhausted).count();
        let passed = spec.pools.iter().all(|pool| {
            let mine = &probes[pool.sidecars.clone()];
            let serve = mine.iter().filter(|p| **p == Probe::Serves).count();
            let exhaust = mine.iter().filter(|p| **p == Probe::Exhausted).count();
            serve == pool.holders() && exhaust == mine.len() - pool.holders()
        });
        if passed || t.elapsed() > limit {
            return Liveness {
                passed,
                seconds: t.elapsed().as_secs_f64(),
                limit_seconds: limit.as_secs_f64(),
                serving,
                exhausted,
                other: probes
                    .into_iter()
                    .enumerate()
                    .filter_map(|(i, p)| match p {
                        Probe::Other(why) => Some(format!("sidecar {i}: {why}")),
                        _ => None,
                    })
                    .collect(),
            };
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

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

fn summary(r: &Report) -> String {
    let v = r.verdict_detail;
    let mut t = format!(
        "\n== idcar fault campaign: {} ==\nstore {:?}  seed {}  layout {}  sidecars {}  pool {}  planted bug {}\n\
         duration {:.1} s  session timeout (etcd: TTL) {} ms  horizon {} ms (idle {} ms)  renew {} ms\n",
        r.verdict.to_uppercase(),
        r.store,
        r.seed,
        r.layout,
        r.sidecars,
        r.pool_size,
        r.plant_bug,
        r.duration_s,
        r.zk_session_timeout_ms,
        r.lease_horizon_ms,
        r.idle_horizon_ms,
        r.renew_interval_ms
    );
    let pools: Vec<String> = r
        .pools
        .iter()
        .map(|p| {
            format!(
                "{} {} sidecars for {} slots{} ({}, sidecars {}..{})",
                p.name,
                p.sidecars.len(),
                p.size,
                if p.slots > 1 {
                    format!(", {} each", p.slots)
                } else {
                    String::new()
                },
                p.root,
                p.sidecars.start,
                p.sidecars.end - 1
            )
        })
        .collect();
    t += &format!("pools: {}\n", pools.join("; "));
    let faults: Vec<String> = r
        .faults_by_kind
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    t += &format!("faults: {}\n", faults.join(", "));
    let q = &r.requests;
    t += &format!(
        "requests {} (binary {}, HTTP {}): ok {}, refused {}, timed out {}, failed {}\n",
        q.total, q.binary, q.http, q.ok, q.refused, q.timeout, q.failed
    );
    t += &format!(
        "IDs checked {}, duplicates {}\n",
        v.ids_checked, v.duplicates
    );
    if v.order_checked {
        t += &format!(
            "order per slot: {} IDs not above their slot's earlier IDs\n",
            v.order_violations
        );
    }
    if r.versions.len() > 1 {
        let each: Vec<String> = r
            .versions
            .iter()
            .map(|(v, x)| format!("{v}: {} incarnations, {} IDs", x.incarnations, x.ids))
            .collect();
        t += &format!("versions: {}\n", each.join("; "));
    }
    t += "availability (share of seconds with IDs; requests answered with IDs):\n";
    for (s, a) in &r.availability {
        let pool = r.pools[crate::procs::pool_of(r.pools, *s)].name;
        t += &format!(
            "  sidecar {s:2} ({pool:4}): {:5.1} %  {:5.1} %  ({} incarnations)\n",
            a.seconds_with_ids * 100.0,
            a.ok_share * 100.0,
            a.incarnations
        );
    }
    t += "longest per fault kind against its bound:\n";
    for (k, f) in &v.per_kind {
        t += &format!("  {k:10} {:3} faults\n", f.faults);
        for (what, m) in &f.measures {
            let longest = m.longest_ms.map_or("-".into(), |ms| format!("{ms:.0} ms"));
            let bound = m
                .bound_ms
                .map_or("no refusal".into(), |ms| format!("bound {ms:.0} ms"));
            t += &format!("    {what}: {longest} ({bound}), {} measured\n", m.judged);
        }
    }
    t += &recovery_summary(v);
    t += &format!(
        "refusals during busy-neighbour faults (not judged): {}\n",
        v.refusals_under_busy_neighbour
    );
    if let Some(l) = &r.liveness {
        t += &format!(
            "liveness after healing: {} in {:.1} s (limit {:.1} s): {} serving, {} exhausted\n",
            if l.passed { "ok" } else { "FAILED" },
            l.seconds,
            l.limit_seconds,
            l.serving,
            l.exhausted
        );
    }
    if v.violations.is_empty() {
        t += "violations: none\n";
    } else {
        t += &format!("violations: {}\n", v.violations.len());
        for x in &v.violations {
            t += &format!("  [{}] {}\n", x.check, x.detail);
        }
    }
    t
}

/// The availability after faults, per kind: how many, how long until IDs again (the worst
/// and the median of every sidecar stopped; `>=` where a later fault or the history's end cut
/// the measure short), against the bound.
fn recovery_summary(v: &Verdict) -> String {
    if v.recovery.is_empty() {
        return String::new();
    }
    let ms = |t: check::Took| format!("{}{:.0} ms", if t.at_least { ">= " } else { "" }, t.ms);
    let mut t =
        String::from("availability after faults (time until IDs again, against its bound):\n");
    for (k, r) in &v.recovery {
        t += &format!(
            "  {k:10} {:3} faults, {} judged: {}\n",
            r.faults, r.judged, r.what
        );
        let stopped = r.took.len();
        let line = match (r.worst(), r.median()) {
            _ if r.judged == 0 => "not judged (other faults near each)".to_string(),
            (Some(worst), Some(median)) if k != "compact" => format!(
                "{stopped} stopped of {} issuing: worst {}, median {} (bound {:.0} ms)",
                r.watched,
                ms(worst),
                ms(median),
                r.bound_ms
            ),
            (worst, _) if k == "compact" => format!(
                "{stopped} stopped of {} issuing (bound: none stops){}",
                r.watched,
                worst.map_or(String::new(), |w| format!(
                    ", the longest without IDs {}",
                    ms(w)
                ))
            ),
            _ => format!(
                "none stopped of {} issuing (bound {:.0} ms)",
                r.watched, r.bound_ms
            ),
        };
        t += &format!("             {line}");
        if r.broken > 0 {
            t += &format!(": {} over the bound, BROKEN", r.broken);
        }
        t += "\n";
    }
    t
}
