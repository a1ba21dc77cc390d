"""kill -9 of `keel gateway` while clients write: a crash loop on raw and dedupe buckets.

Each round, client threads put (single and multipart), copy and delete objects of their own keys
in an unversioned and a versioned bucket, and the gateway is SIGKILLed at a random moment and
started again on the same state. Then, for every key:
- what a GET returns is whole: the exact bytes of one write (no torn or mixed object);
- it is the key's last acknowledged state, or the state of the one request that was in flight
  when the gateway died (a write may land without its answer; nothing acknowledged is lost);
- in the versioned bucket every acknowledged version is still listed and reads back as written,
  and any other version listed is one in-flight write, whole.
The keys a client owns are written by it alone, one request at a time, so each key's history is
a sequence. KEEL_CRASH_ROUNDS (default 4 per bucket kind) and KEEL_CRASH_SEED set the run."""
import concurrent.futures
import hashlib
import json
import os
import random
import subprocess
import threading
import time
import unittest

from gateway_harness import KEEL, Gateway, boto3_client

MIB = 1 << 20
ROUNDS = int(os.environ.get("KEEL_CRASH_ROUNDS", "4"))
SEED = int(os.environ.get("KEEL_CRASH_SEED", "1"))
CLIENTS = 6
KEYS_PER_CLIENT = 4


def body_of(write_id, size):
    """The bytes of write `write_id`: a header naming it, then bytes derived from it."""
    head = f"write {write_id} size {size}\n".encode()
    assert size >= len(head)
    return head + hashlib.shake_256(head).digest(size - len(head))


def write_of(data):
    """The write id whose bytes `data` are, or None if they are no write's whole bytes."""
    try:
        first = data.split(b"\n", 1)[0].decode()
        _, write_id, _, size = first.split(" ")
        write_id, size = int(write_id), int(size)
    except ValueError:
        return None
    return write_id if len(data) == size and body_of(write_id, size) == data else None


class WriteIds:
    """1, 2, 3, ... across threads."""

    def __init__(self):
        self.lock, self.last = threading.Lock(), 0

    def __next__(self):
        with self.lock:
            self.last += 1
            return self.last


class Client:
    """One writer: its own keys, one request at a time, each outcome recorded in order."""

    def __init__(self, index, gateway, buckets, rng, ids):
        self.index, self.gateway, self.buckets, self.rng, self.ids = index, gateway, buckets, rng, ids
        # (bucket, key) -> list of (state, acknowledged): state is a write id, None (absent)
        self.history = {(b, f"c{index}/k{i} é"): [(None, True)] for b in buckets for i in range(KEYS_PER_CLIENT)}
        # (bucket, key) -> {version id: write id} of acknowledged versioned writes
        self.versions = {}

    def run(self, stop):
        s3 = boto3_client(self.gateway, "http")
        while not stop.is_set():
            bucket = self.rng.choice(self.buckets)
            key = f"c{self.index}/k{self.rng.randrange(KEYS_PER_CLIENT)} é"
            history = self.history[(bucket, key)]
            kind = self.rng.choices(["put", "multipart", "copy", "delete"], [6, 1, 2, 2])[0]
            write_id = next(self.ids)
            try:
                if kind == "put":
                    state = write_id
                    size = self.rng.choice([40, 1000, 100_000, 700_000])  # the header fits
                    history.append((state, False))
                    answer = s3.put_object(Bucket=bucket, Key=key, Body=body_of(write_id, size))
                elif kind == "multipart":
                    state = write_id
                    data = body_of(write_id, 5 * MIB + self.rng.randrange(1, 300_000))
                    history.append((state, False))
                    upload = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
                    parts = []
                    for number, at in enumerate((0, 5 * MIB), start=1):
                        part = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=number,
                                              Body=data[at:at + 5 * MIB])
                        parts.append({"PartNumber": number, "ETag": part["ETag"]})
                    answer = s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload,
                                                          MultipartUpload={"Parts": parts})
                elif kind == "copy":
                    source = f"c{self.index}/k{self.rng.randrange(KEYS_PER_CLIENT)} é"
                    state = self.last_acknowledged(bucket, source)
                    if state is None or source == key:
                        continue
                    history.append((state, False))
                    answer = s3.copy_object(Bucket=bucket, Key=key, CopySource={"Bucket": bucket, "Key": source})
                else:
                    state = None
                    history.append((state, False))
                    answer = s3.delete_object(Bucket=bucket, Key=key)
            except Exception:  # the gateway died under this request: its outcome is unknown
                return
            history[-1] = (state, True)
            version = answer.get("VersionId")
            if version and version != "null" and state is not None:
                self.versions.setdefault((bucket, key), {})[version] = state

    def last_acknowledged(self, bucket, key):
        return [s for s, acknowledged in self.history[(bucket, key)] if acknowledged][-1]


class CrashLoop(unittest.TestCase):
    dedupe = False

    def test_acknowledged_writes_survive_kill_9_and_none_is_torn(self):
        gateway = Gateway(dedupe=self.dedupe)
        self.addCleanup(gateway.stop)
        setup = boto3_client(gateway, "http")
        buckets = ["crash-plain", "crash-versioned"]
        for b in buckets:
            setup.create_bucket(Bucket=b)
        setup.put_bucket_versioning(Bucket="crash-versioned", VersioningConfiguration={"Status": "Enabled"})
        rng = random.Random(SEED + (1000 if self.dedupe else 0))
        ids = WriteIds()
        clients = [Client(i, gateway, buckets, random.Random(rng.random()), ids) for i in range(CLIENTS)]
        self.acknowledged = self.landed_unanswered = 0
        for round_number in range(ROUNDS):
            stop = threading.Event()
            with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
                running = [pool.submit(c.run, stop) for c in clients]
                time.sleep(rng.uniform(0.3, 2.5))
                gateway.process.kill()  # SIGKILL while requests are in flight
                stop.set()
                for r in running:
                    r.result()
            gateway.crash_and_restart()
            self.verify(boto3_client(gateway, "http"), clients, f"round {round_number}")
        # What the crashes left (packs no record names, uploads never completed) goes to a
        # collection that repacks hard; every key and version must read as before.
        gateway.halt()
        gc = subprocess.run([KEEL, "gateway", "gc", "--config", gateway.config, "--grace", "0",
                             "--repack-threshold", "90%", "--json"], capture_output=True, text=True, timeout=300)
        gateway.start()
        self.assertEqual(gc.returncode, 0, gc.stderr)
        self.verify(boto3_client(gateway, "http"), clients, "after gateway gc")
        collected = [r["prune"] for r in json.loads(gc.stdout.splitlines()[-1])]
        print(f"\n{'dedupe' if self.dedupe else 'raw'}: {ROUNDS} kills, {self.acknowledged} requests acknowledged, "
              f"{self.landed_unanswered} writes landed without their answer; gc: "
              f"{sum(c['packs_deleted'] for c in collected)} packs deleted", flush=True)

    def verify(self, s3, clients, where):
        for client in clients:
            for (bucket, key), history in client.history.items():
                last = max(i for i, (_, acknowledged) in enumerate(history) if acknowledged)
                self.acknowledged += last
                allowed = {history[last][0]} | {state for state, _ in history[last + 1:]}
                try:
                    data = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
                    found = write_of(data)
                    self.assertIsNotNone(found, f"{where}: {bucket}/{key} reads {len(data)} bytes of no one write")
                except s3.exceptions.NoSuchKey:
                    found = None
                self.assertIn(found, allowed, f"{where}: {bucket}/{key} is write {found}; the last acknowledged "
                                              f"state is {history[last][0]}, in flight {history[last + 1:]}")
                self.landed_unanswered += found != history[last][0]
                # The state is now what was found: a write in flight that landed counts as done.
                client.history[(bucket, key)] = [(found, True)]
                if bucket != "crash-versioned":
                    continue
                listed = {}
                for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=key):
                    for v in page.get("Versions", []):
                        if v["Key"] == key:
                            listed[v["VersionId"]] = v
                acknowledged = client.versions.get((bucket, key), {})
                for version, write_id in acknowledged.items():
                    self.assertIn(version, listed, f"{where}: acknowledged version {version} of {key} is gone")
                for version in listed:
                    data = s3.get_object(Bucket=bucket, Key=key, VersionId=version)["Body"].read()
                    found = write_of(data)
                    self.assertIsNotNone(found, f"{where}: version {version} of {key} is torn")
                    if version in acknowledged:
                        self.assertEqual(found, acknowledged[version], f"{where}: version {version} of {key}")
                    acknowledged[version] = found
                client.versions[(bucket, key)] = acknowledged


class DedupeCrashLoop(CrashLoop):
    dedupe = True


if __name__ == "__main__":
    unittest.main()
