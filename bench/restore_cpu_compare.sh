#!/usr/bin/env bash
# Restore CPU of two keel binaries side by side, each run into a fresh ext4
# file system (a loop file made and mounted per run), so that no run pays for
# inodes an earlier one deleted (ext4's recently_deleted scan: up to a third
# of a restore's CPU after an `rm -rf` of the previous target, see
# docs/performance.md). Needs root (mkfs, mount).
#
#   bench/restore_cpu_compare.sh --repo R --old BIN --new BIN [--runs 3] [--cold]
#
# The binaries alternate (old, new, old, new, ...). Each run: `BIN restore
# latest --repo R --target MNT/t --json` under /usr/bin/time; every file must
# verify. Prints one line per run and the medians: user and system CPU,
# CPU-s per GB (10^9 bytes restored, user + system), wall, peak RSS, the
# restore's own account by stage, and the load average at the start.
set -euo pipefail

runs=3
scratch=${TMPDIR:-/tmp}
fs_gib=0
cold=0
repo='' old='' new=''
while [ $# -gt 0 ]; do
  case $1 in
    --repo) repo=$2; shift 2 ;;
    --old) old=$2; shift 2 ;;
    --new) new=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --cold) cold=1; shift ;;  # the packs dropped from the page cache before each run
    --scratch) scratch=$2; shift 2 ;;  # where the loop files go (default $TMPDIR or /tmp)
    --fs-size-gib) fs_gib=$2; shift 2 ;;  # default: twice the repository, at least 2
    *) echo "usage: $0 --repo R --old BIN --new BIN [--runs N] [--cold] [--scratch DIR] [--fs-size-gib N]" >&2; exit 2 ;;
  esac
done
[ -n "$repo" ] && [ -x "$old" ] && [ -x "$new" ] || { echo "$0: --repo, --old and --new are required" >&2; exit 2; }
export KEEL_PASSWORD=${KEEL_PASSWORD:-bench}

work=$(mktemp -d "$scratch/restore_cpu.XXXXXX")
mnt=$work/mnt
mkdir -p "$mnt"
cleanup() { mountpoint -q "$mnt" && umount "$mnt"; rm -rf "$work"; }
trap cleanup EXIT

if [ "$fs_gib" = 0 ]; then
  repo_gib=$(du -s --block-size=1G "$repo" | cut -f1)
  fs_gib=$(( 2 * repo_gib + 2 ))
fi
# The packs in the page cache for every run alike, or (--cold) in none.
page_cache() {  # keep | drop
  find "$repo" -type f -print0 | python3 -c '
import os, sys
for path in sys.stdin.read().split("\0")[:-1]:
    with open(path, "rb") as f:
        if sys.argv[1] == "drop":
            os.fsync(f.fileno())
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        else:
            while f.read(1 << 20):
                pass
' "$1"
}
[ "$cold" = 1 ] || page_cache keep

one_run() {  # label binary
  local img=$work/fs.img out=$work/out.json times=$work/time
  truncate -s "${fs_gib}G" "$img"
  mkfs.ext4 -q -F "$img"
  mount -o loop "$img" "$mnt"
  sync
  [ "$cold" = 0 ] || page_cache drop
  local load
  load=$(cut -d' ' -f1 /proc/loadavg)
  /usr/bin/time -o "$times" -f '%U %S %e %M' "$2" restore latest --repo "$repo" --target "$mnt/t" --json >"$out"
  umount "$mnt"
  rm -f "$img"
  python3 - "$1" "$load" "$times" "$out" <<'EOF'
import json, sys
label, load, times, out = sys.argv[1:]
user, sys_, wall, rss_kib = open(times).read().split()[-4:]
doc = json.loads(open(out).read().splitlines()[-1])
if not doc.get("verified") or doc["files_verified"] != doc["files"]:
    sys.exit(f"{label}: restore not verified: {doc.get('failures')}")
gb = doc["bytes"] / 1e9
stages = " ".join(f"{k}={v:.2f}" for k, v in doc["cpu_seconds_per_gb"].items())
print(f"{label} load={load} user={float(user):.2f} sys={float(sys_):.2f} "
      f"cpu_per_gb={(float(user) + float(sys_)) / gb:.2f} wall={float(wall):.2f} "
      f"rss_mb={int(rss_kib) / 1024:.0f} readers={doc['peak_readers']} files={doc['files']} "
      f"gb={gb:.3f} own: {stages}", flush=True)
EOF
}

log=$work/runs.log
: >"$log"
for i in $(seq 1 "$runs"); do
  one_run old "$old" | tee -a "$log"
  one_run new "$new" | tee -a "$log"
done
python3 - "$log" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    label, *fields = line.split(" own: ")[0].split()
    for f in fields:
        k, v = f.split("=")
        rows.setdefault(label, {}).setdefault(k, []).append(float(v))
keys = ["user", "sys", "cpu_per_gb", "wall", "rss_mb", "readers"]
print("median  " + "  ".join(keys))
for label, r in rows.items():
    print(f"{label:6}  " + "  ".join(f"{statistics.median(r[k]):.2f}" for k in keys))
EOF
