#!/usr/bin/env python3
"""Turn s3_compare.sh's measurements into tables (text and markdown).

Inputs: measure.py's JSON lines for keel's and restic's phases (--records) and for
awscli's upload and download (--raw); per phase, the bucket's size, the server's CPU
time and keel's bytes_added (--extras); the restore checks (--verify). The keel/restic
table is report.py's, with the repository size taken from the bucket; then the
server's share of the CPU, the raw rates, and the issue's targets.
"""

import argparse
import json
import sys

import report

MB, GB = 1e6, 1e9
TOOLS = ("keel", "restic")
PHASE_LABELS = dict(report.PHASES)
# The goals: keel's upload rate at least 70% of a tuned bulk copy's, and keel at
# least 3x restic's throughput on backup and on restore.
UPLOAD_SHARE_GOAL = 0.70
RESTIC_SPEEDUP_GOAL = 3.0


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def text_table(headers, rows):
    widths = [max(len(str(row[i])) for row in [headers] + rows) for i in range(len(headers))]
    def line(row):
        return "  ".join(str(c).ljust(w) if i < 2 else str(c).rjust(w)
                         for i, (c, w) in enumerate(zip(row, widths))).rstrip()
    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


def markdown_table(headers, rows):
    out = ["| " + " | ".join(headers) + " |",
           "|" + "|".join(":--" if i < 2 else "--:" for i in range(len(headers))) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def server_rows(records, raw, extras):
    """Client and server CPU per phase: on a small machine both compete for the cores."""
    rows = []
    phases = [(p, label, tool) for p, label in report.PHASES for tool in TOOLS]
    phases += [("upload", "upload", "awscli"), ("download", "download", "awscli")]
    for phase, label, tool in phases:
        r = records.get((phase, tool)) or raw.get((phase, tool))
        e = extras.get((phase, tool))
        if not r or not e or e.get("server_cpu_s") is None:
            continue
        client = r["user_s"] + r["sys_s"]
        server = e["server_cpu_s"]
        rows.append((label, tool, f"{r['wall_s']:.2f}", f"{r['user_s']:.2f}", f"{r['sys_s']:.2f}",
                     f"{server:.2f}", f"{(client + server) / r['wall_s']:.2f}"))
    return rows


def rate_rows(raw, records, extras):
    """awscli's raw rates next to keel's and restic's, all in MB/s of bytes moved."""
    rows, rates = [], {}
    for phase, what in (("upload", "upload (s3 cp file -> bucket)"),
                        ("download", "download (s3 cp bucket -> file)")):
        r = raw.get((phase, "awscli"))
        if r:
            rates[f"awscli {phase}"] = r["data_bytes"] / MB / r["wall_s"]
            rows.append((what, "awscli", f"{r['data_bytes'] / MB:.1f}", f"{r['wall_s']:.2f}",
                         f"{rates[f'awscli {phase}']:.1f}",
                         f"{r['user_s'] + r['sys_s']:.2f}", f"{r['max_rss_kib'] / 1024:.0f}"))
    for tool in TOOLS:
        r, e = records.get(("initial", tool)), extras.get(("initial", tool))
        if not r or not e:
            continue
        # Bytes that reached the bucket: keel reports what it stored; for restic the bucket's
        # growth is all there is (the first backup starts from an empty repository but for
        # its config and keys, a few KB).
        added = e.get("bytes_added", e["repo_bytes"])
        rates[f"{tool} upload"] = added / MB / r["wall_s"]
        rows.append(("first backup: bytes added / wall", tool, f"{added / MB:.1f}",
                     f"{r['wall_s']:.2f}", f"{rates[f'{tool} upload']:.1f}",
                     f"{r['user_s'] + r['sys_s']:.2f}", f"{r['max_rss_kib'] / 1024:.0f}"))
    for tool in TOOLS:
        r = records.get(("restore", tool))
        if r:
            rates[f"{tool} restore"] = r["data_bytes"] / MB / r["wall_s"]
            rows.append(("restore: dataset bytes / wall", tool, f"{r['data_bytes'] / MB:.1f}",
                         f"{r['wall_s']:.2f}", f"{rates[f'{tool} restore']:.1f}",
                         f"{r['user_s'] + r['sys_s']:.2f}", f"{r['max_rss_kib'] / 1024:.0f}"))
    return rows, rates


def target_rows(figures, rates):
    """(target, phase, measured, goal, met): the issue's goals against this run."""
    def verdict(value, goal):
        return "yes" if value >= goal else f"NO ({value / goal:.0%} of the goal)"
    rows = []
    if "keel upload" in rates and "awscli upload" in rates:
        share = rates["keel upload"] / rates["awscli upload"]
        rows.append(("keel upload rate / awscli upload rate", "first backup", f"{share:.0%}",
                     f">= {UPLOAD_SHARE_GOAL:.0%}", verdict(share, UPLOAD_SHARE_GOAL)))
    for phase, label in report.PHASES:
        keel, restic = figures.get((phase, "keel")), figures.get((phase, "restic"))
        if keel and restic:
            speedup = keel["mbps"] / restic["mbps"]
            rows.append(("keel MB/s / restic MB/s", label, f"{speedup:.2f}x",
                         f">= {RESTIC_SPEEDUP_GOAL:.0f}x", verdict(speedup, RESTIC_SPEEDUP_GOAL)))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", required=True, help="measure.py's lines for keel and restic")
    parser.add_argument("--raw", required=True, help="measure.py's lines for awscli")
    parser.add_argument("--extras", required=True,
                        help="lines {phase, tool, repo_bytes, server_cpu_s[, bytes_added]}")
    parser.add_argument("--verify", required=True,
                        help="lines 'REP TOOL OK|MISMATCH' from the restore checks")
    parser.add_argument("--markdown", required=True, help="file to write the markdown to")
    parser.add_argument("--note", action="append", default=[],
                        help="a line for the header (repeatable)")
    args = parser.parse_args()

    extras = {(e["phase"], e["tool"]): e for e in read_jsonl(args.extras)}
    records = read_jsonl(args.records)
    for r in records:  # the repository is a bucket: its size comes from a listing
        r["repo_bytes"] = extras.get((r["phase"], r["tool"]), {}).get("repo_bytes", 0)
    by_phase = {(r["phase"], r["tool"]): r for r in records}
    raw = {(r["phase"], r["tool"]): r for r in read_jsonl(args.raw)}
    with open(args.verify) as f:
        verifications = [line.split() for line in f if line.strip()]

    figures = report.medians(records)
    main_table = list(report.rows(figures, list(TOOLS)))
    rates_table, rates = rate_rows(raw, by_phase, extras)
    targets_table = target_rows(figures, rates)
    server_table = server_rows(by_phase, raw, extras)

    verdicts = []
    for tool in TOOLS:
        results = [v[2] for v in verifications if v[1] == tool]
        if results:
            verdict = "OK" if all(r == "OK" for r in results) else "MISMATCH"
            verdicts.append(f"{tool}: {verdict} ({results.count('OK')}/{len(results)} restores)")
    notes = args.note + ["restore verification: " + "; ".join(verdicts)]

    sections = [
        ("keel vs restic, S3 repositories", list(report.HEADERS), main_table,
         "MB/s = dataset bytes / wall time (MB = 10^6 bytes); CPU s = user + system of the "
         "client; cores = CPU s / wall s; repo = bytes in the tool's bucket after the phase "
         "(ListObjects); cache = the tool's local cache or catalog. Ratio rows: MB/s above 1x "
         "means keel is faster; CPU s/GB, RSS and repo below 1x mean keel uses less."),
        ("Transfer rates: awscli against the same server",
         ["what", "tool", "MB moved", "wall s", "MB/s", "CPU s", "peak RSS MiB"], rates_table,
         "awscli moves one file of stream_gen.py data with 16 requests in flight and 8 MiB "
         "parts. keel's bytes added = `bytes_added` of `keel backup --json` (compressed, "
         "encrypted, what went to the bucket); restic's = the bucket's size after its first "
         "backup. Backup rates include reading, chunking, compressing and encrypting: they "
         "are end-to-end rates, awscli's only move bytes."),
        ("Targets", ["target", "phase", "measured", "goal", "met"], targets_table, ""),
    ]
    if server_table:
        sections.append((
            "Client and server CPU",
            ["phase", "tool", "wall s", "client user s", "client sys s", "server CPU s",
             "cores busy"], server_table,
            "client user/sys s = the tool's user and system CPU time (system time is mostly "
            "file creation in a restore); server CPU s = user + system time of the RGW daemons "
            "(radosgw, ceph-osd, ceph-mon) during the phase; cores busy = (client + server CPU "
            "s) / wall s: near the "
            "machine's core count, the machine, not the network or the tool's concurrency, "
            "is the limit."))

    for note in notes:
        print(note)
    for title, headers, rows, _ in sections:
        print(f"\n{title}\n{text_table(headers, rows)}")

    with open(args.markdown, "w") as md:
        md.write("# keel vs restic on S3: backup, incremental backup, restore\n\n")
        md.write("\n".join(f"- {note}" for note in notes) + "\n")
        for title, headers, rows, caption in sections:
            md.write(f"\n## {title}\n\n{markdown_table(headers, rows)}\n")
            if caption:
                md.write(f"\n{caption}\n")
        md.write("\nSee bench/README.md.\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
