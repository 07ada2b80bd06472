#!/usr/bin/env bash
# Runs etcd on loopback for trying idcar: the newest supported release from the store cache
# (etcd/ensure-etcd.sh builds it), ETCD_VERSION=older the older one, or ETCD=path another etcd
# (with the etcdctl beside it, or on PATH).
#
#   etcd/etcd.sh start [single|cluster] [DIR]   start (default: one member in .etcd/)
#   etcd/etcd.sh stop [DIR]                     stop every member started in DIR
#   etcd/etcd.sh status [DIR]                   each member's health
#
# single: one member, client port 2379 (ETCD_PORT to change), peer port ETCD_PORT+1000.
# cluster: three members, client ports 2379-2381 (ETCD_PORT is the first), peer ports +1000.
# Connect idcar with --etcd 127.0.0.1:2379,127.0.0.1:2380,127.0.0.1:2381.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=etcd/lib.sh
. "$here/lib.sh"
cmd=${1:-}
# Sets etcd and etcdctl to the binaries to run, or fails saying how to build them.
find_etcd() {
  etcd=${ETCD:-$(etcd_bin etcd "${ETCD_VERSION:-newest}")} || exit 1
  etcdctl=$(dirname "$etcd")/etcdctl
  [ -x "$etcdctl" ] || etcdctl=etcdctl
}
health() { "$etcdctl" --endpoints="127.0.0.1:$1" --dial-timeout=1s --command-timeout=1s endpoint health 2>&1; }
case "$cmd" in
  start)
    find_etcd
    mode=${2:-single}
    dir=$(mkdir -p "${3:-.etcd}" && cd "${3:-.etcd}" && pwd)
    port=${ETCD_PORT:-2379}
    case "$mode" in single) n=1 ;; cluster) n=3 ;; *) echo "usage: $0 start [single|cluster] [DIR]" >&2; exit 2 ;; esac
    cluster=""
    for i in $(seq 0 $((n - 1))); do
      cluster+="${cluster:+,}m$i=http://127.0.0.1:$((port + 1000 + i))"
    done
    for i in $(seq 0 $((n - 1))); do
      c=$((port + i)) p=$((port + 1000 + i))
      mkdir -p "$dir/m$i"
      nohup "$etcd" --name "m$i" --data-dir "$dir/m$i/data" \
        --listen-client-urls "http://127.0.0.1:$c" --advertise-client-urls "http://127.0.0.1:$c" \
        --listen-peer-urls "http://127.0.0.1:$p" --initial-advertise-peer-urls "http://127.0.0.1:$p" \
        --initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token "idcar-$dir" \
        --auto-compaction-mode periodic --auto-compaction-retention 1h \
        --logger zap --log-outputs stderr >"$dir/m$i/etcd.log" 2>&1 &
      echo $! >"$dir/m$i/pid"
    done
    for i in $(seq 0 $((n - 1))); do
      for _ in $(seq 1 300); do health $((port + i)) >/dev/null && break; sleep 0.2; done
      health $((port + i)) >/dev/null || { echo "etcd m$i did not start: see $dir/m$i/etcd.log" >&2; exit 1; }
    done
    eps=""
    for i in $(seq 0 $((n - 1))); do eps+="${eps:+,}127.0.0.1:$((port + i))"; done
    echo "etcd $("$etcd" --version | sed -n 's/^etcd Version: //p') ($n member(s)) on $eps (data in $dir)"
    ;;
  stop)
    dir=${2:-.etcd}
    for p in "$dir"/*/pid; do
      [ -f "$p" ] || continue
      kill "$(cat "$p")" 2>/dev/null || true
      rm -f "$p"
    done
    echo "stopped etcd members in $dir"
    ;;
  status)
    find_etcd
    dir=${2:-.etcd}
    for l in "$dir"/*/etcd.log; do
      [ -f "$l" ] || continue
      c=$(grep -o '"advertise-client-urls":\["http://127.0.0.1:[0-9]*' "$l" | head -1 | grep -o '[0-9]*$' || true)
      [ -n "$c" ] && health "$c" || true
    done
    ;;
  *) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
