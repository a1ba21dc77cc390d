#!/usr/bin/env bash
# keel's main job on its embedded default: a local directory repository and the
# SQLite catalog. Installs what building and running keel needs (not the test
# dependencies: scripts/test.sh installs those), builds keel alone (no tests,
# benchmarks or fuzzers) in build-demo/, backs up examples/data,
# restores it to a scratch directory, verifies it byte for byte, checks the
# repository. Everything it writes lives under $KEEL_DEMO_DIR (default .demo/).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
# The demo's build is a first run's wait, so it is cut for compile time
# (docs/packaging.md#the-demo-timed; the "demo" preset in CMakePresets.json,
# which scripts/check_unity.sh checks in CI): -O1 instead of the tested builds'
# -O2, no debug info (-g: more than half the compile's CPU and a 296 MB
# binary), and a unity build, which parses the headers (Boost, the engine's)
# once per library instead of once per file.
cmake --preset demo >/dev/null
ninja -C build-demo keel >/dev/null

demo=$(realpath -m "${KEEL_DEMO_DIR:-.demo}")
rm -rf "$demo"; mkdir -p "$demo"
export KEEL_REPO=$demo/repo KEEL_PASSWORD=${KEEL_PASSWORD:-demo-password} XDG_DATA_HOME=$demo/state
keel=build-demo/cli/keel
data=$(realpath examples/data)

set -x
$keel init
$keel backup "$data" --tag demo
$keel snapshots
$keel restore latest --target "$demo/restore"
$keel check --read-data
set +x
diff -r "$data" "$demo/restore$data"
echo "demo: restored tree is identical to $data (repository: $KEEL_REPO)"
