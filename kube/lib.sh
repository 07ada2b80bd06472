# Shared by the kube/ scripts and the test harness: which Kubernetes release the Lease-object
# store's tests run against and where its build is kept.
#
# kube/ensure-kube.sh builds kube-apiserver and kubectl from the Kubernetes Go module into
# ${IDCAR_CACHE:-$HOME/.cache/idcar}/stores/kubernetes-VERSION/bin/; the API server stores its
# objects in an etcd of etcd/ensure-etcd.sh's newest release.

# The release the tests run (docs/compatibility.md says which others the store supports).
KUBE_VERSION=1.37.2
# The Prometheus Operator whose CRDs (PodMonitor, PrometheusRule) are registered before the
# manifests of deploy/kubernetes are checked against the API server: from its Go module.
PROMETHEUS_OPERATOR_VERSION=0.85.0

# kube_home: the directory the build is (or would be) kept in.
kube_home() {
  printf '%s\n' "${IDCAR_CACHE:-$HOME/.cache/idcar}/stores/kubernetes-$KUBE_VERSION"
}
