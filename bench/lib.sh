# shellcheck shell=bash
# Sourced first by the bench scripts: what each of them needs besides its own
# measurement, so that none writes it again.
#   bench_dir, repo_root, out_dir  this folder, the checkout, bench/out
#   keel_bin                       $KEEL_BIN or build/cli/keel, for --keel to change
#   require_keel                   dies unless keel_bin runs; makes it absolute
#   die MESSAGE                    "SCRIPT: MESSAGE" on stderr, exit 1
#   positive_int OPTION VALUE      dies unless VALUE is a positive integer
#   bench_scratch PREFIX           sets work: $work if given (absent or empty;
#                                  created), else a new directory under
#                                  ${TMPDIR:-/tmp}; removed at exit unless
#                                  keep=1
#   at_exit COMMAND                runs COMMAND when the script exits, before
#                                  the scratch directory goes; the last one
#                                  added runs first
#   start_gateway CONFIG LINE      starts keel gateway (keel_bin) on CONFIG and
#                                  waits until it prints a line starting with
#                                  LINE; sets gateway_pid and gateway_url (its
#                                  first HTTP URL); the gateway stops at exit

bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck disable=SC2034  # for the scripts that source this
repo_root=$(dirname "$bench_dir") out_dir="$bench_dir/out"
keel_bin=${KEEL_BIN:-$repo_root/build/cli/keel}

die() { echo "${0##*/}: $*" >&2; exit 1; }

require_keel() {
  [[ -x $keel_bin ]] || die "no keel binary at $keel_bin: build it (scripts/build.sh) or pass --keel PATH"
  keel_bin=$(cd "$(dirname "$keel_bin")" && pwd)/$(basename "$keel_bin")
}

positive_int() {
  [[ $2 =~ ^[1-9][0-9]*$ ]] || die "$1 must be a positive integer, not '$2'"
}

exit_commands=()
at_exit() { exit_commands=("$1" "${exit_commands[@]}"); }

bench_scratch() {
  if [[ -z ${work:-} ]]; then
    work=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
  else
    # Removed at the end: never a directory that holds anything already.
    [[ ! -e $work || -z $(ls -A "$work") ]] || die "--work $work is not empty"
    mkdir -p "$work"
    work=$(cd "$work" && pwd)
  fi
  trap bench_exit EXIT
}

bench_exit() {
  local command
  for command in "${exit_commands[@]}"; do eval "$command" || true; done
  if ((${keep:-0})); then
    echo "kept scratch directory $work" >&2
  elif [[ -n ${work:-} && $work != / && -d $work ]]; then
    rm -rf -- "$work"
  fi
}

start_gateway() {
  "$keel_bin" gateway --config "$1" >"$work/gateway.out" 2>"$work/gateway.err" &
  gateway_pid=$!
  at_exit "kill $gateway_pid 2>/dev/null; wait $gateway_pid 2>/dev/null"
  for _ in $(seq 100); do
    grep -q "^$2" "$work/gateway.out" 2>/dev/null && break
    kill -0 "$gateway_pid" 2>/dev/null || die "keel gateway did not start: $(cat "$work/gateway.err")"
    sleep 0.1
  done
  grep -q "^$2" "$work/gateway.out" || die "keel gateway did not print '$2': $(cat "$work/gateway.err")"
  gateway_url=$(awk '/^listening on /{print $3; exit}' "$work/gateway.out")
  [[ -n $gateway_url ]] || die "keel gateway printed no URL"
}
