#!/usr/bin/env bash
# Makes sure a ZooKeeper server can be started: prints where it found one, or installs
# Debian's `zookeeper` package when it is missing. Exits non-zero, saying what to do, when it
# cannot. Honours ZOOKEEPER_HOME (a tarball layout with lib/*.jar) when set.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=zk/lib.sh
. "$here/lib.sh"

if cp=$(zk_classpath 2>/dev/null); then
  echo "zookeeper: found (${cp%%:*})"
  exit 0
fi
if ! command -v java >/dev/null 2>&1 || [ ! -f /usr/share/java/zookeeper.jar ]; then
  if command -v apt-get >/dev/null 2>&1; then
    sudo=""
    if [ "$(id -u)" != 0 ]; then
      if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
        echo "zookeeper: missing, and installing it needs root: run 'apt-get install zookeeper' as root" >&2
        exit 1
      fi
    fi
    echo "zookeeper: not found; installing Debian's zookeeper package" >&2
    $sudo apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq zookeeper >&2
  else
    echo "zookeeper: missing and no apt-get here. Install ZooKeeper 3.8+ and Java, and set" >&2
    echo "ZOOKEEPER_HOME to its directory (the one with lib/ and the zookeeper jar)." >&2
    exit 1
  fi
fi
cp=$(zk_classpath)
echo "zookeeper: installed (${cp%%:*})"
