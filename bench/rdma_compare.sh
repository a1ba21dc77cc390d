#!/usr/bin/env bash
# keel backup and restore through `keel gateway`, with the RDMA data plane (--rdma) and
# without (HTTP bodies): throughput and CPU seconds per GiB of the client (keel) and the
# server (keel gateway, from /proc). Needs an RDMA device: the address in
# KEEL_RDMA_TEST_IP (or --ip; real RoCE/InfiniBand), or it boots the Soft-RoCE VM of
# tests/rdma/run-in-vm.sh and runs there. Soft-RoCE numbers say the code works and how
# the CPU is spent, nothing about a NIC's speed. See docs/rdma.md.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  cat <<USAGE
usage: bench/rdma_compare.sh [options]
  --mib N      data set size in MiB, random bytes in 4 files (default 128; the VM has 2 GiB of RAM)
  --ip ADDR    an address on the RDMA device (default: \$KEEL_RDMA_TEST_IP, \$RXE_IP, else the VM)
  --port N     the gateway's rdma_listen port (default 7471)
  --work DIR   scratch directory (default: a new one under \${TMPDIR:-/tmp}), removed at the end
  --keel PATH  keel binary (default: \$KEEL_BIN or build/cli/keel)
  --smoke      16 MiB; fails unless every payload went by RDMA with --rdma and restores match
  -h, --help   this text
Writes the table to stdout and to bench/out/rdma_compare.md (rdma_compare_smoke.md with
--smoke). Exit status 77 when there is no device and the VM cannot be booted.
USAGE
}

mib=128 ip=${KEEL_RDMA_TEST_IP:-${RXE_IP:-}} port=7471 work="" smoke=0
args=("$@")
while (($#)); do
  case $1 in
    --mib) mib=${2:?}; shift 2 ;;
    --ip) ip=${2:?}; shift 2 ;;
    --port) port=${2:?}; shift 2 ;;
    --work) work=${2:?}; shift 2 ;;
    --keel) keel_bin=${2:?}; shift 2 ;;
    --smoke) smoke=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done
positive_int --mib "$mib"
report_name=rdma_compare
if ((smoke)); then mib=16 report_name=rdma_compare_smoke; fi
require_keel
mkdir -p "$out_dir"

if [[ -z $ip ]]; then
  [[ -z ${KEEL_IN_RXE_VM:-} ]] || die "inside the RDMA VM but RXE_IP is not set"
  echo "no RDMA address given: running in the Soft-RoCE VM (tests/rdma/run-in-vm.sh)"
  # The VM shares the current directory read-write (the host's root read-only): the report lands here.
  cd "$out_dir"
  exec "$repo_root/tests/rdma/run-in-vm.sh" "$bench_dir/rdma_compare.sh" "${args[@]}" --keel "$keel_bin"
fi

bench_scratch keel-rdmabench

# --- data and gateway ----------------------------------------------------------------
mkdir -p "$work/data"
for i in 0 1 2 3; do head -c $((mib * 262144)) /dev/urandom > "$work/data/file$i"; done
data_bytes=$((mib * 1048576))

export AWS_ACCESS_KEY_ID=RDMABENCHACCESSKEY01 AWS_SECRET_ACCESS_KEY=rdma-bench-secret-key-000000000000000000
export KEEL_PASSWORD="rdma bench" XDG_DATA_HOME="$work/state" HOME="$work"
cat > "$work/gateway.conf" <<CONF
[server]
listen = 127.0.0.1:0
state_dir = $work/gateway
threads = 4
rdma_listen = $ip:$port
[user:bench]
access_key = $AWS_ACCESS_KEY_ID
secret_key = $AWS_SECRET_ACCESS_KEY
[bucket:bench]
owner = bench
path = $work/gateway/bench
CONF
start_gateway "$work/gateway.conf" "rdma on"

ticks=$(getconf CLK_TCK)
# CPU seconds the gateway has used so far (utime + stime).
server_cpu() { awk -v t="$ticks" '{printf "%.3f", ($14 + $15) / t}' "/proc/$gateway_pid/stat"; }

# run MODE PHASE ARGS...: keel with the mode's flags, its JSON to $work/MODE-PHASE.json and a
# line "wall client_cpu server_cpu" to $work/MODE-PHASE.cost.
run() {
  local mode=$1 phase=$2; shift 2
  local flags=(--repo "s3://bench/$mode" --endpoint "$gateway_url" --json)
  [[ $mode == http ]] || flags+=(--rdma "$ip:$port")
  local before after
  before=$(server_cpu)
  /usr/bin/time -f "%e %U %S" -o "$work/time" "$keel_bin" "${flags[@]}" "$@" > "$work/$mode-$phase.json" ||
    die "keel $phase ($mode) failed"
  after=$(server_cpu)
  read -r wall user sys < "$work/time"
  awk -v w="$wall" -v u="$user" -v s="$sys" -v a="$after" -v b="$before" \
    'BEGIN {printf "%s %.3f %.3f\n", w, u + s, a - b}' > "$work/$mode-$phase.cost"
}

for mode in http rdma; do
  "$keel_bin" --repo "s3://bench/$mode" --endpoint "$gateway_url" init > /dev/null
  run "$mode" backup backup "$work/data"
  snapshot=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])["snapshot"])' "$work/$mode-backup.json")
  run "$mode" restore restore "$snapshot" --target "$work/restore-$mode"
  restored=$(find "$work/restore-$mode" -type d -name data | head -1)
  restored=${restored:-$work/restore-$mode}
  diff -r -q "$work/data" "$restored" > /dev/null || die "the $mode restore differs from the data"
  rm -rf "$work/restore-$mode"
done

# --- report ----------------------------------------------------------------------------
report=$(python3 - "$work" "$data_bytes" "$smoke" "$ip" <<'PY'
import json, sys
work, data_bytes, smoke, ip = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
gib = data_bytes / 2**30
rows, problems = [], []
for phase in ("backup", "restore"):
    for mode in ("http", "rdma"):
        wall, client, server = map(float, open(f"{work}/{mode}-{phase}.cost").read().split())
        t = json.loads(open(f"{work}/{mode}-{phase}.json").read().splitlines()[-1])["transfer"]  # after the status lines
        way = "put" if phase == "backup" else "get"
        by_rdma = t[f"rdma_{way}_bytes"]
        rows.append(f"| {phase} | {mode} | {data_bytes / 2**20 / wall:.1f} | {client / gib:.2f} | {server / gib:.2f} "
                    f"| {by_rdma / 2**20:.1f} | {t[f'http_{way}_bytes'] / 2**20:.1f} | {t['rdma_fallbacks']} |")
        if mode == "rdma" and (t["rdma_fallbacks"] or by_rdma < data_bytes):
            problems.append(f"{phase} with --rdma: {by_rdma} bytes by RDMA, {t['rdma_fallbacks']} fallbacks")
print(f"keel through keel gateway, {data_bytes >> 20} MiB of random data, RDMA device at {ip}\n")
print("| phase | path | MiB/s | client CPU s/GiB | gateway CPU s/GiB | MiB by RDMA | MiB by HTTP | fallbacks |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
print("\n".join(rows))
for p in problems:
    print(f"\nPROBLEM: {p}")
sys.exit(1 if smoke and problems else 0)
PY
) || { echo "$report"; die "the RDMA path did not carry the payloads"; }
echo "$report" | tee "$out_dir/$report_name.md"
