#!/usr/bin/env bash
# keel gateway (raw-mode bucket) beside Ceph RGW, both driven by the same awscli: PUT and
# GET throughput of one large object, and objects per second for many small ones
# (`aws s3 cp --recursive`, awscli's default 10 parallel requests). RGW is a private one
# started by tests/s3/with-rgw.sh (memstore: RAM), unless S3_ENDPOINT names a server; the
# gateway keeps its bucket on disk under the scratch directory. See docs/performance.md.
set -euo pipefail

bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(dirname "$bench_dir")
out_dir="$bench_dir/out"

usage() {
  cat <<USAGE
usage: bench/gateway_compare.sh [options]
  --big-mib N      size of the large object in MiB (default 1024)
  --small-count N  number of small objects (default 500)
  --small-kib N    size of each small object in KiB (default 512)
  --work DIR       scratch directory (default: a new one under \${TMPDIR:-/tmp}), removed at the end
  --keel PATH      keel binary (default: \$KEEL_BIN or build/cli/keel)
  --aws PATH       awscli (default: /usr/bin/aws, Debian's)
  --smoke          a 32 MiB object and 40 small ones; fails on any command failure or mismatch
  -h, --help       this text
Writes the table to stdout and to bench/out/gateway_compare.md (gateway_compare_smoke.md
with --smoke). Exit status 77 when RGW cannot start.
USAGE
}

die() { echo "gateway_compare.sh: $*" >&2; exit 1; }

big_mib=1024 small_count=500 small_kib=512 work="" smoke=0
keel_bin=${KEEL_BIN:-$repo_root/build/cli/keel}
aws_bin=/usr/bin/aws
args=("$@")
while (($#)); do
  case $1 in
    --big-mib) big_mib=${2:?}; shift 2 ;;
    --small-count) small_count=${2:?}; shift 2 ;;
    --small-kib) small_kib=${2:?}; shift 2 ;;
    --work) work=${2:?}; shift 2 ;;
    --keel) keel_bin=${2:?}; shift 2 ;;
    --aws) aws_bin=${2:?}; shift 2 ;;
    --smoke) smoke=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done
for n in "$big_mib" "$small_count" "$small_kib"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || die "sizes and counts must be positive integers, not '$n'"
done
report_name=gateway_compare
if ((smoke)); then big_mib=32 small_count=40 report_name=gateway_compare_smoke; fi

[[ -x $keel_bin ]] || die "no keel binary at $keel_bin: build it or pass --keel PATH"
keel_bin=$(cd "$(dirname "$keel_bin")" && pwd)/$(basename "$keel_bin")
[[ -x $aws_bin ]] || die "awscli is not installed at $aws_bin (Debian package 'awscli')"

if [[ -z ${S3_ENDPOINT:-} ]]; then
  # memstore holds the objects in RAM: room for both data sets and some slack.
  export RGW_MEM_BYTES=${RGW_MEM_BYTES:-$(( (big_mib + small_count * small_kib / 1024) * 2 * 1048576 + (1 << 30) ))}
  export RGW_TLS=0
  echo "starting a private Ceph RGW (tests/s3/with-rgw.sh)"
  exec "$repo_root/tests/s3/with-rgw.sh" "$bench_dir/gateway_compare.sh" "${args[@]}"
fi
[[ -n ${S3_ACCESS_KEY:-} && -n ${S3_SECRET_KEY:-} ]] || die "S3_ENDPOINT is set but S3_ACCESS_KEY or S3_SECRET_KEY is not"

if [[ -z $work ]]; then
  work=$(mktemp -d "${TMPDIR:-/tmp}/keel-gwbench.XXXXXX")
else
  mkdir -p "$work"
  work=$(cd "$work" && pwd)
fi
gateway_pid=""
cleanup() {
  [[ -z $gateway_pid ]] || { kill "$gateway_pid" 2>/dev/null; wait "$gateway_pid" 2>/dev/null || true; }
  rm -rf "$work"
}
trap cleanup EXIT

# --- data ---------------------------------------------------------------------
mkdir -p "$work/small" "$work/aws"
head -c $((big_mib << 20)) /dev/urandom >"$work/big.bin"
for ((i = 0; i < small_count; i++)); do
  head -c $((small_kib << 10)) /dev/urandom >"$work/small/obj-$i.bin"
done

# --- the gateway ----------------------------------------------------------------
gateway_access=AKIDGWBENCH000000001 gateway_secret=gateway-bench-secret-0000000000000000
cat >"$work/gateway.conf" <<CONF
[server]
listen = 127.0.0.1:0
state_dir = $work/gateway-state
threads = 4

[user:bench]
access_key = $gateway_access
secret_key = $gateway_secret
CONF
"$keel_bin" gateway --config "$work/gateway.conf" >"$work/gateway.out" 2>"$work/gateway.err" &
gateway_pid=$!
for _ in $(seq 100); do
  grep -q '^listening on ' "$work/gateway.out" 2>/dev/null && break
  kill -0 "$gateway_pid" 2>/dev/null || die "keel gateway did not start: $(cat "$work/gateway.err")"
  sleep 0.1
done
gateway_url=$(awk '/^listening on /{print $3; exit}' "$work/gateway.out")
[[ -n $gateway_url ]] || die "keel gateway printed no URL"

# --- measurements -------------------------------------------------------------------
export AWS_CONFIG_FILE="$work/aws/config" AWS_SHARED_CREDENTIALS_FILE="$work/aws/credentials"
export AWS_DEFAULT_REGION=${S3_REGION:-us-east-1} AWS_EC2_METADATA_DISABLED=true
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_ENDPOINT_URL AWS_ENDPOINT_URL_S3
: >"$AWS_CONFIG_FILE"

now() { date +%s.%N; }
declare -A result
# run_target NAME ENDPOINT ACCESS SECRET: fills result[NAME,phase] with seconds.
run_target() {
  local name=$1 endpoint=$2 bucket="gwbench-$1-$$"
  local -a creds=("$3" "$4")
  s3() { AWS_ACCESS_KEY_ID=${creds[0]} AWS_SECRET_ACCESS_KEY=${creds[1]} "$aws_bin" --endpoint-url "$endpoint" "$@"; }
  s3 s3 mb "s3://$bucket" >/dev/null
  local t0 t1
  t0=$(now); s3 s3 cp --only-show-errors "$work/big.bin" "s3://$bucket/big.bin"; t1=$(now)
  result[$name,big_put]=$(echo "$t1 - $t0" | bc -l)
  t0=$(now); s3 s3 cp --only-show-errors "s3://$bucket/big.bin" - >/dev/null; t1=$(now)
  result[$name,big_get]=$(echo "$t1 - $t0" | bc -l)
  t0=$(now); s3 s3 cp --only-show-errors --recursive "$work/small" "s3://$bucket/small/"; t1=$(now)
  result[$name,small_put]=$(echo "$t1 - $t0" | bc -l)
  rm -rf "$work/back"
  t0=$(now); s3 s3 cp --only-show-errors --recursive "s3://$bucket/small/" "$work/back/"; t1=$(now)
  result[$name,small_get]=$(echo "$t1 - $t0" | bc -l)
  diff -r "$work/small" "$work/back" >/dev/null || die "$name: the small objects read back differ"
  if ((smoke)); then
    s3 s3 cp --only-show-errors "s3://$bucket/big.bin" - | cmp - "$work/big.bin" || die "$name: the large object read back differs"
  fi
  s3 s3 rb --force "s3://$bucket" >/dev/null
}
echo "RGW at $S3_ENDPOINT, keel gateway at $gateway_url; ${big_mib} MiB object, $small_count x $small_kib KiB objects"
run_target rgw "$S3_ENDPOINT" "$S3_ACCESS_KEY" "$S3_SECRET_KEY"
run_target gateway "$gateway_url" "$gateway_access" "$gateway_secret"

mkdir -p "$out_dir"
python3 - "$big_mib" "$small_count" "$small_kib" \
  "${result[rgw,big_put]}" "${result[rgw,big_get]}" "${result[rgw,small_put]}" "${result[rgw,small_get]}" \
  "${result[gateway,big_put]}" "${result[gateway,big_get]}" "${result[gateway,small_put]}" "${result[gateway,small_get]}" \
  <<'PY' | tee "$out_dir/$report_name.md"
import sys
big_mib, count, kib = (int(x) for x in sys.argv[1:4])
rgw = [float(x) for x in sys.argv[4:8]]
gw = [float(x) for x in sys.argv[8:12]]
rows = [("PUT one %d MiB object (MiB/s)" % big_mib, big_mib, 0), ("GET it (MiB/s)", big_mib, 1),
        ("PUT %d x %d KiB (objects/s)" % (count, kib), count, 2), ("GET them (objects/s)", count, 3)]
print("| awscli, `aws s3 cp` | Ceph RGW (memstore) | keel gateway (raw, disk) | gateway / RGW |")
print("| --- | ---: | ---: | ---: |")
for label, amount, i in rows:
    a, b = amount / rgw[i], amount / gw[i]
    print(f"| {label} | {a:.1f} | {b:.1f} | {b / a:.2f} |")
PY
