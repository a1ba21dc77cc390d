#!/usr/bin/env python3
"""Run one benchmark command and append its costs to a JSON-lines file.

Records wall time, user and system CPU time and peak RSS of the command (from
getrusage of this process's children: this process runs nothing else before
the command finishes), then the size of the tool's repository and local cache
(du -sb). The command's stdout and stderr go to --log; on failure the tail of
the log is shown and the exit status is passed on.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time


def du_bytes(path):
    """Apparent size of a tree, as `du -sb` reports it (0 if it does not exist)."""
    if not os.path.exists(path):
        return 0
    output = subprocess.run(["du", "-sb", path], check=True, capture_output=True, text=True)
    return int(output.stdout.split()[0])


def log_tail(path, lines=20):
    with open(path, errors="replace") as log:
        return "".join(log.readlines()[-lines:])


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", required=True, help="JSON-lines file to append to")
    parser.add_argument("--rep", type=int, required=True, help="repetition number")
    parser.add_argument("--phase", required=True)
    parser.add_argument("--tool", required=True)
    parser.add_argument("--dataset", default="", help="which dataset (for reports with several)")
    parser.add_argument("--data-bytes", type=int, required=True,
                        help="dataset bytes this phase processes (for MB/s)")
    parser.add_argument("--repo", required=True, help="repository directory to size")
    parser.add_argument("--cache", required=True, help="local cache/catalog directory to size")
    parser.add_argument("--log", required=True, help="file for the command's output")
    parser.add_argument("--cwd", help="directory to run the command in")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARG...]")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")

    with open(args.log, "w") as log:
        started = time.perf_counter()
        try:
            status = subprocess.run(command, cwd=args.cwd, stdin=subprocess.DEVNULL,
                                    stdout=log, stderr=subprocess.STDOUT).returncode
        except OSError as error:  # not found, not executable, bad --cwd
            print(f"measure.py: cannot run {args.tool} {args.phase}: {error}", file=sys.stderr)
            return 127
        wall = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # before du runs

    if status != 0:
        print(f"measure.py: {args.tool} {args.phase} failed with exit status {status}: "
              f"{' '.join(command)}\n--- last lines of {args.log} ---\n"
              f"{log_tail(args.log)}", file=sys.stderr)
        return status

    record = {
        "rep": args.rep, "phase": args.phase, "tool": args.tool, "dataset": args.dataset,
        "data_bytes": args.data_bytes,
        "wall_s": wall, "user_s": usage.ru_utime, "sys_s": usage.ru_stime,
        "max_rss_kib": usage.ru_maxrss,  # Linux reports KiB
        "repo_bytes": du_bytes(args.repo), "cache_bytes": du_bytes(args.cache),
    }
    with open(args.records, "a") as records:
        records.write(json.dumps(record) + "\n")
    print(f"  {args.tool:7s} {args.phase:12s} {wall:8.2f} s wall "
          f"{usage.ru_utime + usage.ru_stime:8.2f} s CPU "
          f"{usage.ru_maxrss / 1024:7.0f} MiB RSS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
