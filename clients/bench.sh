#!/usr/bin/env bash
# IDs per second through each client, single calls and with prefetch 1000, beside the Rust
# client (single requests, and requests of 1,000), all against one release idcar per layout,
# in one run. Server and clients are pinned to CPU 0 (taskset): on a small VM a wake-up across
# CPUs costs tens of microseconds and whether one happens is the scheduler's lottery (see
# docs/benchmarks.md), which would swamp the clients' own costs. Prefetch refills share that
# CPU too, as in a one-CPU pod. Usage: bash clients/bench.sh [seconds per figure, default 3]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-3}"
cargo build --release --quiet --bin idcar --example clientbench
cargo build --release --quiet -p idcar-client --example bench
(cd clients/java && mvn -o -q -B -Dmaven.repo.local=/usr/share/maven-repo package -DskipTests)
export GOCACHE="$PWD/target/test-tools/go-cache" GOPATH="$PWD/target/test-tools/go-path" GOFLAGS=-mod=mod GOPROXY=off
(cd clients/go && go build -o ../../target/test-tools/go-bench ./examples/bench)
dir="$(mktemp -d)"
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
pin="taskset -c 0"
for layout in lable64 sno80; do
  $pin target/release/idcar serve --socket "$dir/s.sock" --state-file "$dir/state" --admin-addr none \
    --log error --layout "$layout" & pid=$!
  for _ in $(seq 100); do [ -S "$dir/s.sock" ] && break; sleep 0.05; done
  echo "== $layout (machine: $(nproc) CPUs, $(uname -r))"
  echo "-- rust (one connection, raw requests)"; $pin target/release/examples/clientbench --socket "$dir/s.sock" --seconds "$secs"
  echo "-- rust (idcar-client)"; $pin target/release/examples/bench --socket "$dir/s.sock" --seconds "$secs"
  echo "-- python"; PYTHONPATH=clients/python $pin python3 clients/python/examples/bench.py --socket "$dir/s.sock" --seconds "$secs"
  echo "-- go";     $pin target/test-tools/go-bench --socket "$dir/s.sock" --seconds "$secs"
  echo "-- node";   $pin node clients/node/examples/bench.js --socket "$dir/s.sock" --seconds "$secs"
  echo "-- java";   $pin java -cp clients/java/target/idcar-client-0.2.0.jar clients/java/examples/Bench.java --socket "$dir/s.sock" --seconds "$secs"
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
done
