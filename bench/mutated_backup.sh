#!/usr/bin/env bash
# Backup after mutation, keel (old and new binaries) against restic, on a
# copy of a dataset: each tool backs the pristine copy up once, mutate.py
# changes ~5% of it, then each tool's second backup is timed ROUNDS times,
# alternating, every time from the same first-backup state (repository and
# keel's catalog restored from a saved copy, so the parent is the first
# snapshot each time). Prints one line per timed run: tool, wall s, CPU s
# (user + system of the command), and for keel its --json CPU by stage.
#
#   bench/mutated_backup.sh --data /tmp/bk2/mixed4g --old /tmp/bk/keel-main \
#       --new build/cli/keel --rounds 2 --scratch /tmp/bk/mut
#
# --data is changed in place (mutate.py): give it a copy, never a shared dataset.
set -euo pipefail

data="" old="" new="" rounds=2 scratch=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --data) data=$2; shift 2 ;;
    --old) old=$2; shift 2 ;;
    --new) new=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --scratch) scratch=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -n "$data" && -n "$old" && -n "$new" && -n "$scratch" ]] || { sed -n 2,13p "$0" >&2; exit 2; }
bench_dir=$(cd "$(dirname "$0")" && pwd)
old=$(realpath "$old") new=$(realpath "$new")

mkdir -p "$scratch"
echo bench > "$scratch/password"
export KEEL_PASSWORD_FILE="$scratch/password" RESTIC_PASSWORD=bench
export RESTIC_CACHE_DIR="$scratch/restic-cache"

# keel's state (catalog) lives under XDG_DATA_HOME: one per binary, saved
# beside its repository after the first backup.
first_keel() {  # name binary
  local name=$1 bin=$2
  XDG_DATA_HOME="$scratch/$name-state" "$bin" init --repo "$scratch/$name-repo" > /dev/null
  XDG_DATA_HOME="$scratch/$name-state" "$bin" backup --repo "$scratch/$name-repo" "$data" --json > /dev/null
  cp -a "$scratch/$name-repo" "$scratch/$name-repo.saved"
  cp -a "$scratch/$name-state" "$scratch/$name-state.saved"
}

timed() {  # label command...: prints label wall cpu
  local label=$1; shift
  sync
  /usr/bin/time -o "$scratch/time.txt" -f "%e %U %S" "$@" > "$scratch/out.json" 2> /dev/null
  read -r wall user sys < "$scratch/time.txt"
  printf '%s wall %s cpu %.2f' "$label" "$wall" "$(echo "$user + $sys" | bc)"
}

second_keel() {  # name binary
  local name=$1 bin=$2
  rm -rf "$scratch/$name-repo" "$scratch/$name-state"
  cp -a "$scratch/$name-repo.saved" "$scratch/$name-repo"
  cp -a "$scratch/$name-state.saved" "$scratch/$name-state"
  XDG_DATA_HOME="$scratch/$name-state" timed "keel-$name" "$bin" backup --repo "$scratch/$name-repo" "$data" --json
  python3 -c 'import json,sys; d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print(" read", d["bytes_read"], "stages", {k: round(v, 3) for k, v in d["cpu_seconds"].items()})' "$scratch/out.json"
}

second_restic() {
  rm -rf "$scratch/restic-repo"
  cp -a "$scratch/restic-repo.saved" "$scratch/restic-repo"
  timed restic restic -r "$scratch/restic-repo" backup "$data" --quiet
  echo
}

# A rerun on the same scratch directory reuses the first backups and the
# mutated data (the binaries' repositories must be of the same format).
if [[ ! -e "$scratch/mutated" ]]; then
  first_keel old "$old"
  first_keel new "$new"
  restic -r "$scratch/restic-repo" init --quiet > /dev/null
  restic -r "$scratch/restic-repo" backup "$data" --quiet > /dev/null
  cp -a "$scratch/restic-repo" "$scratch/restic-repo.saved"
  python3 "$bench_dir/mutate.py" "$data" > /dev/null
  touch "$scratch/mutated"
fi

for ((r = 1; r <= rounds; r++)); do
  second_keel old "$old"
  second_keel new "$new"
  second_restic
done
