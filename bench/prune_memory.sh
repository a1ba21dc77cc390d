#!/usr/bin/env bash
# How keel prune's peak memory grows with the number of indexed chunks.
# A repository with small chunks (2 KiB on average) grows by --gib-per-step
# of new stream_gen.py data per step; after each step keel prune marks every
# chunk (nothing is forgotten, so nothing is deleted), timed by measure.py.
# The cost of one more chunk is the slope of peak RSS between the last two
# steps: the fixed part (code, buffers, the catalog's bounded page cache)
# cancels out. Opening the repository sets a floor of its own (the key slot's
# scrypt takes 32 MiB, about 41 MiB peak in all), so the steps must be large
# enough that prune's peak lies above it at both. Fails if that slope exceeds
# --max-bytes-per-chunk. See bench/README.md.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  cat <<EOF
usage: bench/prune_memory.sh [options]
  --steps N                 repository sizes measured (default 4)
  --gib-per-step G          new data per step, GiB (default 1)
  --chunk-avg-kib K         average chunk size of the repository (default 2)
  --max-bytes-per-chunk B   fail above this slope (default 64)
  --work DIR                scratch directory (default: a new one under \${TMPDIR:-/tmp});
                            must be empty or absent; removed at the end unless --keep
  --keel PATH               keel binary (default: \$KEEL_BIN or build/cli/keel)
  --keep                    keep the scratch directory
  --smoke                   2 steps of 32 MiB: checks the script, not the figure (the
                            slope is printed, not judged: at this size prune's peak lies
                            within a MiB of the scrypt floor and allocator noise decides it)
  --report-only             print the slope but do not judge it (sanitizer builds:
                            ASan's shadow memory and quarantine, not keel, set their RSS)
  -h, --help                this text
Writes the table to stdout and to bench/out/prune_memory.md.
EOF
}

steps=4 gib=1 chunk_kib=2 max_per_chunk=64 work="" keep=0 smoke=0
while (($#)); do
  case $1 in
    --steps) steps=${2:?--steps needs a value}; shift 2 ;;
    --gib-per-step) gib=${2:?--gib-per-step needs a value}; shift 2 ;;
    --chunk-avg-kib) chunk_kib=${2:?--chunk-avg-kib needs a value}; shift 2 ;;
    --max-bytes-per-chunk) max_per_chunk=${2:?--max-bytes-per-chunk needs a value}; shift 2 ;;
    --work) work=${2:?--work needs a value}; shift 2 ;;
    --keel) keel_bin=${2:?--keel needs a value}; shift 2 ;;
    --keep) keep=1; shift ;;
    --smoke) smoke=1; shift ;;
    --report-only) max_per_chunk=none; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done
[[ $steps =~ ^[2-9][0-9]*$ ]] || die "--steps must be at least 2"
require_keel
report_name=prune_memory
if ((smoke)); then steps=2 gib=0.03125 report_name=prune_memory_smoke max_per_chunk=none; fi

bench_scratch keel-prune-memory
mkdir -p "$out_dir/logs"
records="$work/records.jsonl"
: >"$records"
export KEEL_PASSWORD=bench XDG_DATA_HOME="$work/cache" KEEL_REPO="$work/repo"

"$keel_bin" init --chunk-min $((chunk_kib / 2 > 0 ? chunk_kib / 2 : 1)) --chunk-avg "$chunk_kib" \
  --chunk-max $((chunk_kib * 4)) >/dev/null || die "keel init failed"
bytes=$(python3 -c "print(int(float('$gib') * (1 << 30)))")
for ((step = 1; step <= steps; step++)); do
  python3 "$bench_dir/stream_gen.py" --bytes "$bytes" --seed "$step" |
    "$keel_bin" backup --stdin --stdin-name "part$step" >"$out_dir/logs/prune-memory-backup-$step.log" 2>&1 ||
    die "backup of step $step failed (log: $out_dir/logs/prune-memory-backup-$step.log)"
  log="$out_dir/logs/prune-memory-$step.log"
  python3 "$bench_dir/measure.py" --records "$records" --rep "$step" --phase prune --tool keel --data-bytes 0 \
    --repo "$work/repo" --cache "$work/cache" --log "$log" -- "$keel_bin" prune --grace 0 --json ||
    die "prune of step $step failed (log: $log)"
  python3 - "$log" "$records" <<'EOF'
import json, sys
result = json.loads(open(sys.argv[1]).read().splitlines()[-1])  # the document follows the status lines
lines = open(sys.argv[2]).read().splitlines()
record = json.loads(lines[-1])
record.update(blobs=result["blobs"], mark_memory_bytes=result["mark_memory_bytes"], prune_s=result["seconds"])
lines[-1] = json.dumps(record)
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
EOF
done

python3 - "$records" "$max_per_chunk" "$out_dir/$report_name.md" "$chunk_kib" "$gib" <<'EOF'
import json, sys
records = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
limit = None if sys.argv[2] == "none" else float(sys.argv[2])  # none: --report-only
md_path = sys.argv[3]
MIB = 1 << 20
rows = [("step", "chunks", "prune s", "peak RSS MiB", "mark MiB", "mark B/chunk", "slope B/chunk")]
for prev, r in zip([None] + records[:-1], records):
    rss = r["max_rss_kib"] * 1024
    slope = ""
    if prev:
        slope = f"{(rss - prev['max_rss_kib'] * 1024) / (r['blobs'] - prev['blobs']):.1f}"
    rows.append((str(r["rep"]), f"{r['blobs']:,}", f"{r['prune_s']:.2f}", f"{rss / MIB:.1f}",
                 f"{r['mark_memory_bytes'] / MIB:.1f}", f"{r['mark_memory_bytes'] / r['blobs']:.1f}", slope))
# The last two steps: the earlier ones may sit under the floor opening the repository sets.
first, last = records[-2], records[-1]
overall = (last["max_rss_kib"] - first["max_rss_kib"]) * 1024 / (last["blobs"] - first["blobs"])
widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
for row in rows:
    print("  ".join(c.rjust(w) for c, w in zip(row, widths)))
summary = (f"peak RSS grows by {overall:.1f} bytes per indexed chunk between {first['blobs']:,} and "
           f"{last['blobs']:,} chunks " + ("(not judged)" if limit is None else f"(limit {limit:g})"))
print(summary)
with open(md_path, "w") as md:
    md.write(f"# keel prune: peak memory against indexed chunks ({sys.argv[4]} KiB chunks, "
             f"{sys.argv[5]} GiB per step)\n\n")
    md.write("| " + " | ".join(rows[0]) + " |\n|" + "--:|" * len(rows[0]) + "\n")
    for row in rows[1:]:
        md.write("| " + " | ".join(row) + " |\n")
    md.write(f"\n{summary}\n")
sys.exit(0 if limit is None or overall <= limit else 1)
EOF
