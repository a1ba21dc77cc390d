#!/usr/bin/env python3
"""Turn backup_compare.sh's measurements into a table (text and markdown).

Reads the JSON lines measure.py wrote (one per dataset, tool, phase and
repetition) and the restore verifications, takes the median of each figure
over repetitions, and adds ratio rows comparing keel with each other tool:
one table per dataset.
"""

import argparse
import json
import statistics
import sys

PHASES = (("initial", "first backup"),
          ("incremental", "backup after mutate"),
          ("restore", "restore (mutated)"))
# backup_compare.sh also times this; s3_compare.sh does not.
CHECK_PHASES = PHASES + (("check", "check --read-data"),)
HEADERS = ("phase", "tool", "wall s", "MB/s", "CPU s", "CPU s/GB", "cores",
           "peak RSS MiB", "repo MiB", "cache MiB")
MB, GB, MIB = 1e6, 1e9, 1024 * 1024


def medians(records):
    """{(phase, tool): {metric: median over repetitions}}."""
    grouped = {}
    for r in records:
        grouped.setdefault((r["phase"], r["tool"]), []).append(r)
    result = {}
    for key, runs in grouped.items():
        def median(metric):
            return statistics.median(metric(r) for r in runs)
        wall = median(lambda r: r["wall_s"])
        cpu = median(lambda r: r["user_s"] + r["sys_s"])
        data = median(lambda r: r["data_bytes"])
        result[key] = {
            "wall": wall, "mbps": data / MB / wall, "cpu": cpu,
            "cpu_per_gb": cpu / (data / GB),
            "cores": median(lambda r: (r["user_s"] + r["sys_s"]) / r["wall_s"]),
            "rss": median(lambda r: r["max_rss_kib"] / 1024),
            "repo": median(lambda r: r["repo_bytes"] / MIB),
            "cache": median(lambda r: r["cache_bytes"] / MIB),
            "runs": len(runs),
        }
    return result


def rows(figures, tools, phases=PHASES):
    for phase, label in phases:
        for tool in tools:
            f = figures.get((phase, tool))
            if f:
                yield (label, tool, f"{f['wall']:.2f}", f"{f['mbps']:.1f}", f"{f['cpu']:.2f}",
                       f"{f['cpu_per_gb']:.2f}", f"{f['cores']:.2f}", f"{f['rss']:.0f}",
                       f"{f['repo']:.1f}", f"{f['cache']:.1f}")
        keel = figures.get((phase, "keel"))
        for other in tools:
            theirs = figures.get((phase, other))
            if other == "keel" or not keel or not theirs:
                continue
            def ratio(metric):
                return f"{keel[metric] / theirs[metric]:.2f}x" if theirs[metric] else "-"
            # Throughput above 1x: keel is faster. CPU per GB, RSS, repo below 1x: keel uses less.
            yield (label, f"keel/{other}", "", ratio("mbps"), "", ratio("cpu_per_gb"), "",
                   ratio("rss"), ratio("repo"), "")


def text_table(table):
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    def line(row):
        cells = [c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))]
        return "  ".join(cells).rstrip()
    return "\n".join([line(table[0]), line(["-" * w for w in widths])] +
                     [line(row) for row in table[1:]])


def markdown_table(table):
    out = ["| " + " | ".join(table[0]) + " |",
           "|" + "|".join(":--" if i < 2 else "--:" for i in range(len(table[0]))) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in table[1:]]
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", required=True, help="measure.py's JSON lines")
    parser.add_argument("--verify", required=True,
                        help="lines 'DATASET REP TOOL OK|MISMATCH' from the restore checks")
    parser.add_argument("--tools", required=True, help="comma-separated, in table order")
    parser.add_argument("--datasets", required=True, help="comma-separated, in report order")
    parser.add_argument("--markdown", required=True, help="file to write the markdown to")
    parser.add_argument("--note", action="append", default=[],
                        help="a line for the header (repeatable)")
    args = parser.parse_args()

    with open(args.records) as f:
        records = [json.loads(line) for line in f if line.strip()]
    with open(args.verify) as f:
        verifications = [line.split() for line in f if line.strip()]
    tools = args.tools.split(",")
    repetitions = max((r["rep"] for r in records), default=0)

    verdicts = []
    for tool in tools:
        results = [v[3] for v in verifications if v[2] == tool]
        if results:
            verdict = "OK" if all(r == "OK" for r in results) else "MISMATCH"
            verdicts.append(f"{tool}: {verdict} ({results.count('OK')}/{len(results)} restores)")
    notes = args.note + [f"medians of {repetitions} repetition(s)",
                         "restore verification: " + "; ".join(verdicts)]

    tables = []
    for dataset in args.datasets.split(","):
        figures = medians([r for r in records if r.get("dataset") == dataset])
        tables.append((dataset, [HEADERS] + list(rows(figures, tools, CHECK_PHASES))))
    for dataset, table in tables:
        print(f"dataset {dataset}:")
        print(text_table(table))
        print()
    for note in notes:
        print(note)

    with open(args.markdown, "w") as md:
        md.write("# keel vs restic vs borg: backup, incremental backup, restore, check\n\n")
        md.write("\n".join(f"- {note}" for note in notes) + "\n\n")
        for dataset, table in tables:
            md.write(f"## dataset {dataset}\n\n" + markdown_table(table) + "\n\n")
        md.write("MB/s = dataset bytes / wall time (MB = 10^6 bytes); CPU s = user + system; "
                 "cores = CPU s / wall s; repo = `du -sb` of the repository after the phase; "
                 "cache = the tool's local cache or catalog. Ratio rows: MB/s above 1x means "
                 "keel is faster; CPU s/GB, RSS and repo below 1x mean keel uses less. "
                 "See bench/README.md.\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
