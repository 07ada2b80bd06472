#!/usr/bin/env bash
# Makes sure the supported ZooKeeper releases can be started: prints where it found each, or
# fetches the missing ones from Maven Central (the server's jar with its runtime dependencies,
# and the logback that ZooKeeper's own distribution ships, at the versions that release pins),
# with Maven (`mvn`; Java to run them).
#
#   zk/ensure-zookeeper.sh [WHICH...]   newest, older or a listed version (default: every one)
#
# Jars go to ${IDCAR_CACHE:-$HOME/.cache/idcar}/stores/zookeeper-VERSION/lib/ (zk/lib.sh), made
# whole in a temporary directory beside it and moved into place, so an interrupted fetch leaves
# nothing that looks fetched. Maven's own repository (~/.m2) keeps what it downloaded.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=zk/lib.sh
. "$here/lib.sh"

[ $# -gt 0 ] || set -- "${ZK_VERSIONS[@]}"

# maven-dependency-plugin, pinned: it runs on the Maven 3.8 that Debian 12 ships.
dependency_plugin=org.apache.maven.plugins:maven-dependency-plugin:3.6.1

tmp=""
trap 'rm -rf "$tmp"' EXIT

fetch() {
  local v=$1 home=$2 start=$SECONDS
  for tool in java mvn; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      echo "zookeeper $v: fetching it needs $tool on PATH (tests/ensure-deps.sh installs it)" >&2
      return 1
    fi
  done
  echo "zookeeper $v: not fetched; fetching its jars from Maven Central" >&2
  tmp=$(mktemp -d "$(dirname "$home")/.zookeeper-$v.XXXXXX")
  # A throwaway project: the server, and what its distribution ships beside it that its POM
  # leaves out (optional or provided) and the server needs, at the versions ZooKeeper's parent
  # POM manages: logback-classic for its log, metrics-core for its default metrics provider,
  # snappy-java for its snapshots' names, commons-cli.
  cat >"$tmp/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>invalid.idcar</groupId>
  <artifactId>zookeeper-fetch</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencyManagement>
    <dependencies>
      <dependency>
        <groupId>org.apache.zookeeper</groupId>
        <artifactId>parent</artifactId>
        <version>$v</version>
        <type>pom</type>
        <scope>import</scope>
      </dependency>
    </dependencies>
  </dependencyManagement>
  <dependencies>
    <dependency>
      <groupId>org.apache.zookeeper</groupId>
      <artifactId>zookeeper</artifactId>
      <version>$v</version>
    </dependency>
    <dependency>
      <groupId>ch.qos.logback</groupId>
      <artifactId>logback-classic</artifactId>
    </dependency>
    <dependency>
      <groupId>io.dropwizard.metrics</groupId>
      <artifactId>metrics-core</artifactId>
    </dependency>
    <dependency>
      <groupId>org.xerial.snappy</groupId>
      <artifactId>snappy-java</artifactId>
    </dependency>
    <dependency>
      <groupId>commons-cli</groupId>
      <artifactId>commons-cli</artifactId>
    </dependency>
  </dependencies>
</project>
POM
  if ! mvn -B -q -f "$tmp/pom.xml" "$dependency_plugin:copy-dependencies" -DincludeScope=runtime \
    -DoutputDirectory="$tmp/lib" >"$tmp/mvn.log" 2>&1; then
    cat "$tmp/mvn.log" >&2
    return 1
  fi
  if [ ! -f "$tmp/lib/zookeeper-$v.jar" ]; then
    echo "zookeeper $v: Maven gave no zookeeper-$v.jar" >&2
    return 1
  fi
  rm -f "$tmp/pom.xml" "$tmp/mvn.log"
  rm -rf "$home"
  mv "$tmp" "$home"
  tmp=""
  echo "zookeeper $v: fetched in $((SECONDS - start))s" >&2
}

for which in "$@"; do
  v=$(zk_version "$which")
  home=$(zk_home "$v")
  mkdir -p "$(dirname "$home")"
  # One fetch of a release at a time, whoever runs this.
  exec 9>"$(dirname "$home")/.zookeeper-$v.lock"
  flock 9
  [ -f "$home/lib/zookeeper-$v.jar" ] || fetch "$v" "$home"
  exec 9>&-
  echo "zookeeper $v: $home/lib"
done
