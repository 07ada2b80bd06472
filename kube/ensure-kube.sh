#!/usr/bin/env bash
# Makes sure kube-apiserver and kubectl of the pinned Kubernetes release are built: prints where
# it found them, or builds them from the k8s.io/kubernetes Go module with the Go on PATH
# (GOTOOLCHAIN=local). About 12 minutes on two cores the first time, plus the module downloads.
#
# The module's zip holds no staging/ directory, so its go.mod's replace directives for
# k8s.io/api, k8s.io/apiserver, ... are pointed at those modules' published releases of the same
# Kubernetes version (v0.X.Y for v1.X.Y), its vendor/ directory is dropped and the two commands
# are built with -mod=mod. The build goes to ${IDCAR_CACHE:-$HOME/.cache/idcar}/stores/
# kubernetes-VERSION/bin/, made whole in a temporary directory beside it and moved into place.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=kube/lib.sh
. "$here/lib.sh"

v=$KUBE_VERSION
home=$(kube_home)
tmp=""
trap 'rm -rf "$tmp"' EXIT

build() {
  local start=$SECONDS dir got staging=v0.${v#1.}
  if ! command -v go >/dev/null 2>&1; then
    echo "kubernetes $v: building it needs Go on PATH (tests/ensure-deps.sh installs Debian's golang-go when none is)" >&2
    return 1
  fi
  echo "kubernetes $v: not built; building kube-apiserver and kubectl from the k8s.io/kubernetes Go module with $(go version | cut -d' ' -f3) (about 12 minutes on two cores)" >&2
  tmp=$(mktemp -d "$(dirname "$home")/.kubernetes-$v.XXXXXX")
  mkdir -p "$tmp/bin"
  if ! (
    export GOTOOLCHAIN=local GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0
    # (In a condition, `set -e` does not apply: each step is chained.)
    dir=$(go mod download -json "k8s.io/kubernetes@v$v" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p') &&
      [ -n "$dir" ] && cp -r "$dir" "$tmp/src" && chmod -R u+w "$tmp/src" && cd "$tmp/src" &&
      rm -rf vendor &&
      for m in $(sed -n 's|^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*|\1|p' go.mod); do
        go mod edit "-replace=$m=$m@$staging" || exit 1
      done &&
      go mod tidy -e &&
      ldflags="-s -X k8s.io/component-base/version.gitVersion=v$v -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$v" | cut -d. -f2)" &&
      go build -trimpath -ldflags="$ldflags" -o "$tmp/bin/kube-apiserver" ./cmd/kube-apiserver &&
      go build -trimpath -ldflags="$ldflags" -o "$tmp/bin/kubectl" ./cmd/kubectl
  ) >"$tmp/build.log" 2>&1; then
    tail -50 "$tmp/build.log" >&2
    return 1
  fi
  got=$("$tmp/bin/kube-apiserver" --version | sed -n 's/^Kubernetes v//p')
  if [ "$got" != "$v" ]; then
    echo "kubernetes $v: the build says it is '$got'" >&2
    return 1
  fi
  rm -rf "$tmp/src" "$tmp/build.log"
  rm -rf "$home"
  mv "$tmp" "$home"
  tmp=""
  echo "kubernetes $v: built in $((SECONDS - start))s" >&2
}

mkdir -p "$(dirname "$home")"
# One build at a time, whoever runs this.
exec 9>"$(dirname "$home")/.kubernetes-$v.lock"
flock 9
if [ ! -x "$home/bin/kube-apiserver" ] || [ ! -x "$home/bin/kubectl" ]; then
  build
fi
# The Prometheus Operator's CRDs, for the manifests' check (a module download, seconds).
crds=$home/crds
if [ ! -f "$crds/monitoring.coreos.com_podmonitors.yaml" ]; then
  po=github.com/prometheus-operator/prometheus-operator@v$PROMETHEUS_OPERATOR_VERSION
  dir=$(GOWORK=off GOFLAGS=-mod=mod go mod download -json "$po" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -n "$dir" ] || { echo "kubernetes $v: cannot download $po" >&2; exit 1; }
  mkdir -p "$crds.tmp"
  cp "$dir/example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml" \
    "$dir/example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml" "$crds.tmp/"
  chmod u+w "$crds.tmp"/*
  rm -rf "$crds" && mv "$crds.tmp" "$crds"
fi
exec 9>&-
echo "kubernetes $v: $home/bin ($("$home/bin/kube-apiserver" --version)); Prometheus Operator $PROMETHEUS_OPERATOR_VERSION CRDs in $crds"
