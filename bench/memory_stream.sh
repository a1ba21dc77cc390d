#!/usr/bin/env bash
# Does `keel backup --stdin --memory MIB` keep to its memory budget on a long stream?
# Streams N GiB of stream_gen.py data (deterministic, partly compressible, all new to the
# repository) into keel, measures keel's peak RSS with /usr/bin/time, and passes if it is at
# most the budget plus a fixed overhead (code, catalog, index, thread stacks). Against a
# local repository, and with --s3 also against an S3 one. See bench/README.md.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  cat <<EOF
usage: bench/memory_stream.sh [options]
  --gib N           GiB streamed into the local repository (default 10)
  --memory-mib M    keel backup --memory M (default 256)
  --overhead-mib O  allowed peak RSS above the budget (default 128)
  --seed N          stream_gen.py seed (default 1)
  --s3              also stream into an S3 repository: the server in S3_ENDPOINT,
                    S3_ACCESS_KEY, S3_SECRET_KEY if set, else a private Ceph RGW
                    (tests/s3/with-rgw.sh; exit status 77 if it cannot start)
  --s3-gib N        GiB streamed into the S3 repository (default 1, at most 2: the
                    test server holds objects in RAM)
  --verify          restore the stream (keel restore --stdout) and compare its SHA-256
  --work DIR        scratch directory (default: a new one under \${TMPDIR:-/tmp}); must
                    be empty or absent; removed at the end unless --keep. The local
                    repository needs about 0.75 x the streamed bytes
  --keel PATH       keel binary (default: \$KEEL_BIN or build/cli/keel)
  --keep            keep the scratch directory (and the bucket on an outside server)
  --report-only     print peak RSS but do not judge it (sanitizer builds: ASan's shadow
                    memory and quarantine, not keel, set their RSS)
  -h, --help        this text
Exits non-zero if a backup fails, a peak RSS exceeds budget + overhead, or (--verify) a
restore differs. Writes the table to stdout and bench/out/memory_stream.md.
EOF
}

gib=10 memory_mib=256 overhead_mib=128 seed=1 s3=0 s3_gib=1 verify=0 work="" keep=0 judge_rss=1
args=("$@")
while (($#)); do
  case $1 in
    --gib) gib=${2:?--gib needs a value}; shift 2 ;;
    --memory-mib) memory_mib=${2:?--memory-mib needs a value}; shift 2 ;;
    --overhead-mib) overhead_mib=${2:?--overhead-mib needs a value}; shift 2 ;;
    --seed) seed=${2:?--seed needs a value}; shift 2 ;;
    --s3) s3=1; shift ;;
    --s3-gib) s3_gib=${2:?--s3-gib needs a value}; shift 2 ;;
    --verify) verify=1; shift ;;
    --work) work=${2:?--work needs a value}; shift 2 ;;
    --keel) keel_bin=${2:?--keel needs a value}; shift 2 ;;
    --keep) keep=1; shift ;;
    --report-only) judge_rss=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done
number='^[0-9]+([.][0-9]+)?$'
[[ $gib =~ $number && $s3_gib =~ $number ]] || die "--gib and --s3-gib take a number of GiB"
[[ $memory_mib =~ ^[1-9][0-9]*$ && $overhead_mib =~ ^[0-9]+$ ]] ||
  die "--memory-mib and --overhead-mib take a whole number of MiB"
awk -v n="$s3_gib" 'BEGIN {exit !(n <= 2)}' ||
  die "--s3-gib $s3_gib: at most 2 (the test server keeps every object in RAM)"
require_keel
[[ -x /usr/bin/time ]] || die "/usr/bin/time is missing (Debian package 'time')"

if ((s3)) && [[ -z ${S3_ENDPOINT:-} ]]; then
  [[ -x $repo_root/tests/s3/with-rgw.sh ]] || die "tests/s3/with-rgw.sh is missing"
  export RGW_TLS=0 MEMORY_STREAM_OWN_RGW=1
  echo "starting a private Ceph RGW (tests/s3/with-rgw.sh)"
  exec "$repo_root/tests/s3/with-rgw.sh" "$bench_dir/memory_stream.sh" "${args[@]}"
fi
own_rgw=${MEMORY_STREAM_OWN_RGW:-0}
bucket=$(printf 'kmem-%x-%x' "$(date +%s)" $$)
if ((s3)); then
  [[ -n ${S3_ACCESS_KEY:-} && -n ${S3_SECRET_KEY:-} ]] ||
    die "S3_ENDPOINT is set but S3_ACCESS_KEY or S3_SECRET_KEY is not (eval \"\$(tests/s3/rgw.sh env)\")"
  export AWS_ACCESS_KEY_ID=$S3_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$S3_SECRET_KEY
  export AWS_REGION=${S3_REGION:-us-east-1} KEEL_S3_ENDPOINT=$S3_ENDPOINT
  unset AWS_SESSION_TOKEN AWS_PROFILE
fi

bench_scratch keel-memstream
# shellcheck disable=SC2317  # run by at_exit
remove_bucket() {  # from a server that outlives this run
  ((s3 && !own_rgw && !keep)) || return 0
  if command -v aws >/dev/null; then
    aws --endpoint-url "$S3_ENDPOINT" s3 rb --force "s3://$bucket" >/dev/null 2>&1 ||
      echo "could not remove bucket $bucket from $S3_ENDPOINT" >&2
  else
    echo "left bucket $bucket on $S3_ENDPOINT (awscli is needed to remove it)" >&2
  fi
}
at_exit remove_bucket

mkdir -p "$out_dir/logs"
export KEEL_PASSWORD=bench XDG_DATA_HOME="$work/catalog"
results="$work/results.jsonl"
: >"$results"

# Streams GIB GiB into REPO and records the figures: stream_into NAME REPO GIB
stream_into() {
  local name=$1 repo=$2 bytes log="$out_dir/logs/memory_stream-$1.log" status
  bytes=$(python3 -c 'import sys; print(int(float(sys.argv[1]) * 2**30))' "$3")  # awk's %d stops at 2^31
  "$keel_bin" init --repo "$repo" >"$log" 2>&1 || die "keel init --repo $repo failed (log: $log)"
  echo "  $name: streaming $3 GiB into keel backup --stdin --memory $memory_mib ($repo)"
  local digest_args=()
  ((verify)) && digest_args=(--sha256 "$work/$name.sha256")
  # pipefail: a generator that stops early fails the pipeline too.
  status=0
  python3 "$bench_dir/stream_gen.py" --bytes "$bytes" --seed "$seed" "${digest_args[@]}" |
    /usr/bin/time -f '%M %e %U %S' -o "$work/$name.time" \
      "$keel_bin" backup --repo "$repo" --stdin --stdin-name big.img --memory "$memory_mib" \
      --json >"$work/$name.json" 2>>"$log" || status=$?
  ((status == 0)) || { tail -n 20 "$log" >&2; die "$name: the backup failed (status $status, log: $log)"; }
  local restored=""
  if ((verify)); then
    restored=$("$keel_bin" restore latest --repo "$repo" --stdout big.img 2>>"$log" |
               sha256sum | cut -d' ' -f1) || die "$name: the restore failed (log: $log)"
  fi
  python3 - "$name" "$bytes" "$work/$name.time" "$work/$name.json" "$restored" \
    "$work/$name.sha256" >>"$results" <<'EOF'
import json, sys
name, streamed, time_file, json_file, restored, digest_file = sys.argv[1:]
rss_kib, wall, user, system = open(time_file).read().split()[-4:]  # last line: our format
backup = json.loads(open(json_file).read().splitlines()[-1])  # after the status lines
record = {"target": name, "streamed": int(streamed), "bytes": backup["bytes"],
          "bytes_added": backup["bytes_added"], "peak_buffered": backup["peak_buffered_bytes"],
          "rss_kib": int(rss_kib), "wall_s": float(wall), "cpu_s": float(user) + float(system)}
if restored:
    record["restore_ok"] = restored == open(digest_file).read().strip()
print(json.dumps(record))
EOF
}

echo "keel backup --stdin: peak RSS against --memory $memory_mib (+ $overhead_mib MiB allowed); scratch $work"
stream_into local "$work/repo" "$gib"
((s3)) && stream_into s3 "s3://$bucket/repo" "$s3_gib"

status=0
python3 - "$results" "$memory_mib" "$overhead_mib" "$judge_rss" "$out_dir/memory_stream.md" \
  "$("$keel_bin" --version), $(nproc) cores, $(date -u +%Y-%m-%d)" <<'EOF' || status=$?
import json, sys
results, budget, overhead, judge_rss, markdown, about = sys.argv[1:]
budget, overhead, judge_rss = int(budget), int(overhead), judge_rss == "1"
MIB = 1 << 20
headers = ["target", "GiB streamed", "wall s", "MB/s", "CPU s", "MB added", "peak buffered MiB",
           "peak RSS MiB", "limit MiB", "verdict"]
rows, failed = [], 0
for line in open(results):
    r = json.loads(line)
    rss = r["rss_kib"] / 1024
    rss_over = judge_rss and rss > budget + overhead
    ok = not rss_over and r["bytes"] == r["streamed"] and r.get("restore_ok", True)
    why = [] if judge_rss else ["RSS not judged"]
    if rss_over:
        why.append(f"RSS {rss - budget - overhead:.0f} MiB over")
    if r["bytes"] != r["streamed"]:
        why.append(f"stored {r['bytes']} of {r['streamed']} bytes")
    if "restore_ok" in r:
        why.append("restore " + ("matches" if r["restore_ok"] else "DIFFERS"))
    failed += not ok
    rows.append([r["target"], f"{r['streamed'] / (1 << 30):.2f}", f"{r['wall_s']:.1f}",
                 f"{r['streamed'] / 1e6 / r['wall_s']:.0f}", f"{r['cpu_s']:.1f}",
                 f"{r['bytes_added'] / 1e6:.0f}", f"{r['peak_buffered'] / MIB:.0f}", f"{rss:.0f}",
                 f"{budget + overhead}", ("PASS" if ok else "FAIL") + (f" ({', '.join(why)})" if why else "")])
widths = [max(len(row[i]) for row in [headers] + rows) for i in range(len(headers))]
for row in [headers] + rows:
    print("  ".join(c.ljust(w) if i in (0, 9) else c.rjust(w)
                    for i, (c, w) in enumerate(zip(row, widths))).rstrip())
caption = (f"keel backup --stdin --memory {budget}: the budget for chunks and parts in flight; "
           f"limit = budget + {overhead} MiB of fixed overhead. peak RSS from /usr/bin/time (%M); "
           "peak buffered = keel's own peak_buffered_bytes (--json). MB = 10^6 bytes. "
           f"Data: bench/stream_gen.py. {about}.")
print(caption)
with open(markdown, "w") as md:
    md.write("# keel backup --stdin: peak memory against the --memory budget\n\n")
    md.write("| " + " | ".join(headers) + " |\n|" + "|".join(
        ":--" if i in (0, 9) else "--:" for i in range(len(headers))) + "|\n")
    md.writelines("| " + " | ".join(row) + " |\n" for row in rows)
    md.write(f"\n{caption} See bench/README.md.\n")
sys.exit(1 if failed else 0)
EOF
echo "wrote $out_dir/memory_stream.md"
exit $status
