#!/usr/bin/env python3
"""Restore latency and throughput of keel against the raw read rate of the same target.

In one run, on one repository (a local directory, or with --s3 the S3 server named by
S3_ENDPOINT/S3_ACCESS_KEY/S3_SECRET_KEY, e.g. under tests/s3/with-rgw.sh):

  raw read      every pack read with parallel 16 MiB ranged reads (8 threads), no decryption:
                the most any restore could get out of this target
  verify-only   `keel drill --verify-only`: fetch, check, decrypt, decompress, hash every chunk
  restore       `keel restore` of the whole snapshot to a scratch directory (page cache writes)
  one file      `keel restore SNAP:FILE` of one ~1 MiB file, --repeat times: the restore's own
                time (from --json) and the whole command (process start, key derivation, catalog)

Throughputs are in stored (packed) bytes per second for raw read and verify-only, so the two
compare like for like; restore is in restored bytes per second. Prints a table and writes it
as markdown to bench/out/restore_bench.md.
"""

import argparse
import concurrent.futures
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "../tests/s3"))
RANGE = 16 << 20


def last_json(stdout):
    """keel --json: status lines while it runs, its document on the last line."""
    return json.loads(stdout.splitlines()[-1])


def run(cmd, env, check=True):
    started = time.monotonic()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    elapsed = time.monotonic() - started
    if check and p.returncode != 0:
        sys.exit(f"restore_bench: {' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
    return p, elapsed


class LocalPacks:
    def __init__(self, root):
        self.root = root

    def list(self):
        out = []
        for d, _, files in os.walk(os.path.join(self.root, "packs")):
            out += [(os.path.join(d, f), os.path.getsize(os.path.join(d, f))) for f in files]
        return out

    def reader(self):
        def read(key, offset, length):
            with open(key, "rb") as f:
                return len(os.pread(f.fileno(), length, offset))
        return read


class S3Packs:
    def __init__(self, bucket, prefix):
        import xml.etree.ElementTree as ET
        from s3client import S3Client
        self.bucket, self.prefix, self.ET, self.S3Client = bucket, prefix, ET, S3Client

    def list(self):
        s3, out, token = self.S3Client.from_env(), [], None
        while True:
            query = {"list-type": "2", "prefix": self.prefix + "packs/"}
            if token:
                query["continuation-token"] = token
            r = s3.request("GET", "/" + self.bucket, query=query)
            root = self.ET.fromstring(r.body)
            ns = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
            out += [(c.find(ns + "Key").text, int(c.find(ns + "Size").text)) for c in root.iter(ns + "Contents")]
            if root.findtext(ns + "IsTruncated") != "true":
                return out
            token = root.findtext(ns + "NextContinuationToken")

    def reader(self):
        import threading
        local = threading.local()

        def read(key, offset, length):
            if not hasattr(local, "s3"):
                local.s3 = self.S3Client.from_env()
            r = local.s3.request("GET", f"/{self.bucket}/{key}",
                                 headers={"Range": f"bytes={offset}-{offset + length - 1}"})
            assert r.status in (200, 206), r.status
            return len(r.body)
        return read


def raw_read(packs, threads=8):
    objects = packs.list()
    ranges = [(key, off, min(RANGE, size - off)) for key, size in objects for off in range(0, size, RANGE)]
    read = packs.reader()
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        total = sum(pool.map(lambda r: read(*r), ranges))
    return total, time.monotonic() - started


def pick_file(root, target=1 << 20):
    best = None
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            if os.path.islink(p):
                continue
            size = os.path.getsize(p)
            if best is None or abs(size - target) < abs(best[1] - target):
                best = (p, size)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keel", default=os.path.join(HERE, "../build/cli/keel"))
    ap.add_argument("--size-gib", type=float, default=1.0)
    ap.add_argument("--data", help="use this tree instead of generating one")
    ap.add_argument("--s3", action="store_true", help="repository on the S3 server in S3_ENDPOINT")
    ap.add_argument("--repeat", type=int, default=5, help="one-file restores to take the median of")
    ap.add_argument("--smoke", action="store_true", help="tiny dataset, for CI")
    args = ap.parse_args()
    if args.smoke:
        args.size_gib, args.repeat = 0.02, 2

    work = tempfile.mkdtemp(prefix="keel-restore-bench-")
    try:
        env = dict(os.environ, KEEL_PASSWORD="bench", XDG_DATA_HOME=os.path.join(work, "state"))
        data = args.data
        if not data:
            data = os.path.join(work, "data")
            run([sys.executable, os.path.join(HERE, "gen_dataset.py"), data, "--size-gib", str(args.size_gib)], env)
        if args.s3:
            bucket = "keel-restore-bench-" + secrets.token_hex(4)
            repo, packs = f"s3://{bucket}/repo", S3Packs(bucket, "repo/")
            env.update(KEEL_S3_ENDPOINT=os.environ["S3_ENDPOINT"], AWS_ACCESS_KEY_ID=os.environ["S3_ACCESS_KEY"],
                       AWS_SECRET_ACCESS_KEY=os.environ["S3_SECRET_KEY"],
                       AWS_REGION=os.environ.get("S3_REGION", "us-east-1"))
        else:
            repo = os.path.join(work, "repo")
            packs = LocalPacks(repo)
        env["KEEL_REPO"] = repo
        keel = os.path.abspath(args.keel)
        run([keel, "init", "-q"], env)
        backup = last_json(run([keel, "backup", data, "--json"], env)[0].stdout)

        stored, raw_s = raw_read(packs)
        drill = last_json(run([keel, "drill", "--verify-only", "--json"], env)[0].stdout)
        target = os.path.join(work, "restore")
        restore = last_json(run([keel, "restore", "latest", "--target", target, "--json"], env)[0].stdout)
        shutil.rmtree(target, ignore_errors=True)

        path, size = pick_file(data)
        own, whole = [], []
        for i in range(args.repeat):
            out = os.path.join(work, f"one{i}")
            p, wall = run([keel, "restore", f"latest:{os.path.abspath(path)}", "--target", out, "--json"], env)
            own.append(last_json(p.stdout)["seconds"])
            whole.append(wall)

        raw_rate = stored / raw_s
        verify_rate = stored / drill["seconds"]
        rows = [
            ("raw parallel ranged read of all packs", f"{stored / 1e6:.1f} MB stored", f"{raw_s:.2f} s",
             f"{raw_rate / 1e6:.1f} MB/s", "1.00x"),
            ("keel drill --verify-only", f"{stored / 1e6:.1f} MB stored", f"{drill['seconds']:.2f} s",
             f"{verify_rate / 1e6:.1f} MB/s", f"{verify_rate / raw_rate:.2f}x"),
            ("keel restore (whole snapshot)", f"{restore['bytes'] / 1e6:.1f} MB restored", f"{restore['seconds']:.2f} s",
             f"{restore['bytes'] / restore['seconds'] / 1e6:.1f} MB/s", ""),
            (f"one file of {size / 2**20:.2f} MiB, restore only (median of {args.repeat})", "", 
             f"{statistics.median(own) * 1000:.1f} ms", "", ""),
            (f"one file of {size / 2**20:.2f} MiB, whole command (median of {args.repeat})", "",
             f"{statistics.median(whole) * 1000:.1f} ms", "", ""),
        ]
        where = "S3 " + os.environ.get("S3_ENDPOINT", "") if args.s3 else "local directory"
        lines = [f"# keel restore vs the raw read rate ({where})", "",
                 f"- dataset: {backup['files']} files, {backup['bytes'] / 2**20:.1f} MiB; repository {stored / 2**20:.1f} MiB",
                 f"- drill: first file after {drill.get('first_file_seconds', -1) * 1000:.1f} ms", "",
                 "| what | bytes | time | rate | vs raw |", "|:--|--:|--:|--:|--:|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        text = "\n".join(lines) + "\n"
        print(text)
        os.makedirs(os.path.join(HERE, "out"), exist_ok=True)
        name = "restore_bench" + ("_s3" if args.s3 else "") + ("_smoke" if args.smoke else "") + ".md"
        with open(os.path.join(HERE, "out", name), "w") as f:
            f.write(text)
    finally:
        subprocess.run(["chmod", "-R", "u+rwX", work], check=False)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
