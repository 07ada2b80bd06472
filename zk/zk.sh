#!/usr/bin/env bash
# Runs ZooKeeper on loopback for trying idcar: the newest supported release from the store
# cache (zk/ensure-zookeeper.sh fetches it), ZK_VERSION=older the older one, or ZOOKEEPER_HOME.
#
#   zk/zk.sh start [standalone|ensemble] [DIR]   start (default: standalone in .zk/)
#   zk/zk.sh stop [DIR]                          stop every server started in DIR
#   zk/zk.sh status [DIR]                        each server's mode
#
# standalone: one server, client port 2181 (ZK_PORT to change).
# ensemble: three servers, client ports 2181-2183 (ZK_PORT is the first), quorum/election
# ports from 12888/13888 up. Connect idcar with --zk 127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
cmd=${1:-}
case "$cmd" in
  start)
    mode=${2:-standalone}
    dir=$(mkdir -p "${3:-.zk}" && cd "${3:-.zk}" && pwd)
    port=${ZK_PORT:-2181}
    case "$mode" in
      standalone)
        zk_write_conf "$dir/1" "$port"
        zk_start "$dir/1"
        zk_wait "$port"
        echo "ZooKeeper standalone on 127.0.0.1:$port (data in $dir/1)"
        ;;
      ensemble)
        servers=""
        for i in 1 2 3; do
          servers+="server.$i=127.0.0.1:$((12887 + i)):$((13887 + i))"$'\n'
        done
        for i in 1 2 3; do
          zk_write_conf "$dir/$i" $((port + i - 1)) "$servers"
          echo "$i" >"$dir/$i/data/myid"
        done
        for i in 1 2 3; do zk_start "$dir/$i"; done
        for i in 1 2 3; do zk_wait $((port + i - 1)) 30; done
        echo "ZooKeeper ensemble on 127.0.0.1:$port,127.0.0.1:$((port + 1)),127.0.0.1:$((port + 2))"
        ;;
      *) echo "usage: $0 start [standalone|ensemble] [DIR]" >&2; exit 2 ;;
    esac
    ;;
  stop)
    dir=${2:-.zk}
    for p in "$dir"/*/pid; do
      [ -f "$p" ] || continue
      kill "$(cat "$p")" 2>/dev/null || true
      rm -f "$p"
    done
    echo "stopped ZooKeeper servers in $dir"
    ;;
  status)
    dir=${2:-.zk}
    for c in "$dir"/*/zoo.cfg; do
      [ -f "$c" ] || continue
      port=$(sed -n 's/^clientPort=//p' "$c")
      printf '%s: ' "$port"
      zk_wait "$port" 1 || true
    done
    ;;
  *) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
