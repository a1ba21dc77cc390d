# Sourced by the bench scripts that run `keel gateway`: a scratch directory
# and a gateway process, both gone when the script exits.
#   bench_scratch PREFIX       sets work: $work if given (created), else a new
#                              directory under ${TMPDIR:-/tmp}
#   start_gateway CONFIG LINE  starts keel gateway (keel_bin) on CONFIG and waits
#                              until it prints a line starting with LINE; sets
#                              gateway_pid and gateway_url (its first HTTP URL)
# The caller defines die().

gateway_pid=""

bench_scratch() {
  if [[ -z $work ]]; then
    work=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
  else
    mkdir -p "$work"
    work=$(cd "$work" && pwd)
  fi
  trap bench_cleanup EXIT
}

bench_cleanup() {
  [[ -z $gateway_pid ]] || { kill "$gateway_pid" 2>/dev/null; wait "$gateway_pid" 2>/dev/null || true; }
  rm -rf "$work"
}

start_gateway() {
  "$keel_bin" gateway --config "$1" >"$work/gateway.out" 2>"$work/gateway.err" &
  gateway_pid=$!
  for _ in $(seq 100); do
    grep -q "^$2" "$work/gateway.out" 2>/dev/null && break
    kill -0 "$gateway_pid" 2>/dev/null || die "keel gateway did not start: $(cat "$work/gateway.err")"
    sleep 0.1
  done
  grep -q "^$2" "$work/gateway.out" || die "keel gateway did not print '$2': $(cat "$work/gateway.err")"
  gateway_url=$(awk '/^listening on /{print $3; exit}' "$work/gateway.out")
  [[ -n $gateway_url ]] || die "keel gateway printed no URL"
}
