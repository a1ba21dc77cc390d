#!/usr/bin/env bash
# Installs dependencies, builds keel and runs the whole test suite.
#   scripts/test.sh              release build in build/
#   scripts/test.sh --sanitize   ASan+UBSan build in build-asan/, without the
#                                benchmark smokes: the release run keeps their
#                                scripts from rotting, and under ASan they would
#                                mostly re-time restic and borg
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test

# -g1: line tables and function names, enough for backtraces, sanitizer
# reports and perf; full -g (types, locals) costs a quarter more compile time
# on 2 cores and no test reads it.
dir=build; args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"); select=()
if [ "${1:-}" = "--sanitize" ]; then
  dir=build-asan; args=(-DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DKEEL_SANITIZE=ON -DKEEL_BUILD_BENCH=OFF)
  select=(-LE bench)
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
fi
scripts/build.sh "$dir" "${args[@]}"
ctest --test-dir "$dir" --output-on-failure -j2 --timeout 900 "${select[@]}"
