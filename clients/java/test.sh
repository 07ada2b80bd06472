#!/usr/bin/env bash
# Builds the jar, compiles the tests against it and runs them against real idcar servers:
#   IDCAR_BIN=/path/to/idcar bash clients/java/test.sh
# Exits non-zero when any test fails (and the server tests fail when IDCAR_BIN is unset).
set -euo pipefail
DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILD="$DIR/build"
bash "$DIR/build.sh"
rm -rf "$BUILD/test-classes"
mkdir -p "$BUILD/test-classes"
find "$DIR/src/test/java" -name '*.java' > "$BUILD/test-sources.txt"
javac --release 17 -Xlint:all -encoding UTF-8 -cp "$BUILD/idcar-client.jar" -d "$BUILD/test-classes" @"$BUILD/test-sources.txt"
exec java -cp "$BUILD/idcar-client.jar:$BUILD/test-classes" dev.idcar.client.TestRunner "$@"
