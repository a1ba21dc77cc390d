"""Driver of bench/gateway_scale.sh: N small objects in one bucket of one S3 endpoint.

PUT rate with C client processes (each its own kept-alive connection, SigV4 by
tests/s3/s3client.py, so the client costs little CPU), ListObjectsV2 page times
(1000 keys) at the start, middle and end of the key space, a DeleteObjects of 1000
keys, and the server's RSS and CPU time (/proc/PID/status and stat of the PIDs given),
after a tenth, half and all of the PUTs too. Prints one JSON
object. Fails (exit 1) on any unexpected status or a listing that is not the keys put."""
import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time
import xml.etree.ElementTree as ElementTree

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "s3"))
from s3client import S3Client, md5_base64  # noqa: E402

NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


def key_of(i):
    # Three levels as backup products write them (job/chain/block), in byte order of i.
    return f"job-{i // 100000:02d}/chain-{i // 1000 % 100:02d}/block-{i:08d}"


def client(args):
    return S3Client(args.endpoint, args.access_key, args.secret_key, timeout=120)


def put_range(job):
    args, first, end, step = job
    s3 = client(args)
    body = b"x" * args.body_bytes
    latencies = []
    for i in range(first, end, step):
        t0 = time.monotonic()
        r = s3.request("PUT", f"/{args.bucket}/{key_of(i)}", body=body, unsigned_payload=True)
        latencies.append(time.monotonic() - t0)
        if r.status != 200:
            raise RuntimeError(f"PUT {key_of(i)}: HTTP {r.status} {r.body[:300]!r}")
    s3.close()
    return latencies


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        fields = dict(line.split(":", 1) for line in f if ":" in line)
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def cpu_seconds(pid):
    # utime + stime of the process, all its threads (fields 14 and 15 of /proc/PID/stat).
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def file_bytes(path):
    return os.path.getsize(path) if os.path.exists(path) else 0


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def main():
    p = argparse.ArgumentParser()
    for name in ("endpoint", "access-key", "secret-key", "bucket"):
        p.add_argument("--" + name, required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--body-bytes", type=int, default=64)
    p.add_argument("--list-repeats", type=int, default=30)
    p.add_argument("--stages", type=int, default=0,
                   help="report after each of N equal stretches of the PUTs (default: a tenth, a half, all)")
    p.add_argument("--pid", action="append", default=[], help="NAME=PID of a server process (RSS, CPU)")
    p.add_argument("--state-dir", help="the gateway's state directory (metadata bytes per object)")
    args = p.parse_args()
    result = {"count": args.count, "clients": args.clients}
    s3 = client(args)
    r = s3.request("PUT", f"/{args.bucket}")
    if r.status != 200:
        raise SystemExit(f"CreateBucket {args.bucket}: HTTP {r.status} {r.body[:300]!r}")

    # The PUTs in stages (a tenth, then to a half, then the rest, or --stages equal
    # stretches): rate, PUT latency, server CPU per 1000 PUTs, RSS and metadata
    # bytes per object after each, to show what grows with the object count.
    pids = {spec.split("=")[0]: int(spec.split("=")[1]) for spec in args.pid}
    stages = []
    done, put_s = 0, 0.0
    cpu_start = {name: cpu_seconds(pid) for name, pid in pids.items()}
    with multiprocessing.Pool(args.clients) as pool:
        if args.stages > 0:
            ends = {max(1, args.count * n // args.stages) for n in range(1, args.stages + 1)}
        else:
            ends = {max(1, args.count // 10), max(1, args.count // 2), args.count}
        for end in sorted(ends):
            cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
            start = time.monotonic()
            latencies = [t for part in pool.map(put_range, [(args, done + c, end, args.clients)
                                                             for c in range(args.clients)]) for t in part]
            seconds = time.monotonic() - start
            stage = {"objects": end, "put_per_s": (end - done) / seconds,
                     "put_p50_ms": statistics.median(latencies) * 1000,
                     "put_p99_ms": percentile(latencies, 0.99) * 1000}
            for name, pid in pids.items():
                stage[f"cpu_ms_per_1000_{name}"] = (cpu_seconds(pid) - cpu0[name]) * 1e6 / (end - done)
                stage[f"rss_{name}_kib"] = rss_kib(pid)[0]
            if args.state_dir:
                db = os.path.join(args.state_dir, "gateway.db")
                stage["db_bytes_per_object"] = file_bytes(db) / end
                stage["wal_bytes"] = file_bytes(db + "-wal")
            stages.append(stage)
            print(json.dumps(stage), file=sys.stderr, flush=True)  # progress of a long run
            put_s += seconds
            done = end
    result["put_s"] = put_s
    result["put_per_s"] = args.count / put_s
    result["stages"] = stages
    for name, pid in pids.items():
        result[f"cpu_ms_per_1000_{name}"] = (cpu_seconds(pid) - cpu_start[name]) * 1e6 / args.count

    s3.close()
    s3 = client(args)  # a new connection: the server may have closed the one idle during the PUTs
    page_keys = min(1000, args.count)
    for where, first in (("start", 0), ("middle", args.count // 2), ("end", max(0, args.count - page_keys))):
        times = []
        for _ in range(args.list_repeats):
            query = {"list-type": "2", "max-keys": "1000"}
            if first:
                query["start-after"] = key_of(first - 1)
            t0 = time.monotonic()
            r = s3.request("GET", f"/{args.bucket}", query=query)
            times.append(time.monotonic() - t0)
            if r.status != 200:
                raise SystemExit(f"ListObjectsV2 at {where}: HTTP {r.status} {r.body[:300]!r}")
        keys = [c.findtext(NS + "Key") for c in ElementTree.fromstring(r.body).iter(NS + "Contents")]
        wanted = [key_of(i) for i in range(first, min(args.count, first + 1000))]
        if keys != wanted:
            raise SystemExit(f"ListObjectsV2 at {where}: {len(keys)} keys, not the {len(wanted)} put "
                             f"(first {keys[:2]} vs {wanted[:2]})")
        result[f"list_{where}_p50_ms"] = statistics.median(times) * 1000
        result[f"list_{where}_p99_ms"] = percentile(times, 0.99) * 1000

    doomed = [key_of(i) for i in range(args.count // 3, args.count // 3 + min(1000, args.count))]
    body = ("<Delete><Quiet>true</Quiet>" + "".join(f"<Object><Key>{k}</Key></Object>" for k in doomed) +
            "</Delete>").encode()
    t0 = time.monotonic()
    r = s3.request("POST", f"/{args.bucket}", query={"delete": ""}, body=body,
                   headers={"Content-MD5": md5_base64(body), "Content-Type": "application/xml"})
    result["delete_1000_ms"] = (time.monotonic() - t0) * 1000
    if r.status != 200 or b"<Error>" in r.body:
        raise SystemExit(f"DeleteObjects: HTTP {r.status} {r.body[:300]!r}")
    r = s3.request("GET", f"/{args.bucket}", query={"list-type": "2", "max-keys": "1",
                                                    "start-after": key_of(args.count // 3 - 1)})
    keys = [c.findtext(NS + "Key") for c in ElementTree.fromstring(r.body).iter(NS + "Contents")]
    after = args.count // 3 + len(doomed)
    if keys != ([key_of(after)] if after < args.count else []):
        raise SystemExit(f"after DeleteObjects the next key is {keys}, not {key_of(after)}")

    for spec in args.pid:
        name, pid = spec.split("=")
        result[f"rss_{name}_kib"], result[f"hwm_{name}_kib"] = rss_kib(int(pid))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
