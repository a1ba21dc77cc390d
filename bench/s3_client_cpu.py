#!/usr/bin/env python3
"""keel's own CPU against S3, old binary against new: first backup and restore.

Run under a private RGW:

    tests/s3/with-rgw.sh python3 bench/s3_client_cpu.py --data DIR OLD_KEEL NEW_KEEL

For each repetition and each binary (alternating; the order flips on every
repetition) it makes a fresh bucket, runs `keel init`, a first backup of DIR and
a restore of that snapshot into --restore-dir (with --local, the same against a
local repository too, so that what the S3 target adds shows), and records the keel process's
user and system CPU (wait4 rusage), its wall time and the server's CPU (the RGW
daemons' utime + stime, from $RGW_DIR/pids) for each phase. The first restore
of every binary is checked against DIR (tree_compare.py); then the bucket's
objects are deleted so that memstore does not grow. Prints medians (and
ranges) of client CPU-s per GB of source (GB = 10^9 bytes).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(here), "tests", "s3"))
import s3client  # noqa: E402


def server_cpu_s():
    """CPU seconds the RGW daemons have used so far (0 if their PIDs are unknown)."""
    pids = os.path.join(os.environ.get("RGW_DIR", ""), "pids")
    if not os.path.exists(pids):
        return 0.0
    ticks = 0
    with open(pids) as f:
        for line in f:
            try:
                with open(f"/proc/{line.split()[0]}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
                ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
            except (OSError, IndexError):
                pass
    return ticks / os.sysconf("SC_CLK_TCK")


def run(command, log, env):
    """Runs command; returns (wall s, user s, sys s, peak RSS MiB) of that process alone."""
    with open(log, "w") as out:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out,
                                   stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        with open(log, errors="replace") as f:
            tail = "".join(f.readlines()[-20:])
        sys.exit(f"s3_client_cpu.py: {' '.join(command)} failed:\n{tail}")
    return wall, usage.ru_utime, usage.ru_stime, usage.ru_maxrss / 1024


def empty_bucket(client, bucket):
    client.close()  # the server may have dropped the idle connection during the run
    while True:
        listing = client.request("GET", f"/{bucket}", {"list-type": "2", "max-keys": "1000"})
        keys = [part.split("</Key>")[0] for part in listing.body.decode().split("<Key>")[1:]]
        if not keys:
            return
        for key in keys:
            client.request("DELETE", f"/{bucket}/{key}")


def tree_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            total += os.lstat(os.path.join(root, name)).st_size
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="the tree to back up")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", default=None, help="scratch directory (catalogs, logs)")
    parser.add_argument("--restore-dir", default="/dev/shm", help="where restores go")
    parser.add_argument("--json", help="append every record to this JSON-lines file")
    parser.add_argument("--local", action="store_true",
                        help="also back up to and restore from a local repository under --work, "
                             "to tell what the S3 target adds to the engine's own CPU")
    parser.add_argument("binaries", nargs="+", help="keel binaries to compare")
    args = parser.parse_args()
    if "S3_ENDPOINT" not in os.environ:
        sys.exit("s3_client_cpu.py: no S3_ENDPOINT: run it under tests/s3/with-rgw.sh")
    data = os.path.abspath(args.data)
    data_bytes = tree_bytes(data)
    work = tempfile.mkdtemp(prefix="keel-s3cpu.", dir=args.work)
    client = s3client.S3Client.from_env()
    env = dict(os.environ, KEEL_PASSWORD="bench", KEEL_S3_ENDPOINT=os.environ["S3_ENDPOINT"],
               AWS_ACCESS_KEY_ID=os.environ["S3_ACCESS_KEY"],
               AWS_SECRET_ACCESS_KEY=os.environ["S3_SECRET_KEY"],
               AWS_REGION=os.environ.get("S3_REGION", "us-east-1"))
    digest = os.path.join(work, "source.digest")
    subprocess.run([sys.executable, os.path.join(here, "tree_compare.py"), "digest", data, digest],
                   check=True)
    records = []
    checked = set()
    try:
        for rep in range(args.repeat):
            order = list(enumerate(args.binaries))
            if rep % 2:
                order.reverse()
            for index, binary in order:
                bucket = f"s3cpu-{os.getpid()}-{rep}-{index}"
                client.close()
                client.request("PUT", f"/{bucket}")
                repos = {"s3": f"s3://{bucket}/repo"}
                if args.local:
                    repos["local"] = os.path.join(work, f"repo-{rep}-{index}")
                for where, repo in repos.items():
                    env["XDG_DATA_HOME"] = os.path.join(work, f"cache-{rep}-{index}-{where}")
                    restore = tempfile.mkdtemp(prefix="keel-s3cpu-restore.", dir=args.restore_dir)
                    log = os.path.join(work, f"{rep}-{index}-{where}")
                    run([binary, "init", "--repo", repo], log + "-init.log", env)
                    phases = {"backup": [binary, "backup", "--repo", repo, data, "--json"],
                              "restore": [binary, "restore", "latest", "--repo", repo, "--target",
                                          restore, "--json"]}
                    for phase, command in phases.items():
                        subprocess.run(["sync"], check=True)
                        before = server_cpu_s()
                        wall, user, system, rss = run(command, f"{log}-{phase}.log", env)
                        record = {"rep": rep, "binary": index, "path": binary, "target": where,
                                  "phase": phase, "wall_s": wall, "user_s": user, "sys_s": system,
                                  "rss_mib": rss, "server_cpu_s": server_cpu_s() - before,
                                  "data_bytes": data_bytes}
                        records.append(record)
                        print(f"rep {rep} binary {index} {where:5s} {phase:7s} wall {wall:6.2f} s  "
                              f"client {user:6.2f} u {system:5.2f} s = "
                              f"{(user + system) / data_bytes * 1e9:5.2f} CPU-s/GB  server "
                              f"{record['server_cpu_s']:5.2f} s  RSS {rss:4.0f} MiB", flush=True)
                    if (index, where) not in checked:
                        compare = subprocess.run(
                            [sys.executable, os.path.join(here, "tree_compare.py"), "check", digest,
                             restore + data], capture_output=True, text=True)
                        if compare.returncode != 0:
                            sys.exit(f"s3_client_cpu.py: {binary} restored something else from "
                                     f"{repo}:\n{compare.stdout}{compare.stderr}")
                        checked.add((index, where))
                    shutil.rmtree(restore)
                    shutil.rmtree(env["XDG_DATA_HOME"], ignore_errors=True)
                    if where == "local":
                        shutil.rmtree(repo)
                empty_bucket(client, bucket)
                client.request("DELETE", f"/{bucket}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        with open(args.json, "a") as f:
            for record in records:
                f.write(json.dumps(record) + "\n")

    print(f"\n{data_bytes / 1e9:.3f} GB of source; medians (ranges) of {args.repeat} runs")
    print("| binary | target | phase | client CPU-s/GB | client user s | client sys s | wall s "
          "| server CPU s |")
    print("|:--|:--|:--|--:|--:|--:|--:|--:|")
    for index, binary in enumerate(args.binaries):
        for where in ("s3", "local"):
            for phase in ("backup", "restore"):
                rows = [r for r in records
                        if r["binary"] == index and r["target"] == where and r["phase"] == phase]
                if not rows:
                    continue
                per_gb = [(r["user_s"] + r["sys_s"]) / data_bytes * 1e9 for r in rows]

                def med(key):
                    return statistics.median(r[key] for r in rows)
                server = f"{med('server_cpu_s'):.2f}" if where == "s3" else ""
                print(f"| {binary} | {where} | {phase} | {statistics.median(per_gb):.2f} "
                      f"({min(per_gb):.2f}-{max(per_gb):.2f}) | {med('user_s'):.2f} "
                      f"| {med('sys_s'):.2f} | {med('wall_s'):.2f} | {server} |")


if __name__ == "__main__":
    main()
