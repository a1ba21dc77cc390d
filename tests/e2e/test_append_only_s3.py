"""Append-only backups on Ceph RGW with credentials that really lack the permission
(issue 18): a second RGW user whom the bucket policy allows only s3:PutObject,
s3:GetObject and s3:ListBucket. Its `keel backup --append-only` runs work; the attack
with its credentials (delete, DeleteObjects, forget, prune, overwrite with garbage)
loses nothing. Plain S3 cannot refuse an overwrite by permission, so the bucket is
versioned: check names the overwritten snapshot, and the owner brings the older
version back. Runs only against S3 (tests/s3/with-rgw.sh, ctest s3_rgw)."""
import json
import os
import random
import secrets
import subprocess
import unittest
import xml.etree.ElementTree as ET
from urllib.parse import quote
from xml.sax.saxutils import escape

from keelcli import ON_S3, KeelTestCase, tree_state
from s3client import S3Client, md5_base64

RGW_SH = os.path.join(os.path.dirname(__file__), "../s3/rgw.sh")


def write_files(root, seed, count=4, size=256 << 10):
    os.makedirs(root, exist_ok=True)
    rng = random.Random(seed)
    for i in range(count):
        with open(os.path.join(root, f"f{i}"), "wb") as f:
            f.write(rng.randbytes(size))


@unittest.skipUnless(ON_S3 and os.environ.get("RGW_DIR"), "needs the Ceph RGW of tests/s3/with-rgw.sh")
class AppendOnlyPolicyOnRgw(KeelTestCase):
    def setUp(self):
        super().setUp()
        self.owner = S3Client.from_env()
        self.bucket = self.repo.split("/")[2]
        uid = "appender-" + secrets.token_hex(4)
        access, secret = "APPEND" + secrets.token_hex(7).upper(), secrets.token_hex(20)
        subprocess.run([RGW_SH, "user", uid, access, secret], check=True, capture_output=True)
        self.appender = S3Client(os.environ["S3_ENDPOINT"], access, secret, os.environ.get("S3_REGION", "us-east-1"))
        self.appender_env = {"AWS_ACCESS_KEY_ID": access, "AWS_SECRET_ACCESS_KEY": secret}
        self.addCleanup(self.owner.close)
        self.addCleanup(self.appender.close)

        self.init()  # the owner's credentials make the bucket
        versioning = (b'<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
                      b"<Status>Enabled</Status></VersioningConfiguration>")
        self.expect(self.owner.request("PUT", f"/{self.bucket}", query={"versioning": ""}, body=versioning), 200)
        policy = {"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Principal": {"AWS": [f"arn:aws:iam:::user/{uid}"]},
            "Action": ["s3:PutObject", "s3:GetObject", "s3:ListBucket"],
            "Resource": [f"arn:aws:s3:::{self.bucket}", f"arn:aws:s3:::{self.bucket}/*"]}]}
        self.expect(self.owner.request("PUT", f"/{self.bucket}", query={"policy": ""},
                                       body=json.dumps(policy).encode()), (200, 204))

    def expect(self, response, status):
        statuses = status if isinstance(status, tuple) else (status,)
        self.assertIn(response.status, statuses, response.body[:500])
        return response

    def as_appender(self, *args, expect=0):
        return self.keel(*args, expect=expect, env=self.appender_env)

    def all_keys(self):
        return set(self.store.list(""))

    def test_append_only_backups_survive_the_appenders_attack(self):
        src, states = self.path("src"), {}
        for n in range(2):
            write_files(src, seed=n)
            states[self.keel_json("backup", "--append-only", src, env=self.appender_env)["snapshot"]] = tree_state(src)
        # The policy bites: the appender's own DELETE is refused by RGW.
        pack = next(k for k in self.all_keys() if k.startswith("packs/"))
        self.expect(self.appender.request("DELETE", f"/{self.bucket}/{self.store.prefix}{pack}"), 403)
        before = self.all_keys()

        p = self.as_appender("forget", "--keep-last", "1", expect=None)
        self.assertNotEqual(p.returncode, 0, p.stdout)
        self.assertIn("AccessDenied", p.stderr.decode())
        self.as_appender("prune", "--grace", "0", expect=None)
        self.assertTrue(before <= self.all_keys(), "the appender's forget/prune removed objects")
        objects = "".join(f"<Object><Key>{escape(self.store.prefix + k)}</Key></Object>" for k in sorted(before)[:10])
        body = f"<Delete>{objects}</Delete>".encode()
        r = self.appender.request("POST", f"/{self.bucket}", query={"delete": ""}, body=body,
                                  headers={"content-md5": md5_base64(body)})
        self.assertIn(r.status, (200, 403), r.body[:300])
        if r.status == 200:
            self.assertNotIn(b"<Deleted>", r.body)
        self.assertTrue(before <= self.all_keys(), "DeleteObjects with the appender's credentials removed objects")

        # An overwrite is a PutObject, which plain S3 cannot refuse by permission.
        victim = sorted(states)[0]
        key = f"{self.store.prefix}snapshots/{victim}"
        self.expect(self.appender.request("PUT", f"/{self.bucket}/{key}", body=os.urandom(512)), 200)
        p = self.keel("check", expect=None)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(victim, p.stdout.decode() + p.stderr.decode())

        # The versioned bucket kept the original: the owner copies it back.
        r = self.expect(self.owner.request("GET", f"/{self.bucket}", query={"versions": "", "prefix": key}), 200)
        root = ET.fromstring(r.body)
        ns = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
        versions = [(v.findtext(ns + "LastModified"), v.findtext(ns + "VersionId")) for v in root.iter(ns + "Version")]
        self.assertEqual(len(versions), 2, r.body)
        original = min(versions)[1]
        self.expect(self.owner.request("PUT", f"/{self.bucket}/{key}",
                                       headers={"x-amz-copy-source": f"/{self.bucket}/{quote(key)}?versionId={original}"}), 200)
        self.keel("check", "--read-data")
        for snapshot, state in states.items():
            out = self.path("out-" + snapshot[:8])
            self.keel("restore", snapshot, "--target", out, env={"XDG_DATA_HOME": self.path("fresh-" + snapshot[:8])})
            self.assertEqual(state, tree_state(out + src))


if __name__ == "__main__":
    unittest.main()
