#!/usr/bin/env bash
# keel gateway (a raw-mode and a dedupe-mode bucket) beside Ceph RGW, all driven by the same
# awscli: PUT and GET throughput of one large object, and objects per second for many small
# ones (`aws s3 cp --recursive`, awscli's default 10 parallel requests). RGW is a private one
# started by tests/s3/with-rgw.sh (memstore: RAM), unless S3_ENDPOINT names a server; the
# gateway keeps its buckets on disk under the scratch directory (the dedupe bucket in a keel
# repository there). Then the dedupe ratio of a backup chain: an image of 1 MiB blocks
# written seven times into the dedupe bucket, 10% of its blocks changed each generation,
# against the repository space of the first generation. See docs/performance.md.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  cat <<USAGE
usage: bench/gateway_compare.sh [options]
  --big-mib N      size of the large object in MiB (default 1024)
  --small-count N  number of small objects (default 500)
  --small-kib N    size of each small object in KiB (default 512)
  --work DIR       scratch directory (default: a new one under \${TMPDIR:-/tmp}), removed at the end
  --keel PATH      keel binary (default: \$KEEL_BIN or build/cli/keel)
  --aws PATH       awscli (default: /usr/bin/aws, Debian's)
  --chain-mib N    size of the backup-chain image in MiB (default 256)
  --smoke          a 32 MiB object, 40 small ones and a 32 MiB chain; fails on any command
                   failure or mismatch
  -h, --help       this text
Writes the table to stdout and to bench/out/gateway_compare.md (gateway_compare_smoke.md
with --smoke). Exit status 77 when RGW cannot start.
USAGE
}

big_mib=1024 small_count=500 small_kib=512 chain_mib=256 work="" smoke=0
aws_bin=/usr/bin/aws
args=("$@")
while (($#)); do
  case $1 in
    --big-mib) big_mib=${2:?}; shift 2 ;;
    --small-count) small_count=${2:?}; shift 2 ;;
    --small-kib) small_kib=${2:?}; shift 2 ;;
    --chain-mib) chain_mib=${2:?}; shift 2 ;;
    --work) work=${2:?}; shift 2 ;;
    --keel) keel_bin=${2:?}; shift 2 ;;
    --aws) aws_bin=${2:?}; shift 2 ;;
    --smoke) smoke=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done
for n in big_mib small_count small_kib chain_mib; do positive_int "--${n//_/-}" "${!n}"; done
report_name=gateway_compare
if ((smoke)); then big_mib=32 small_count=40 chain_mib=32 report_name=gateway_compare_smoke; fi

require_keel
[[ -x $aws_bin ]] || die "awscli is not installed at $aws_bin (Debian package 'awscli')"

if [[ -z ${S3_ENDPOINT:-} ]]; then
  # memstore holds the objects in RAM: room for both data sets and some slack.
  export RGW_MEM_BYTES=${RGW_MEM_BYTES:-$(( (big_mib + small_count * small_kib / 1024) * 2 * 1048576 + (1 << 30) ))}
  export RGW_TLS=0
  echo "starting a private Ceph RGW (tests/s3/with-rgw.sh)"
  exec "$repo_root/tests/s3/with-rgw.sh" "$bench_dir/gateway_compare.sh" "${args[@]}"
fi
[[ -n ${S3_ACCESS_KEY:-} && -n ${S3_SECRET_KEY:-} ]] || die "S3_ENDPOINT is set but S3_ACCESS_KEY or S3_SECRET_KEY is not"

bench_scratch keel-gwbench

# --- data ---------------------------------------------------------------------
mkdir -p "$work/small" "$work/aws"
head -c $((big_mib << 20)) /dev/urandom >"$work/big.bin"
for ((i = 0; i < small_count; i++)); do
  head -c $((small_kib << 10)) /dev/urandom >"$work/small/obj-$i.bin"
done

# --- the gateway ----------------------------------------------------------------
# The dedupe bucket's repository: 128 KiB average chunks, so that a changed 1 MiB block
# costs little more than itself (the default 1 MiB average would store about twice that).
echo "gateway bench password" >"$work/password"
"$keel_bin" init --repo "$work/repo" --password-file "$work/password" --catalog "$work/catalog.db" \
  --chunk-min 64 --chunk-avg 128 --chunk-max 1024 >/dev/null
gateway_access=AKIDGWBENCH000000001 gateway_secret=gateway-bench-secret-0000000000000000
dedupe_bucket=gwbench-dedupe
cat >"$work/gateway.conf" <<CONF
[server]
listen = 127.0.0.1:0
state_dir = $work/gateway-state
threads = 4

[user:bench]
access_key = $gateway_access
secret_key = $gateway_secret

[bucket:$dedupe_bucket]
owner = bench
mode = dedupe
repository = $work/repo
password_file = $work/password
catalog = $work/catalog.db
CONF
start_gateway "$work/gateway.conf" "listening on "

# --- measurements -------------------------------------------------------------------
export AWS_CONFIG_FILE="$work/aws/config" AWS_SHARED_CREDENTIALS_FILE="$work/aws/credentials"
export AWS_DEFAULT_REGION=${S3_REGION:-us-east-1} AWS_EC2_METADATA_DISABLED=true
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_ENDPOINT_URL AWS_ENDPOINT_URL_S3
: >"$AWS_CONFIG_FILE"

now() { date +%s.%N; }
declare -A result
# run_target NAME ENDPOINT ACCESS SECRET: fills result[NAME,phase] with seconds.
# A fifth argument names a configured bucket, used as it is and emptied at the end.
run_target() {
  local name=$1 endpoint=$2 bucket=${5:-"gwbench-$1-$$"}
  local -a creds=("$3" "$4")
  s3() { AWS_ACCESS_KEY_ID=${creds[0]} AWS_SECRET_ACCESS_KEY=${creds[1]} "$aws_bin" --endpoint-url "$endpoint" "$@"; }
  [[ -n ${5:-} ]] || s3 s3 mb "s3://$bucket" >/dev/null
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
  if [[ -n ${5:-} ]]; then
    s3 s3 rm --only-show-errors --recursive "s3://$bucket"
  else
    s3 s3 rb --force "s3://$bucket" >/dev/null
  fi
}

pack_bytes() { find "$work/repo/packs" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}'; }

# The backup chain: generation g is generation g-1 with 10% of its 1 MiB blocks
# overwritten, each written as its own object. Fills chain[gen1], chain[gen7] (bytes of
# packs added) and chain[put_s] (seconds for all seven).
declare -A chain
run_chain() {
  local endpoint=$1 bucket=$dedupe_bucket base t0 t1
  s3() { AWS_ACCESS_KEY_ID=$gateway_access AWS_SECRET_ACCESS_KEY=$gateway_secret "$aws_bin" --endpoint-url "$endpoint" "$@"; }
  head -c $((chain_mib << 20)) /dev/urandom >"$work/image.bin"
  base=$(pack_bytes)
  t0=$(now)
  for gen in 1 2 3 4 5 6 7; do
    if ((gen > 1)); then
      python3 - "$work/image.bin" "$gen" <<'PY'
import os, random, sys
path, gen = sys.argv[1], int(sys.argv[2])
blocks = os.path.getsize(path) >> 20
rnd = random.Random(gen)
with open(path, "r+b") as f:
    for block in rnd.sample(range(blocks), max(1, round(blocks / 10))):
        f.seek(block << 20)
        f.write(os.urandom(1 << 20))
PY
    fi
    s3 s3 cp --only-show-errors "$work/image.bin" "s3://$bucket/chain/gen-$gen.img"
    ((gen > 1)) || chain[gen1]=$(($(pack_bytes) - base))
  done
  t1=$(now)
  chain[gen7]=$(($(pack_bytes) - base))
  chain[put_s]=$(echo "$t1 - $t0" | bc -l)
  s3 s3 cp --only-show-errors "s3://$bucket/chain/gen-7.img" - | cmp - "$work/image.bin" ||
    die "dedupe: generation 7 read back differs"
}
echo "RGW at $S3_ENDPOINT, keel gateway at $gateway_url; ${big_mib} MiB object, $small_count x $small_kib KiB objects"
run_target rgw "$S3_ENDPOINT" "$S3_ACCESS_KEY" "$S3_SECRET_KEY"
run_target gateway "$gateway_url" "$gateway_access" "$gateway_secret"
run_target dedupe "$gateway_url" "$gateway_access" "$gateway_secret" "$dedupe_bucket"
run_chain "$gateway_url"

mkdir -p "$out_dir"
python3 - "$big_mib" "$small_count" "$small_kib" "$chain_mib" "${chain[gen1]}" "${chain[gen7]}" "${chain[put_s]}" \
  "${result[rgw,big_put]}" "${result[rgw,big_get]}" "${result[rgw,small_put]}" "${result[rgw,small_get]}" \
  "${result[gateway,big_put]}" "${result[gateway,big_get]}" "${result[gateway,small_put]}" "${result[gateway,small_get]}" \
  "${result[dedupe,big_put]}" "${result[dedupe,big_get]}" "${result[dedupe,small_put]}" "${result[dedupe,small_get]}" \
  <<'PY' | tee "$out_dir/$report_name.md"
import sys
big_mib, count, kib, chain_mib, gen1, gen7 = (int(x) for x in sys.argv[1:7])
chain_s = float(sys.argv[7])
rgw, raw, dedupe = ([float(x) for x in sys.argv[i:i + 4]] for i in (8, 12, 16))
rows = [("PUT one %d MiB object (MiB/s)" % big_mib, big_mib, 0), ("GET it (MiB/s)", big_mib, 1),
        ("PUT %d x %d KiB (objects/s)" % (count, kib), count, 2), ("GET them (objects/s)", count, 3)]
print("| awscli, `aws s3 cp` | Ceph RGW (memstore) | keel gateway (raw, disk) | keel gateway (dedupe, disk) "
      "| raw / RGW | dedupe / RGW |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for label, amount, i in rows:
    a, b, c = amount / rgw[i], amount / raw[i], amount / dedupe[i]
    print(f"| {label} | {a:.1f} | {b:.1f} | {c:.1f} | {b / a:.2f} | {c / a:.2f} |")
print()
print(f"Backup chain in the dedupe bucket: a {chain_mib} MiB image of 1 MiB blocks written 7 times, "
      f"10% of the blocks changed per generation ({7 * chain_mib / chain_s:.1f} MiB/s for the 7 PUTs).")
print()
print("| repository space | MiB | x generation 1 |")
print("| --- | ---: | ---: |")
print(f"| generation 1 | {gen1 / 2**20:.1f} | 1.00 |")
print(f"| generations 1 to 7 | {gen7 / 2**20:.1f} | {gen7 / gen1:.2f} |")
print(f"| logical bytes written | {7 * chain_mib:.1f} | {7 * chain_mib * 2**20 / gen1:.2f} |")
PY
