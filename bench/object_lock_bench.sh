#!/usr/bin/env bash
# The cost of Object Lock (docs/immutable.md): the same backups into a plain bucket and into
# a bucket with versioning and Object Lock (a GOVERNANCE repository, 30-day period), both on
# one `keel gateway` on loopback. For each: time and the gateway's requests by operation
# (keel_gateway_requests_total before and after) of a first backup, an unchanged second
# one, and a second one from a host whose catalog knows nothing of the locks (it asks, with
# HEAD, how long each pack it uses is locked). Retention is extended by PutObjectRetention,
# never by sending data again.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  cat <<USAGE
usage: bench/object_lock_bench.sh [options]
  --mib N      data backed up, in random 4 MiB files (default 256)
  --work DIR   scratch directory (default: a new one under \${TMPDIR:-/tmp}), removed at the end
  --keel PATH  keel binary (default: \$KEEL_BIN or build/cli/keel)
  --smoke      16 MiB; fails on any command failure, on a locked backup that sends data
               again or on an unlocked object in the locked bucket
  -h, --help   this text
Writes the table to stdout and to bench/out/object_lock.md (object_lock_smoke.md with --smoke).
USAGE
}

mib=256 work="" smoke=0
while (($#)); do
  case $1 in
    --mib) mib=${2:?}; shift 2 ;;
    --work) work=${2:?}; shift 2 ;;
    --keel) keel_bin=${2:?}; shift 2 ;;
    --smoke) smoke=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done
positive_int --mib "$mib"
report_name=object_lock
if ((smoke)); then mib=16 report_name=object_lock_smoke; fi
require_keel

bench_scratch keel-lockbench

access=AKIDLOCKBENCH0000001 secret=lock-bench-secret-0000000000000000000
metrics_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$work/gateway.conf" <<CONF
[server]
listen = 127.0.0.1:0
state_dir = $work/gateway-state
metrics_listen = 127.0.0.1:$metrics_port

[user:bench]
access_key = $access
secret_key = $secret

[bucket:plain]
owner = bench
path = $work/plain

[bucket:locked]
owner = bench
path = $work/locked
CONF
start_gateway "$work/gateway.conf" "listening on "
metrics_url="http://127.0.0.1:$metrics_port/metrics"

export AWS_ACCESS_KEY_ID=$access AWS_SECRET_ACCESS_KEY=$secret KEEL_PASSWORD=bench
python3 - "$gateway_url" <<'PY'
import os, sys, boto3
s3 = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1")
s3.put_bucket_versioning(Bucket="locked", VersioningConfiguration={"Status": "Enabled"})
s3.put_object_lock_configuration(Bucket="locked", ObjectLockConfiguration={"ObjectLockEnabled": "Enabled"})
PY

mkdir -p "$work/data"
for ((i = 0; i < mib / 4; i++)); do head -c $((4 << 20)) /dev/urandom >"$work/data/file$i"; done

snapshot() { curl -sf "$metrics_url" | grep '^keel_gateway_requests_total' || true; }
k() { # BUCKET STATE ARGS...
  local bucket=$1 state=$2; shift 2
  XDG_DATA_HOME="$work/state-$state" "$keel_bin" "$@" --repo "s3://$bucket/repo" --endpoint "$gateway_url"
}
run() { # LABEL BUCKET STATE: one backup, a line of JSON on stdout
  local label=$1 bucket=$2 state=$3 before after started ended
  before=$(snapshot)
  started=$(date +%s.%N)
  k "$bucket" "$state" backup --quiet "$work/data" >/dev/null || die "$label: backup failed"
  ended=$(date +%s.%N)
  after=$(snapshot)
  python3 - "$label" "$started" "$ended" "$before" "$after" <<'PY'
import json, re, sys
label, started, ended, before, after = sys.argv[1:6]
def counts(text):
    out = {}
    for line in text.splitlines():
        m = re.match(r'keel_gateway_requests_total\{operation="([^"]+)",status="(\d+)"\} (\S+)', line)
        if m:
            out[m[1]] = out.get(m[1], 0) + float(m[3])
    return out
b, a = counts(before), counts(after)
print(json.dumps({"label": label, "seconds": float(ended) - float(started),
                  "ops": {op: int(a[op] - b.get(op, 0)) for op in a if a[op] - b.get(op, 0) > 0}}))
PY
}

k plain bench-plain init >/dev/null
k locked bench-locked init --object-lock governance --lock-period 30d >/dev/null
results=()
for bucket in plain locked; do
  results+=("$(run "$bucket, 1st" "$bucket" "a-$bucket")")
  results+=("$(run "$bucket, 2nd unchanged" "$bucket" "a-$bucket")")
  results+=("$(run "$bucket, 2nd from a new host" "$bucket" "b-$bucket")")
done

if ((smoke)); then
  # Every object of the locked repository but the leases is locked; no pack was sent twice.
  python3 - "$gateway_url" <<'PY' || die "the smoke check failed"
import sys, boto3
s3 = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1")
keys = [o["Key"] for o in s3.list_objects_v2(Bucket="locked", Prefix="repo/").get("Contents", [])]
unlocked = [k for k in keys if not k.startswith(("repo/running/", "repo/locks/"))
            and "ObjectLockMode" not in s3.head_object(Bucket="locked", Key=k)]
assert not unlocked, f"unlocked: {unlocked}"
versions = s3.list_object_versions(Bucket="locked", Prefix="repo/packs/").get("Versions", [])
assert len(versions) == len({v["Key"] for v in versions}), "a pack was written twice"
PY
fi

mkdir -p "$out_dir"
python3 - "$mib" "${results[@]}" <<'PY' | tee "$out_dir/$report_name.md"
import json, sys
mib, rows = int(sys.argv[1]), [json.loads(r) for r in sys.argv[2:]]
ops = ["PutObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload", "PutObjectRetention",
       "HeadObject", "GetObject", "ListObjectsV2", "DeleteObject"]
print(f"{mib} MiB of random data through keel gateway on loopback\n")
print("| backup | time (s) | " + " | ".join(ops) + " | other |")
print("| --- | ---: | " + " | ".join("---:" for _ in ops) + " | ---: |")
for r in rows:
    other = sum(v for k, v in r["ops"].items() if k not in ops)
    print(f"| {r['label']} | {r['seconds']:.1f} | " + " | ".join(str(r["ops"].get(op, 0)) for op in ops) + f" | {other} |")
PY
