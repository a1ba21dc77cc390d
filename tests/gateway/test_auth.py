"""Authentication as S3 clients meet it (HTTP): Signature Version 2 from s3cmd
and boto3 (header and query string) for a user that has it enabled, AWS's
InvalidRequest for one that has not; RequestTimeTooSkewed, expired presigned
URLs, and CORS preflights without a CORS configuration."""
import datetime
import hashlib
import hmac
import http.client
import os
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

from gateway_harness import USERS, Gateway, boto3_client, client, error_of

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "s3"))
from s3client import S3Client  # noqa: E402

import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402

CAROL = ("AKIDCAROL00000000003", "carol-secret-key-000000000000000000000")
GATEWAY = None


def setUpModule():
    global GATEWAY
    GATEWAY = Gateway(extra_config=f"[user:carol]\naccess_key = {CAROL[0]}\nsecret_key = {CAROL[1]}\n"
                                   "signature_v2 = true\n")


def tearDownModule():
    GATEWAY.stop()


def v2_client(access, secret):
    """boto3 signing with Signature Version 2 ("s3"), also for presigned URLs."""
    return boto3.client("s3", endpoint_url=GATEWAY.urls["http"], aws_access_key_id=access,
                        aws_secret_access_key=secret, region_name="us-east-1",
                        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1},
                                      signature_version="s3"))


def raw_request(method, path, headers):
    host = GATEWAY.urls["http"].split("://")[1]
    connection = http.client.HTTPConnection(host, timeout=10)
    connection.request(method, path, headers=headers)
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response.status, body


class AuthTest(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="keel-auth-", dir=GATEWAY.dir)

    def s3cmd(self, access, secret, *args):
        host = GATEWAY.urls["http"].split("://")[1]
        cfg = os.path.join(self.work, "s3cfg")
        with open(cfg, "w") as f:
            f.write(f"[default]\naccess_key = {access}\nsecret_key = {secret}\nhost_base = {host}\n"
                    f"host_bucket = {host}\nuse_https = False\nbucket_location = us-east-1\nsignature_v2 = True\n")
        return subprocess.run([client("s3cmd"), "-c", cfg, "--signature-v2", *args], capture_output=True, text=True,
                              env=GATEWAY.env())

    def test_s3cmd_signature_v2(self):
        def ok(*args):
            run = self.s3cmd(*CAROL, *args)
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            return run.stdout
        ok("mb", "s3://carol-v2")
        src = os.path.join(self.work, "odd name+%.txt")
        with open(src, "wb") as f:
            f.write(os.urandom(100000))
        ok("put", src, "s3://carol-v2/dir/")
        self.assertIn("odd name+%.txt", ok("ls", "s3://carol-v2/dir/"))
        got = os.path.join(self.work, "got")
        ok("get", "s3://carol-v2/dir/odd name+%.txt", got)
        with open(src, "rb") as a, open(got, "rb") as b:
            self.assertEqual(a.read(), b.read())
        ok("del", "s3://carol-v2/dir/odd name+%.txt")
        ok("rb", "s3://carol-v2")

        # alice has no signature_v2: s3cmd recognises AWS's "Please use AWS4-HMAC-SHA256"
        # answer and resends with Version 4 (boto3 below sees the error itself).
        run = self.s3cmd(*USERS["alice"], "--debug", "ls", "s3://shared")
        self.assertEqual(run.returncode, 0, run.stderr[-2000:])
        self.assertIn("Endpoint requires signature v4", run.stdout + run.stderr)

    def test_boto3_signature_v2_header_and_query(self):
        carol = v2_client(*CAROL)
        carol.create_bucket(Bucket="carol-boto")
        carol.put_object(Bucket="carol-boto", Key="a key/ü", Body=b"v2 body", ContentType="text/plain",
                         Metadata={"x": "y"})
        got = carol.get_object(Bucket="carol-boto", Key="a key/ü")
        self.assertEqual(got["Body"].read(), b"v2 body")
        self.assertEqual(got["Metadata"], {"x": "y"})
        self.assertEqual([o["Key"] for o in carol.list_objects(Bucket="carol-boto")["Contents"]], ["a key/ü"])
        self.assertEqual(carol.head_object(Bucket="carol-boto", Key="a key/ü", Range="bytes=0-1")["ContentLength"], 2)

        url = carol.generate_presigned_url("get_object", Params={"Bucket": "carol-boto", "Key": "a key/ü"},
                                           ExpiresIn=300)
        self.assertIn("AWSAccessKeyId=", url)
        with urllib.request.urlopen(url, timeout=10) as r:
            self.assertEqual(r.read(), b"v2 body")
        expired = carol.generate_presigned_url("get_object", Params={"Bucket": "carol-boto", "Key": "a key/ü"},
                                               ExpiresIn=1)
        time.sleep(2.1)
        with self.assertRaises(urllib.error.HTTPError) as raised:
            urllib.request.urlopen(expired, timeout=10)
        self.assertEqual(raised.exception.code, 403)
        self.assertIn(b"<Code>AccessDenied</Code>", raised.exception.read())
        tampered = url.replace("a%20key", "b%20key")
        with self.assertRaises(urllib.error.HTTPError) as raised:
            urllib.request.urlopen(tampered, timeout=10)
        self.assertIn(b"<Code>SignatureDoesNotMatch</Code>", raised.exception.read())

        wrong = v2_client(CAROL[0], "not-the-secret")
        self.assertEqual(error_of(lambda: wrong.list_objects(Bucket="carol-boto"))["Error"]["Code"],
                         "SignatureDoesNotMatch")
        alice = v2_client(*USERS["alice"])
        refused = error_of(lambda: alice.list_objects(Bucket="shared"))
        self.assertEqual(refused["Error"]["Code"], "InvalidRequest")
        self.assertEqual(refused["ResponseMetadata"]["HTTPStatusCode"], 400)
        # carol still signs with V4 as well.
        v4 = boto3_client(GATEWAY, "http", access=CAROL[0], secret=CAROL[1])
        self.assertEqual(v4.get_object(Bucket="carol-boto", Key="a key/ü")["Body"].read(), b"v2 body")
        carol.delete_object(Bucket="carol-boto", Key="a key/ü")
        carol.delete_bucket(Bucket="carol-boto")

    def test_skew_and_presigned_expiry(self):
        signer = S3Client(GATEWAY.urls["http"], *USERS["alice"])
        for minutes, status in ((0, 200), (20, 403), (-20, 403)):
            headers = {}
            when = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=minutes)
            signer.sign("GET", "/shared", {}, headers, hashlib.sha256(b"").hexdigest(), now=when)
            got, body = raw_request("GET", "/shared", headers)
            self.assertEqual(got, status, body)
            if status == 403:
                self.assertIn(b"<Code>RequestTimeTooSkewed</Code>", body)

        alice = boto3_client(GATEWAY, "http")
        alice.put_object(Bucket="shared", Key="presigned", Body=b"p")
        url = alice.generate_presigned_url("get_object", Params={"Bucket": "shared", "Key": "presigned"}, ExpiresIn=1)
        time.sleep(2.1)
        with self.assertRaises(urllib.error.HTTPError) as raised:
            urllib.request.urlopen(url, timeout=10)
        self.assertEqual(raised.exception.code, 403)
        self.assertIn(b"<Code>AccessDenied</Code>", raised.exception.read())

    def test_date_header_instead_of_x_amz_date(self):
        """SigV4 with the timestamp in Date (no x-amz-date), and with both: x-amz-date is the one signed."""
        access, secret = USERS["alice"]
        now = datetime.datetime.now(datetime.timezone.utc)
        amz_date = now.strftime("%Y%m%dT%H%M%SZ")
        host = GATEWAY.urls["http"].split("://")[1]
        payload = hashlib.sha256(b"").hexdigest()

        def signed(extra):
            headers = dict(extra, host=host, **{"x-amz-content-sha256": payload})
            names = sorted(headers)
            canonical = "\n".join(["GET", "/shared", "", "".join(f"{n}:{headers[n]}\n" for n in names),
                                   ";".join(names), payload])
            scope = f"{amz_date[:8]}/us-east-1/s3/aws4_request"
            to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
            key = ("AWS4" + secret).encode()
            for part in (amz_date[:8], "us-east-1", "s3", "aws4_request"):
                key = hmac.new(key, part.encode(), hashlib.sha256).digest()
            signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
            headers["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={access}/{scope}, "
                                        f"SignedHeaders={';'.join(names)}, Signature={signature}")
            return headers

        self.assertEqual(raw_request("GET", "/shared", signed({"date": amz_date}))[0], 200)
        http_date = now.strftime("%a, %d %b %Y %H:%M:%S GMT")
        self.assertEqual(raw_request("GET", "/shared", signed({"date": http_date}))[0], 200)
        both = signed({"date": "Mon, 01 Jan 2001 00:00:00 GMT", "x-amz-date": amz_date})
        self.assertEqual(raw_request("GET", "/shared", both)[0], 200)
        # botocore given a Date header: since 1.31 it signs with Date alone, in email.utils.formatdate()'s
        # "-0000" form (conformance suites' header tests do this: every such request was refused);
        # before, it kept the Date as given next to X-Amz-Date, which wins.
        s3 = boto3_client(GATEWAY, "http")
        seen = []
        s3.meta.events.register("before-call.s3.PutObject",
                                lambda **kw: kw["params"]["headers"].update({"Date": "Bad Date"}))
        s3.meta.events.register("before-send.s3.PutObject", lambda **kw: seen.append(dict(kw["request"].headers)))
        s3.put_object(Bucket="shared", Key="dated", Body=b"bar")
        dated = seen[0]["Date"].endswith(b"-0000") and "X-Amz-Date" not in seen[0]
        self.assertTrue(dated or (seen[0]["Date"] == b"Bad Date" and "X-Amz-Date" in seen[0]), seen)

    def test_cors_preflight(self):
        status, body = raw_request("OPTIONS", "/shared/key", {"Access-Control-Request-Method": "GET"})
        self.assertEqual(status, 400)
        self.assertIn(b"<Code>BadRequest</Code>", body)
        status, body = raw_request("OPTIONS", "/shared/key", {"Origin": "http://example.com",
                                                              "Access-Control-Request-Method": "GET"})
        self.assertEqual(status, 403)
        self.assertIn(b"<Code>AccessForbidden</Code>", body)


if __name__ == "__main__":
    unittest.main(verbosity=2)
