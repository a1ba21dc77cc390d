#!/usr/bin/env python3
"""First-backup CPU by stage, old binary against new, alternating.

For each round and each binary: `keel init` of a fresh local repository,
`sync`, `keel backup DATA --json`; the per-stage CPU-seconds per GB come from
the backup's --json document (cpu_seconds_per_gb), the process's user+system
time from getrusage of the child. Prints a markdown table of medians and
ranges, and the repository's size (the bytes of its files, as
`du --apparent-size` counts them). Optionally restores each backup and compares it with `diff -r`.

  bench/backup_stages.py --data /work/data/mixed4g --old /tmp/bk/keel-main \\
      --new build/cli/keel --rounds 3 --scratch /tmp/bk/stages

Runs alternate old, new, old, new... so load from other work on the machine
falls on both sides alike. The repositories (and their catalogs) are deleted
after each run.
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

STAGES = ["read", "chunk", "hash", "compress", "encrypt", "write", "catalog", "other", "total"]


def run(cmd, env, **kw):
    return subprocess.run(cmd, env=env, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def catalog_dir(init_output):
    for line in init_output.splitlines():
        if line.startswith("catalog: "):
            return os.path.dirname(line[len("catalog: "):].strip())
    return None


def one_backup(keel, data, scratch, env, verify):
    repo = os.path.join(scratch, "repo")
    shutil.rmtree(repo, ignore_errors=True)
    init = run([keel, "init", "--repo", repo], env)
    catalog = catalog_dir(init.stdout + init.stderr)
    subprocess.run(["sync"], check=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    out = run([keel, "backup", "--repo", repo, data, "--json"], env)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    gb = doc["bytes"] / 1e9
    row = dict(doc["cpu_seconds_per_gb"])
    row["rusage"] = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) / gb
    row["wall"] = wall
    row["cores"] = row["rusage"] * gb / wall
    row["repo_mb"] = sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(repo) for f in files) / 1e6
    if verify:
        target = os.path.join(scratch, "restored")
        shutil.rmtree(target, ignore_errors=True)
        run([keel, "restore", "--repo", repo, "latest", "--target", target], env)
        # The snapshot holds the source's absolute path under the target.
        diff = subprocess.run(["diff", "-r", data, target + data], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if diff.returncode != 0:
            sys.exit(f"{keel}: restore differs from {data}:\n{diff.stdout[:2000]!r}")
        shutil.rmtree(target, ignore_errors=True)
    shutil.rmtree(repo, ignore_errors=True)
    if catalog:
        shutil.rmtree(catalog, ignore_errors=True)
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True)
    p.add_argument("--old", required=True)
    p.add_argument("--new", required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--scratch", required=True, help="directory for the repositories (deleted after each run)")
    p.add_argument("--verify", action="store_true", help="restore each backup and diff -r it against the data")
    args = p.parse_args()

    os.makedirs(args.scratch, exist_ok=True)
    env = dict(os.environ)
    if "KEEL_PASSWORD_FILE" not in env:
        pw = os.path.join(args.scratch, "password")
        with open(pw, "w") as f:
            f.write("bench\n")
        env["KEEL_PASSWORD_FILE"] = pw
    results = {"old": [], "new": []}
    for r in range(args.rounds):
        for side in ("old", "new"):
            row = one_backup(getattr(args, side), args.data, args.scratch, env, args.verify)
            results[side].append(row)
            print(f"round {r + 1} {side}: " + " ".join(f"{k} {v:.2f}" for k, v in row.items()), file=sys.stderr, flush=True)

    def cell(rows, key):
        values = [row[key] for row in rows]
        return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"

    print("| CPU-s per GB | old | new | new/old |")
    print("|:--|--:|--:|--:|")
    for key in STAGES + ["rusage"]:
        old = statistics.median(row[key] for row in results["old"])
        new = statistics.median(row[key] for row in results["new"])
        ratio = f"{new / old:.2f}" if old else ""
        print(f"| {key} | {cell(results['old'], key)} | {cell(results['new'], key)} | {ratio} |")
    for key in ("wall", "cores"):
        print(f"| {key} | {cell(results['old'], key)} | {cell(results['new'], key)} | |")
    old = statistics.median(row["repo_mb"] for row in results["old"])
    new = statistics.median(row["repo_mb"] for row in results["new"])
    print(f"| repository MB | {cell(results['old'], 'repo_mb')} | {cell(results['new'], 'repo_mb')} | {new / old:.3f} |")


if __name__ == "__main__":
    main()
