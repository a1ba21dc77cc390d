#!/usr/bin/env python3
"""Turn prune_compare.sh's measurements into a table (text and markdown).

Reads measure.py's JSON lines (phases forget, prune, baseline-empty and
baseline-one, one per tool and repetition) and the facts the script noted
(chunks indexed, keel's own accounting), takes medians over repetitions, and
works out keel's peak memory per indexed chunk two ways:

  over empty: (peak RSS of the prune - peak RSS of a prune of an empty
              repository) / chunks indexed. Everything that grows with the
              repository counts, including the catalog's page cache.
  marginal:   (peak RSS of the prune - peak RSS of a prune of the first
              snapshot alone that repacks every pack) / (chunks - chunks of
              the first snapshot): what one more chunk costs once the fixed
              buffers (repack's included) are full.

Opening a repository sets a floor of about 41 MiB (the key slot's scrypt);
while prune's own memory stays under it, both figures read near zero and
bench/prune_memory.sh is the measure that shows the slope.
"""

import argparse
import json
import statistics
import sys

from report import markdown_table, text_table

MIB = 1024 * 1024
HEADERS = ("phase", "tool", "wall s", "CPU s", "cores", "peak RSS MiB", "repo MiB after")
PHASES = (("forget", "forget --keep-last"), ("prune", "prune"))


def median_of(records, phase, tool, metric):
    values = [metric(r) for r in records if r["phase"] == phase and r["tool"] == tool]
    return statistics.median(values) if values else None


def fact(facts, tool, key):
    values = [f["value"] for f in facts if f["tool"] == tool and f["key"] == key]
    return statistics.median(values) if values else None


def figures(records, phase, tool):
    wall = median_of(records, phase, tool, lambda r: r["wall_s"])
    if wall is None:
        return None
    return {
        "wall": wall,
        "cpu": median_of(records, phase, tool, lambda r: r["user_s"] + r["sys_s"]),
        "cores": median_of(records, phase, tool, lambda r: (r["user_s"] + r["sys_s"]) / r["wall_s"]),
        "rss": median_of(records, phase, tool, lambda r: r["max_rss_kib"] * 1024),
        "repo": median_of(records, phase, tool, lambda r: r["repo_bytes"]),
    }


def table_rows(records, tools):
    for phase, label in PHASES:
        for tool in tools:
            f = figures(records, phase, tool)
            if f:
                yield (label, tool, f"{f['wall']:.2f}", f"{f['cpu']:.2f}", f"{f['cores']:.2f}",
                       f"{f['rss'] / MIB:.1f}", f"{f['repo'] / MIB:.1f}")
        keel = figures(records, phase, "keel")
        for other in tools:
            theirs = figures(records, phase, other)
            if other == "keel" or not keel or not theirs:
                continue
            def ratio(metric):
                return f"{keel[metric] / theirs[metric]:.2f}x" if theirs[metric] else "-"
            yield (label, f"keel/{other}", ratio("wall"), ratio("cpu"), "", ratio("rss"), ratio("repo"))


def memory_lines(records, facts, tools):
    lines = []
    for tool in tools:
        blobs = fact(facts, tool, "blobs")
        prune = figures(records, "prune", tool)
        if blobs and prune:
            lines.append(f"{tool}: {blobs:,.0f} chunks indexed (data and tree blobs); prune peak RSS "
                         f"{prune['rss'] / MIB:.1f} MiB = {prune['rss'] / blobs:.0f} bytes per chunk in all")
    keel_prune = figures(records, "prune", "keel")
    empty = figures(records, "baseline-empty", "keel")
    one = figures(records, "baseline-one", "keel")
    blobs = fact(facts, "keel", "blobs")
    blobs_one = fact(facts, "keel", "blobs_one")
    mark = fact(facts, "keel", "mark_memory_bytes")
    if keel_prune and empty and blobs:
        lines.append(f"keel over empty: ({keel_prune['rss'] / MIB:.1f} - {empty['rss'] / MIB:.1f} MiB) / "
                     f"{blobs:,.0f} chunks = {(keel_prune['rss'] - empty['rss']) / blobs:.1f} bytes per chunk")
    if keel_prune and one and blobs and blobs_one and blobs > blobs_one:
        lines.append(f"keel marginal: ({keel_prune['rss'] / MIB:.1f} - {one['rss'] / MIB:.1f} MiB) / "
                     f"({blobs:,.0f} - {blobs_one:,.0f} chunks) = "
                     f"{(keel_prune['rss'] - one['rss']) / (blobs - blobs_one):.1f} bytes per chunk")
    if mark and blobs:
        lines.append(f"keel mark structure (its own count): {mark / MIB:.1f} MiB = {mark / blobs:.1f} bytes per chunk")
    reclaimed = fact(facts, "keel", "bytes_deleted")
    if reclaimed is not None:
        lines.append(f"keel prune deleted {fact(facts, 'keel', 'packs_deleted'):.0f} packs "
                     f"({reclaimed / MIB:.1f} MiB), repacked {fact(facts, 'keel', 'packs_repacked'):.0f}")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", required=True, help="measure.py's JSON lines")
    parser.add_argument("--facts", required=True, help="JSON lines {tool, rep, key, value}")
    parser.add_argument("--tools", required=True, help="comma-separated, in table order")
    parser.add_argument("--markdown", required=True, help="file to write the markdown to")
    parser.add_argument("--note", action="append", default=[], help="a line for the header (repeatable)")
    args = parser.parse_args()
    with open(args.records) as f:
        records = [json.loads(line) for line in f if line.strip()]
    with open(args.facts) as f:
        facts = [json.loads(line) for line in f if line.strip()]
    tools = args.tools.split(",")
    repetitions = max((r["rep"] for r in records), default=0)

    table = [HEADERS] + list(table_rows(records, tools))
    memory = memory_lines(records, facts, tools)
    notes = args.note + [f"medians of {repetitions} repetition(s), each on a fresh copy of the history"]
    print(text_table(table))
    print()
    for line in notes + memory:
        print(line)
    with open(args.markdown, "w") as md:
        md.write("# keel vs restic: forget and prune on the same history\n\n")
        md.write("\n".join(f"- {note}" for note in notes) + "\n\n")
        md.write(markdown_table(table) + "\n\n")
        md.write("Memory:\n\n" + "\n".join(f"- {line}" for line in memory) + "\n\n")
        md.write("CPU s = user + system; cores = CPU s / wall s; repo = `du -sb` of the repository after the "
                 "phase. Ratio rows: below 1x means keel takes less. See bench/README.md.\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
