#!/usr/bin/env bash
# keel vs restic with S3 repositories on the same server: a first backup, a backup after
# mutate.py has changed ~5% of the bytes, and a full restore of the mutated state, each
# timed (wall, CPU, peak RSS) with the bucket's size after it; every restore is checked
# against the source tree. For context, the server's raw rates: awscli uploading and
# downloading one large file with 16 parallel multipart requests. See bench/README.md.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  cat <<EOF
usage: bench/s3_compare.sh [options]
  --size-gib N      dataset size in GiB (default 1; the server holds every repository
                    in RAM: keep it at 2 or less on a 24 GiB machine)
  --seed N          dataset seed for gen_dataset.py (default 1)
  --aws-mib N       size of awscli's test file in MiB (default 512)
  --work DIR        scratch directory (default: a new one under \${TMPDIR:-/tmp});
                    must be empty or absent; removed at the end unless --keep
  --restore-dir DIR where the restores go (default: the scratch directory); e.g.
                    /dev/shm to time the tools rather than the disk's file creation
  --keel PATH       keel binary (default: \$KEEL_BIN or build/cli/keel)
  --aws PATH        awscli (default: /usr/bin/aws, Debian's, else aws on PATH)
  --keep            keep the scratch directory and, on a server given by S3_ENDPOINT,
                    the buckets
  --smoke           a ~40 MiB dataset and a 64 MiB awscli file: fails on any command
                    failure or restore mismatch
  -h, --help        this text
The server: S3_ENDPOINT, S3_ACCESS_KEY, S3_SECRET_KEY (and S3_REGION) if set, as
tests/s3/rgw.sh env prints them; otherwise a private Ceph RGW started with
tests/s3/with-rgw.sh for this run (exit status 77 if it cannot start).
Writes the tables to stdout and to bench/out/s3_compare.md
(bench/out/s3_compare_smoke.md with --smoke); command logs go to bench/out/logs/s3-*.log.
EOF
}

size_gib=1 seed=1 aws_mib=512 work="" restore_dir="" keep=0 smoke=0
aws_bin=""
args=("$@")
while (($#)); do
  case $1 in
    --size-gib) size_gib=${2:?--size-gib needs a value}; shift 2 ;;
    --seed) seed=${2:?--seed needs a value}; shift 2 ;;
    --aws-mib) aws_mib=${2:?--aws-mib needs a value}; shift 2 ;;
    --work) work=${2:?--work needs a value}; shift 2 ;;
    --restore-dir) restore_dir=${2:?--restore-dir needs a value}; shift 2 ;;
    --keel) keel_bin=${2:?--keel needs a value}; shift 2 ;;
    --aws) aws_bin=${2:?--aws needs a value}; shift 2 ;;
    --keep) keep=1; shift ;;
    --smoke) smoke=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done
positive_int --aws-mib "$aws_mib"
[[ -z $restore_dir || -d $restore_dir ]] || die "--restore-dir $restore_dir is not a directory"

report_name=s3_compare
if ((smoke)); then
  size_gib=0.0390625  # 40 MiB
  aws_mib=64
  report_name=s3_compare_smoke
fi

# --- tools ----------------------------------------------------------------
require_keel
command -v restic >/dev/null || die "restic is not installed (Debian package 'restic')"
if [[ -z $aws_bin ]]; then
  if [[ -x /usr/bin/aws ]]; then aws_bin=/usr/bin/aws; else aws_bin=$(command -v aws || true); fi
fi
[[ -n $aws_bin && -x $aws_bin ]] || die "awscli is not installed (Debian package 'awscli') or pass --aws PATH"

# --- the server -------------------------------------------------------------
if [[ -z ${S3_ENDPOINT:-} ]]; then
  # A private RGW for this run, sized for the repositories of both tools and the awscli file:
  # memstore takes RAM only as objects are written.
  [[ -x $repo_root/tests/s3/with-rgw.sh ]] || die "tests/s3/with-rgw.sh is missing"
  export RGW_MEM_BYTES=${RGW_MEM_BYTES:-$(python3 -c "
import sys; print(max(4 << 30, int((3 * float(sys.argv[1]) + 2) * (1 << 30))))" "$size_gib")}
  export RGW_TLS=0 S3_COMPARE_OWN_RGW=1
  echo "starting a private Ceph RGW (tests/s3/with-rgw.sh, memstore up to $((RGW_MEM_BYTES >> 20)) MiB)"
  exec "$repo_root/tests/s3/with-rgw.sh" "$bench_dir/s3_compare.sh" "${args[@]}"
fi
own_rgw=${S3_COMPARE_OWN_RGW:-0}
[[ -n ${S3_ACCESS_KEY:-} && -n ${S3_SECRET_KEY:-} ]] ||
  die "S3_ENDPOINT is set but S3_ACCESS_KEY or S3_SECRET_KEY is not (eval \"\$(tests/s3/rgw.sh env)\")"
# One set of credentials for all three clients; nothing from the user's ~/.aws.
export AWS_ACCESS_KEY_ID=$S3_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$S3_SECRET_KEY
export AWS_REGION=${S3_REGION:-us-east-1} AWS_DEFAULT_REGION=${S3_REGION:-us-east-1}
export KEEL_S3_ENDPOINT=$S3_ENDPOINT
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_ENDPOINT_URL AWS_ENDPOINT_URL_S3

# --- scratch space ----------------------------------------------------------
bench_scratch keel-s3bench
# Bucket names unique to this run, so a shared server is never disturbed.
run_id=$(printf 'kbench-%x-%x' "$(date +%s)" $$)
bucket() { echo "$run_id-$1"; }
restores=$(mktemp -d "${restore_dir:-$work}/keel-s3bench-restore.XXXXXX")

export AWS_CONFIG_FILE="$work/aws/config" AWS_SHARED_CREDENTIALS_FILE="$work/aws/credentials"
aws_s3() { "$aws_bin" --endpoint-url "$S3_ENDPOINT" "$@"; }

remove_buckets() {
  local tool
  if ((!own_rgw && !keep)); then  # a private RGW is discarded whole when this script ends
    for tool in keel restic awscli; do
      aws_s3 s3 rb --force "s3://$(bucket "$tool")" >/dev/null 2>&1 || true
    done
  fi
  rm -rf -- "$restores"
  ((!keep)) || echo "kept buckets $run_id-*" >&2
}
at_exit remove_buckets

mkdir -p "$out_dir/logs" "$work/aws"
rm -f "$out_dir"/logs/s3-*.log
data="$work/data"
records="$work/records.jsonl"   # measure.py: keel and restic phases
raw="$work/raw.jsonl"           # measure.py: awscli upload and download
extras="$work/s3.jsonl"         # per phase: bucket bytes, server CPU, keel's bytes_added
verify="$work/verify.txt"
: >"$records"; : >"$raw"; : >"$extras"; : >"$verify"

export KEEL_PASSWORD=bench RESTIC_PASSWORD=bench
export XDG_DATA_HOME="$work/keel/cache" RESTIC_CACHE_DIR="$work/restic/cache"

# The server's CPU time so far (seconds, all its daemons), when its PIDs are known: on a small
# machine it competes with the client for the same cores. Empty for a server given from outside.
server_cpu_s() {
  [[ -n ${RGW_DIR:-} && -r $RGW_DIR/pids ]] || return 0
  local pid ticks=0 fields
  while read -r pid _; do
    # utime and stime are fields 14 and 15; the command name (field 2) holds no spaces here.
    fields=$(cat "/proc/$pid/stat" 2>/dev/null) || continue
    ticks=$((ticks + $(awk '{print $14 + $15}' <<<"$fields")))
  done <"$RGW_DIR/pids"
  awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", t / hz}'
}

bucket_bytes() {
  aws_s3 s3 ls --recursive --summarize "s3://$1/" | awk '/Total Size:/ {print $3}'
}

keel_repo() { echo "s3://$(bucket keel)/repo"; }
restic_repo() { echo "s3:$S3_ENDPOINT/$(bucket restic)/repo"; }

# Runs one timed phase: measure RECORDS PHASE TOOL DATA_BYTES -- COMMAND...
# and appends the bucket's size, the server's CPU time and (keel) bytes_added to $extras.
measure() {
  local file=$1 phase=$2 tool=$3 bytes=$4 log="$out_dir/logs/s3-1-$3-$2.log" cpu_before
  shift 4
  cpu_before=$(server_cpu_s)
  sync  # no tool pays for the previous step's dirty pages
  python3 "$bench_dir/measure.py" --records "$file" --rep 1 --phase "$phase" --tool "$tool" \
    --data-bytes "$bytes" --repo "$work/$tool/no-local-repo" --cache "$work/$tool/cache" \
    --log "$log" "$@" || die "$tool $phase failed (log: $log)"
  python3 - "$extras" "$phase" "$tool" "$cpu_before" "$(server_cpu_s)" \
    "$(bucket_bytes "$(bucket "$tool")")" "$log" <<'EOF'
import json, sys
extras, phase, tool, before, after, repo, log = sys.argv[1:]
record = {"phase": phase, "tool": tool, "repo_bytes": int(repo or 0),
          "server_cpu_s": float(after) - float(before) if before and after else None}
if tool == "keel" and phase != "restore":  # keel backup --json: its document is the last line
    lines = [l for l in open(log, errors="replace") if l.startswith("{")]
    record["bytes_added"] = json.loads(lines[-1])["bytes_added"]
with open(extras, "a") as f:
    f.write(json.dumps(record) + "\n")
EOF
}

data_bytes() { python3 "$bench_dir/tree_compare.py" stats "$data" | cut -d' ' -f2; }

tool_init() {
  local log="$out_dir/logs/s3-1-$1-init.log"
  case $1 in
    keel) "$keel_bin" init --repo "$(keel_repo)" ;;
    restic) restic --repo "$(restic_repo)" init ;;
  esac >"$log" 2>&1 || die "$1 init failed (log: $log)"
}

backup_phase() {
  local phase=$1 tool=$2 bytes=$3
  case $tool in
    keel) measure "$records" "$phase" keel "$bytes" -- \
            "$keel_bin" backup --repo "$(keel_repo)" "$data" --json ;;
    restic) measure "$records" "$phase" restic "$bytes" -- \
              restic --repo "$(restic_repo)" backup "$data" ;;
  esac
}

restore_phase() {
  local tool=$1 bytes=$2 target="$restores/$1"
  case $tool in
    keel) measure "$records" restore keel "$bytes" -- \
            "$keel_bin" restore latest --repo "$(keel_repo)" --target "$target" --json ;;
    restic) measure "$records" restore restic "$bytes" -- \
              restic --repo "$(restic_repo)" restore latest --target "$target" ;;
  esac
}

# --- the runs ---------------------------------------------------------------
tools=(keel restic)
echo "keel vs restic on S3 at $S3_ENDPOINT; dataset ${size_gib} GiB, seed $seed;" \
     "awscli file $aws_mib MiB; scratch $work"
started=$SECONDS

# The server's raw rates first, on an empty server: awscli with 16 requests in flight and
# 8 MiB parts, as a tuned bulk copy would run.
"$aws_bin" configure set default.s3.max_concurrent_requests 16
"$aws_bin" configure set default.s3.multipart_chunksize 8MB
"$aws_bin" configure set default.s3.multipart_threshold 8MB
big="$work/aws/big.bin"
python3 "$bench_dir/stream_gen.py" --bytes "${aws_mib}M" --seed "$seed" >"$big"
aws_bytes=$(stat -c %s "$big")
aws_s3 s3 mb "s3://$(bucket awscli)" >"$out_dir/logs/s3-1-awscli-init.log" 2>&1 ||
  die "awscli could not create a bucket (log: $out_dir/logs/s3-1-awscli-init.log)"
mkdir -p "$work/awscli/cache"
measure "$raw" upload awscli "$aws_bytes" -- \
  "$aws_bin" --endpoint-url "$S3_ENDPOINT" s3 cp --only-show-errors "$big" "s3://$(bucket awscli)/big.bin"
measure "$raw" download awscli "$aws_bytes" -- \
  "$aws_bin" --endpoint-url "$S3_ENDPOINT" s3 cp --only-show-errors "s3://$(bucket awscli)/big.bin" "$big.down"
cmp -s "$big" "$big.down" || die "awscli downloaded something other than it uploaded"
aws_s3 s3 rm --only-show-errors "s3://$(bucket awscli)/big.bin"  # frees the server's RAM
rm -f "$big" "$big.down"

python3 "$bench_dir/gen_dataset.py" "$data" --size-gib "$size_gib" --seed "$seed"
bytes=$(data_bytes)
for tool in "${tools[@]}"; do
  mkdir -p "$work/$tool/cache"
  tool_init "$tool"
  backup_phase initial "$tool" "$bytes"
done

python3 "$bench_dir/mutate.py" "$data" --seed $((seed + 1))
bytes=$(data_bytes)
python3 "$bench_dir/tree_compare.py" digest "$data" "$work/source.digest"
for tool in "${tools[@]}"; do
  backup_phase incremental "$tool" "$bytes"
done

# The restored trees are deleted only after both restores: on ext4 without a journal, creating
# files soon after many were deleted is slow (the allocator skips inodes freed in the last
# minutes), so deleting one tool's tree would slow the next tool's restore.
mismatches=0
for tool in "${tools[@]}"; do
  restore_phase "$tool" "$bytes"
  target="$restores/$tool"
  # Both restore the dataset at its full path under the target.
  if python3 "$bench_dir/tree_compare.py" check "$work/source.digest" "$target$data" \
      >"$work/check.txt"; then
    result=OK
  else
    result=MISMATCH
    mismatches=$((mismatches + 1))
  fi
  echo "  $tool restore: $(head -n 11 "$work/check.txt")"
  echo "1 $tool $result" >>"$verify"
done
rm -rf -- "${restores:?}"/*

# --- the report ---------------------------------------------------------------
echo
server="$S3_ENDPOINT"
((own_rgw)) && server="Ceph RGW $(radosgw --version 2>/dev/null | awk '{print $3}') (memstore) on loopback, started by tests/s3/with-rgw.sh"
notes=("dataset: gen_dataset.py --size-gib $size_gib --seed $seed, then mutate.py --seed $((seed + 1)); $(python3 "$bench_dir/tree_compare.py" stats "$data" | awk '{printf "%d files, %.1f MiB after mutation", $1, $2 / 1048576}')"
       "server: $server"
       "restores into: $(df --output=fstype "$restores" | tail -n 1) ($(df --output=target "$restores" | tail -n 1))"
       "machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(free -g | awk '/^Mem:/ {print $2}') GiB RAM, $(date -u +%Y-%m-%d); client and server share the cores"
       "keel: $("$keel_bin" --version) (defaults: --memory 256)"
       "restic: $(restic version | cut -d' ' -f1-2) (defaults: s3.connections 5)"
       "awscli: $("$aws_bin" --version 2>&1 | cut -d' ' -f1), max_concurrent_requests 16, multipart_chunksize 8MB")
note_args=()
for note in "${notes[@]}"; do note_args+=(--note "$note"); done
python3 "$bench_dir/s3_report.py" --records "$records" --raw "$raw" --extras "$extras" \
  --verify "$verify" --markdown "$out_dir/$report_name.md" "${note_args[@]}"
echo "wrote $out_dir/$report_name.md in $((SECONDS - started)) s"

((mismatches == 0)) || die "$mismatches restore(s) did not match the source"
