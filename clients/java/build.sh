#!/usr/bin/env bash
# Compiles the client and its examples (javac --release 17) and packages build/idcar-client.jar.
# Works from any directory: everything is relative to this script's own directory.
set -euo pipefail
DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILD="$DIR/build"
rm -rf "$BUILD/classes"
mkdir -p "$BUILD/classes"
find "$DIR/src/main/java" "$DIR/src/examples/java" -name '*.java' > "$BUILD/sources.txt"
javac --release 17 -Xlint:all -encoding UTF-8 -d "$BUILD/classes" @"$BUILD/sources.txt"
rm -f "$BUILD/idcar-client.jar"
jar --create --file "$BUILD/idcar-client.jar" -C "$BUILD/classes" .
echo "built $BUILD/idcar-client.jar"
