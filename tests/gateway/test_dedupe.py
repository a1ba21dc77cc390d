"""The main client workflows against dedupe-mode buckets (objects chunked,
deduplicated, compressed and encrypted into a keel repository): awscli
(multipart, ranged get, sync), rclone (copy, check), boto3 (objects, copy,
ranges, listings, presigned URLs, versioning, Object Lock, tagging, SOSAPI,
metrics), then what only dedupe buckets do: a re-upload adds nothing to the
repository, and `keel gateway gc` reclaims deleted versions' chunks while
keeping locked and current ones. HTTP only: TLS is the same code path, which
test_clients and test_s3_features cover."""
import base64
import hashlib
import json
import os
import subprocess
import unittest
import urllib.request

import test_clients
import test_s3_features
from gateway_harness import KEEL, Gateway, boto3_client

GATEWAY = None


def setUpModule():
    global GATEWAY
    GATEWAY = Gateway(dedupe=True)
    test_clients.GATEWAY = GATEWAY
    test_s3_features.GATEWAY = GATEWAY


def tearDownModule():
    GATEWAY.stop()


class DedupeClientTest(test_clients.ClientTest):
    # s3cmd and restic add nothing the storage seam would see differently.
    test_s3cmd = None
    test_restic = None


class DedupeFeatureTest(test_s3_features.FeatureTest):
    pass


def pack_bytes(repo):
    total = 0
    for root, _, files in os.walk(os.path.join(repo, "packs")):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total


def dedupe_metrics():
    values = {}
    for line in urllib.request.urlopen(GATEWAY.metrics_url).read().decode().splitlines():
        if line.startswith("keel_gateway_dedupe_"):
            name, value = line.rsplit(" ", 1)
            values[name.split("{")[0]] = float(value)
    return values


class DedupeOnlyTest(unittest.TestCase):
    def test_reupload_adds_nothing_to_the_repository(self):
        s3 = boto3_client(GATEWAY, "http")
        s3.create_bucket(Bucket="reupload")
        body = os.urandom(3 << 20)
        s3.put_object(Bucket="reupload", Key="first", Body=body)
        stored = pack_bytes(GATEWAY.repo)
        self.assertGreater(stored, len(body) * 0.9)  # random data: stored once, about its size
        before = dedupe_metrics()
        put = s3.put_object(Bucket="reupload", Key="second", Body=body)
        self.assertEqual(put["ETag"], '"' + hashlib.md5(body).hexdigest() + '"')
        self.assertEqual(pack_bytes(GATEWAY.repo), stored)
        after = dedupe_metrics()
        self.assertEqual(after["keel_gateway_dedupe_logical_bytes_total"]
                         - before["keel_gateway_dedupe_logical_bytes_total"], len(body))
        self.assertEqual(after["keel_gateway_dedupe_stored_bytes_total"],
                         before["keel_gateway_dedupe_stored_bytes_total"])
        self.assertGreater(after["keel_gateway_dedupe_ratio"], before["keel_gateway_dedupe_ratio"])
        self.assertEqual(s3.get_object(Bucket="reupload", Key="second")["Body"].read(), body)

    def test_gc_reclaims_deleted_versions_and_keeps_locked_ones(self):
        s3 = boto3_client(GATEWAY, "http")
        s3.create_bucket(Bucket="collected", ObjectLockEnabledForBucket=True)
        locked, gone = os.urandom(2 << 20), os.urandom(2 << 20)
        md5 = base64.b64encode(hashlib.md5(locked).digest()).decode()
        s3.put_object(Bucket="collected", Key="locked", Body=locked, ContentMD5=md5, ObjectLockMode="COMPLIANCE",
                      ObjectLockRetainUntilDate="2099-01-01T00:00:00Z")
        s3.put_object(Bucket="collected", Key="locked", Body=b"newer")  # the locked version is noncurrent now
        version = s3.put_object(Bucket="collected", Key="gone", Body=gone)["VersionId"]
        s3.delete_object(Bucket="collected", Key="gone", VersionId=version)

        # gc refuses while the gateway serves the state directory.
        busy = subprocess.run([KEEL, "gateway", "gc", "--config", GATEWAY.config, "--grace", "0"],
                              capture_output=True, timeout=120)
        self.assertEqual(busy.returncode, 8, busy.stderr)
        # Plain keel prune sees only snapshots: it refuses a gateway's repository.
        plain = subprocess.run([KEEL, "prune", "--repo", GATEWAY.repo, "--password-file",
                                os.path.join(GATEWAY.dir, "password"), "--catalog",
                                os.path.join(GATEWAY.dir, "prune-catalog.db"), "--grace", "0"],
                               capture_output=True, text=True, timeout=120)
        self.assertEqual(plain.returncode, 2, plain.stderr)
        self.assertIn("keel gateway gc", plain.stderr)
        before = pack_bytes(GATEWAY.repo)
        GATEWAY.halt()
        try:
            p = subprocess.run([KEEL, "gateway", "gc", "--config", GATEWAY.config, "--grace", "0", "--json"],
                               capture_output=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stderr)
            result = json.loads(p.stdout.splitlines()[-1])[0]  # after the status lines
        finally:
            GATEWAY.start()
        self.assertGreaterEqual(result["prune"]["packs_deleted"], 1)
        self.assertIn("collected", result["buckets"])
        self.assertLessEqual(pack_bytes(GATEWAY.repo), before - len(gone) * 0.9)
        s3 = boto3_client(GATEWAY, "http")
        versions = s3.list_object_versions(Bucket="collected", Prefix="locked")["Versions"]
        oldest = [v for v in versions if not v["IsLatest"]][0]["VersionId"]
        self.assertEqual(s3.get_object(Bucket="collected", Key="locked", VersionId=oldest)["Body"].read(), locked)
        self.assertEqual(s3.get_object(Bucket="collected", Key="locked")["Body"].read(), b"newer")


if __name__ == "__main__":
    unittest.main()
