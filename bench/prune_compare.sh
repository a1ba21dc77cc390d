#!/usr/bin/env bash
# keel vs restic: retention and space reclamation on the same history.
# Builds N snapshots of the bench dataset with mutate.py between them, in a
# keel and a restic repository, then times forget --keep-last K and prune
# (keel prune --grace 0; restic prune) on fresh copies of that history, R
# times, and reports medians of wall time, CPU and peak RSS, the chunks
# indexed and keel's bytes of peak memory per indexed chunk. The newest
# snapshot is restored from each pruned repository and checked against the
# source. See bench/README.md.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  cat <<EOF
usage: bench/prune_compare.sh [options]
  --size-gib N      dataset size in GiB (default 1)
  --snapshots N     snapshots in the history (default 30)
  --keep-last K     the retention policy (default 10)
  --fraction F      share of the bytes mutate.py changes between snapshots (default 0.05)
  --seed N          dataset seed (default 1; mutation i uses seed N+i)
  --tools LIST      keel,restic (default: both, restic skipped if not installed)
  --repeat R        prune R fresh copies of the history, report medians (default 3)
  --work DIR        scratch directory (default: a new one under \${TMPDIR:-/tmp});
                    must be empty or absent; removed at the end unless --keep
  --keel PATH       keel binary (default: \$KEEL_BIN or build/cli/keel)
  --keep            keep the scratch directory
  --smoke           40 MiB, 4 snapshots, keep-last 2, one repetition: for CI
  -h, --help        this text
Writes the table to stdout and to bench/out/prune_compare.md
(prune_compare_smoke.md with --smoke); command logs go to bench/out/logs/prune-*.log.
EOF
}

size_gib=1 snapshots=30 keep_last=10 fraction=0.05 seed=1 tools="" repeat=3 work="" keep=0 smoke=0
while (($#)); do
  case $1 in
    --size-gib) size_gib=${2:?--size-gib needs a value}; shift 2 ;;
    --snapshots) snapshots=${2:?--snapshots needs a value}; shift 2 ;;
    --keep-last) keep_last=${2:?--keep-last needs a value}; shift 2 ;;
    --fraction) fraction=${2:?--fraction needs a value}; shift 2 ;;
    --seed) seed=${2:?--seed needs a value}; shift 2 ;;
    --tools) tools=${2:?--tools needs a value}; shift 2 ;;
    --repeat) repeat=${2:?--repeat needs a value}; shift 2 ;;
    --work) work=${2:?--work needs a value}; shift 2 ;;
    --keel) keel_bin=${2:?--keel needs a value}; shift 2 ;;
    --keep) keep=1; shift ;;
    --smoke) smoke=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done
for n in snapshots keep_last repeat; do
  positive_int "--${n//_/-}" "${!n}"
done
((keep_last < snapshots)) || die "--keep-last must be below --snapshots, or nothing is pruned"

report_name=prune_compare
if ((smoke)); then
  size_gib=0.0390625 snapshots=4 keep_last=2 repeat=1 report_name=prune_compare_smoke
fi

# --- tools ----------------------------------------------------------------
selected=()
if [[ -n $tools ]]; then
  IFS=, read -ra selected <<<"$tools"
  for tool in "${selected[@]}"; do
    case $tool in
      keel) require_keel ;;
      restic) command -v restic >/dev/null || die "restic is not installed (Debian package 'restic')" ;;
      *) die "unknown tool '$tool' (known: keel, restic)" ;;
    esac
  done
else
  require_keel
  selected=(keel)
  if command -v restic >/dev/null; then selected+=(restic); else echo "skipping restic: not installed" >&2; fi
fi
tools=$(IFS=,; echo "${selected[*]}")

# --- scratch space ----------------------------------------------------------
bench_scratch keel-prune-bench

mkdir -p "$out_dir/logs"
rm -f "$out_dir"/logs/prune-*.log
data="$work/data"
records="$work/records.jsonl"
facts="$work/facts.jsonl"
: >"$records"
: >"$facts"
export KEEL_PASSWORD=bench RESTIC_PASSWORD=bench

# A tool's state lives in $work/STATE/{repo,cache}: the history is built in
# "TOOL-history", each repetition prunes a copy "TOOL-rREP". Repositories are
# copied with hard links (neither tool changes a stored file in place, they
# only add and remove files); caches and catalogs are copied in full.
state_env() {  # state_env STATE: the environment a tool needs for that state
  echo "XDG_DATA_HOME=$work/$1/cache RESTIC_CACHE_DIR=$work/$1/cache"
}
tool_bin() { [[ $1 == keel ]] && echo "$keel_bin" || echo "$1"; }
tool_cmd() {  # tool_cmd TOOL STATE ARGS...: run the tool on that state
  local tool=$1 state=$2
  shift 2
  env $(state_env "$state") "$(tool_bin "$tool")" --repo "$work/$state/repo" "$@"
}
copy_state() {  # copy_state FROM TO
  rm -rf "${work:?}/$2"
  mkdir -p "$work/$2"
  cp -al "$work/$1/repo" "$work/$2/repo"
  cp -a "$work/$1/cache" "$work/$2/cache"
}

# measure REP PHASE TOOL STATE -- ARGS...: one timed command of a tool on a state.
measure() {
  local rep=$1 phase=$2 tool=$3 state=$4
  shift 5
  local log="$out_dir/logs/prune-$rep-$tool-$phase.log"
  python3 "$bench_dir/measure.py" --records "$records" --rep "$rep" --phase "$phase" --tool "$tool" \
    --data-bytes 0 --repo "$work/$state/repo" --cache "$work/$state/cache" --log "$log" -- \
    env $(state_env "$state") "$(tool_bin "$tool")" --repo "$work/$state/repo" "$@" ||
    die "$tool $phase failed (log: $log)"
}

fact() { echo "{\"tool\": \"$1\", \"rep\": $2, \"key\": \"$3\", \"value\": $4}" >>"$facts"; }
# KEY of the JSON document that ends LOG (status lines come before it).
json_field() { python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])[sys.argv[2]])' "$1" "$2"; }

# --- the history ------------------------------------------------------------
echo "tools: $tools; dataset ${size_gib} GiB, $snapshots snapshots (mutate --fraction $fraction), keep-last $keep_last;" \
     "$repeat repetition(s); scratch $work"
started=$SECONDS
python3 "$bench_dir/gen_dataset.py" "$data" --size-gib "$size_gib" --seed "$seed" >/dev/null
for tool in "${selected[@]}"; do
  mkdir -p "$work/$tool-history/cache"
  tool_cmd "$tool" "$tool-history" init >"$out_dir/logs/prune-init-$tool.log" 2>&1 || die "$tool init failed"
done
for ((i = 1; i <= snapshots; i++)); do
  if ((i > 1)); then python3 "$bench_dir/mutate.py" "$data" --seed $((seed + i)) --fraction "$fraction" >/dev/null; fi
  for tool in "${selected[@]}"; do
    tool_cmd "$tool" "$tool-history" backup "$data" >>"$out_dir/logs/prune-history-$tool.log" 2>&1 ||
      die "$tool backup $i failed (log: $out_dir/logs/prune-history-$tool.log)"
    # keel's baseline: the same prune on the first snapshot alone.
    if ((i == 1)) && [[ $tool == keel ]]; then copy_state keel-history keel-one; fi
  done
  echo "  snapshot $i/$snapshots ($((SECONDS - started)) s)"
done
python3 "$bench_dir/tree_compare.py" digest "$data" "$work/source.digest"

# keel's fixed overhead: prune of an empty repository, and of one snapshot
# with every pack repacked (so the repack buffers count in that baseline too).
if [[ " ${selected[*]} " == *" keel "* ]]; then
  mkdir -p "$work/keel-empty/cache"
  tool_cmd keel keel-empty init >/dev/null 2>&1 || die "keel init failed"
  for ((rep = 1; rep <= repeat; rep++)); do
    measure "$rep" baseline-empty keel keel-empty -- prune --grace 0
    copy_state keel-one keel-one-r$rep
    measure "$rep" baseline-one keel "keel-one-r$rep" -- prune --grace 0 --repack-threshold 100% --json
    fact keel "$rep" blobs_one "$(json_field "$out_dir/logs/prune-$rep-keel-baseline-one.log" blobs)"
  done
fi

# --- forget and prune on copies of the history ------------------------------
mismatches=0
for ((rep = 1; rep <= repeat; rep++)); do
  echo "== repetition $rep/$repeat"
  for tool in "${selected[@]}"; do
    state="$tool-r$rep"
    copy_state "$tool-history" "$state"
    case $tool in
      keel)
        measure "$rep" forget keel "$state" -- forget --keep-last "$keep_last"
        measure "$rep" prune keel "$state" -- prune --grace 0 --json
        log="$out_dir/logs/prune-$rep-keel-prune.log"
        for key in blobs mark_memory_bytes bytes_deleted packs_deleted packs_repacked; do
          fact keel "$rep" "$key" "$(json_field "$log" "$key")"
        done
        ;;
      restic)
        fact restic "$rep" blobs "$(tool_cmd restic "$state" list blobs 2>/dev/null | wc -l)"
        measure "$rep" forget restic "$state" -- forget --keep-last "$keep_last"
        measure "$rep" prune restic "$state" -- prune
        ;;
    esac
    if ((rep == 1)); then
      target="$work/$tool-restore"
      tool_cmd "$tool" "$state" restore latest --target "$target" >"$out_dir/logs/prune-restore-$tool.log" 2>&1 ||
        die "$tool restore after prune failed"
      if python3 "$bench_dir/tree_compare.py" check "$work/source.digest" "$target$data" >"$work/check.txt"; then
        echo "  $tool: newest snapshot restores identical after prune"
      else
        echo "  $tool: restore MISMATCH after prune: $(head -n 5 "$work/check.txt")"
        mismatches=$((mismatches + 1))
      fi
      rm -rf "$target"
    fi
    if ((rep < repeat)); then rm -rf "${work:?}/$state"; fi
  done
done

# --- the report ---------------------------------------------------------------
notes=("dataset: gen_dataset.py --size-gib $size_gib --seed $seed, $snapshots snapshots with mutate.py --fraction $fraction between them; $(python3 "$bench_dir/tree_compare.py" stats "$data" | awk '{printf "%d files, %.1f MiB at the end", $1, $2 / 1048576}')"
       "policy: forget --keep-last $keep_last; keel prune --grace 0 (default --repack-threshold 50%), restic prune (default --max-unused 5%)"
       "machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(date -u +%Y-%m-%d)"
       "keel: $("$keel_bin" --version)")
if [[ " ${selected[*]} " == *" restic "* ]]; then notes+=("restic: $(restic version | cut -d' ' -f1-2)"); fi
note_args=()
for note in "${notes[@]}"; do note_args+=(--note "$note"); done
python3 "$bench_dir/prune_report.py" --records "$records" --facts "$facts" --tools "$tools" \
  --markdown "$out_dir/$report_name.md" "${note_args[@]}"
echo "wrote $out_dir/$report_name.md in $((SECONDS - started)) s"
((mismatches == 0)) || die "$mismatches restore(s) after prune did not match the source"
