#!/usr/bin/env bash
# keel vs restic vs borg on the same data: a first backup, a backup after
# mutate.py has changed ~5% of the bytes, a full restore of the mutated state
# and a check that reads every stored byte, each timed (wall, CPU, peak RSS)
# with the repository size after it, on each dataset profile of
# gen_dataset.py. Every restore is checked against the source tree. See
# bench/README.md.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  cat <<EOF
usage: bench/backup_compare.sh [options]
  --size-gib N      dataset size in GiB (default 2)
  --seed N          dataset seed for gen_dataset.py (default 1)
  --datasets LIST   comma-separated gen_dataset.py profiles, each measured and
                    reported on its own (default: mixed,kind)
  --tools LIST      comma-separated subset of keel,restic,borg (default: all three)
  --repeat R        run everything R times and report medians (default 1); the
                    tools take turns in reverse order on even repetitions
  --data DIR        back up this tree (made earlier by gen_dataset.py) instead of
                    generating one; --datasets then names it, one name only
  --work DIR        scratch directory (default: a new one under \${TMPDIR:-/tmp});
                    must be empty or absent; removed at the end unless --keep
  --keel PATH       keel binary (default: \$KEEL_BIN or build/cli/keel)
  --keep            keep the scratch directory (dataset, repositories)
  --smoke           ~20 MiB of each dataset, one repetition, for CI: fails on any
                    command failure or restore mismatch; tools that are not
                    installed are skipped
  -h, --help        this text
Writes the table to stdout and to bench/out/backup_compare.md
(bench/out/backup_compare_smoke.md with --smoke); command logs go to bench/out/logs/.
EOF
}

size_gib=2 seed=1 tools="" repeat=1 work="" keep=0 smoke=0 datasets=mixed,kind given_data=
while (($#)); do
  case $1 in
    --size-gib) size_gib=${2:?--size-gib needs a value}; shift 2 ;;
    --seed) seed=${2:?--seed needs a value}; shift 2 ;;
    --datasets) datasets=${2:?--datasets needs a value}; shift 2 ;;
    --tools) tools=${2:?--tools needs a value}; shift 2 ;;
    --repeat) repeat=${2:?--repeat needs a value}; shift 2 ;;
    --data) given_data=${2:?--data needs a value}; shift 2 ;;
    --work) work=${2:?--work needs a value}; shift 2 ;;
    --keel) keel_bin=${2:?--keel needs a value}; shift 2 ;;
    --keep) keep=1; shift ;;
    --smoke) smoke=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done
positive_int --repeat "$repeat"
if [[ -n $given_data ]]; then
  [[ -d $given_data ]] || die "--data $given_data is not a directory"
  [[ $datasets != *,* ]] || die "--data is one dataset: give --datasets one name for it"
  given_data=$(cd "$given_data" && pwd)
fi

report_name=backup_compare
if ((smoke)); then
  size_gib=0.01953125  # 20 MiB
  repeat=1
  report_name=backup_compare_smoke
fi

# --- tools ----------------------------------------------------------------
tool_available() {
  case $1 in
    keel) [[ -x $keel_bin ]] ;;
    restic|borg) command -v "$1" >/dev/null ;;
    *) die "unknown tool '$1' (known: keel, restic, borg)" ;;
  esac
}

tool_version() {
  case $1 in
    keel) "$keel_bin" --version ;;
    restic) restic version | cut -d' ' -f1-2 ;;
    borg) borg --version ;;
  esac
}

selected=()
if [[ -n $tools ]]; then
  # Named explicitly: every one must be there.
  IFS=, read -ra selected <<<"$tools"
  for tool in "${selected[@]}"; do
    tool_available "$tool" || die "$tool is not available (keel: build it or pass --keel PATH)"
  done
else
  require_keel
  selected=(keel)
  for tool in restic borg; do
    if tool_available "$tool"; then
      selected+=("$tool")
    else
      echo "skipping $tool: not installed (Debian package '${tool/borg/borgbackup}')" >&2
    fi
  done
fi
tools=$(IFS=,; echo "${selected[*]}")
[[ ! -x $keel_bin ]] || keel_bin=$(cd "$(dirname "$keel_bin")" && pwd)/$(basename "$keel_bin")

# --- scratch space ----------------------------------------------------------
bench_scratch keel-bench

mkdir -p "$out_dir/logs"
rm -f "$out_dir"/logs/*.log
data="$work/data"
records="$work/records.jsonl"
verify="$work/verify.txt"
: >"$records"
: >"$verify"

# Each tool keeps its repository, local cache (keel: the catalog) and restore
# target under $work/TOOL; the variables are disjoint, so all can be exported.
export KEEL_PASSWORD=bench RESTIC_PASSWORD=bench BORG_PASSPHRASE=bench
export XDG_DATA_HOME="$work/keel/cache" RESTIC_CACHE_DIR="$work/restic/cache"
export BORG_BASE_DIR="$work/borg/cache"

tool_init() {
  local repo="$work/$1/repo"
  case $1 in
    keel) "$keel_bin" init --repo "$repo" ;;
    restic) restic --repo "$repo" init ;;
    borg) borg init --encryption=repokey-blake2 "$repo" ;;
  esac
}

# Runs one timed phase on $dataset: measure REP PHASE TOOL DATA_BYTES [--cwd DIR] -- COMMAND...
measure() {
  local rep=$1 phase=$2 tool=$3 bytes=$4 log="$out_dir/logs/$dataset-$1-$3-$2.log"
  shift 4
  # Write back what the previous step left dirty (the generator, mutate, the
  # previous tool), so that no tool pays for another's writes.
  sync
  python3 "$bench_dir/measure.py" --records "$records" --rep "$rep" --phase "$phase" \
    --tool "$tool" --dataset "$dataset" --data-bytes "$bytes" --repo "$work/$tool/repo" \
    --cache "$work/$tool/cache" --log "$log" "$@" ||
    die "$tool $phase on $dataset failed (log: $log)"
}

# Times one backup: backup_phase REP PHASE TOOL DATA_BYTES (PHASE names borg's archive).
backup_phase() {
  local rep=$1 phase=$2 tool=$3 bytes=$4 repo="$work/$3/repo"
  case $tool in
    keel) measure "$rep" "$phase" keel "$bytes" -- \
            "$keel_bin" backup --repo "$repo" "$data" --json ;;
    restic) measure "$rep" "$phase" restic "$bytes" -- restic --repo "$repo" backup "$data" ;;
    borg) measure "$rep" "$phase" borg "$bytes" -- \
            borg create --compression zstd,3 "$repo::$phase" "$data" ;;
  esac
}

# Times one full restore of the latest snapshot into $work/TOOL/restore.
restore_phase() {
  local rep=$1 tool=$2 bytes=$3 repo="$work/$2/repo" target="$work/$2/restore"
  case $tool in
    keel) measure "$rep" restore keel "$bytes" -- \
            "$keel_bin" restore latest --repo "$repo" --target "$target" --json ;;
    restic) measure "$rep" restore restic "$bytes" -- \
            restic --repo "$repo" restore latest --target "$target" ;;
    # borg extracts into the current directory, paths without the leading /.
    borg) measure "$rep" restore borg "$bytes" --cwd "$target" -- \
            borg extract "$repo::incremental" ;;
  esac
}

# Times a check that reads and verifies every stored byte.
check_phase() {
  local rep=$1 tool=$2 bytes=$3 repo="$work/$2/repo"
  case $tool in
    keel) measure "$rep" check keel "$bytes" -- "$keel_bin" check --repo "$repo" --read-data ;;
    restic) measure "$rep" check restic "$bytes" -- restic --repo "$repo" check --read-data ;;
    borg) measure "$rep" check borg "$bytes" -- borg check --verify-data "$repo" ;;
  esac
}

data_bytes() { python3 "$bench_dir/tree_compare.py" stats "$data" | cut -d' ' -f2; }

# --- the runs ---------------------------------------------------------------
IFS=, read -ra dataset_list <<<"$datasets"
echo "tools: $tools; datasets $datasets, ${size_gib} GiB each, seed $seed; $repeat repetition(s); scratch $work"
started=$SECONDS load_at_start=$(cut -d' ' -f1 /proc/loadavg)
mismatches=0
# Each dataset is generated once; every repetition backs up a fresh copy.
pristine() { if [[ -n $given_data ]]; then echo "$given_data"; else echo "$work/pristine-$1"; fi; }
for dataset in "${dataset_list[@]}"; do
  [[ -z $given_data ]] || break
  python3 "$bench_dir/gen_dataset.py" "$(pristine "$dataset")" --profile "$dataset" \
    --size-gib "$size_gib" --seed "$seed" || die "gen_dataset.py --profile $dataset failed"
done
for ((rep = 1; rep <= repeat; rep++)); do
  order=("${selected[@]}")
  if ((rep % 2 == 0)); then  # alternate, so that no tool always runs first
    order=()
    for ((i = ${#selected[@]} - 1; i >= 0; i--)); do order+=("${selected[$i]}"); done
  fi
  for dataset in "${dataset_list[@]}"; do
    echo "== repetition $rep/$repeat, dataset $dataset, order ${order[*]}"
    rm -rf "$data" "$work"/{keel,restic,borg}
    cp -a "$(pristine "$dataset")" "$data"
    bytes=$(data_bytes)

    for tool in "${order[@]}"; do
      mkdir -p "$work/$tool/cache" "$work/$tool/restore"
      tool_init "$tool" >"$out_dir/logs/$dataset-$rep-$tool-init.log" 2>&1 ||
        die "$tool init failed (log: $out_dir/logs/$dataset-$rep-$tool-init.log)"
      backup_phase "$rep" initial "$tool" "$bytes"
    done

    python3 "$bench_dir/mutate.py" "$data" --seed $((seed + 1))
    bytes=$(data_bytes)
    python3 "$bench_dir/tree_compare.py" digest "$data" "$work/source.digest"

    for tool in "${order[@]}"; do
      backup_phase "$rep" incremental "$tool" "$bytes"
    done

    for tool in "${order[@]}"; do
      restore_phase "$rep" "$tool" "$bytes"
      target="$work/$tool/restore"
      # All three restore the dataset at its full path under the target.
      if python3 "$bench_dir/tree_compare.py" check "$work/source.digest" "$target$data" \
          >"$work/check.txt"; then
        result=OK
      else
        result=MISMATCH
        mismatches=$((mismatches + 1))
      fi
      echo "  $tool restore: $(head -n 11 "$work/check.txt")"
      echo "$dataset $rep $tool $result" >>"$verify"
      rm -rf "$target"
    done

    for tool in "${order[@]}"; do
      check_phase "$rep" "$tool" "$bytes"
    done
  done
done

# --- the report ---------------------------------------------------------------
echo
made="gen_dataset.py --profile $datasets --size-gib $size_gib --seed $seed"
[[ -z $given_data ]] || made="$given_data"
notes=("datasets: $made, then mutate.py --seed $((seed + 1)); $(for d in "${dataset_list[@]}"; do python3 "$bench_dir/tree_compare.py" stats "$(pristine "$d")" | awk -v d="$d" '{printf "%s: %d files, %.1f MiB before mutation; ", d, $1, $2 / 1048576}'; done)"
       "machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(date -u +%Y-%m-%d); load average $load_at_start at the start, $(cut -d' ' -f1 /proc/loadavg) at the end")
for tool in "${selected[@]}"; do notes+=("$tool: $(tool_version "$tool")"); done
note_args=()
for note in "${notes[@]}"; do note_args+=(--note "$note"); done
python3 "$bench_dir/report.py" --records "$records" --verify "$verify" --tools "$tools" \
  --datasets "$datasets" \
  --markdown "$out_dir/$report_name.md" "${note_args[@]}"
echo "wrote $out_dir/$report_name.md in $((SECONDS - started)) s"

((mismatches == 0)) || die "$mismatches restore(s) did not match the source"
