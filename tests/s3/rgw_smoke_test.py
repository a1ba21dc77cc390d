#!/usr/bin/env python3
"""Checks the test S3 server and the fault proxy together: bucket and object round trips against
the real Ceph RGW directly, over TLS, through fault_proxy.py without rules, and through it with
every fault mode on (a retrying client must still end with the right data). Also pins the RGW
behaviours keel relies on (Content-MD5 and payload-hash checks, If-None-Match: *).

  tests/s3/with-rgw.sh python3 tests/s3/rgw_smoke_test.py     # about 5 s after RGW is up
"""

import hashlib
import http.client
import os
import ssl
import sys
import time
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fault_proxy import ProxyProcess  # noqa: E402
from s3client import S3Client, md5_base64  # noqa: E402

RETRYABLE_STATUS = (500, 502, 503)


def retrying(operation, attempts=12):
    """Calls operation() until it returns a non-retryable response, as a client's retry loop."""
    for attempt in range(attempts):
        try:
            response = operation()
            if response.status not in RETRYABLE_STATUS:
                return response
        except (OSError, http.client.HTTPException):
            pass
        time.sleep(0.01 * attempt)
    raise AssertionError(f"still failing after {attempts} attempts")


def new_bucket_name():
    return f"keel-smoke-{uuid.uuid4().hex[:12]}"


class RgwSmokeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if "S3_ENDPOINT" not in os.environ:
            raise RuntimeError("S3_ENDPOINT is not set: run under tests/s3/with-rgw.sh")
        cls.rgw_port = int(os.environ["S3_ENDPOINT"].rsplit(":", 1)[1])

    def round_trip(self, s3, call=lambda operation: operation()):
        """Bucket and object lifecycle; call wraps each request (e.g. in retries)."""
        bucket = new_bucket_name()
        self.assertEqual(call(lambda: s3.request("PUT", f"/{bucket}")).status, 200)
        data = os.urandom(3 * 1024 * 1024 + 17)
        key = f"/{bucket}/packs/00/pack one+ü.bin"  # needs URL encoding in the signature
        put = call(lambda: s3.request("PUT", key, body=data,
                                      headers={"Content-MD5": md5_base64(data)}))
        self.assertEqual(put.status, 200, put.body)
        self.assertEqual(put.headers["etag"], f'"{hashlib.md5(data).hexdigest()}"')
        got = call(lambda: s3.request("GET", key))
        self.assertEqual((got.status, got.body), (200, data))
        part = call(lambda: s3.request("GET", key, headers={"Range": "bytes=1000-1999"}))
        self.assertEqual((part.status, part.body), (206, data[1000:2000]))
        head = call(lambda: s3.request("HEAD", key))
        self.assertEqual(head.headers["content-length"], str(len(data)))
        listing = call(lambda: s3.request("GET", f"/{bucket}", query={"list-type": "2"}))
        self.assertIn(b"<Key>packs/00/pack one+\xc3\xbc.bin</Key>", listing.body)
        self.assertEqual(call(lambda: s3.request("DELETE", key)).status, 204)
        missing = call(lambda: s3.request("GET", key))
        self.assertEqual(missing.status, 404)
        self.assertIn(b"<Code>NoSuchKey</Code>", missing.body)
        self.assertEqual(call(lambda: s3.request("DELETE", f"/{bucket}")).status, 204)

    def test_direct(self):
        s3 = S3Client.from_env()
        self.round_trip(s3)
        s3.close()

    def test_server_checks_what_keel_relies_on(self):
        s3 = S3Client.from_env()
        bucket = new_bucket_name()
        self.assertEqual(s3.request("PUT", f"/{bucket}").status, 200)
        data = b"pack bytes" * 100
        bad_md5 = s3.request("PUT", f"/{bucket}/k", body=data,
                             headers={"Content-MD5": md5_base64(b"other")})
        self.assertEqual(bad_md5.status, 400)
        self.assertIn(b"<Code>BadDigest</Code>", bad_md5.body)
        # a payload that does not match its signed x-amz-content-sha256 is refused
        sign = s3.sign
        s3.sign = lambda m, p, q, h, _, now=None: sign(m, p, q, h, hashlib.sha256(b"x").hexdigest())
        bad_hash = s3.request("PUT", f"/{bucket}/k", body=data)
        s3.sign = sign
        self.assertEqual(bad_hash.status, 400)
        self.assertIn(b"<Code>XAmzContentSHA256Mismatch</Code>", bad_hash.body)
        # create-only writes
        once = {"If-None-Match": "*"}
        self.assertEqual(s3.request("PUT", f"/{bucket}/lock", body=b"1", headers=once).status, 200)
        self.assertEqual(s3.request("PUT", f"/{bucket}/lock", body=b"2", headers=once).status, 412)
        self.assertEqual(s3.request("GET", f"/{bucket}/lock").body, b"1")
        # a real server checks signatures
        wrong = S3Client(os.environ["S3_ENDPOINT"], os.environ["S3_ACCESS_KEY"], "not-the-secret")
        denied = wrong.request("GET", f"/{bucket}")
        wrong.close()
        self.assertEqual(denied.status, 403)
        self.assertIn(b"<Code>SignatureDoesNotMatch</Code>", denied.body)
        s3.request("DELETE", f"/{bucket}/lock")
        self.assertEqual(s3.request("DELETE", f"/{bucket}").status, 204)
        s3.close()

    def test_tls(self):
        if "S3_TLS_ENDPOINT" not in os.environ:
            self.skipTest("RGW runs without TLS (RGW_TLS=0)")
        s3 = S3Client.from_env(os.environ["S3_TLS_ENDPOINT"])
        self.round_trip(s3)
        s3.close()
        # the certificate is self-signed: without the CA file verification must fail
        untrusting = S3Client(os.environ["S3_TLS_ENDPOINT"], os.environ["S3_ACCESS_KEY"],
                              os.environ["S3_SECRET_KEY"])
        with self.assertRaises(ssl.SSLCertVerificationError):
            untrusting.request("GET", "/")

    def test_through_proxy_without_rules(self):
        with ProxyProcess(self.rgw_port, max_seconds=120) as proxy:
            s3 = S3Client.from_env(proxy.endpoint)
            self.round_trip(s3)
            s3.close()
            stats = proxy.stop()
        self.assertEqual(stats["requests"], 9)
        self.assertEqual(stats["forwarded"], 9)
        self.assertEqual(sum(stats["injected"].values()), 0)

    def test_through_proxy_with_faults_a_retrying_client_succeeds(self):
        # the first rule that fires wins: the sparser ones go first so each mode gets its turn
        rules = ["truncate:every=4,method=GET", "reset-response:every=3,method=GET",
                 "reset-request:every=2,method=PUT", "stall:every=5,seconds=0.2", "503:every=3"]
        with ProxyProcess(self.rgw_port, rules, seed=5, max_seconds=120) as proxy:
            s3 = S3Client.from_env(proxy.endpoint)
            self.round_trip(s3, call=retrying)
            s3.close()
            stats = proxy.stop()
        for mode in (rule.split(":")[0] for rule in rules):
            self.assertGreater(stats["injected"][mode], 0, f"{mode} never injected: {stats}")
        self.assertIn("injected:", proxy.stderr)


if __name__ == "__main__":
    unittest.main()
