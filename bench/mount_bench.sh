#!/usr/bin/env bash
# keel mount vs restic mount: the time to open a large file through the mount
# and read 1 MiB from its middle (then from other offsets, each in a freshly
# opened file at a place not read before), on the same file backed up by both
# to a local repository. Prints a table and writes bench/out/mount_bench.md
# (mount_bench_smoke.md with --smoke). See bench/README.md.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  cat <<EOF
usage: bench/mount_bench.sh [options]
  --size-gib N   size of the file (default 4); incompressible data
  --reads R      reads per tool: the middle, then R-1 other offsets (default 9)
  --tools LIST   keel,restic (default: both; restic skipped if not installed)
  --work DIR     scratch directory (default: a new one under \${TMPDIR:-/tmp}); removed unless --keep
  --keel PATH    keel binary (default: \$KEEL_BIN or build/cli/keel)
  --keep         keep the scratch directory
  --smoke        a 64 MiB file, 3 reads: for CI
  -h, --help     this text
Needs /dev/fuse and fusermount3 (exits 77 without them). Command logs go to bench/out/logs/mount-*.log.
EOF
}

size_gib=4 reads=9 tools="" work="" keep=0 smoke=0
while (($#)); do
  case $1 in
    --size-gib) size_gib=${2:?--size-gib needs a value}; shift 2 ;;
    --reads) reads=${2:?--reads needs a value}; shift 2 ;;
    --tools) tools=${2:?--tools needs a value}; shift 2 ;;
    --work) work=${2:?--work needs a value}; shift 2 ;;
    --keel) keel_bin=${2:?--keel needs a value}; shift 2 ;;
    --keep) keep=1; shift ;;
    --smoke) smoke=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done
positive_int --reads "$reads"
report_name=mount_bench
if ((smoke)); then
  size_gib=0.0625 reads=3 report_name=mount_bench_smoke
fi
if [[ ! -e /dev/fuse ]] || ! command -v fusermount3 >/dev/null; then
  echo "mount_bench.sh: skipped: no /dev/fuse or no fusermount3 (Debian package fuse3)" >&2
  exit 77
fi

if [[ -n $tools ]]; then
  IFS=, read -ra selected <<<"$tools"
else
  selected=(keel)
  if command -v restic >/dev/null; then selected+=(restic); else echo "mount_bench.sh: restic not installed; skipped" >&2; fi
fi
for tool in "${selected[@]}"; do
  case $tool in
    keel) require_keel ;;
    restic) command -v restic >/dev/null || die "restic is not installed (Debian package 'restic')" ;;
    *) die "unknown tool '$tool' (known: keel, restic)" ;;
  esac
done

bench_scratch keel-mount-bench
mkdir -p "$out_dir/logs"
pids=()
unmount_all() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for m in "$work"/mnt-*; do
    if [[ -d $m ]] && mountpoint -q "$m"; then fusermount3 -u -z "$m" 2>/dev/null || true; fi
  done
}
at_exit unmount_all

size_bytes=$(python3 -c "print(int($size_gib * (1 << 30)))")
data="$work/data"
mkdir -p "$data"
echo "[mount_bench] writing a $size_gib GiB file" >&2
head -c "$size_bytes" /dev/zero | openssl enc -aes-128-ctr -nosalt -pbkdf2 -pass pass:keel-mount-bench 2>/dev/null \
  >"$data/big.bin"

export KEEL_PASSWORD=bench RESTIC_PASSWORD=bench XDG_DATA_HOME="$work/state"
run_logged() {  # name, command...
  local log="$out_dir/logs/mount-$1.log"; shift
  "$@" >"$log" 2>&1 || { tail -20 "$log" >&2; die "failed: $* (log: $log)"; }
}

# The timing: open, pread 1 MiB, close; the middle first, then other offsets.
# Prints the middle read's, the median and the slowest time in ms.
measure() {  # file
  python3 - "$1" "$reads" <<'PY'
import os, random, sys, time
path, reads = sys.argv[1], int(sys.argv[2])
size = os.stat(path).st_size
mib = 1 << 20
offsets = [size // 2]
rnd = random.Random(7)
while len(offsets) < reads:
    o = rnd.randrange(0, max(1, size - mib))
    # Far from the others (nothing read ahead serves it), where the file is large enough.
    if size < 64 * mib * reads or all(abs(o - p) > 16 * mib for p in offsets):
        offsets.append(o)
times = []
for o in offsets:
    t = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    data = os.pread(fd, mib, o)
    os.close(fd)
    times.append((time.perf_counter() - t) * 1000)
    assert len(data) == min(mib, size - o), (o, len(data))
ordered = sorted(times)
print(f"{times[0]:.1f} {ordered[len(ordered) // 2]:.1f} {ordered[-1]:.1f}")
PY
}

wait_for() {  # path, pid
  for _ in $(seq 1200); do
    [[ -e $1 ]] && return 0
    kill -0 "$2" 2>/dev/null || die "the mount process exited early"
    sleep 0.05
  done
  die "$1 did not appear within 60 s"
}

declare -A first median slowest ready
for tool in "${selected[@]}"; do
  mnt="$work/mnt-$tool"
  mkdir -p "$mnt"
  echo "[mount_bench] $tool: backup" >&2
  if [[ $tool == keel ]]; then
    export KEEL_REPO="$work/repo-keel"
    run_logged keel-init "$keel_bin" init
    run_logged keel-backup "$keel_bin" backup "$data"
    start=$(date +%s.%N)
    "$keel_bin" mount "$mnt" >"$out_dir/logs/mount-keel-mount.log" 2>&1 &
  else
    export RESTIC_REPOSITORY="$work/repo-restic"
    run_logged restic-init restic init
    run_logged restic-backup restic backup "$data"
    start=$(date +%s.%N)
    restic mount "$mnt" >"$out_dir/logs/mount-restic-mount.log" 2>&1 &
  fi
  pid=$!
  pids+=("$pid")
  file="$mnt/snapshots/latest$data/big.bin"
  echo "[mount_bench] $tool: reading through the mount" >&2
  wait_for "$file" "$pid"
  ready[$tool]=$(python3 -c "import time; print(f'{(time.time() - $start) * 1000:.0f}')")
  read -r "first[$tool]" "median[$tool]" "slowest[$tool]" < <(measure "$file")
  kill -INT "$pid"
  wait "$pid" || true
  if mountpoint -q "$mnt"; then die "$tool left $mnt mounted after SIGINT"; fi
done

{
  echo "## keel mount vs restic mount: open + read 1 MiB through the mount"
  echo
  echo "File: $size_gib GiB of incompressible data, backed up to a local repository (its files in the OS page cache)."
  echo "Each read opens the file and reads 1 MiB at an offset not read before: the middle first, then $((reads - 1)) others."
  echo
  echo "| tool | mount → file visible (ms) | middle read (ms) | median of $reads reads (ms) | slowest (ms) |"
  echo "|:--|--:|--:|--:|--:|"
  for tool in "${selected[@]}"; do
    echo "| $tool | ${ready[$tool]} | ${first[$tool]} | ${median[$tool]} | ${slowest[$tool]} |"
  done
  echo
  echo "Host: $(nproc) cores, load average $(cut -d' ' -f1 /proc/loadavg) at the end; $(date -u +%Y-%m-%dT%H:%MZ)."
} | tee "$out_dir/$report_name.md"
