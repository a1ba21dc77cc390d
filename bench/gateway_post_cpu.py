#!/usr/bin/env python3
"""The gateway's CPU cost of a browser POST upload (the multipart/form-data
reader in front of PutObject): user + system seconds of a raw-bucket
`keel gateway` for one object sent as a boto3 PutObject and as an anonymous
POST form (requests) into a public-write bucket, alternating, medians.
boto3 signs its PUT with a payload SHA-256 the gateway verifies; the form
has no payload hash (MD5 for the ETag only), so the figures bound the
reader's cost rather than isolate it.

    KEEL_BIN=build/cli/keel python3 bench/gateway_post_cpu.py [--mib 256] [--runs 5]
"""
import argparse
import os
import statistics
import sys

import requests

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "gateway"))
from gateway_harness import Gateway, boto3_client  # noqa: E402
from gateway_sse_cpu import cpu_seconds  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    gateway = Gateway()
    try:
        s3 = boto3_client(gateway, "http")
        s3.create_bucket(Bucket="bench", ACL="public-read-write")
        body = os.urandom(args.mib << 20)
        put, post = [], []
        for run in range(args.runs):
            before = cpu_seconds(gateway.process.pid)
            s3.put_object(Bucket="bench", Key=f"put{run}", Body=body)
            put.append(cpu_seconds(gateway.process.pid) - before)
            before = cpu_seconds(gateway.process.pid)
            r = requests.post(f"{gateway.urls['http']}/bench", files=[("key", (None, f"post{run}")), ("file", ("f", body))],
                              timeout=600)
            if r.status_code != 204:
                sys.exit(f"POST answered {r.status_code}: {r.text}")
            post.append(cpu_seconds(gateway.process.pid) - before)
        for name, figures in (("PutObject", put), ("POST form", post)):
            print(f"{name:10} {args.mib} MiB: cpu s {[round(x, 2) for x in figures]} median {statistics.median(figures):.2f}")
    finally:
        gateway.stop()


if __name__ == "__main__":
    main()
