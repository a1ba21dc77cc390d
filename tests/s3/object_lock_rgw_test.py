#!/usr/bin/env python3
"""Object Lock repositories (docs/immutable.md) against the real Ceph RGW: a bucket created with
Object Lock takes `keel init --object-lock compliance`, a backup locks what it writes (RGW reports
COMPLIANCE and a date a period ahead), a locked version cannot be deleted, `keel forget` of a snapshot is refused
with the date (keep rules keep it), and a bucket without Object Lock is refused by init.

  tests/s3/with-rgw.sh python3 tests/s3/object_lock_rgw_test.py
"""

import datetime
import os
import shutil
import subprocess
import tempfile
import unittest
import uuid

import boto3
from botocore.exceptions import ClientError

KEEL = os.environ.get("KEEL_BIN", os.path.join(os.path.dirname(__file__), "../../build/cli/keel"))


class RgwObjectLock(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if "S3_ENDPOINT" not in os.environ:
            raise RuntimeError("S3_ENDPOINT is not set: run under tests/s3/with-rgw.sh")
        cls.s3 = boto3.client("s3", endpoint_url=os.environ["S3_ENDPOINT"], region_name="us-east-1",
                              aws_access_key_id=os.environ["S3_ACCESS_KEY"],
                              aws_secret_access_key=os.environ["S3_SECRET_KEY"])
        cls.tmp = tempfile.mkdtemp(prefix="keel-rgw-lock-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def keel(self, bucket, *args, expect=0):
        env = dict(os.environ, AWS_ACCESS_KEY_ID=os.environ["S3_ACCESS_KEY"],
                   AWS_SECRET_ACCESS_KEY=os.environ["S3_SECRET_KEY"], KEEL_PASSWORD="rgw lock",
                   XDG_DATA_HOME=os.path.join(self.tmp, "state"), KEEL_CATALOG=os.path.join(self.tmp, bucket + ".db"))
        p = subprocess.run([KEEL, *args, "--repo", f"s3://{bucket}/repo", "--endpoint", os.environ["S3_ENDPOINT"]],
                           env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, expect, f"keel {' '.join(args)}\n{p.stdout}\n{p.stderr}")
        return p

    def test_compliance_repository(self):
        plain = f"keel-plain-{uuid.uuid4().hex[:8]}"
        self.s3.create_bucket(Bucket=plain)
        p = self.keel(plain, "init", "--object-lock", "compliance", "--lock-period", "1d", expect=2)
        self.assertIn("has no Object Lock", p.stderr)

        bucket = f"keel-lock-{uuid.uuid4().hex[:8]}"
        self.s3.create_bucket(Bucket=bucket, ObjectLockEnabledForBucket=True)
        self.keel(bucket, "init", "--object-lock", "compliance", "--lock-period", "1d")
        source = os.path.join(self.tmp, "source")
        os.makedirs(source)
        with open(os.path.join(source, "data"), "wb") as f:
            f.write(os.urandom(6 << 20))
        for _ in range(2):
            self.keel(bucket, "backup", source)
        now = datetime.datetime.now(datetime.timezone.utc)
        keys = [o["Key"] for o in self.s3.list_objects_v2(Bucket=bucket, Prefix="repo/")["Contents"]]
        packs = [k for k in keys if k.startswith("repo/packs/")]
        self.assertTrue(packs)
        for key in keys:
            if key.startswith(("repo/running/", "repo/locks/")):
                continue
            head = self.s3.head_object(Bucket=bucket, Key=key)
            self.assertEqual(head.get("ObjectLockMode"), "COMPLIANCE", key)
            self.assertGreater(head["ObjectLockRetainUntilDate"], now + datetime.timedelta(days=1), key)
        version = self.s3.head_object(Bucket=bucket, Key=packs[0])["VersionId"]
        with self.assertRaises(ClientError) as refused:
            self.s3.delete_object(Bucket=bucket, Key=packs[0], VersionId=version)
        self.assertEqual(refused.exception.response["Error"]["Code"], "AccessDenied")
        p = self.keel(bucket, "forget", "latest", expect=8)
        self.assertIn("COMPLIANCE retention until", p.stderr)
        p = self.keel(bucket, "forget", "--keep-last", "1")
        self.assertIn("1 of them under Object Lock", p.stdout)
        self.keel(bucket, "check")


if __name__ == "__main__":
    unittest.main()
