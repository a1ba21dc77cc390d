"""Access control as S3 clients use it (boto3 over HTTP, and unsigned
requests): canned and explicit ACLs on buckets and objects, anonymous reads
(404 for a missing key only where listing is allowed), a bucket policy with
principals, actions, resources, aws:SourceIp and s3:prefix, the server-side
encryption keys with Null and StringNotEquals, Bool aws:SecureTransport,
aws:Referer and aws:UserAgent, the ForAnyValue:/ForAllValues: qualifiers,
NotPrincipal/NotAction/NotResource, grants by e-mail address, OwnershipControls
BucketOwnerEnforced and PublicAccessBlock."""
import json
import os
import tempfile
import unittest
import urllib.error
import urllib.request

import boto3
from botocore import UNSIGNED
from botocore.config import Config

from gateway_harness import Gateway, boto3_client, error_of

GATEWAY = None


def setUpModule():
    global GATEWAY
    # SSE-S3 in raw buckets, for the policies that demand it.
    master_key = os.path.join(tempfile.mkdtemp(prefix="keel-access-sse-"), "master.key")
    GATEWAY = Gateway(server_extra=f"sse_master_key = {master_key}\n")


def tearDownModule():
    GATEWAY.stop()


def anonymous(scheme="http"):
    return boto3.client("s3", endpoint_url=GATEWAY.urls[scheme], region_name="us-east-1",
                        verify=GATEWAY.cert if scheme == "https" else None,
                        config=Config(signature_version=UNSIGNED, s3={"addressing_style": "path"},
                                      retries={"max_attempts": 1}))


def code(fn):
    response = error_of(fn)
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]


class AccessTest(unittest.TestCase):
    counter = 0

    def setUp(self):
        self.alice = boto3_client(GATEWAY, "http")
        self.bob = boto3_client(GATEWAY, "http", user="bob")
        self.anon = anonymous()

    def new_bucket(self, **create):
        AccessTest.counter += 1
        name = f"access-{AccessTest.counter}"
        self.alice.create_bucket(Bucket=name, **create)
        return name

    def test_private_by_default_and_canned_bucket_acls(self):
        bucket = self.new_bucket()
        self.alice.put_object(Bucket=bucket, Key="doc", Body=b"secret")
        self.assertEqual(code(lambda: self.anon.get_object(Bucket=bucket, Key="doc")), (403, "AccessDenied"))
        self.assertEqual(code(lambda: self.anon.get_object(Bucket=bucket, Key="missing")), (403, "AccessDenied"))
        self.assertEqual(code(lambda: self.anon.list_objects_v2(Bucket=bucket)), (403, "AccessDenied"))
        self.assertEqual(code(lambda: self.bob.list_objects_v2(Bucket=bucket)), (403, "AccessDenied"))
        self.assertEqual(code(lambda: self.anon.list_buckets()), (403, "AccessDenied"))
        acl = self.alice.get_bucket_acl(Bucket=bucket)
        self.assertEqual(acl["Owner"]["DisplayName"], "alice")
        self.assertEqual([g["Permission"] for g in acl["Grants"]], ["FULL_CONTROL"])

        # public-read on the bucket: everyone lists; a missing key is 404, the private object still 403.
        self.alice.put_bucket_acl(Bucket=bucket, ACL="public-read")
        self.assertEqual([o["Key"] for o in self.anon.list_objects_v2(Bucket=bucket)["Contents"]], ["doc"])
        self.assertEqual(code(lambda: self.anon.get_object(Bucket=bucket, Key="missing")), (404, "NoSuchKey"))
        self.assertEqual(code(lambda: self.anon.get_object(Bucket=bucket, Key="doc")), (403, "AccessDenied"))
        self.assertEqual(code(lambda: self.anon.put_object(Bucket=bucket, Key="x", Body=b"x")), (403, "AccessDenied"))
        grants = self.alice.get_bucket_acl(Bucket=bucket)["Grants"]
        self.assertIn({"Grantee": {"Type": "Group", "URI": "http://acs.amazonaws.com/groups/global/AllUsers"},
                       "Permission": "READ"}, grants)
        # public-read on the object: anonymous GET, also by a plain URL.
        self.alice.put_object_acl(Bucket=bucket, Key="doc", ACL="public-read")
        self.assertEqual(self.anon.get_object(Bucket=bucket, Key="doc")["Body"].read(), b"secret")
        with urllib.request.urlopen(f"{GATEWAY.urls['http']}/{bucket}/doc", timeout=10) as r:
            self.assertEqual(r.read(), b"secret")
        # Rewriting the object starts from private again.
        self.alice.put_object(Bucket=bucket, Key="doc", Body=b"new")
        self.assertEqual(code(lambda: self.anon.get_object(Bucket=bucket, Key="doc")), (403, "AccessDenied"))
        # x-amz-acl on PutObject.
        self.alice.put_object(Bucket=bucket, Key="open", Body=b"o", ACL="public-read")
        self.assertEqual(self.anon.get_object(Bucket=bucket, Key="open")["Body"].read(), b"o")
        self.assertEqual(code(lambda: self.alice.put_object(Bucket=bucket, Key="k", Body=b"", ACL="nonsense")),
                         (400, "InvalidArgument"))

        # authenticated-read: bob reads, anonymous does not.
        self.alice.put_bucket_acl(Bucket=bucket, ACL="authenticated-read")
        self.assertEqual(len(self.bob.list_objects_v2(Bucket=bucket)["Contents"]), 2)
        self.assertEqual(code(lambda: self.anon.list_objects_v2(Bucket=bucket)), (403, "AccessDenied"))
        # public-read-write: anonymous writes.
        self.alice.put_bucket_acl(Bucket=bucket, ACL="public-read-write")
        self.anon.put_object(Bucket=bucket, Key="dropbox", Body=b"from anyone")
        self.assertEqual(self.alice.get_object(Bucket=bucket, Key="dropbox")["Body"].read(), b"from anyone")
        self.alice.put_bucket_acl(Bucket=bucket, ACL="private")
        self.assertEqual(code(lambda: self.anon.put_object(Bucket=bucket, Key="x", Body=b"")), (403, "AccessDenied"))
        # Only the owner changes the bucket's ACL.
        self.assertEqual(code(lambda: self.bob.put_bucket_acl(Bucket=bucket, ACL="public-read")), (403, "AccessDenied"))

    def test_recreating_your_bucket_succeeds_only_without_changing_its_acl(self):
        """A re-create of a bucket you own answers 200 (us-east-1: a retried create succeeds) when it
        asks for the ACL the bucket has (none asked: private); one that would change it is refused
        409 BucketAlreadyExists, as RGW, and the ACL stays."""
        listed = lambda b: [g["Permission"] for g in self.alice.get_bucket_acl(Bucket=b)["Grants"]]
        private = self.new_bucket()
        self.alice.create_bucket(Bucket=private)
        self.assertEqual(code(lambda: self.alice.create_bucket(Bucket=private, ACL="public-read")),
                         (409, "BucketAlreadyExists"))
        self.assertEqual(listed(private), ["FULL_CONTROL"])
        public = self.new_bucket(ACL="public-read")
        self.alice.create_bucket(Bucket=public, ACL="public-read")
        self.assertEqual(code(lambda: self.alice.create_bucket(Bucket=public)), (409, "BucketAlreadyExists"))
        self.assertEqual(listed(public), ["READ", "FULL_CONTROL"])
        self.assertEqual(code(lambda: self.bob.create_bucket(Bucket=public, ACL="public-read")),
                         (409, "BucketAlreadyExists"))

    def test_grants_listed_groups_first_then_users_by_name(self):
        """S3 gives grant order no meaning; conformance suites compare it with RGW's: group grants
        first (in the order given), then user grants by user."""
        bucket = self.new_bucket(ACL="public-read-write")
        listed = lambda: [(g["Grantee"].get("URI", g["Grantee"].get("DisplayName")), g["Permission"])
                          for g in self.alice.get_bucket_acl(Bucket=bucket)["Grants"]]
        all_users = "http://acs.amazonaws.com/groups/global/AllUsers"
        self.assertEqual(listed(), [(all_users, "READ"), (all_users, "WRITE"), ("alice", "FULL_CONTROL")])
        owner = self.alice.get_bucket_acl(Bucket=bucket)["Owner"]
        bob_id = self.bob.list_buckets()["Owner"]["ID"]
        user = lambda id_: {"Type": "CanonicalUser", "ID": id_}
        self.alice.put_bucket_acl(Bucket=bucket, AccessControlPolicy={"Owner": owner, "Grants": [
            {"Grantee": user(bob_id), "Permission": "READ"},
            {"Grantee": user(owner["ID"]), "Permission": "FULL_CONTROL"},
            {"Grantee": {"Type": "Group", "URI": all_users}, "Permission": "READ_ACP"}]})
        self.assertEqual(listed(), [(all_users, "READ_ACP"), ("alice", "FULL_CONTROL"), ("bob", "READ")])

    def test_explicit_grants_by_canonical_id(self):
        bucket = self.new_bucket()
        self.alice.put_object(Bucket=bucket, Key="report", Body=b"r")
        alice_id = self.alice.get_bucket_acl(Bucket=bucket)["Owner"]["ID"]
        # bob learns his id from a bucket of his own.
        self.bob.create_bucket(Bucket="bobs-bucket")
        bob_id = self.bob.get_bucket_acl(Bucket="bobs-bucket")["Owner"]["ID"]
        self.assertEqual(len(bob_id), 64)
        self.assertNotEqual(bob_id, alice_id)

        self.assertEqual(code(lambda: self.bob.get_object(Bucket=bucket, Key="report")), (403, "AccessDenied"))
        self.alice.put_object_acl(Bucket=bucket, Key="report", GrantRead=f'id="{bob_id}"')
        self.assertEqual(self.bob.get_object(Bucket=bucket, Key="report")["Body"].read(), b"r")
        self.assertEqual(code(lambda: self.bob.get_object_acl(Bucket=bucket, Key="report")), (403, "AccessDenied"))
        # A full AccessControlPolicy document: bob may write the bucket.
        self.alice.put_bucket_acl(Bucket=bucket, AccessControlPolicy={
            "Owner": {"ID": alice_id},
            "Grants": [{"Grantee": {"Type": "CanonicalUser", "ID": alice_id}, "Permission": "FULL_CONTROL"},
                       {"Grantee": {"Type": "CanonicalUser", "ID": bob_id}, "Permission": "WRITE"}]})
        self.bob.put_object(Bucket=bucket, Key="from-bob", Body=b"b")
        self.assertEqual(code(lambda: self.bob.list_objects_v2(Bucket=bucket)), (403, "AccessDenied"))
        self.assertEqual(code(lambda: self.alice.put_bucket_acl(Bucket=bucket, GrantRead='id="' + "0" * 64 + '"')),
                         (400, "InvalidArgument"))

    def test_grants_by_email_address(self):
        """A grantee by e-mail address (AmazonCustomerByEmail, or emailAddress= in x-amz-grant-*)
        is the user whose configuration gives that address, in any case; it is kept and shown as
        that canonical user. An address no user has: 400 UnresolvableGrantByEmailAddress."""
        bucket = self.new_bucket()
        self.alice.put_object(Bucket=bucket, Key="report", Body=b"r")
        acl = self.alice.get_bucket_acl(Bucket=bucket)
        bob_id = self.bob.list_buckets()["Owner"]["ID"]
        by_email = lambda address: {"Grantee": {"Type": "AmazonCustomerByEmail", "EmailAddress": address},
                                    "Permission": "READ"}
        self.alice.put_bucket_acl(Bucket=bucket, AccessControlPolicy={
            "Owner": acl["Owner"], "Grants": acl["Grants"] + [by_email("Bob@Example.COM")]})
        grants = self.alice.get_bucket_acl(Bucket=bucket)["Grants"]
        self.assertIn({"Grantee": {"Type": "CanonicalUser", "ID": bob_id, "DisplayName": "bob"}, "Permission": "READ"},
                      grants)
        self.assertEqual([o["Key"] for o in self.bob.list_objects_v2(Bucket=bucket)["Contents"]], ["report"])
        self.alice.put_object_acl(Bucket=bucket, Key="report", GrantRead='emailAddress="bob@example.com"')
        self.assertEqual(self.bob.get_object(Bucket=bucket, Key="report")["Body"].read(), b"r")
        self.assertEqual(code(lambda: self.alice.put_bucket_acl(Bucket=bucket, AccessControlPolicy={
            "Owner": acl["Owner"], "Grants": [by_email("carl@example.com")]})), (400, "UnresolvableGrantByEmailAddress"))
        self.assertEqual(code(lambda: self.alice.put_object(Bucket=bucket, Key="k", Body=b"",
                                                            GrantRead="emailAddress=carl@example.com")),
                         (400, "UnresolvableGrantByEmailAddress"))

    def test_bucket_policy_referer_user_agent_and_set_qualifiers(self):
        """aws:Referer and aws:UserAgent are the request's headers; ForAnyValue: and ForAllValues:
        apply the operator to each of the request's values for the key (one, or none when the
        header is absent: ForAnyValue: then fails, ForAllValues: holds)."""
        bucket = self.new_bucket()
        arn = f"arn:aws:s3:::{bucket}"
        self.alice.put_object(Bucket=bucket, Key="page", Body=b"p")
        url = f"{GATEWAY.urls['http']}/{bucket}/page"

        def anonymous_get(**headers):
            try:
                with urllib.request.urlopen(urllib.request.Request(url, headers=headers)) as response:
                    return response.status
            except urllib.error.HTTPError as e:
                return e.code

        def put_policy(operator, key, value, effect="Allow"):
            self.alice.put_bucket_policy(Bucket=bucket, Policy=json.dumps({"Statement": [{
                "Effect": effect, "Principal": "*", "Action": "s3:GetObject", "Resource": f"{arn}/*",
                "Condition": {operator: {key: value}}}]}))

        put_policy("StringLikeIfExists", "aws:Referer", "http://www.example.com/*")
        self.assertEqual(anonymous_get(Referer="http://www.example.com/index.html"), 200)
        self.assertEqual(anonymous_get(Referer="http://example.com"), 403)
        self.assertEqual(anonymous_get(), 200)
        put_policy("ForAnyValue:StringLike", "aws:Referer", ["http://elsewhere/*", "http://www.example.com/*"])
        self.assertEqual(anonymous_get(Referer="http://www.example.com/"), 200)
        self.assertEqual(anonymous_get(Referer="http://example.com"), 403)
        self.assertEqual(anonymous_get(), 403)
        put_policy("ForAllValues:StringEquals", "aws:Referer", "http://www.example.com/")
        self.assertEqual(anonymous_get(Referer="http://www.example.com/"), 200)
        self.assertEqual(anonymous_get(Referer="http://example.com"), 403)
        self.assertEqual(anonymous_get(), 200)
        put_policy("ForAllValues:StringNotLike", "aws:UserAgent", "*crawler*")
        self.assertEqual(anonymous_get(**{"User-Agent": "browser/1.0"}), 200)
        self.assertEqual(anonymous_get(**{"User-Agent": "crawler/2.0"}), 403)
        for operator in ("ForAnyValue:Null", "ForAllValues:StringEqualz"):
            self.assertEqual(code(lambda: put_policy(operator, "aws:Referer", "true")), (400, "MalformedPolicy"))

    def test_bucket_policy(self):
        bucket = self.new_bucket()
        for key in ("public/a", "private/b", "home/bob/c", "home/carl/d"):
            self.alice.put_object(Bucket=bucket, Key=key, Body=key.encode())
        policy = {"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
             "Resource": f"arn:aws:s3:::{bucket}/public/*"},
            {"Effect": "Allow", "Principal": {"AWS": ["bob"]}, "Action": "s3:ListBucket",
             "Resource": f"arn:aws:s3:::{bucket}", "Condition": {"StringLike": {"s3:prefix": "home/bob/*"}}},
            {"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::000000000000:user/bob"}, "Action": "s3:*",
             "Resource": f"arn:aws:s3:::{bucket}/home/bob/*"},
            {"Effect": "Deny", "Principal": "*", "Action": "s3:DeleteObject",
             "Resource": f"arn:aws:s3:::{bucket}/public/*"}]}
        self.alice.put_bucket_policy(Bucket=bucket, Policy=json.dumps(policy))
        self.assertEqual(json.loads(self.alice.get_bucket_policy(Bucket=bucket)["Policy"]), policy)

        self.assertEqual(self.anon.get_object(Bucket=bucket, Key="public/a")["Body"].read(), b"public/a")
        self.assertEqual(code(lambda: self.anon.get_object(Bucket=bucket, Key="private/b")), (403, "AccessDenied"))
        # Allowed to get under public/ but not to list: a missing key there is 403.
        self.assertEqual(code(lambda: self.anon.get_object(Bucket=bucket, Key="public/none")), (403, "AccessDenied"))
        self.assertEqual([o["Key"] for o in self.bob.list_objects_v2(Bucket=bucket, Prefix="home/bob/")["Contents"]],
                         ["home/bob/c"])
        self.assertEqual(code(lambda: self.bob.list_objects_v2(Bucket=bucket, Prefix="home/carl/")),
                         (403, "AccessDenied"))
        self.assertEqual(code(lambda: self.bob.list_objects_v2(Bucket=bucket)), (403, "AccessDenied"))
        self.bob.put_object(Bucket=bucket, Key="home/bob/new", Body=b"n")
        self.assertEqual(code(lambda: self.bob.put_object(Bucket=bucket, Key="home/carl/x", Body=b"")),
                         (403, "AccessDenied"))
        # The explicit Deny binds the owner too; the owner can still remove the policy.
        self.assertEqual(code(lambda: self.alice.delete_object(Bucket=bucket, Key="public/a")), (403, "AccessDenied"))
        self.assertEqual(code(lambda: self.alice.put_bucket_policy(Bucket=bucket, Policy=json.dumps(
            {"Statement": [{"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
                            "Resource": "arn:aws:s3:::another-bucket/*"}]}))), (400, "MalformedPolicy"))
        self.assertEqual(code(lambda: self.bob.get_bucket_policy(Bucket=bucket)), (403, "AccessDenied"))
        self.alice.delete_bucket_policy(Bucket=bucket)
        self.alice.delete_object(Bucket=bucket, Key="public/a")
        self.assertEqual(code(lambda: self.alice.get_bucket_policy(Bucket=bucket)), (404, "NoSuchBucketPolicy"))

        # aws:SourceIp: the tests connect from 127.0.0.1.
        def ip_policy(condition):
            return json.dumps({"Statement": [{"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
                                              "Resource": f"arn:aws:s3:::{bucket}/*",
                                              "Condition": {condition: {"aws:SourceIp": "127.0.0.0/8"}}}]})
        self.alice.put_bucket_policy(Bucket=bucket, Policy=ip_policy("IpAddress"))
        self.assertEqual(self.anon.get_object(Bucket=bucket, Key="private/b")["Body"].read(), b"private/b")
        self.alice.put_bucket_policy(Bucket=bucket, Policy=ip_policy("NotIpAddress"))
        self.assertEqual(code(lambda: self.anon.get_object(Bucket=bucket, Key="private/b")), (403, "AccessDenied"))

    def test_bucket_policy_encryption_keys_and_not_elements(self):
        """The policy S3's documentation gives for "every object SSE-S3" (a Deny for another
        algorithm, a Deny for none: Null, and StringNotEquals holding for a missing header),
        answered 403 before the encryption headers are judged; NotPrincipal, NotAction and
        NotResource (and an account's root ARN); Bool aws:SecureTransport; ListBucket apart from
        ListBucketVersions."""
        bucket = self.new_bucket()
        arn = f"arn:aws:s3:::{bucket}"

        def put_policy(*statements):
            self.alice.put_bucket_policy(Bucket=bucket, Policy=json.dumps({"Statement": list(statements)}))

        put_policy({"Effect": "Deny", "Principal": "*", "Action": "s3:PutObject", "Resource": f"{arn}/*",
                    "Condition": {"StringNotEquals": {"s3:x-amz-server-side-encryption": "AES256"}}},
                   {"Effect": "Deny", "Principal": "*", "Action": "s3:PutObject", "Resource": f"{arn}/*",
                    "Condition": {"Null": {"s3:x-amz-server-side-encryption": "true"}}})
        put = self.alice.put_object(Bucket=bucket, Key="sealed", Body=b"s", ServerSideEncryption="AES256")
        self.assertEqual(put["ServerSideEncryption"], "AES256")
        self.assertEqual(code(lambda: self.alice.put_object(Bucket=bucket, Key="plain", Body=b"p")),
                         (403, "AccessDenied"))
        # The gateway has no KMS key ring: without the policy aws:kms is 400 InvalidArgument.
        self.assertEqual(code(lambda: self.alice.put_object(Bucket=bucket, Key="kms", Body=b"k",
                                                            ServerSideEncryption="aws:kms")), (403, "AccessDenied"))
        self.assertEqual(code(lambda: self.alice.copy_object(Bucket=bucket, Key="copy",
                                                             CopySource={"Bucket": bucket, "Key": "sealed"})),
                         (403, "AccessDenied"))
        self.alice.copy_object(Bucket=bucket, Key="copy", CopySource={"Bucket": bucket, "Key": "sealed"},
                               ServerSideEncryption="AES256")
        self.alice.delete_bucket_policy(Bucket=bucket)
        self.assertEqual(code(lambda: self.alice.put_object(Bucket=bucket, Key="kms", Body=b"k",
                                                            ServerSideEncryption="aws:kms")), (400, "InvalidArgument"))

        # bob may do anything under work/ but delete (everyone but alice is refused that), and
        # nothing but reads outside it.
        put_policy({"Effect": "Allow", "Principal": {"AWS": "bob"}, "Action": ["s3:*"], "Resource": f"{arn}/*"},
                   {"Effect": "Allow", "Principal": {"AWS": "bob"}, "Action": "s3:ListBucket", "Resource": arn},
                   {"Effect": "Deny", "NotPrincipal": {"AWS": "alice"}, "Action": "s3:DeleteObject",
                    "Resource": f"{arn}/*"},
                   {"Effect": "Deny", "Principal": {"AWS": "bob"}, "NotAction": "s3:GetObject",
                    "NotResource": f"{arn}/work/*"})
        self.bob.put_object(Bucket=bucket, Key="work/a", Body=b"a")
        self.assertEqual(code(lambda: self.bob.delete_object(Bucket=bucket, Key="work/a")), (403, "AccessDenied"))
        self.assertEqual(code(lambda: self.bob.put_object(Bucket=bucket, Key="done/a", Body=b"")),
                         (403, "AccessDenied"))
        self.assertEqual(self.bob.get_object(Bucket=bucket, Key="sealed")["Body"].read(), b"s")
        # NotResource takes in the bucket itself: bob's listing is refused, and ListBucket never
        # stood for ListBucketVersions.
        self.assertEqual(code(lambda: self.bob.list_objects_v2(Bucket=bucket)), (403, "AccessDenied"))
        self.alice.delete_object(Bucket=bucket, Key="work/a")
        put_policy({"Effect": "Allow", "Principal": {"AWS": "bob"}, "Action": "s3:ListBucket", "Resource": arn})
        self.assertEqual(len(self.bob.list_objects_v2(Bucket=bucket)["Contents"]), 2)
        self.assertEqual(code(lambda: self.bob.list_object_versions(Bucket=bucket)), (403, "AccessDenied"))

        # Bool aws:SecureTransport: anonymous reads over TLS only.
        put_policy({"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": f"{arn}/*",
                    "Condition": {"Bool": {"aws:SecureTransport": "true"}}})
        self.assertEqual(anonymous("https").get_object(Bucket=bucket, Key="sealed")["Body"].read(), b"s")
        self.assertEqual(code(lambda: self.anon.get_object(Bucket=bucket, Key="sealed")), (403, "AccessDenied"))
        self.assertEqual(code(lambda: self.alice.put_bucket_policy(Bucket=bucket, Policy=json.dumps({"Statement": [{
            "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": f"{arn}/*",
            "Condition": {"NullIfExists": {"s3:x-amz-acl": "true"}}}]}))), (400, "MalformedPolicy"))

        # An account's root ARN is every user (the gateway's users are one account): everyone but
        # them is the anonymous requests, which makes the policy public.
        put_policy({"Effect": "Allow", "NotPrincipal": {"AWS": "arn:aws:iam::s3tenant1:root"},
                    "Action": "s3:ListBucket", "Resource": arn})
        self.assertTrue(self.alice.get_bucket_policy_status(Bucket=bucket)["PolicyStatus"]["IsPublic"])
        self.assertEqual(len(self.anon.list_objects_v2(Bucket=bucket)["Contents"]), 2)
        self.assertEqual(code(lambda: self.bob.list_objects_v2(Bucket=bucket)), (403, "AccessDenied"))

    def test_objects_belong_to_their_writer(self):
        """As S3 without BucketOwnerEnforced: what another user writes into a bucket by a grant is
        that user's (Owner in listings and GetObjectAcl), delete markers too; BucketOwnerPreferred
        gives the bucket's owner what is written with bucket-owner-full-control, and
        BucketOwnerEnforced makes every object the bucket's owner's."""
        bucket = self.new_bucket()
        alice_id = self.alice.get_bucket_acl(Bucket=bucket)["Owner"]["ID"]
        self.bob.create_bucket(Bucket="bobs-own")
        bob_id = self.bob.get_bucket_acl(Bucket="bobs-own")["Owner"]["ID"]
        self.alice.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        self.alice.put_bucket_acl(Bucket=bucket, AccessControlPolicy={
            "Owner": {"ID": alice_id},
            "Grants": [{"Grantee": {"Type": "CanonicalUser", "ID": alice_id}, "Permission": "FULL_CONTROL"},
                       {"Grantee": {"Type": "CanonicalUser", "ID": bob_id}, "Permission": "WRITE"}]})
        self.alice.put_object(Bucket=bucket, Key="by-alice", Body=b"a")
        self.bob.put_object(Bucket=bucket, Key="by-bob", Body=b"b")
        self.bob.put_object(Bucket=bucket, Key="shared", Body=b"s", ACL="bucket-owner-full-control")
        upload = self.bob.create_multipart_upload(Bucket=bucket, Key="bob-mp")["UploadId"]
        part = self.bob.upload_part(Bucket=bucket, Key="bob-mp", UploadId=upload, PartNumber=1, Body=b"m")
        self.bob.complete_multipart_upload(Bucket=bucket, Key="bob-mp", UploadId=upload,
                                           MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
        self.bob.put_object(Bucket="bobs-own", Key="src", Body=b"c")
        self.bob.copy_object(Bucket=bucket, Key="bob-copy", CopySource={"Bucket": "bobs-own", "Key": "src"})
        self.bob.delete_object(Bucket=bucket, Key="by-alice")  # a delete marker of bob's
        writers = {"by-alice": alice_id, "by-bob": bob_id, "shared": bob_id, "bob-mp": bob_id, "bob-copy": bob_id}

        def owners():
            v1 = {o["Key"]: o["Owner"]["ID"] for o in self.alice.list_objects(Bucket=bucket)["Contents"]}
            v2 = {o["Key"]: o["Owner"]["ID"]
                  for o in self.alice.list_objects_v2(Bucket=bucket, FetchOwner=True)["Contents"]}
            self.assertEqual(v1, v2)
            listed = self.alice.list_object_versions(Bucket=bucket)
            versions = {v["Key"]: v["Owner"]["ID"] for v in listed["Versions"]}
            markers = {m["Key"]: m["Owner"]["ID"] for m in listed["DeleteMarkers"]}
            # Each version's ACL as its owner reads it: the bucket's owner may not read bob's
            # (as S3; ACLs not disabled), bob always may.
            readers = {alice_id: self.alice, bob_id: self.bob}
            acls = {v["Key"]: readers[v["Owner"]["ID"]].get_object_acl(Bucket=bucket, Key=v["Key"],
                                                                       VersionId=v["VersionId"])
                    for v in listed["Versions"]}
            return v1, versions, markers, acls

        listed, versions, markers, acls = owners()
        self.assertEqual(listed, {k: v for k, v in writers.items() if k != "by-alice"})
        self.assertEqual(versions, writers)
        self.assertEqual(markers, {"by-alice": bob_id})
        self.assertEqual({k: a["Owner"]["ID"] for k, a in acls.items()}, writers)
        # The default ACL gives the writer FULL_CONTROL; bucket-owner-full-control the bucket's owner too.
        self.assertEqual([(g["Grantee"]["ID"], g["Permission"]) for g in acls["by-bob"]["Grants"]],
                         [(bob_id, "FULL_CONTROL")])
        self.assertEqual(sorted((g["Grantee"]["ID"], g["Permission"]) for g in acls["shared"]["Grants"]),
                         sorted([(bob_id, "FULL_CONTROL"), (alice_id, "FULL_CONTROL")]))
        self.assertEqual(self.alice.get_object_acl(Bucket=bucket, Key="shared")["Owner"]["ID"], bob_id)
        self.assertEqual(code(lambda: self.alice.get_object_acl(Bucket=bucket, Key="by-bob")), (403, "AccessDenied"))

        # BucketOwnerPreferred: bucket-owner-full-control hands the object to the bucket's owner.
        self.alice.put_bucket_ownership_controls(Bucket=bucket, OwnershipControls={
            "Rules": [{"ObjectOwnership": "BucketOwnerPreferred"}]})
        self.bob.put_object(Bucket=bucket, Key="preferred", Body=b"p", ACL="bucket-owner-full-control")
        self.bob.put_object(Bucket=bucket, Key="not-preferred", Body=b"n")
        listed = owners()[0]
        self.assertEqual((listed["preferred"], listed["not-preferred"], listed["by-bob"]), (alice_id, bob_id, bob_id))
        # BucketOwnerEnforced: everything is the bucket's owner's, whoever wrote it (bob may write
        # by a policy now: ACLs grant nothing).
        self.alice.put_bucket_ownership_controls(Bucket=bucket, OwnershipControls={
            "Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]})
        self.alice.put_bucket_policy(Bucket=bucket, Policy=json.dumps({"Statement": [{
            "Effect": "Allow", "Principal": {"AWS": "bob"}, "Action": "s3:PutObject",
            "Resource": f"arn:aws:s3:::{bucket}/*"}]}))
        self.bob.put_object(Bucket=bucket, Key="enforced", Body=b"e")
        listed, versions, markers, acls = owners()
        self.assertEqual(set(listed.values()) | set(versions.values()) | set(markers.values()), {alice_id})
        self.assertEqual({a["Owner"]["ID"] for a in acls.values()}, {alice_id})
        # Lifted again, the writers show again (what was written under it stays the bucket's owner's).
        self.alice.delete_bucket_ownership_controls(Bucket=bucket)
        listed = owners()[0]
        self.assertEqual((listed["by-bob"], listed["enforced"]), (bob_id, alice_id))

    def test_ownership_controls_and_public_access_block(self):
        bucket = self.new_bucket()
        self.alice.put_object(Bucket=bucket, Key="doc", Body=b"d")
        self.assertEqual(code(lambda: self.alice.get_bucket_ownership_controls(Bucket=bucket)),
                         (404, "OwnershipControlsNotFoundError"))
        self.alice.put_bucket_ownership_controls(Bucket=bucket, OwnershipControls={
            "Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]})
        self.assertEqual(self.alice.get_bucket_ownership_controls(Bucket=bucket)["OwnershipControls"]["Rules"],
                         [{"ObjectOwnership": "BucketOwnerEnforced"}])
        self.assertEqual(code(lambda: self.alice.put_bucket_acl(Bucket=bucket, ACL="public-read")),
                         (400, "AccessControlListNotSupported"))
        self.assertEqual(code(lambda: self.alice.put_object(Bucket=bucket, Key="x", Body=b"", ACL="public-read")),
                         (400, "AccessControlListNotSupported"))
        self.alice.put_object(Bucket=bucket, Key="x", Body=b"", ACL="bucket-owner-full-control")
        self.alice.delete_bucket_ownership_controls(Bucket=bucket)

        self.assertEqual(code(lambda: self.alice.get_public_access_block(Bucket=bucket)),
                         (404, "NoSuchPublicAccessBlockConfiguration"))
        self.alice.put_bucket_acl(Bucket=bucket, ACL="public-read")
        self.alice.put_object_acl(Bucket=bucket, Key="doc", ACL="public-read")
        self.assertEqual(self.anon.get_object(Bucket=bucket, Key="doc")["Body"].read(), b"d")
        block = {"BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True,
                 "RestrictPublicBuckets": False}
        self.alice.put_public_access_block(Bucket=bucket, PublicAccessBlockConfiguration=block)
        self.assertEqual(self.alice.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"], block)
        # IgnorePublicAcls: the public grants in place count for nothing.
        self.assertEqual(code(lambda: self.anon.get_object(Bucket=bucket, Key="doc")), (403, "AccessDenied"))
        self.assertEqual(code(lambda: self.anon.list_objects_v2(Bucket=bucket)), (403, "AccessDenied"))
        # BlockPublicAcls and BlockPublicPolicy: new public ones are refused.
        self.assertEqual(code(lambda: self.alice.put_object_acl(Bucket=bucket, Key="doc", ACL="public-read-write")),
                         (403, "AccessDenied"))
        public_policy = json.dumps({"Statement": [{"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
                                                   "Resource": f"arn:aws:s3:::{bucket}/*"}]})
        self.assertEqual(code(lambda: self.alice.put_bucket_policy(Bucket=bucket, Policy=public_policy)),
                         (403, "AccessDenied"))
        # RestrictPublicBuckets: a public policy already in place grants nothing to outsiders.
        self.alice.delete_public_access_block(Bucket=bucket)
        self.alice.put_bucket_acl(Bucket=bucket, ACL="private")
        self.alice.put_object_acl(Bucket=bucket, Key="doc", ACL="private")
        self.alice.put_bucket_policy(Bucket=bucket, Policy=public_policy)
        self.assertEqual(self.anon.get_object(Bucket=bucket, Key="doc")["Body"].read(), b"d")
        self.alice.put_public_access_block(Bucket=bucket, PublicAccessBlockConfiguration=dict(
            block, IgnorePublicAcls=False, BlockPublicPolicy=False, RestrictPublicBuckets=True))
        self.assertEqual(code(lambda: self.anon.get_object(Bucket=bucket, Key="doc")), (403, "AccessDenied"))
        self.assertEqual(self.alice.get_object(Bucket=bucket, Key="doc")["Body"].read(), b"d")

    def test_settings_survive_a_restart_and_go_with_the_bucket(self):
        bucket = self.new_bucket()
        self.alice.put_object(Bucket=bucket, Key="doc", Body=b"kept", ACL="public-read")
        self.alice.put_bucket_acl(Bucket=bucket, ACL="public-read")
        GATEWAY.crash_and_restart()
        anon = anonymous()
        self.assertEqual(anon.get_object(Bucket=bucket, Key="doc")["Body"].read(), b"kept")
        self.assertEqual(code(lambda: anon.get_object(Bucket=bucket, Key="gone")), (404, "NoSuchKey"))
        alice = boto3_client(GATEWAY, "http")
        alice.delete_object(Bucket=bucket, Key="doc")
        alice.delete_bucket(Bucket=bucket)
        alice.create_bucket(Bucket=bucket)
        self.assertEqual(code(lambda: anon.list_objects_v2(Bucket=bucket)), (403, "AccessDenied"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
