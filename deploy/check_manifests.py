"""Cross-file checks of deploy/ that no schema validator makes (run by tests/deploy.rs with
the test venv's Python: `target/test-tools/venv/bin/python deploy/check_manifests.py HELP`,
HELP being the text of `idcar serve --help`).

- the PrometheusRule carries exactly the groups of the plain rules file;
- the PodMonitor selects the example's pods and scrapes a port the idcar container names;
- the kustomization lists files that exist;
- the example pods (ZooKeeper's Deployment and StatefulSet, etcd's) run idcar as a native sidecar, non-root, read-only, no privilege
  escalation, all capabilities dropped, with requests and limits, probes that read state
  only (never an ID path), an fsGroup for the socket, and only IDCAR_* variables that
  `idcar serve --help` knows.
"""
import os
import sys

import yaml

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
K8S = os.path.join(ROOT, "deploy", "kubernetes")
failures = []
checks = 0


def check(ok, what):
    global checks
    checks += 1
    if not ok:
        failures.append(what)


def load(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


help_text = open(sys.argv[1]).read()

rules = load(os.path.join(ROOT, "deploy", "prometheus", "idcar-rules.yml"))[0]
prule = load(os.path.join(K8S, "prometheusrule.yaml"))[0]
check(prule["kind"] == "PrometheusRule", "prometheusrule.yaml is a PrometheusRule")
check(prule["spec"]["groups"] == rules["groups"],
      "PrometheusRule groups differ from deploy/prometheus/idcar-rules.yml")

def workload(path):
    """The Deployment or StatefulSet in `path`."""
    found = [d for d in load(path) if d["kind"] in ("Deployment", "StatefulSet")]
    check(len(found) == 1, f"{path} holds one Deployment or StatefulSet")
    return found[0]


def check_deployment(path):
    """The example pod in `path`: native sidecar, hardened, probes, variables, volumes."""
    deploy = workload(path)
    pod = deploy["spec"]["template"]
    spec = pod["spec"]
    sidecars = [c for c in spec.get("initContainers", []) if c["name"] == "idcar"]
    check(len(sidecars) == 1, "an init container named idcar")
    idcar = sidecars[0]
    check(idcar.get("restartPolicy") == "Always", "idcar is a native sidecar (restartPolicy: Always)")

    mon = load(os.path.join(K8S, "podmonitor.yaml"))[0]
    labels = pod["metadata"]["labels"]
    for k, v in mon["spec"]["selector"]["matchLabels"].items():
        check(labels.get(k) == v, f"PodMonitor selects {k}={v}, the pod has {labels.get(k)!r}")
    ports = {p["name"]: p["containerPort"] for p in idcar.get("ports", [])}
    for ep in mon["spec"]["podMetricsEndpoints"]:
        check(ep["port"] in ports, f"PodMonitor port {ep['port']!r} is named by the idcar container")
        check(ep.get("path", "/metrics") == "/metrics", "PodMonitor scrapes /metrics")

    kust = load(os.path.join(K8S, "kustomization.yaml"))[0]
    for r in kust["resources"]:
        check(os.path.exists(os.path.join(K8S, r)), f"kustomization resource {r} exists")

    check(spec.get("securityContext", {}).get("fsGroup") is not None, "the pod sets fsGroup")
    check(0 < spec.get("terminationGracePeriodSeconds", 0) <= 120, "a termination grace period")
    for c in spec.get("initContainers", []) + spec["containers"]:
        sc = c.get("securityContext", {})
        name = c["name"]
        check(sc.get("runAsNonRoot") is True and sc.get("runAsUser", 0) != 0, f"{name} runs as non-root")
        check(sc.get("readOnlyRootFilesystem") is True, f"{name} has a read-only root filesystem")
        check(sc.get("allowPrivilegeEscalation") is False, f"{name} cannot escalate privileges")
        check(sc.get("capabilities", {}).get("drop") == ["ALL"], f"{name} drops all capabilities")
        res = c.get("resources", {})
        check({"cpu", "memory"} <= set(res.get("requests", {})), f"{name} has cpu and memory requests")
        check("memory" in res.get("limits", {}), f"{name} has a memory limit")

    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        p = idcar.get(probe)
        check(p is not None, f"idcar has a {probe}")
        if p is None:
            continue
        if "httpGet" in p:
            check(p["httpGet"]["path"] in ("/readyz", "/healthz"), f"{probe} reads state only")
            check(p["httpGet"]["port"] in ports or p["httpGet"]["port"] in ports.values(),
                  f"{probe} targets the admin port")
        else:
            check(p.get("exec", {}).get("command", [None, None])[:2] == ["idcar", "probe"],
                  f"{probe} uses idcar probe")

    env = {e["name"]: e for e in idcar.get("env", [])}
    for name in env:
        if name.startswith("IDCAR_"):
            check(name in help_text, f"{name} is a variable `idcar serve --help` knows")
    check("IDCAR_POD_NAME" in env and env["IDCAR_POD_NAME"].get("valueFrom", {}).get("fieldRef", {})
          .get("fieldPath") == "metadata.name", "the pod name comes from the downward API")
    admin = env.get("IDCAR_ADMIN_ADDR", {}).get("value", "")
    check(not admin.startswith("127.") and admin.endswith(":%d" % ports.get("admin", 0)),
          "the admin listener is reachable by kubelet on the named admin port")
    check(env.get("IDCAR_STATE_FILE", {}).get("value", "").startswith("/var/lib/idcar/"),
          "the state file is on the writable volume")
    mounts = {m["mountPath"] for m in idcar.get("volumeMounts", [])}
    check({"/run/idcar", "/var/lib/idcar"} <= mounts, "idcar mounts the socket and state volumes")
    app_mounts = {m["mountPath"] for c in spec["containers"] for m in c.get("volumeMounts", [])}
    check("/run/idcar" in app_mounts, "the app shares the socket volume")


EXAMPLES = ("deployment.yaml", os.path.join("etcd", "deployment.yaml"),
            os.path.join("statefulset", "statefulset.yaml"), os.path.join("kube", "deployment.yaml"),
            os.path.join("kube", "statefulset.yaml"))
for example in EXAMPLES:
    check_deployment(os.path.join(K8S, example))
for sub in ("etcd", "statefulset", "kube"):
    kust = load(os.path.join(K8S, sub, "kustomization.yaml"))[0]
    for r in kust["resources"]:
        check(os.path.exists(os.path.join(K8S, sub, r)), f"{sub} kustomization resource {r} exists")

# The StatefulSet prefers its ordinal's slots: the ordinal from the pod-index label, a
# headless Service of its own, and slots that fit the pool for every replica.
path = os.path.join(K8S, "statefulset", "statefulset.yaml")
sts = workload(path)
env = {e["name"]: e for c in sts["spec"]["template"]["spec"]["initContainers"] for e in c.get("env", [])}
check(env.get("IDCAR_PREFER_ORDINAL", {}).get("value") == "true", "the StatefulSet prefers its ordinal")
check(env.get("IDCAR_POD_INDEX", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
      == "metadata.labels['apps.kubernetes.io/pod-index']", "the ordinal comes from the pod-index label")
services = [d for d in load(path) if d["kind"] == "Service"]
check(any(d["metadata"]["name"] == sts["spec"]["serviceName"] and d["spec"].get("clusterIP") == "None"
          for d in services), "the StatefulSet's serviceName is a headless Service in the file")
slots = int(env.get("IDCAR_SLOTS", {}).get("value", "1"))
check(sts["spec"]["replicas"] * slots <= 64, "every replica's preferred slots fit lable64's pool")

# The Lease-object examples run as the service account the Role of rbac.yaml binds, and use no
# other store.
rbac = load(os.path.join(K8S, "kube", "rbac.yaml"))
kinds = {d["kind"]: d for d in rbac}
check(set(kinds) == {"ServiceAccount", "Role", "RoleBinding"}, "kube/rbac.yaml: a ServiceAccount, a Role, a RoleBinding")
rules = kinds["Role"]["rules"]
check(len(rules) == 1 and rules[0]["apiGroups"] == ["coordination.k8s.io"] and rules[0]["resources"] == ["leases"],
      "the Role grants Lease objects only")
check(set(rules[0]["verbs"]) <= {"get", "list", "watch", "create", "patch", "delete"}, "the Role grants only idcar's verbs")
check(kinds["RoleBinding"]["subjects"][0]["name"] == kinds["ServiceAccount"]["metadata"]["name"],
      "the RoleBinding binds the ServiceAccount")
for example in ("deployment.yaml", "statefulset.yaml"):
    w = workload(os.path.join(K8S, "kube", example))
    pod = w["spec"]["template"]["spec"]
    check(pod.get("serviceAccountName") == kinds["ServiceAccount"]["metadata"]["name"],
          f"kube/{example} runs as the Role's service account")
    env = {e["name"]: e for c in pod["initContainers"] for e in c.get("env", [])}
    check(env.get("IDCAR_KUBE", {}).get("value") == "true" and "IDCAR_ZK" not in env and "IDCAR_ETCD" not in env,
          f"kube/{example} keeps its pool in Lease objects and no other store")

for f in failures:
    print(f"FAILED: {f}")
print(f"{checks - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
