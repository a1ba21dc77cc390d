#!/usr/bin/env bash
# The guard for the demo's unity build (scripts/demo.sh, CMakePresets.json
# "demo"): the tested builds compile one file at a time and never see two
# files' anonymous namespaces in one translation unit, so a clash of
# file-local names would break only the demo. Configures the demo's build in
# BUILD_DIR (default build-unity) and compiles each unity batch with
# -fsyntax-only: the front end's errors (redefinitions, ambiguous names)
# without code generation, about a minute on 2 cores. CI runs it (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-unity}
cmake --preset demo -B "$dir" >/dev/null
python3 - "$dir/compile_commands.json" "$(nproc)" <<'PY'
import concurrent.futures, json, shlex, subprocess, sys

commands = [e for e in json.load(open(sys.argv[1])) if "/Unity/unity_" in e["file"]]
if not commands:
    sys.exit("check_unity: no unity batches in the compile database: is CMAKE_UNITY_BUILD on?")

def syntax_only(entry):
    args = shlex.split(entry["command"])
    # -fsyntax-only writes no object: drop the output and keep the flags.
    i = args.index("-o")
    del args[i:i + 2]
    return entry["file"], subprocess.run(args + ["-fsyntax-only"], cwd=entry["directory"],
                                         capture_output=True, text=True)

failed = 0
with concurrent.futures.ThreadPoolExecutor(int(sys.argv[2])) as pool:
    for batch, result in pool.map(syntax_only, commands):
        if result.returncode != 0:
            failed += 1
            print(f"check_unity: {batch} does not compile:\n{result.stderr}", file=sys.stderr)
if failed:
    sys.exit(f"check_unity: {failed} of {len(commands)} unity batches fail; two files of one library "
             "probably define the same file-local name (docs/packaging.md#the-demo-timed)")
print(f"check_unity: {len(commands)} unity batches compile")
PY
