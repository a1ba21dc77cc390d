#!/usr/bin/env python3
"""The gateway's CPU cost of SSE-C: user + system seconds of a raw-bucket
`keel gateway` (tests/gateway/gateway_harness.py, loopback HTTP, boto3) for a
PUT and a GET of one object, plain and under SSE-C, alternating, medians.

    KEEL_BIN=build/cli/keel python3 bench/gateway_sse_cpu.py [--mib 64] [--runs 3]
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "gateway"))
from gateway_harness import Gateway, boto3_client  # noqa: E402


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    gateway = Gateway()
    try:
        s3 = boto3_client(gateway, "http")
        s3.create_bucket(Bucket="sse-cpu")
        body = os.urandom(args.mib << 20)
        customer = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": os.urandom(32)}
        seconds = {"plain": [], "sse-c": []}
        for _ in range(args.runs):
            for name, extra in (("plain", {}), ("sse-c", customer)):
                before = cpu_seconds(gateway.process.pid)
                s3.put_object(Bucket="sse-cpu", Key=name, Body=body, **extra)
                if s3.get_object(Bucket="sse-cpu", Key=name, **extra)["Body"].read() != body:
                    sys.exit(f"{name}: the object read back differs")
                seconds[name].append(cpu_seconds(gateway.process.pid) - before)
        for name, values in seconds.items():
            print(f"{name}: gateway CPU s per {args.mib} MiB PUT+GET {[round(v, 2) for v in values]}, "
                  f"median {statistics.median(values):.2f}")
    finally:
        gateway.stop()


if __name__ == "__main__":
    main()
