#!/usr/bin/env bash
# Runs a Kubernetes API server on loopback for trying idcar's Lease-object store (--kube) and
# for its benchmarks: the pinned kube-apiserver (kube/ensure-kube.sh builds it), over TLS with
# a throwaway CA, service-account keys and RBAC on, its objects in the etcd of
# `etcd/etcd.sh start cluster DIR/etcd` (three members; ETCD_PORT sets the first client port).
#
#   kube/kube.sh start [DIR] [NAMESPACE]   start (default .kube-test/, namespace idcar)
#   kube/kube.sh stop [DIR]                stop the API server and its etcd
#
# Writes DIR/admin.kubeconfig (an administrator) and DIR/idcar.kubeconfig (the service account
# `idcar` of NAMESPACE, bound by deploy/kubernetes/kube/rbac.yaml: what a pod's sidecar has).
# The API server listens on 127.0.0.1:${KUBE_PORT:-6443}; its etcd's client ports are printed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=kube/lib.sh
. "$here/lib.sh"
cmd=${1:-}
dir=${2:-.kube-test}
case "$cmd" in
  start)
    ns=${3:-idcar}
    bin=$(kube_home)/bin
    [ -x "$bin/kube-apiserver" ] || { echo "not built: run kube/ensure-kube.sh" >&2; exit 1; }
    mkdir -p "$dir" && dir=$(cd "$dir" && pwd)
    port=${KUBE_PORT:-6443}
    etcd_port=${ETCD_PORT:-2379}
    ETCD_PORT=$etcd_port bash "$repo/etcd/etcd.sh" start cluster "$dir/etcd" >/dev/null
    bash "$repo/zk/tls-certs.sh" "$dir/certs" >/dev/null
    openssl genrsa -out "$dir/sa.key" 2048 2>/dev/null
    openssl rsa -in "$dir/sa.key" -pubout -out "$dir/sa.pub" 2>/dev/null
    token=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
    echo "$token,admin,admin-uid,system:masters" >"$dir/tokens.csv"
    etcds="http://127.0.0.1:$etcd_port,http://127.0.0.1:$((etcd_port + 1)),http://127.0.0.1:$((etcd_port + 2))"
    (cd "$dir"
      nohup "$bin/kube-apiserver" --etcd-servers "$etcds" \
      --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$port" \
      --tls-cert-file certs/server.crt --tls-private-key-file certs/server-key.pem \
      --client-ca-file certs/ca.pem --token-auth-file tokens.csv --authorization-mode RBAC \
      --service-account-issuer https://kubernetes.default.svc --service-account-key-file sa.pub \
      --service-account-signing-key-file sa.key --service-cluster-ip-range 10.96.0.0/24 \
      --endpoint-reconciler-type none --cert-dir generated --profiling=false \
      >apiserver.log 2>&1 &
      echo $! >apiserver.pid)
    kubeconfig() { # FILE USER-BODY NAMESPACE
      cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$port
    certificate-authority: $dir/certs/ca.pem
users:
- name: user
  user:
    $2
contexts:
- name: local
  context: {cluster: local, user: user, namespace: $3}
current-context: local
KC
    }
    kubeconfig "$dir/admin.kubeconfig" "token: $token" default
    kubectl=("$bin/kubectl" --kubeconfig "$dir/admin.kubeconfig")
    for _ in $(seq 1 120); do
      [ "$("${kubectl[@]}" get --raw /readyz 2>/dev/null)" = ok ] && break
      if ! kill -0 "$(cat "$dir/apiserver.pid")" 2>/dev/null; then
        tail -5 "$dir/apiserver.log" >&2
        exit 1
      fi
      sleep 0.5
    done
    "${kubectl[@]}" get --raw /readyz >/dev/null
    "${kubectl[@]}" create namespace "$ns" >/dev/null
    "${kubectl[@]}" -n "$ns" apply -f "$repo/deploy/kubernetes/kube/rbac.yaml" >/dev/null
    sa=$("${kubectl[@]}" -n "$ns" create token idcar --duration 48h)
    kubeconfig "$dir/idcar.kubeconfig" "token: $sa" "$ns"
    echo "kube-apiserver on https://127.0.0.1:$port (its etcd: 127.0.0.1:$etcd_port-$((etcd_port + 2)))"
    echo "  idcar serve --kube --kubeconfig $dir/idcar.kubeconfig      # namespace $ns, the shipped Role"
    echo "  $bin/kubectl --kubeconfig $dir/admin.kubeconfig ...        # administrator"
    ;;
  stop)
    [ -f "$dir/apiserver.pid" ] && kill "$(cat "$dir/apiserver.pid")" 2>/dev/null || true
    rm -f "$dir/apiserver.pid"
    bash "$repo/etcd/etcd.sh" stop "$dir/etcd" >/dev/null 2>&1 || true
    echo "stopped"
    ;;
  *)
    echo "usage: $0 start [DIR] [NAMESPACE] | stop [DIR]" >&2
    exit 2
    ;;
esac
