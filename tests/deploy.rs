//! What ships in deploy/ (Kubernetes manifests, alert rules, the Grafana dashboard) and
//! docker-compose.yml, checked with the real tools: kubernetes-validate (schemas of 1.29 and
//! the newest it knows), yamllint, promtool (rules, rule unit tests, metrics lint), and the
//! dashboard's and rules' metric names against a live `/metrics`.

mod common;

use common::*;
use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

#[test]
fn manifests_validate_against_kubernetes_1_29_and_the_newest_schemas() {
    let k8s = repo().join("deploy/kubernetes");
    for version in [Some("1.29.0"), None] {
        let mut cmd = Command::new(tool("kubernetes-validate"));
        cmd.arg("--strict");
        if let Some(v) = version {
            cmd.args(["-k", v]);
        }
        cmd.arg(k8s.join("deployment.yaml"))
            .arg(k8s.join("zookeeper.yaml"))
            .arg(k8s.join("etcd/deployment.yaml"))
            .arg(k8s.join("etcd/etcd.yaml"))
            .arg(k8s.join("statefulset/statefulset.yaml"))
            .arg(k8s.join("kube/rbac.yaml"))
            .arg(k8s.join("kube/deployment.yaml"))
            .arg(k8s.join("kube/statefulset.yaml"));
        let (ok, out) = run_tool(&mut cmd, LIMIT);
        assert!(ok, "kubernetes-validate {version:?}:\n{out}");
        for resource in [
            "deployment/idcar-demo",
            "statefulset/zk",
            "service/zk-hs",
            "poddisruptionbudget/zk",
            "statefulset/etcd",
            "service/etcd-hs",
            "poddisruptionbudget/etcd",
            "statefulset/idcar-ordinal",
            "service/idcar-ordinal",
            "serviceaccount/idcar",
            "role/idcar-leases",
            "rolebinding/idcar-leases",
            "statefulset/idcar-kube-ordinal",
        ] {
            assert!(
                out.contains(&format!("passed for resource {resource}")),
                "{resource} not validated ({version:?}):\n{out}"
            );
        }
    }
}

#[test]
fn manifests_agree_with_each_other_and_with_idcar() {
    let (ok, help) = run_tool(Command::new(BIN).args(["serve", "--help"]), LIMIT);
    assert!(ok, "{help}");
    let help_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(help_file.path(), &help).unwrap();
    let (ok, out) = run_tool(
        Command::new(tool("python"))
            .arg(repo().join("deploy/check_manifests.py"))
            .arg(help_file.path()),
        LIMIT,
    );
    assert!(ok, "{out}");
    assert!(out.contains(" passed, 0 failed"), "{out}");
}

#[test]
fn yaml_is_lint_clean() {
    let (ok, out) = run_tool(
        Command::new(tool("yamllint")).current_dir(repo()).args([
            "-c",
            ".yamllint.yml",
            "--strict",
            "deploy",
            "docker-compose.yml",
            "docker-compose.tls.yml",
        ]),
        LIMIT,
    );
    assert!(ok, "{out}");
}

#[test]
fn alert_rules_check_and_every_alert_is_unit_tested() {
    let dir = repo().join("deploy/prometheus");
    let (ok, out) = run_tool(
        Command::new(tool("promtool")).current_dir(&dir).args([
            "check",
            "rules",
            "idcar-rules.yml",
        ]),
        LIMIT,
    );
    assert!(ok, "{out}");
    let (ok, out) = run_tool(
        Command::new(tool("promtool")).current_dir(&dir).args([
            "test",
            "rules",
            "idcar-rules.test.yml",
        ]),
        LIMIT,
    );
    assert!(ok && out.contains("SUCCESS"), "{out}");
    // Every alert has a unit test.
    let rules = std::fs::read_to_string(dir.join("idcar-rules.yml")).unwrap();
    let tests = std::fs::read_to_string(dir.join("idcar-rules.test.yml")).unwrap();
    let alerts: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .collect();
    assert!(alerts.len() >= 7, "{alerts:?}");
    // Every alert links to its runbook, which says what it means, how to confirm it (with a
    // metric) and what to do.
    let runbooks = std::fs::read_to_string(repo().join("docs/runbooks.md")).unwrap();
    for a in &alerts {
        let link = format!("runbook_url: docs/runbooks.md#{}", a.to_lowercase());
        let in_rule = rules
            .split("- alert: ")
            .find(|r| r.starts_with(&format!("{a}\n")))
            .unwrap();
        assert!(in_rule.contains(&link), "{a} lacks `{link}`");
        let section = runbooks
            .split("\n## ")
            .find(|s| s.starts_with(&format!("{a}\n")))
            .unwrap_or_else(|| panic!("no runbook for {a} in docs/runbooks.md"));
        for part in ["**Means.**", "**Confirm.**", "**Do.**", "idcar_"] {
            assert!(section.contains(part), "the runbook of {a} lacks {part}");
        }
    }
    for a in alerts {
        assert!(
            tests.contains(&format!(
                "alertname: {a}\n        exp_alerts:\n          - "
            )),
            "no firing test for {a}"
        );
    }
}

/// The PromQL expressions of every dashboard panel, with Grafana's variables filled in.
fn dashboard_exprs() -> Vec<String> {
    let text = std::fs::read_to_string(repo().join("deploy/grafana/idcar-dashboard.json")).unwrap();
    let dash: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut exprs = Vec::new();
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().into_iter().flatten() {
            let e = t["expr"].as_str().unwrap();
            exprs.push(
                e.replace("$__rate_interval", "1m")
                    .replace("$namespace", ".*")
                    .replace("$layout", ".*")
                    .replace("$cluster", ".*"),
            );
        }
    }
    exprs
}

/// `idcar_*` and `process_*` names in `text`.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let rest = &text[i..];
        let starts = (rest.starts_with("idcar_") || rest.starts_with("process_"))
            && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_'));
        if starts {
            let len = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            names.insert(rest[..len].to_string());
            i += len;
        } else {
            i += 1;
        }
    }
    names
}

#[test]
fn dashboard_expressions_parse() {
    let exprs = dashboard_exprs();
    assert!(exprs.len() >= 15, "{}", exprs.len());
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, e) in exprs.iter().enumerate() {
        rules.push_str(&format!(
            "      - record: dashboard:panel{i}\n        expr: {}\n",
            serde_json::to_string(e).unwrap()
        ));
    }
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), rules).unwrap();
    let (ok, out) = run_tool(
        Command::new(tool("promtool"))
            .args(["check", "rules"])
            .arg(file.path()),
        LIMIT,
    );
    assert!(ok, "{out}");
}

/// A live `/metrics` passes `promtool check metrics`, and every metric the dashboard and the
/// alert rules use is there.
#[tokio::test]
async fn live_metrics_lint_clean_and_cover_dashboard_and_rules() {
    let mut idcar = Idcar::start(&[]).await;
    idcar.wait_ready(Duration::from_secs(10)).await;
    idcar.take(5).await.unwrap();
    let (status, body) = idcar.admin_get("/metrics").await;
    assert_eq!(status, 200);
    let mut lint = Command::new(tool("promtool"));
    lint.args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = lint.spawn().unwrap();
    {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(body.as_bytes())
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics:\n{said}"
    );

    let exported = metric_names(&body);
    let rules = std::fs::read_to_string(repo().join("deploy/prometheus/idcar-rules.yml")).unwrap();
    let mut used = metric_names(&rules);
    for e in dashboard_exprs() {
        used.extend(metric_names(&e));
    }
    assert!(used.len() >= 15, "{used:?}");
    let missing: Vec<_> = used.difference(&exported).collect();
    assert!(missing.is_empty(), "not in /metrics: {missing:?}");
    idcar.stop_ok().await;
}
