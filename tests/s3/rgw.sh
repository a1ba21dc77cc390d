#!/usr/bin/env bash
# rgw.sh start|stop|env|status - a throw-away Ceph RADOS Gateway (a real S3 server) on loopback
# for keel's S3 tests: one monitor, one OSD on the in-memory "memstore" object store, and radosgw
# with its beast frontend, all bound to 127.0.0.1, all state under $RGW_DIR. One S3 user with fixed
# test keys; no buckets (tests make their own). Objects live in RAM and vanish on stop.
#
#   tests/s3/rgw.sh start              # installs the Debian packages if missing, starts, prints env
#   eval "$(tests/s3/rgw.sh env)"      # S3_ENDPOINT S3_ACCESS_KEY S3_SECRET_KEY S3_REGION, and with
#                                      # TLS S3_TLS_ENDPOINT S3_CA_FILE (see README.md)
#   tests/s3/rgw.sh stop               # kills only the PIDs start recorded, removes $RGW_DIR
#   tests/s3/rgw.sh user UID ACCESS SECRET   # one more S3 user, e.g. for bucket-policy tests
#
# Settings (environment): RGW_DIR (default /tmp/keel-rgw), RGW_PORT (18480), RGW_MON_PORT (RGW_PORT+1,
# the monitor's msgr2 port; the OSD takes free ports in Ceph's 6800-7300 range), RGW_TLS_PORT (unset:
# no HTTPS; set: an HTTPS listener with a self-signed cert in $RGW_DIR/tls.crt), RGW_START_TIMEOUT
# (120 s), RGW_MEM_BYTES (memstore capacity, allocated lazily; 4 GiB). Use the same settings for every
# subcommand of one instance.
set -euo pipefail

RGW_DIR=$(realpath -m "${RGW_DIR:-/tmp/keel-rgw}")
RGW_PORT=${RGW_PORT:-18480}
RGW_MON_PORT=${RGW_MON_PORT:-$((RGW_PORT + 1))}
RGW_TLS_PORT=${RGW_TLS_PORT:-}
RGW_START_TIMEOUT=${RGW_START_TIMEOUT:-120}
RGW_MEM_BYTES=${RGW_MEM_BYTES:-4294967296}
PACKAGES=(radosgw ceph-mon ceph-osd ceph-common openssl)

ACCESS_KEY=KEELTESTACCESSKEY001
SECRET_KEY='keel/test+secretkey/0123456789abcdefghij'
# RGW's SigV4 check accepts any region name in the credential scope; us-east-1 is what SDKs default
# to and lets CreateBucket go without a LocationConstraint (see README.md).
REGION=us-east-1

CONF=$RGW_DIR/ceph.conf
MARKER=$RGW_DIR/.keel-rgw   # only a directory holding this marker is ever removed by stop
PIDS=$RGW_DIR/pids

log() { echo "[rgw $(date +%T)] $*" >&2; }

wait_until() { # deadline(SECONDS), description, command...: polls until command succeeds
  local deadline=$1 what=$2 pid name; shift 2
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { log "timed out waiting for $what"; return 1; }
    while read -r pid name; do
      ours "$pid" || { log "$name ($pid) died while waiting for $what"; return 1; }
    done <"$PIDS"
    sleep 0.2
  done
}

ports_free() { # port...: true if each can be bound on 127.0.0.1 as the daemons do (SO_REUSEADDR)
  python3 -c '
import socket, sys
for port in sys.argv[1:]:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", int(port)))
        except OSError as e:
            sys.exit(f"127.0.0.1:{port} {e.strerror}")' "$@"
}

ensure_packages() {
  local missing=() p
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${db:Status-Status}\n' "$p" 2>/dev/null | grep -qx installed || missing+=("$p")
  done
  ((${#missing[@]} == 0)) && return 0
  if [[ $(id -u) != 0 ]]; then
    log "error: missing Debian packages ${missing[*]} and not root to install them"
    return 1
  fi
  log "installing missing Debian packages: apt-get install -y --no-install-recommends ${missing[*]}"
  local install=(apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends "${missing[@]}")
  local apt_log rc=0; apt_log=$(mktemp /tmp/keel-rgw-apt.XXXXXX)
  export DEBIAN_FRONTEND=noninteractive
  if ! "${install[@]}" >"$apt_log" 2>&1; then
    log "install failed; running apt-get update and retrying"
    { apt-get update -q && "${install[@]}"; } >>"$apt_log" 2>&1 || rc=1
  fi
  if ((rc)); then
    tail -n 20 "$apt_log" >&2
    log "error: apt-get install ${missing[*]} failed"
  fi
  rm -f "$apt_log"
  return $rc
}

write_conf() { # fsid
  local tls_frontend=""
  if [[ -n $RGW_TLS_PORT ]]; then
    tls_frontend=" ssl_endpoint=127.0.0.1:$RGW_TLS_PORT ssl_certificate=$RGW_DIR/tls.pem"
  fi
  cat >"$CONF" <<EOF
[global]
fsid = $1
mon_host = v2:127.0.0.1:$RGW_MON_PORT
public_addr = 127.0.0.1
cluster_addr = 127.0.0.1
ms_bind_ipv6 = false
# msgr2 only: one monitor port, and no v1 listeners on the OSD
ms_bind_msgr1 = false
auth_cluster_required = none
auth_service_required = none
auth_client_required = none
# radosgw asks for ms_mon_client_mode=secure by default, which auth "none" cannot give (EACCES)
ms_mon_client_mode = crc
keyring = $RGW_DIR/keyring
run_dir = $RGW_DIR/run
admin_socket = $RGW_DIR/run/\$name.asok
log_file = $RGW_DIR/log/\$name.log
osd_pool_default_size = 1
osd_pool_default_min_size = 1
mon_allow_pool_size_one = true
mon_warn_on_pool_no_redundancy = false
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
osd_pool_default_pg_autoscale_mode = off
mon_max_pg_per_osd = 1000
osd_crush_chooseleaf_type = 0
osd_objectstore = memstore
memstore_device_bytes = $RGW_MEM_BYTES
osd_op_num_shards = 1
osd_op_num_threads_per_shard = 2
# the monitor's store lives on whatever disk /tmp is; never refuse writes over free space
mon_data_avail_warn = 1
mon_data_avail_crit = 0
# every pool radosgw creates is a monitor proposal, batched for 1 s by default: start takes about
# 1 s instead of 13 s
paxos_propose_interval = 0.01
paxos_min_wait = 0.01
[mon.a]
mon_data = $RGW_DIR/mon.a
[osd.0]
osd_data = $RGW_DIR/osd.0
[client.rgw]
rgw_frontends = beast endpoint=127.0.0.1:$RGW_PORT$tls_frontend
rgw_data = $RGW_DIR/rgw
# deleted objects stay in RADOS (here: RAM) until garbage collection, by default for 2 hours
rgw_gc_obj_min_wait = 30
rgw_gc_processor_period = 30
EOF
}

make_tls_cert() {
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
    -keyout "$RGW_DIR/tls.key" -out "$RGW_DIR/tls.crt" >/dev/null 2>&1
  cat "$RGW_DIR/tls.crt" "$RGW_DIR/tls.key" >"$RGW_DIR/tls.pem"
}

spawn() { # name, command...: starts a daemon in the background and records its PID for stop
  local name=$1; shift
  "$@" </dev/null >>"$RGW_DIR/log/$name.out" 2>&1 &
  echo "$! $name" >>"$PIDS"
  disown $!  # no job-control chatter when stop kills it
}

http_ok() { # url [ca-file]: any HTTP status from the server counts as up
  python3 - "$@" <<'EOF'
import ssl, sys, urllib.error, urllib.request
ctx = ssl.create_default_context(cafile=sys.argv[2]) if len(sys.argv) > 2 else None
try:
    urllib.request.urlopen(sys.argv[1], timeout=2, context=ctx)
except urllib.error.HTTPError:
    pass
EOF
}

osd_up() { timeout 10 ceph "${C[@]}" osd dump 2>/dev/null | grep -q "^osd\.$1 up"; }

fail_start() {
  log "error: $1; log tails follow"
  local f
  for f in "$RGW_DIR"/log/*; do
    [[ -s $f ]] || continue
    echo "==> $f <==" >&2
    tail -n 10 "$f" >&2
  done
  stop
  log "error: $1"
  exit 1
}

start() {
  ensure_packages || exit 1
  if [[ -e $RGW_DIR && -n $(ls -A "$RGW_DIR" 2>/dev/null) ]]; then
    log "error: $RGW_DIR exists and is not empty; run stop first or choose another RGW_DIR"
    exit 1
  fi
  local busy
  if ! busy=$(ports_free "$RGW_PORT" "$RGW_MON_PORT" $RGW_TLS_PORT 2>&1); then
    log "error: port in use: $busy (set RGW_PORT / RGW_MON_PORT / RGW_TLS_PORT)"
    exit 1
  fi
  local t0=$SECONDS deadline=$((SECONDS + RGW_START_TIMEOUT))
  mkdir -p "$RGW_DIR"/{mon.a,osd.0,log,run,rgw}
  : >"$MARKER"
  : >"$PIDS"
  local fsid; fsid=$(cat /proc/sys/kernel/random/uuid)
  [[ -z $RGW_TLS_PORT ]] || make_tls_cert || fail_start "openssl could not make the TLS certificate"
  write_conf "$fsid"

  ceph-authtool --create-keyring "$RGW_DIR/keyring" --gen-key -n mon. --cap mon 'allow *' \
    >>"$RGW_DIR/log/mon.mkfs.out" 2>&1 || fail_start "ceph-authtool failed"
  monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$RGW_MON_PORT]" "$RGW_DIR/monmap" \
    >>"$RGW_DIR/log/mon.mkfs.out" 2>&1 || fail_start "monmaptool failed"
  ceph-mon "${C[@]}" -i a --mkfs --monmap "$RGW_DIR/monmap" --keyring "$RGW_DIR/keyring" \
    >>"$RGW_DIR/log/mon.mkfs.out" 2>&1 || fail_start "ceph-mon --mkfs failed"
  spawn mon ceph-mon "${C[@]}" -i a -f
  wait_until "$deadline" "the monitor on 127.0.0.1:$RGW_MON_PORT" timeout 5 ceph "${C[@]}" mon stat ||
    fail_start "the monitor did not come up on 127.0.0.1:$RGW_MON_PORT"
  log "monitor up after $((SECONDS - t0)) s"

  local uuid id; uuid=$(cat /proc/sys/kernel/random/uuid)
  id=$(timeout 30 ceph "${C[@]}" osd new "$uuid") || fail_start "ceph osd new failed"
  ceph-osd "${C[@]}" -i "$id" --mkfs --osd-uuid "$uuid" >>"$RGW_DIR/log/osd.mkfs.out" 2>&1 ||
    fail_start "ceph-osd --mkfs failed"
  spawn osd ceph-osd "${C[@]}" -i "$id" -f
  wait_until "$deadline" "osd.$id" osd_up "$id" || fail_start "the OSD did not come up"
  log "osd.$id up after $((SECONDS - t0)) s"

  spawn rgw radosgw "${C[@]}" -n client.rgw -f
  wait_until "$deadline" "radosgw on 127.0.0.1:$RGW_PORT" http_ok "http://127.0.0.1:$RGW_PORT/" ||
    fail_start "radosgw did not answer on 127.0.0.1:$RGW_PORT"
  if [[ -n $RGW_TLS_PORT ]]; then
    wait_until "$deadline" "radosgw TLS on 127.0.0.1:$RGW_TLS_PORT" \
      http_ok "https://127.0.0.1:$RGW_TLS_PORT/" "$RGW_DIR/tls.crt" ||
      fail_start "radosgw did not answer HTTPS on 127.0.0.1:$RGW_TLS_PORT"
  fi
  log "radosgw answering after $((SECONDS - t0)) s"

  timeout 60 radosgw-admin "${C[@]}" user create --uid keel-test --display-name 'keel tests' \
    --access-key "$ACCESS_KEY" --secret-key "$SECRET_KEY" >>"$RGW_DIR/log/user.out" 2>&1 ||
    fail_start "radosgw-admin user create failed"
  log "ready in $((SECONDS - t0)) s (state in $RGW_DIR)"
  env_out
}

env_out() {
  echo "S3_ENDPOINT=http://127.0.0.1:$RGW_PORT"
  [[ -z $RGW_TLS_PORT ]] || echo "S3_TLS_ENDPOINT=https://127.0.0.1:$RGW_TLS_PORT"
  [[ -z $RGW_TLS_PORT ]] || echo "S3_CA_FILE=$RGW_DIR/tls.crt"
  echo "S3_ACCESS_KEY=$ACCESS_KEY"
  echo "S3_SECRET_KEY='$SECRET_KEY'"
  echo "S3_REGION=$REGION"
}

add_user() { # uid access-key secret-key
  [[ $# == 3 ]] || { echo "usage: $0 user UID ACCESS_KEY SECRET_KEY" >&2; return 2; }
  timeout 60 radosgw-admin "${C[@]}" user create --uid "$1" --display-name "$1" \
    --access-key "$2" --secret-key "$3" >>"$RGW_DIR/log/user.out" 2>&1 ||
    { log "error: radosgw-admin user create $1 failed (log: $RGW_DIR/log/user.out)"; return 1; }
}

ours() { # pid: true if that PID is still a daemon of this instance (not a recycled PID)
  tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline" | grep -qF -- "-c $CONF "
}

stop() {
  [[ -e $MARKER ]] || { log "nothing to stop in $RGW_DIR"; return 0; }
  local pid name i
  if [[ -e $PIDS ]]; then
    # SIGKILL: all state is discarded anyway, and on SIGTERM radosgw waits up to 10 s for a
    # monitor that is shutting down beside it
    while read -r pid name; do
      if ours "$pid"; then kill -9 "$pid" 2>/dev/null && log "killed $name ($pid)"; fi
    done < <(tac "$PIDS")
    while read -r pid name; do
      for ((i = 0; i < 50; i++)); do ours "$pid" || break; sleep 0.1; done
      if ours "$pid"; then log "error: $name ($pid) is still running"; return 1; fi
    done <"$PIDS"
  fi
  rm -rf "$RGW_DIR"
}

status() {
  [[ -e $PIDS ]] || { echo "not started ($RGW_DIR)"; return 1; }
  local pid name rc=0
  while read -r pid name; do
    if ours "$pid"; then echo "$name $pid running"; else echo "$name $pid dead"; rc=1; fi
  done <"$PIDS"
  return $rc
}

C=(-c "$CONF")
case ${1:-} in
  start) start ;;
  stop) stop ;;
  env) env_out ;;
  status) status ;;
  user) shift; add_user "$@" ;;
  *) echo "usage: $0 start|stop|env|status|user" >&2; exit 2 ;;
esac
