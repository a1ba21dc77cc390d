"""Real S3 clients against `keel gateway`, each over HTTP and over TLS:
awscli, s3cmd, rclone, restic and boto3 (run with Debian's python3)."""
import filecmp
import hashlib
import os
import random
import subprocess
import unittest
import urllib.error
import urllib.request
import ssl

from gateway_harness import USERS, Gateway, boto3_client, client, error_of

GATEWAY = None


def setUpModule():
    global GATEWAY
    GATEWAY = Gateway()


def tearDownModule():
    GATEWAY.stop()


def make_tree(root, files=12, seed=1):
    rnd = random.Random(seed)
    for i in range(files):
        sub = os.path.join(root, f"dir{i % 3}")
        os.makedirs(sub, exist_ok=True)
        with open(os.path.join(sub, f"file {i}.bin"), "wb") as f:
            f.write(rnd.randbytes(rnd.randrange(0, 300_000)))


class ClientTest(unittest.TestCase):
    scheme = "http"
    bucket_counter = 0

    def setUp(self):
        self.work = os.path.join(GATEWAY.dir, f"work-{self.id().rsplit('.', 2)[-2]}-{self._testMethodName}")
        os.makedirs(self.work, exist_ok=True)
        self.url = GATEWAY.urls[self.scheme]

    def run_ok(self, args, env=None, input=None, timeout=300):
        p = subprocess.run(args, env=env or GATEWAY.env(scheme=self.scheme), input=input, capture_output=True,
                           timeout=timeout)
        if p.returncode != 0:
            self.fail(f"{' '.join(args)} exited {p.returncode}\nstdout: {p.stdout.decode(errors='replace')[-3000:]}\n"
                      f"stderr: {p.stderr.decode(errors='replace')[-3000:]}")
        return p.stdout.decode(errors="replace")

    def new_bucket_name(self, client_name):
        ClientTest.bucket_counter += 1
        return f"{client_name}-{self.scheme}-{ClientTest.bucket_counter}"

    def aws(self, *args, user="alice"):
        cmd = [client("aws"), "--endpoint-url", self.url, *args]
        return self.run_ok(cmd, env=GATEWAY.env(user, self.scheme))

    # --- awscli -------------------------------------------------------------------
    def test_awscli(self):
        bucket = self.new_bucket_name("aws")
        self.aws("s3", "mb", f"s3://{bucket}")
        big = os.path.join(self.work, "big.bin")
        with open(big, "wb") as f:
            rnd = random.Random(7)
            for _ in range(200):
                f.write(rnd.randbytes(1 << 20))
        self.aws("s3", "cp", big, f"s3://{bucket}/big/big.bin", "--only-show-errors")
        head = self.aws("s3api", "head-object", "--bucket", bucket, "--key", "big/big.bin")
        self.assertIn('-', head.split('"ETag"')[1].split("\n")[0], "a 200 MiB upload must be multipart")
        back = os.path.join(self.work, "back.bin")
        self.aws("s3", "cp", f"s3://{bucket}/big/big.bin", back, "--only-show-errors")
        self.assertTrue(filecmp.cmp(big, back, shallow=False))
        ranged = os.path.join(self.work, "ranged.bin")
        self.aws("s3api", "get-object", "--bucket", bucket, "--key", "big/big.bin", "--range", "bytes=1000-1999999",
                 ranged)
        with open(big, "rb") as f:
            f.seek(1000)
            expected = f.read(1999000)
        with open(ranged, "rb") as f:
            self.assertEqual(f.read(), expected)
        tree = os.path.join(self.work, "tree")
        make_tree(tree)
        self.aws("s3", "sync", tree, f"s3://{bucket}/tree", "--only-show-errors")
        listing = self.aws("s3", "ls", f"s3://{bucket}/tree/", "--recursive")
        self.assertEqual(len([line for line in listing.splitlines() if line.strip()]), 12)
        self.assertIn("PRE tree/", self.aws("s3", "ls", f"s3://{bucket}/"))
        # A second sync has nothing to do; a changed file goes up again.
        with open(os.path.join(tree, "dir0", "file 0.bin"), "ab") as f:
            f.write(b"more")
        out = self.aws("s3", "sync", tree, f"s3://{bucket}/tree")
        self.assertEqual(out.count("upload:"), 1, out)
        restored = os.path.join(self.work, "restored")
        self.aws("s3", "sync", f"s3://{bucket}/tree", restored, "--only-show-errors")
        self.assertEqual(subprocess.run(["diff", "-r", tree, restored]).returncode, 0)
        self.aws("s3", "rm", f"s3://{bucket}", "--recursive", "--only-show-errors")
        self.aws("s3", "rb", f"s3://{bucket}")

    # --- s3cmd --------------------------------------------------------------------
    def test_s3cmd(self):
        host = self.url.split("://")[1]
        access, secret = USERS["alice"]
        cfg = os.path.join(self.work, "s3cfg")
        with open(cfg, "w") as f:
            f.write(f"[default]\naccess_key = {access}\nsecret_key = {secret}\nhost_base = {host}\n"
                    f"host_bucket = {host}\nuse_https = {self.scheme == 'https'}\nbucket_location = us-east-1\n"
                    f"signature_v2 = False\nca_certs_file = {GATEWAY.cert if self.scheme == 'https' else ''}\n"
                    f"check_ssl_certificate = True\n")
        s3cmd = [client("s3cmd"), "-c", cfg]
        bucket = self.new_bucket_name("s3cmd")
        self.run_ok([*s3cmd, "mb", f"s3://{bucket}"])
        src = os.path.join(self.work, "up.bin")
        with open(src, "wb") as f:
            f.write(random.Random(3).randbytes(20 << 20))  # over s3cmd's 15 MiB multipart threshold
        small = os.path.join(self.work, "small.txt")
        with open(small, "w") as f:
            f.write("hello from s3cmd\n")
        self.run_ok([*s3cmd, "put", src, small, f"s3://{bucket}/in/"])
        listing = self.run_ok([*s3cmd, "ls", f"s3://{bucket}/in/"])
        self.assertIn("up.bin", listing)
        self.assertIn("small.txt", listing)
        got = os.path.join(self.work, "got.bin")
        self.run_ok([*s3cmd, "get", f"s3://{bucket}/in/up.bin", got])
        self.assertTrue(filecmp.cmp(src, got, shallow=False))
        self.run_ok([*s3cmd, "del", f"s3://{bucket}/in/up.bin", f"s3://{bucket}/in/small.txt"])
        self.assertNotIn("up.bin", self.run_ok([*s3cmd, "ls", f"s3://{bucket}/in/"]))
        self.run_ok([*s3cmd, "rb", f"s3://{bucket}"])

    # --- rclone -------------------------------------------------------------------
    def test_rclone(self):
        access, secret = USERS["alice"]
        env = dict(GATEWAY.env(scheme=self.scheme), RCLONE_CONFIG_GW_TYPE="s3", RCLONE_CONFIG_GW_PROVIDER="Other",
                   RCLONE_CONFIG_GW_ACCESS_KEY_ID=access, RCLONE_CONFIG_GW_SECRET_ACCESS_KEY=secret,
                   RCLONE_CONFIG_GW_ENDPOINT=self.url, RCLONE_CONFIG_GW_REGION="us-east-1",
                   RCLONE_CONFIG=os.path.join(self.work, "rclone.conf"))
        env.pop("AWS_CA_BUNDLE", None)  # rclone takes its CA through --ca-cert
        ca = ["--ca-cert", GATEWAY.cert] if self.scheme == "https" else []
        rclone = [client("rclone"), *ca, "--s3-upload-cutoff", "5M", "--s3-chunk-size", "5M"]
        tree = os.path.join(self.work, "tree")
        make_tree(tree, files=15, seed=5)
        with open(os.path.join(tree, "large.bin"), "wb") as f:
            f.write(random.Random(9).randbytes(12 << 20))  # multipart through rclone
        bucket = self.new_bucket_name("rclone")
        self.run_ok([*rclone, "mkdir", f"gw:{bucket}"], env=env)
        self.run_ok([*rclone, "copy", tree, f"gw:{bucket}/copy"], env=env)
        self.run_ok([*rclone, "check", tree, f"gw:{bucket}/copy"], env=env)
        # check must notice a difference.
        with open(os.path.join(tree, "dir1", "file 1.bin"), "ab") as f:
            f.write(b"changed")
        p = subprocess.run([*rclone, "check", tree, f"gw:{bucket}/copy"], env=env, capture_output=True)
        self.assertNotEqual(p.returncode, 0)

    # --- restic -------------------------------------------------------------------
    def test_restic(self):
        bucket = self.new_bucket_name("restic")
        env = dict(GATEWAY.env(scheme=self.scheme), RESTIC_PASSWORD="restic gateway test",
                   RESTIC_REPOSITORY=f"s3:{self.url}/{bucket}", RESTIC_CACHE_DIR=os.path.join(self.work, "cache"))
        ca = ["--cacert", GATEWAY.cert] if self.scheme == "https" else []
        restic = [client("restic"), *ca]
        data = os.path.join(self.work, "data")
        make_tree(data, files=30, seed=11)
        self.run_ok([*restic, "init"], env=env)
        self.run_ok([*restic, "backup", data], env=env)
        with open(os.path.join(data, "dir2", "new.bin"), "wb") as f:
            f.write(os.urandom(100_000))
        self.run_ok([*restic, "backup", data], env=env)
        self.run_ok([*restic, "check", "--read-data"], env=env)
        target = os.path.join(self.work, "restore")
        self.run_ok([*restic, "restore", "latest", "--target", target], env=env)
        self.assertEqual(subprocess.run(["diff", "-r", data, target + data]).returncode, 0)

    # --- boto3 --------------------------------------------------------------------
    def s3(self, user="alice", secret=None, access=None):
        return boto3_client(GATEWAY, self.scheme, user, secret, access)

    def error_code(self, fn):
        return error_of(fn)["Error"]["Code"]

    def test_boto3_objects_listing_and_presigned_urls(self):
        s3 = self.s3()
        bucket = self.new_bucket_name("boto")
        s3.create_bucket(Bucket=bucket)
        s3.create_bucket(Bucket=bucket)  # yours already: 200, as in us-east-1, so retried creates succeed
        body = os.urandom(3000)
        put = s3.put_object(Bucket=bucket, Key="docs/a b+c.txt", Body=body, ContentType="text/plain",
                            Metadata={"colour": "blue"})
        self.assertEqual(put["ETag"], '"' + hashlib.md5(body).hexdigest() + '"')
        got = s3.get_object(Bucket=bucket, Key="docs/a b+c.txt")
        self.assertEqual(got["Body"].read(), body)
        self.assertEqual(got["ContentType"], "text/plain")
        self.assertEqual(got["Metadata"], {"colour": "blue"})
        self.assertEqual(s3.get_object(Bucket=bucket, Key="docs/a b+c.txt", Range="bytes=-10")["Body"].read(),
                         body[-10:])
        self.assertEqual(self.error_code(lambda: s3.get_object(Bucket=bucket, Key="docs/a b+c.txt",
                                                               Range="bytes=5000-")), "InvalidRange")
        self.assertEqual(self.error_code(lambda: s3.get_object(Bucket=bucket, Key="missing")), "NoSuchKey")

        # Copy, with the metadata copied or replaced.
        s3.copy_object(Bucket=bucket, Key="copy1", CopySource={"Bucket": bucket, "Key": "docs/a b+c.txt"})
        self.assertEqual(s3.head_object(Bucket=bucket, Key="copy1")["Metadata"], {"colour": "blue"})
        s3.copy_object(Bucket=bucket, Key="copy2", CopySource={"Bucket": bucket, "Key": "docs/a b+c.txt"},
                       MetadataDirective="REPLACE", Metadata={"colour": "red"})
        self.assertEqual(s3.head_object(Bucket=bucket, Key="copy2")["Metadata"], {"colour": "red"})
        self.assertEqual(s3.get_object(Bucket=bucket, Key="copy2")["Body"].read(), body)

        # Pagination across v1 and v2, with a delimiter and URL encoding.
        keys = [f"many/{i:03d}" for i in range(25)] + ["many/sub/x", "many/sub/y", "many/\u00e9t\u00e9"]
        for key in keys:
            s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
        seen = []
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="many/", PaginationConfig={"PageSize": 7}):
            seen += [o["Key"] for o in page.get("Contents", [])]
        self.assertEqual(seen, sorted(keys, key=lambda k: k.encode()))
        seen, prefixes = [], []
        for page in s3.get_paginator("list_objects").paginate(Bucket=bucket, Prefix="many/", Delimiter="/",
                                                              PaginationConfig={"PageSize": 4}):
            seen += [o["Key"] for o in page.get("Contents", [])]
            prefixes += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
        self.assertEqual(prefixes, ["many/sub/"])
        self.assertEqual(len(seen), 26)

        # DeleteObjects, quiet and not.
        result = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[:10]]})
        self.assertEqual(len(result["Deleted"]), 10)
        result = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[10:]], "Quiet": True})
        self.assertNotIn("Deleted", result)
        self.assertEqual(s3.list_objects_v2(Bucket=bucket, Prefix="many/")["KeyCount"], 0)

        # Presigned URLs: GET and PUT without credentials, and an altered one refused.
        context = ssl.create_default_context(cafile=GATEWAY.cert) if self.scheme == "https" else None
        url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "docs/a b+c.txt"}, ExpiresIn=60)
        with urllib.request.urlopen(url, context=context) as r:
            self.assertEqual(r.read(), body)
        put_url = s3.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "presigned"}, ExpiresIn=60)
        request = urllib.request.Request(put_url, data=b"via presigned PUT", method="PUT")
        urllib.request.urlopen(request, context=context).read()
        self.assertEqual(s3.get_object(Bucket=bucket, Key="presigned")["Body"].read(), b"via presigned PUT")
        with self.assertRaises(urllib.error.HTTPError) as raised:
            urllib.request.urlopen(url.replace("a%20b", "a%20c"), context=context)
        self.assertEqual(raised.exception.code, 403)
        self.assertIn(b"SignatureDoesNotMatch", raised.exception.read())

    def test_boto3_multipart(self):
        s3 = self.s3()
        bucket = self.new_bucket_name("mpu")
        s3.create_bucket(Bucket=bucket)
        upload = s3.create_multipart_upload(Bucket=bucket, Key="big", Metadata={"k": "v"})["UploadId"]
        parts_data = [os.urandom(5 << 20), os.urandom(5 << 20), os.urandom(1234)]
        parts = []
        for number, data in enumerate(parts_data, 1):
            etag = s3.upload_part(Bucket=bucket, Key="big", UploadId=upload, PartNumber=number, Body=data)["ETag"]
            parts.append({"PartNumber": number, "ETag": etag})
        listed = s3.list_parts(Bucket=bucket, Key="big", UploadId=upload)
        self.assertEqual([p["Size"] for p in listed["Parts"]], [len(d) for d in parts_data])
        self.assertEqual([u["UploadId"] for u in s3.list_multipart_uploads(Bucket=bucket)["Uploads"]], [upload])
        bad = [dict(parts[0]), dict(parts[1], ETag='"00000000000000000000000000000000"')]
        self.assertEqual(self.error_code(lambda: s3.complete_multipart_upload(
            Bucket=bucket, Key="big", UploadId=upload, MultipartUpload={"Parts": bad})), "InvalidPart")
        done = s3.complete_multipart_upload(Bucket=bucket, Key="big", UploadId=upload, MultipartUpload={"Parts": parts})
        md5s = b"".join(hashlib.md5(d).digest() for d in parts_data)
        self.assertEqual(done["ETag"], f'"{hashlib.md5(md5s).hexdigest()}-3"')
        self.assertEqual(s3.get_object(Bucket=bucket, Key="big")["Body"].read(), b"".join(parts_data))
        self.assertEqual(s3.head_object(Bucket=bucket, Key="big")["Metadata"], {"k": "v"})
        # Ranges across part boundaries.
        whole = b"".join(parts_data)
        edge = (5 << 20) - 10
        self.assertEqual(s3.get_object(Bucket=bucket, Key="big", Range=f"bytes={edge}-{edge + 9999}")["Body"].read(),
                         whole[edge:edge + 10000])
        # UploadPartCopy from the completed object, then abort.
        second = s3.create_multipart_upload(Bucket=bucket, Key="copy")["UploadId"]
        copied = s3.upload_part_copy(Bucket=bucket, Key="copy", UploadId=second, PartNumber=1,
                                     CopySource={"Bucket": bucket, "Key": "big"}, CopySourceRange=f"bytes={edge}-{edge + 99}")
        self.assertEqual(copied["CopyPartResult"]["ETag"], '"' + hashlib.md5(whole[edge:edge + 100]).hexdigest() + '"')
        s3.abort_multipart_upload(Bucket=bucket, Key="copy", UploadId=second)
        self.assertEqual(self.error_code(lambda: s3.list_parts(Bucket=bucket, Key="copy", UploadId=second)),
                         "NoSuchUpload")

    def test_boto3_authentication_and_access(self):
        alice = self.s3()
        self.assertEqual(self.error_code(lambda: self.s3(secret="wrong" * 8).list_buckets()), "SignatureDoesNotMatch")
        self.assertEqual(self.error_code(lambda: self.s3(access="AKIDNOBODY0000000000").list_buckets()),
                         "InvalidAccessKeyId")
        alice.put_object(Bucket="alice-private", Key="secret.txt", Body=b"alice only")
        alice.put_object(Bucket="shared", Key="readme.txt", Body=b"for bob to read")
        bob = self.s3("bob")
        self.assertEqual(self.error_code(lambda: bob.get_object(Bucket="alice-private", Key="secret.txt")),
                         "AccessDenied")
        self.assertEqual(self.error_code(lambda: bob.list_objects_v2(Bucket="alice-private")), "AccessDenied")
        self.assertEqual(self.error_code(lambda: bob.put_object(Bucket="shared", Key="x", Body=b"no")), "AccessDenied")
        self.assertEqual(bob.get_object(Bucket="shared", Key="readme.txt")["Body"].read(), b"for bob to read")
        names = {b["Name"] for b in bob.list_buckets()["Buckets"]}
        self.assertIn("shared", names)
        self.assertNotIn("alice-private", names)
        # No credentials at all.
        context = ssl.create_default_context(cafile=GATEWAY.cert) if self.scheme == "https" else None
        with self.assertRaises(urllib.error.HTTPError) as raised:
            urllib.request.urlopen(f"{self.url}/shared/readme.txt", context=context)
        self.assertEqual(raised.exception.code, 403)
        self.assertIn(b"<Code>AccessDenied</Code>", raised.exception.read())


class TlsClientTest(ClientTest):
    scheme = "https"


if __name__ == "__main__":
    unittest.main()
