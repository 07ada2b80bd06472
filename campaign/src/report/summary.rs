//! The run's summary as printed: parameters, pools, counts, the figures judged against their
//! bounds, availability after faults, the verdict.

use super::Report;
use crate::check::{self, Verdict};

pub(super) fn summary(r: &Report) -> String {
    header(r) + &judged(r)
}

/// The run's parameters, pools and counts.
fn header(r: &Report) -> String {
    let mut t = format!(
        "\n== idcar fault campaign: {} ==\nstore {:?}  seed {}  layout {}  sidecars {}  pool {}  planted bug {}\n\
         duration {:.1} s  session timeout (etcd: TTL; Kubernetes: --kube-ttl) {} ms  horizon {} ms (idle {} ms)  renew {} ms\n",
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
    t + &counts(r)
}

/// The run's counts: faults, requests, IDs, versions, availability per sidecar.
fn counts(r: &Report) -> String {
    let v = r.verdict_detail;
    let mut t = String::new();
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
    t
}

/// The figures judged against bounds, per fault kind, and the verdict's findings.
fn judged(r: &Report) -> String {
    let v = r.verdict_detail;
    let mut t = "longest per fault kind against its bound:\n".to_string();
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
