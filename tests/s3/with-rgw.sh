#!/usr/bin/env bash
# with-rgw.sh COMMAND... - runs COMMAND against a private, throw-away Ceph RGW (tests/s3/rgw.sh):
# a fresh RGW_DIR under /tmp and free loopback ports (HTTP, monitor, and HTTPS unless RGW_TLS=0),
# the variables of `rgw.sh env` exported (plus RGW_DIR), RGW stopped and removed whatever happens.
# Exits with COMMAND's status, or 77 with one line "skipped: <reason>" when RGW cannot start
# (CTest: set_tests_properties(... SKIP_RETURN_CODE 77)).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rgw=$here/rgw.sh

skip() { echo "skipped: $*"; exit 77; }

command -v python3 >/dev/null || skip "python3 is needed to pick free ports"
# free ports as the kernel hands them out now; a race with another process is possible but rare
read -r RGW_PORT RGW_MON_PORT tls_port < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(3)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))')
RGW_TLS_PORT=""
[[ ${RGW_TLS:-1} == 0 ]] || RGW_TLS_PORT=$tls_port
RGW_DIR=$(mktemp -d /tmp/keel-rgw.XXXXXX) || skip "cannot make a directory under /tmp"
export RGW_DIR RGW_PORT RGW_MON_PORT RGW_TLS_PORT
start_log=$RGW_DIR.start.log

cleanup() {
  "$rgw" stop >>"$start_log" 2>&1 || { echo "with-rgw.sh: stopping RGW failed:" >&2; cat "$start_log" >&2; }
  rm -f "$start_log"
  rmdir "$RGW_DIR" 2>/dev/null || true  # left empty when start refused before using it
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# Killed outright (SIGKILL, e.g. by a test timeout), this script runs no trap: a detached watchdog
# (outside this process tree, so it survives a tree kill) stops RGW once this PID is gone.
(setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 2; done; "$2" stop; rm -f "$3"' \
  with-rgw-watchdog $$ "$rgw" "$start_log" </dev/null >/dev/null 2>&1 &)

if ! settings=$("$rgw" start 2>"$start_log"); then
  tail -n 60 "$start_log" >&2
  reason=$(grep -o 'error: .*' "$start_log" | tail -n 1)
  skip "Ceph RGW could not start: ${reason#error: }"
fi
set -a
eval "$settings"
set +a

# in the background so that a TERM/INT/HUP reaches COMMAND at once rather than after it ends
"$@" <&0 &
command_pid=$!
trap 'kill -TERM "$command_pid" 2>/dev/null' TERM INT HUP
status=0
wait "$command_pid" || status=$?
while kill -0 "$command_pid" 2>/dev/null; do  # wait returned early for a signal
  status=0
  wait "$command_pid" || status=$?
done
exit "$status"
