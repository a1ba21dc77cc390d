"""Browser-based POST uploads (HTML forms with a policy document) against a raw
and a dedupe `keel gateway`, with requests as the browser: what the POST
Object cases of an S3 conformance suite assert (status and error codes, the
policy's conditions and expiry, content-length-range, success_action_status
and success_action_redirect, the acl, metadata and tagging fields,
${filename}, SSE-C and SSE-KMS fields, Version 4 and Version 2 signatures)."""
import base64
import datetime
import hashlib
import hmac
import json
import os
import tempfile
import unittest
import xml.etree.ElementTree as ET

import requests

from gateway_harness import USERS, Gateway, boto3_client, stop_all

GATEWAYS = {}
CAROL = ("AKIDCAROL00000000003", "carol-secret-key-000000000000000000000")  # may sign with Version 2
CAROL_CONFIG = f"[user:carol]\naccess_key = {CAROL[0]}\nsecret_key = {CAROL[1]}\nsignature_v2 = true\n"
KMS_KEY = os.path.join(tempfile.mkdtemp(prefix="keel-post-kms-"), "form.key")  # made at the gateway's first start
CAROL_CONFIG += f"[kms]\nform-key = {KMS_KEY}\n"


def setUpModule():
    GATEWAYS["raw"] = Gateway(extra_config=CAROL_CONFIG)
    GATEWAYS["dedupe"] = Gateway(dedupe=True, extra_config=CAROL_CONFIG)


def tearDownModule():
    stop_all(GATEWAYS)


def policy_of(conditions, seconds=600):
    expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds)
    document = {"expiration": expires.strftime("%Y-%m-%dT%H:%M:%SZ"), "conditions": conditions}
    return base64.b64encode(json.dumps(document).encode()).decode()


def v2_fields(policy, user=CAROL):
    signature = base64.b64encode(hmac.new(user[1].encode(), policy.encode(), hashlib.sha1).digest()).decode()
    return [("AWSAccessKeyId", user[0]), ("policy", policy), ("signature", signature)]


def v4_conditions(user=USERS["alice"]):
    """The x-amz-* fields a Version 4 form carries, as policy conditions and as fields."""
    now = datetime.datetime.now(datetime.timezone.utc)
    credential = f"{user[0]}/{now:%Y%m%d}/us-east-1/s3/aws4_request"
    return [("x-amz-algorithm", "AWS4-HMAC-SHA256"), ("x-amz-credential", credential),
            ("x-amz-date", f"{now:%Y%m%dT%H%M%SZ}")]


def v4_signature(policy, date, user=USERS["alice"]):
    key = ("AWS4" + user[1]).encode()
    for part in (date, "us-east-1", "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, policy.encode(), hashlib.sha256).hexdigest()


class PostObjectTest(unittest.TestCase):
    mode = "raw"
    counter = 0

    def setUp(self):
        self.gateway = GATEWAYS[self.mode]
        self.s3 = boto3_client(self.gateway, "http")
        # What carol's forms write (acl private) is hers: as on S3, the bucket's owner may not read it.
        self.carol = boto3_client(self.gateway, "http", access=CAROL[0], secret=CAROL[1])

    def new_bucket(self, **create):
        PostObjectTest.counter += 1
        bucket = f"post-{self.mode}-{PostObjectTest.counter}"
        self.s3.create_bucket(Bucket=bucket, **create)
        return bucket

    def post(self, bucket, fields, file=("upload.txt", b"bar"), **options):
        url = f"{self.gateway.urls['http']}/{bucket}"
        return requests.post(url, files=[(n, (None, v)) for n, v in fields] + [("file", file)], timeout=30, **options)

    def error(self, response):
        return ET.fromstring(response.content).find("Code").text

    def signed_v2(self, bucket, key_condition, extra_conditions=(), **policy):
        conditions = [{"bucket": bucket}, key_condition, {"acl": "private"},
                      ["starts-with", "$Content-Type", "text/"], *extra_conditions]
        return v2_fields(policy_of(conditions, **policy))

    def test_anonymous_upload_to_a_public_write_bucket_with_acl_and_status(self):
        bucket = self.new_bucket(ACL="public-read-write")
        r = self.post(bucket, [("key", "foo.txt"), ("acl", "public-read"), ("Content-Type", "text/plain")])
        self.assertEqual(r.status_code, 204, r.text)
        got = self.s3.get_object(Bucket=bucket, Key="foo.txt")
        self.assertEqual(got["Body"].read(), b"bar")
        self.assertEqual(got["ContentType"], "text/plain")
        self.assertEqual(r.headers["ETag"], got["ETag"])
        # The acl field took effect: anyone reads it.
        self.assertEqual(requests.get(f"{self.gateway.urls['http']}/{bucket}/foo.txt", timeout=30).content, b"bar")
        # success_action_status 201 answers a PostResponse (no namespace), an unknown one 204.
        r = self.post(bucket, [("key", "foo.txt"), ("success_action_status", "201")])
        self.assertEqual(r.status_code, 201)
        self.assertEqual(ET.fromstring(r.content).find("Key").text, "foo.txt")
        self.assertEqual(ET.fromstring(r.content).find("Bucket").text, bucket)
        r = self.post(bucket, [("key", "foo.txt"), ("success_action_status", "404")])
        self.assertEqual((r.status_code, r.content), (204, b""))
        # Without a public grant an anonymous form is refused; no file at all is a 400.
        private = self.new_bucket()
        self.assertEqual(self.post(private, [("key", "foo.txt")]).status_code, 403)
        self.assertEqual(self.error(requests.post(f"{self.gateway.urls['http']}/{bucket}",
                                                  files=[("key", (None, "x"))], timeout=30)),
                         "IncorrectNumberOfFilesInPostRequest")

    def test_version_4_form_with_metadata_tagging_and_filename(self):
        bucket = self.new_bucket()
        amz = v4_conditions()
        policy = policy_of([{"bucket": bucket}, ["starts-with", "$key", "up/"], ["starts-with", "$x-amz-meta-foo", "bar"],
                            ["eq", "$tagging", "<Tagging><TagSet><Tag><Key>k</Key><Value>v</Value></Tag></TagSet></Tagging>"],
                            ["content-length-range", 0, 4 << 20], *[{n: v} for n, v in amz]])
        fields = [("key", "up/${filename}"), ("x-amz-meta-foo", "barclamp"), ("policy", policy),
                  ("tagging", "<Tagging><TagSet><Tag><Key>k</Key><Value>v</Value></Tag></TagSet></Tagging>"), *amz,
                  ("x-amz-signature", v4_signature(policy, amz[1][1].split("/")[1]))]
        # A file that holds delimiter-like bytes across the server's read pieces comes back whole.
        body = (b"\r\n--" + b"x" * 70 + b"\r\n") * 20000
        r = self.post(bucket, fields, file=("f.bin", body))
        self.assertEqual(r.status_code, 204, r.text)
        got = self.s3.get_object(Bucket=bucket, Key="up/f.bin")
        self.assertEqual(hashlib.sha256(got["Body"].read()).hexdigest(), hashlib.sha256(body).hexdigest())
        self.assertEqual(got["Metadata"], {"foo": "barclamp"})
        self.assertEqual(self.s3.get_object_tagging(Bucket=bucket, Key="up/f.bin")["TagSet"], [{"Key": "k", "Value": "v"}])
        # A wrong signature, and a field the policy does not name.
        bad = [(n, v[::-1] if n == "x-amz-signature" else v) for n, v in fields]
        self.assertEqual(self.error(self.post(bucket, bad)), "SignatureDoesNotMatch")
        r = self.post(bucket, fields[:-1] + [("x-amz-meta-extra", "1"), fields[-1]])
        self.assertEqual((r.status_code, self.error(r)), (403, "AccessDenied"))
        self.assertIn("Extra input fields", r.text)

    def test_checksum_field_needs_no_condition_and_is_checked(self):
        # x-amz-checksum-* only narrows what the upload may be, so the policy need not name it
        # (as the conformance suite's POST checksum case sends it); a wrong one refuses the upload.
        bucket = self.new_bucket()
        amz = v4_conditions()
        policy = policy_of([{"bucket": bucket}, ["starts-with", "$key", "sum/"], *[{n: v} for n, v in amz]])
        body = b"x" * (2 << 20)
        right = base64.b64encode(hashlib.sha256(body).digest()).decode()

        def fields(checksum):
            return [("key", "sum/obj"), ("policy", policy), *amz, ("x-amz-checksum-sha256", checksum),
                    ("x-amz-signature", v4_signature(policy, amz[1][1].split("/")[1]))]

        r = self.post(bucket, fields(right), file=("f.bin", body))
        self.assertEqual(r.status_code, 204, r.text)
        head = self.s3.head_object(Bucket=bucket, Key="sum/obj", ChecksumMode="ENABLED")
        self.assertEqual(head["ResponseMetadata"]["HTTPHeaders"].get("x-amz-checksum-sha256"), right)
        wrong = base64.b64encode(hashlib.sha256(b"other").digest()).decode()
        for checksum, code in ((wrong, "BadDigest"), ("sailorjerry", "InvalidRequest")):
            r = self.post(bucket, fields(checksum), file=("f.bin", b"y" * 100))
            self.assertEqual((r.status_code, self.error(r)), (400, code), r.text)
        self.assertEqual(self.s3.get_object(Bucket=bucket, Key="sum/obj")["Body"].read(), body)

    def test_version_2_form_follows_the_users_signature_v2_switch(self):
        bucket = self.new_bucket(ACL="public-read-write")
        fields = [("key", "foo.txt"), ("acl", "private"), ("Content-Type", "text/plain")]
        r = self.post(bucket, fields + self.signed_v2(bucket, ["starts-with", "$key", "foo"]))
        self.assertEqual(r.status_code, 204, r.text)
        self.assertEqual(self.carol.get_object(Bucket=bucket, Key="foo.txt")["Body"].read(), b"bar")
        # alice has signature_v2 off: the error header and query V2 get.
        alice = v2_fields(policy_of([{"bucket": bucket}, ["starts-with", "$key", ""], {"acl": "private"},
                                     ["starts-with", "$Content-Type", ""]]), user=USERS["alice"])
        r = self.post(bucket, fields + alice)
        self.assertEqual((r.status_code, self.error(r)), (400, "InvalidRequest"))
        self.assertIn("AWS4-HMAC-SHA256", r.text)
        # Missing a signature is a 400, a key nobody has 403.
        self.assertEqual(self.post(bucket, fields + self.signed_v2(bucket, ["starts-with", "$key", ""])[:2]).status_code, 400)
        unknown = [(n, "AKIDNOBODY0000000000" if n == "AWSAccessKeyId" else v)
                   for n, v in self.signed_v2(bucket, ["starts-with", "$key", ""])]
        self.assertEqual(self.post(bucket, fields + unknown).status_code, 403)

    def test_policy_expiry_conditions_and_malformed_documents(self):
        # carol signs: she may write into the bucket by its ACL, as the suite's users do.
        bucket = self.new_bucket(ACL="public-read-write")
        fields = [("key", "foo.txt"), ("acl", "private"), ("Content-Type", "text/plain")]
        key = ["starts-with", "$key", "foo"]
        r = self.post(bucket, fields + self.signed_v2(bucket, key, seconds=-600))
        self.assertEqual((r.status_code, self.error(r)), (403, "AccessDenied"))
        self.assertIn("Policy expired", r.text)
        r = self.post(bucket, fields + self.signed_v2(bucket, ["starts-with", "$key", "bar"]))
        self.assertEqual((r.status_code, self.error(r)), (403, "AccessDenied"))
        # A condition on a field the form lacks fails; names and operators in any case pass.
        self.assertEqual(self.post(bucket, fields + self.signed_v2(bucket, key, [["eq", "$x-amz-meta-foo", "x"]])).status_code, 403)
        mixed = v2_fields(policy_of([{"bUcKeT": bucket}, ["StArTs-WiTh", "$KeY", "foo"], {"AcL": "private"},
                                     ["starts-with", "$CoNtEnT-TyPe", "text/plain"]]))
        self.assertEqual(self.post(bucket, [("kEy", "foo.txt"), ("aCl", "private"), ("Content-Type", "text/plain")] + mixed).status_code, 204)
        # The bucket must be named by a condition, and be the one posted to.
        unbound = v2_fields(policy_of([key, {"acl": "private"}, ["starts-with", "$Content-Type", ""]]))
        self.assertEqual(self.post(bucket, fields + unbound).status_code, 403)
        self.assertEqual(self.post(self.new_bucket(ACL="public-read-write"), fields + self.signed_v2(bucket, key)).status_code, 403)
        for document in ({"conditions": [key]}, {"EXPIRATION": "2099-01-01T00:00:00Z", "conditions": [key]},
                         {"expiration": "2099-01-01 00:00:00+00:00", "conditions": [key]},
                         {"expiration": "2099-01-01T00:00:00Z"}, {"expiration": "2099-01-01T00:00:00Z", "conditions": [{}]},
                         {"expiration": "2099-01-01T00:00:00Z", "conditions": [["content-length-range", -1, 0]]}):
            policy = base64.b64encode(json.dumps(document).encode()).decode()
            r = self.post(bucket, fields + v2_fields(policy))
            self.assertEqual((r.status_code, self.error(r)), (400, "InvalidPolicyDocument"), document)

    def test_content_length_range_and_redirect(self):
        # carol signs: she may write into the bucket by its ACL, as the suite's users do.
        bucket = self.new_bucket(ACL="public-read-write")
        fields = [("key", "foo.txt"), ("acl", "private"), ("Content-Type", "text/plain")]
        for low, high, code in ((0, 2, "EntityTooLarge"), (512, 1000, "EntityTooSmall")):
            r = self.post(bucket, fields + self.signed_v2(bucket, ["starts-with", "$key", "foo"],
                                                          [["content-length-range", low, high]]))
            self.assertEqual((r.status_code, self.error(r)), (400, code))
        self.assertNotIn("Contents", self.s3.list_objects_v2(Bucket=bucket))
        # Larger than the limit by far: refused as the bytes come.
        r = self.post(bucket, fields + self.signed_v2(bucket, ["starts-with", "$key", "foo"],
                                                      [["content-length-range", 0, 1024]]), file=("f", b"x" * (8 << 20)))
        self.assertEqual(self.error(r), "EntityTooLarge")
        target = "http://example.com/done?from=form"
        r = self.post(bucket, fields + [("success_action_redirect", target)] +
                      self.signed_v2(bucket, ["starts-with", "$key", "foo"], [["eq", "$success_action_redirect", target]]),
                      allow_redirects=False)
        self.assertEqual(r.status_code, 303, r.text)
        etag = self.carol.head_object(Bucket=bucket, Key="foo.txt")["ETag"].strip('"')
        self.assertEqual(r.headers["Location"], f"{target}&bucket={bucket}&key=foo.txt&etag=%22{etag}%22")


    def test_sse_c_fields_encrypt_the_upload(self):
        bucket = self.new_bucket(ACL="public-read-write")
        key = hashlib.sha256(b"post form key").digest()
        sse = [("x-amz-server-side-encryption-customer-algorithm", "AES256"),
               ("x-amz-server-side-encryption-customer-key", base64.b64encode(key).decode()),
               ("x-amz-server-side-encryption-customer-key-md5", base64.b64encode(hashlib.md5(key).digest()).decode())]
        r = self.post(bucket, [("key", "secret.txt")] + sse)
        self.assertEqual(r.status_code, 204, r.text)
        self.assertEqual(r.headers["x-amz-server-side-encryption-customer-algorithm"], "AES256")
        with self.assertRaises(Exception) as refused:
            self.s3.get_object(Bucket=bucket, Key="secret.txt")
        self.assertEqual(refused.exception.response["Error"]["Code"], "InvalidRequest")
        got = self.s3.get_object(Bucket=bucket, Key="secret.txt", SSECustomerAlgorithm="AES256", SSECustomerKey=key)
        self.assertEqual(got["Body"].read(), b"bar")

    def test_sse_kms_fields_seal_the_upload_under_the_named_key(self):
        bucket = self.new_bucket(ACL="public-read-write")
        sse = [("x-amz-server-side-encryption", "aws:kms"), ("x-amz-server-side-encryption-aws-kms-key-id", "form-key")]
        r = self.post(bucket, [("key", "kms.txt")] + sse)
        self.assertEqual(r.status_code, 204, r.text)
        head = self.s3.head_object(Bucket=bucket, Key="kms.txt")
        self.assertEqual((head["ServerSideEncryption"], head["SSEKMSKeyId"]), ("aws:kms", "form-key"))
        self.assertEqual(self.s3.get_object(Bucket=bucket, Key="kms.txt")["Body"].read(), b"bar")
        unknown = self.post(bucket, [("key", "other.txt"), sse[0], (sse[1][0], "no-such-key")])
        self.assertEqual((unknown.status_code, self.error(unknown)), (400, "KMS.NotFoundException"))


class DedupePostObjectTest(PostObjectTest):
    mode = "dedupe"


if __name__ == "__main__":
    unittest.main()
