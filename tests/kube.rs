//! What is specific to the Kubernetes store, against a real API server (the pinned release,
//! started by the harness on loopback with a throwaway CA, service-account keys and RBAC on;
//! shared by this suite's tests, a namespace each): idcar reaches it as a service account the
//! shipped Role binds and nothing else; a pool lives in its namespace's Lease objects and no
//! other; an idcar without the Role says so and never issues; every manifest under
//! deploy/kubernetes is accepted by the API server itself. What every store must survive is in
//! `store_faults/`; the protocol's own checks in `crates/lease/tests/`.

mod common;

use common::kube::{kubectl_bin, start, start_refused, ApiServer};
use common::*;
use idcar::layout::lable64::Fields;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(20);

fn shared() -> &'static ApiServer {
    ApiServer::shared()
}

/// `idcar pool --kube --json` for lable64 cluster 0 of a pool of `size`, as `kubeconfig`.
fn pool(kubeconfig: &Path, size: u32) -> serde_json::Value {
    let config = kubeconfig.display().to_string();
    let size = size.to_string();
    let (code, out, err) = run(&[
        "pool",
        "--kube",
        "--kubeconfig",
        &config,
        "--pool-size",
        &size,
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str::<serde_json::Value>(&out).unwrap()[0].clone()
}

/// kubectl as the user of `kubeconfig`.
fn kubectl_as(kubeconfig: &Path, args: &[&str]) -> (bool, String) {
    run_tool(
        Command::new(kubectl_bin())
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(args),
        LIMIT,
    )
}

/// Two instances share a pool of Lease objects, as the shipped Role's service account: each
/// holds its own slot, `idcar pool --kube` shows both, and the objects are there for kubectl.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_in_lease_objects_with_only_the_shipped_role() {
    let (config, ns) = tokio::task::spawn_blocking(|| shared().fresh_namespace())
        .await
        .unwrap();
    let a = start(&config, &["--pool-size", "4"]).await;
    let b = start(&config, &["--pool-size", "4"]).await;
    a.wait_ready(LIMIT).await;
    b.wait_ready(LIMIT).await;
    let mut all = Vec::new();
    let mut generators = Vec::new();
    for i in [&a, &b] {
        let ids = i.take(100).await.unwrap();
        generators.push(Fields::unpack(ids[0]).unwrap().generator);
        all.extend(ids);
    }
    assert_unique(&all);
    assert_ne!(generators[0], generators[1], "each holds its own slot");
    let p = pool(&config, 4);
    let held: Vec<u64> = p["held"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["slot"].as_u64().unwrap())
        .collect();
    assert_eq!(held.len(), 2, "{p}");
    assert!(
        p["identity"]["id"].is_string(),
        "the identity recorded: {p}"
    );
    let objects = shared().must(&[
        "get",
        "leases",
        "-n",
        &ns,
        "-l",
        "idcar.dev/pool=idcar.lable64.0",
        "-o",
        "name",
    ]);
    // The params object, four slots, two sessions.
    assert_eq!(objects.lines().count(), 7, "{objects}");
    assert!(objects.contains("lease.coordination.k8s.io/idcar.lable64.0.slot-3"));
    drop(b);
    a.take(1).await.unwrap();
}

/// A graceful stop hands the slot over at once: its session object goes with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_hands_the_slot_over_at_once() {
    let (config, _) = tokio::task::spawn_blocking(|| shared().fresh_namespace())
        .await
        .unwrap();
    let mut a = start(&config, &["--pool-size", "1"]).await;
    a.wait_ready(LIMIT).await;
    let last = *a.take(10).await.unwrap().last().unwrap();
    let b = start_refused(&config, &["--pool-size", "1"]).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_ne!(
        b.admin_get("/readyz").await.0,
        200,
        "two holders of one slot"
    );
    let stopped = std::time::Instant::now();
    a.stop_ok().await;
    b.wait_ready(Duration::from_secs(5)).await;
    let took = stopped.elapsed();
    assert!(took < Duration::from_secs(3), "the hand-over took {took:?}");
    let next = b.take(1).await.unwrap()[0];
    let (l, n) = (Fields::unpack(last).unwrap(), Fields::unpack(next).unwrap());
    assert!(
        (n.timestamp_ms, n.sequence) > (l.timestamp_ms, l.sequence),
        "the successor starts above what was issued: {n:?} after {l:?}"
    );
}

/// Without the Role, idcar says so in one line, names the Role, and never issues.
/// An operator deletes the pool's params object (to change its parameters, or the restore
/// procedure's step) under an idle holder that writes its mark seldom: it stops issuing within
/// a second, as in every store — not at its next write, nor once someone records the pool
/// anew — then agrees on the pool again and serves under the new identity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_params_object_deleted_stops_an_idle_holder_within_a_second() {
    let (config, ns) = tokio::task::spawn_blocking(|| shared().fresh_namespace())
        .await
        .unwrap();
    let idle = ["--lease-horizon", "5s", "--idle-horizon", "60s"];
    let a = start(&config, &idle).await;
    a.wait_ready(LIMIT).await;
    a.take(100).await.unwrap();
    // Past its first writes: idle from here on.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let ns2 = ns.clone();
    let before = tokio::task::spawn_blocking(move || {
        let uid = uid_of(&ns2).expect("the params object");
        shared().must(&["delete", "lease", "idcar.lable64.0", "-n", &ns2]);
        uid
    })
    .await
    .unwrap();
    let deleted = std::time::Instant::now();
    let why = readyz_until(&a, Duration::from_secs(10), |r| r.starts_with("not ready")).await;
    let took = deleted.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "the holder stopped {took:?} after the params object was deleted: {why}"
    );
    assert!(
        a.metric("idcar_lease_losses_total{reason=\"replaced\"}")
            .await
            .unwrap_or(0.0)
            >= 1.0
    );
    // Agreed again: the pool recorded anew, under a params object of its own (its claims then
    // wait past every mark, a minute here).
    let deadline = std::time::Instant::now() + LIMIT;
    loop {
        let ns = ns.clone();
        let now = tokio::task::spawn_blocking(move || uid_of(&ns))
            .await
            .unwrap();
        if now.as_deref().is_some_and(|u| u != before) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not recorded anew: {}",
            a.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A place in the queue left on a holder's session object (its clearing write lost in an
/// overloaded API server) holds no one up: a holder is not in the queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_left_on_a_holders_session_does_not_hold_the_queue_up() {
    let (config, ns) = tokio::task::spawn_blocking(|| shared().fresh_namespace())
        .await
        .unwrap();
    // Two slots: with one free, a claimant behind one place takes nothing by rank.
    let two = ["--pool-size", "2"];
    let a = start(&config, &two).await;
    a.wait_ready(LIMIT).await;
    let ns2 = ns.clone();
    tokio::task::spawn_blocking(move || {
        let path = "jsonpath={.items[*].metadata.name}";
        let sessions = shared()
            .kubectl(&[
                "get",
                "leases",
                "-n",
                &ns2,
                "-l",
                "idcar.dev/role=session",
                "-o",
                path,
            ])
            .unwrap();
        let session = sessions
            .split_whitespace()
            .next()
            .expect("a's session")
            .to_string();
        let place = "idcar.dev/queued=1";
        shared().must(&["annotate", "lease", &session, place, "-n", &ns2]);
    })
    .await
    .unwrap();
    let b = start(&config, &two).await;
    b.wait_ready(LIMIT).await;
    let (x, y) = (a.take(1).await.unwrap(), b.take(1).await.unwrap());
    let (x, y) = (Fields::unpack(x[0]).unwrap(), Fields::unpack(y[0]).unwrap());
    assert_ne!(x.generator, y.generator, "one slot each");
}

/// The uid of the params object of lable64 cluster 0 in `ns`, if there is one.
fn uid_of(ns: &str) -> Option<String> {
    let path = "jsonpath={.metadata.uid}";
    let uid = shared()
        .kubectl(&["get", "lease", "idcar.lable64.0", "-n", ns, "-o", path])
        .ok()?;
    Some(uid.trim().to_string()).filter(|u| !u.is_empty())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_role_idcar_says_so_and_never_issues() {
    let config = tokio::task::spawn_blocking(|| {
        let s = shared();
        let ns = format!("norole-{}", std::process::id());
        s.must(&["create", "namespace", &ns]);
        s.must(&["create", "serviceaccount", "idcar", "-n", &ns]);
        s.service_account(&ns, "idcar")
    })
    .await
    .unwrap();
    let mut a = start_refused(&config, &[]).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (code, body) = a.admin_get("/readyz").await;
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("deploy/kubernetes/kube/rbac.yaml"), "{body}");
    assert!(a.take(1).await.is_err(), "an ID without a slot");
    a.stop().await;
    let logs = a.logs();
    let refusals: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("refused") && l.contains("forbidden"))
        .collect();
    assert!(!refusals.is_empty(), "{logs}");
    assert!(
        refusals[0].contains("rbac.yaml"),
        "names the Role: {}",
        refusals[0]
    );
}

/// The Role is namespaced: the service account of one namespace cannot read or write another
/// namespace's Lease objects, nor anything but Lease objects in its own, nor `update`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_in_one_namespace_cannot_touch_anothers() {
    let ((a, ns_a), (_, ns_b)) =
        tokio::task::spawn_blocking(|| (shared().fresh_namespace(), shared().fresh_namespace()))
            .await
            .unwrap();
    let mut other = start_refused(&a, &["--kube-namespace", &ns_b]).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (code, body) = other.admin_get("/readyz").await;
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("forbidden"), "{body}");
    other.stop().await;
    let can = |args: &[&str]| {
        let (_, out) = kubectl_as(&a, &[&["auth", "can-i"], args].concat());
        out.trim().to_string()
    };
    assert_eq!(
        can(&["patch", "leases.coordination.k8s.io", "-n", &ns_a]),
        "yes"
    );
    assert_eq!(
        can(&["patch", "leases.coordination.k8s.io", "-n", &ns_b]),
        "no"
    );
    assert_eq!(
        can(&["list", "leases.coordination.k8s.io", "-n", &ns_b]),
        "no"
    );
    assert_eq!(
        can(&["update", "leases.coordination.k8s.io", "-n", &ns_a]),
        "no"
    );
    assert_eq!(can(&["get", "secrets", "-n", &ns_a]), "no");
    assert_eq!(can(&["create", "pods", "-n", &ns_a]), "no");
    let (ok, out) = kubectl_as(&a, &["get", "leases", "-n", &ns_b]);
    assert!(!ok && out.contains("forbidden"), "{out}");
}

/// Every manifest under deploy/kubernetes, and each kustomization, is accepted by the API
/// server in a server-side dry run, the Prometheus Operator's CRDs registered first.
#[test]
fn every_manifest_is_accepted_by_the_api_server() {
    let s = shared();
    let ns = format!("manifests-{}", std::process::id());
    s.must(&["create", "namespace", &ns]);
    let crds = idcar_testkit::kube::home().join("crds");
    s.must(&["apply", "--server-side", "-f", &crds.display().to_string()]);
    s.must(&[
        "wait",
        "--for",
        "condition=established",
        "--timeout",
        "60s",
        "crd/podmonitors.monitoring.coreos.com",
        "crd/prometheusrules.monitoring.coreos.com",
    ]);
    let root = repo().join("deploy/kubernetes");
    let mut files = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "yaml") {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut checked = 0;
    for f in &files {
        let path = f.display().to_string();
        let (flag, what) = match f.file_name().is_some_and(|n| n == "kustomization.yaml") {
            true => ("-k", f.parent().unwrap().display().to_string()),
            false => ("-f", path.clone()),
        };
        let out = s
            .kubectl(&["apply", "--dry-run=server", "-n", &ns, flag, &what])
            .unwrap_or_else(|e| panic!("{path}: the API server refused it:\n{e}"));
        assert!(out.contains("(server dry run)"), "{path}:\n{out}");
        checked += 1;
    }
    assert!(checked >= 14, "{files:?}");
}
