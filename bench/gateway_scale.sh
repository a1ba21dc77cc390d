#!/usr/bin/env bash
# keel gateway at scale: N small objects in one bucket, side by side with Ceph RGW.
# PUT rate at 16 clients, ListObjectsV2 page time (p50/p99 of 1000-key pages) at the
# start, middle and end of the key space, a DeleteObjects of 1000 keys, the servers' RSS,
# and the gateway's metadata size (gateway.db) and bucket files. RGW is a private one
# started by tests/s3/with-rgw.sh (memstore: RAM) unless S3_ENDPOINT names a server or
# --no-rgw is given. See docs/performance.md ("keel gateway at scale").
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  cat <<USAGE
usage: bench/gateway_scale.sh [options]
  --count N        objects in the bucket (default 1000000)
  --clients N      parallel PUT clients (default 16)
  --body-bytes N   size of each object (default 64)
  --stages N       report the PUTs after each of N equal stretches (default: a tenth, a half, all)
  --report NAME    write bench/out/NAME.md (default gateway_scale)
  --no-rgw         the gateway only
  --work DIR       scratch directory (default: a new one under \${TMPDIR:-/tmp}), removed at the end
  --keel PATH      keel binary (default: \$KEEL_BIN or build/cli/keel)
  --smoke          2000 objects, 5 listing repeats
  -h, --help       this text
Writes the table to stdout and to bench/out/gateway_scale.md (gateway_scale_smoke.md with
--smoke). Fails on any unexpected status or listing. Exit status 77 when RGW cannot start.
USAGE
}

count=1000000 clients=16 body_bytes=64 work="" smoke=0 rgw=1 repeats=30 stages=0 report_name=""
args=("$@")
while (($#)); do
  case $1 in
    --count) count=${2:?}; shift 2 ;;
    --clients) clients=${2:?}; shift 2 ;;
    --body-bytes) body_bytes=${2:?}; shift 2 ;;
    --stages) stages=${2:?}; shift 2 ;;
    --report) report_name=${2:?}; shift 2 ;;
    --no-rgw) rgw=0; shift ;;
    --work) work=${2:?}; shift 2 ;;
    --keel) keel_bin=${2:?}; shift 2 ;;
    --smoke) smoke=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done
for n in count clients body_bytes; do positive_int "--${n//_/-}" "${!n}"; done
[[ $stages =~ ^[0-9]+$ && $report_name =~ ^[A-Za-z0-9_.-]*$ ]] || die "bad --stages or --report"
if ((smoke)); then count=2000 repeats=5 report_name=${report_name:-gateway_scale_smoke}; fi
report_name=${report_name:-gateway_scale}

require_keel

if ((rgw)) && [[ -z ${S3_ENDPOINT:-} ]]; then
  # memstore keeps objects and their index in RAM: about 4 KiB per small object, plus slack.
  export RGW_MEM_BYTES=${RGW_MEM_BYTES:-$(( count * (body_bytes + 4096) * 2 + (1 << 30) ))}
  export RGW_TLS=0
  echo "starting a private Ceph RGW (tests/s3/with-rgw.sh)"
  exec "$repo_root/tests/s3/with-rgw.sh" "$bench_dir/gateway_scale.sh" "${args[@]}"
fi

bench_scratch keel-gwscale

gateway_access=AKIDGWSCALE000000001 gateway_secret=gateway-scale-secret-000000000000000
cat >"$work/gateway.conf" <<CONF
[server]
listen = 127.0.0.1:0
state_dir = $work/gateway-state
threads = $clients

[user:bench]
access_key = $gateway_access
secret_key = $gateway_secret
CONF
start_gateway "$work/gateway.conf" "listening on "

drive() { # NAME ENDPOINT ACCESS SECRET ARG...: the driver's JSON on stdout (ARG: NAME=PID or --state-dir DIR)
  local name=$1 endpoint=$2 access=$3 secret=$4; shift 4
  local -a pids=()
  while (($#)); do
    if [[ $1 == --state-dir ]]; then pids+=("$1" "$2"); shift 2; else pids+=(--pid "$1"); shift; fi
  done
  echo "$name: $count objects of $body_bytes bytes, $clients clients" >&2
  python3 "$bench_dir/gateway_scale.py" --endpoint "$endpoint" --access-key "$access" --secret-key "$secret" \
    --bucket "scale-$name-$$" --count "$count" --clients "$clients" --body-bytes "$body_bytes" \
    --list-repeats "$repeats" --stages "$stages" "${pids[@]}"
}

gateway_json=$(drive gateway "$gateway_url" "$gateway_access" "$gateway_secret" "gateway=$gateway_pid" \
  --state-dir "$work/gateway-state")
metadata_bytes=$(stat -c %s "$work/gateway-state/gateway.db")
wal_bytes=$(stat -c %s "$work/gateway-state/gateway.db-wal" 2>/dev/null || echo 0)
# The gateway may still be unlinking the files the DeleteObjects freed: du then
# reports those that vanished under it, and the total is still right.
files_bytes=$( (du -sb "$work/gateway-state/buckets" 2>/dev/null || true) | cut -f1)
rgw_json=null
if ((rgw)); then
  rgw_pids=()
  while read -r pid name; do rgw_pids+=("$name=$pid"); done <"$RGW_DIR/pids"
  rgw_json=$(drive rgw "$S3_ENDPOINT" "$S3_ACCESS_KEY" "$S3_SECRET_KEY" "${rgw_pids[@]}")
fi

mkdir -p "$out_dir"
python3 - "$gateway_json" "$rgw_json" "$metadata_bytes" "$wal_bytes" "$files_bytes" <<'PY' | tee "$out_dir/$report_name.md"
import json, sys
gw, rgw = json.loads(sys.argv[1]), json.loads(sys.argv[2])
metadata, wal, files = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
def cell(d, key, fmt):
    return fmt % d[key] if d and key in d else "-"
print(f"{gw['count']} objects, {gw['clients']} PUT clients\n")
print("| | keel gateway (raw, disk) | Ceph RGW (memstore) |")
print("| --- | ---: | ---: |")
print(f"| PUT (objects/s) | {cell(gw, 'put_per_s', '%.0f')} | {cell(rgw, 'put_per_s', '%.0f')} |")
for where in ("start", "middle", "end"):
    print(f"| ListObjectsV2 1000-key page at the {where}, p50 / p99 (ms) | "
          f"{cell(gw, f'list_{where}_p50_ms', '%.1f')} / {cell(gw, f'list_{where}_p99_ms', '%.1f')} | "
          f"{cell(rgw, f'list_{where}_p50_ms', '%.1f')} / {cell(rgw, f'list_{where}_p99_ms', '%.1f')} |")
print(f"| DeleteObjects of 1000 keys (ms) | {cell(gw, 'delete_1000_ms', '%.0f')} | {cell(rgw, 'delete_1000_ms', '%.0f')} |")
rss = lambda d, names: " + ".join(f"{n} {d[f'rss_{n}_kib'] / 1024:.0f}" for n in names if d and f"rss_{n}_kib" in d) or "-"
print(f"| RSS after the run (MiB) | {rss(gw, ['gateway'])} | {rss(rgw, ['rgw', 'osd', 'mon'])} |")
cpu = lambda d, names: " + ".join(f"{n} {d[f'cpu_ms_per_1000_{n}'] / 1000:.2f}" for n in names
                                   if d and f"cpu_ms_per_1000_{n}" in d) or "-"
print(f"| server CPU per 1000 PUTs (s, user + system) | {cpu(gw, ['gateway'])} | {cpu(rgw, ['rgw', 'osd', 'mon'])} |")
print(f"| metadata (gateway.db, bytes per object; WAL {wal / 2**20:.1f} MiB besides) | {metadata / gw['count']:.0f} | - |")
print(f"| object files on disk (bytes per object, directories included) | {files / gw['count']:.0f} | - |")
print("\nkeel gateway as the bucket fills (each stage: the PUTs since the one before)\n")
print("| objects | PUT/s | PUT p50 / p99 (ms) | CPU s per 1000 PUTs | RSS MiB | gateway.db bytes per object | WAL MiB |")
print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for st in gw["stages"]:
    print(f"| {st['objects']} | {st['put_per_s']:.0f} | {st['put_p50_ms']:.1f} / {st['put_p99_ms']:.1f} | "
          f"{st['cpu_ms_per_1000_gateway'] / 1000:.2f} | "
          f"{st['rss_gateway_kib'] / 1024:.0f} | {st['db_bytes_per_object']:.0f} | {st['wal_bytes'] / 2**20:.1f} |")
PY
