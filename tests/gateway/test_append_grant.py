"""The `append` grant and `delete_unversioned = owner` (docs/gateway.md,
docs/immutable.md): boto3 against the real `keel gateway`. An append user
creates, reads and lists objects (PutObject, CopyObject, multipart uploads)
but every delete and every overwrite of an existing key answers 403
AccessDenied, whatever an ACL or bucket policy says; in a bucket with
delete_unversioned = owner, only the owner removes an object no version keeps."""
import json
import shutil
import tempfile
import unittest

from gateway_harness import Gateway, boto3_client, error_of

CAROL = ("AKIDCAROL00000000003", "carol-secret-key-000000000000000000000")
GATEWAY = None
BUCKETS = None


def setUpModule():
    global GATEWAY, BUCKETS
    extra = (f"[user:carol]\naccess_key = {CAROL[0]}\nsecret_key = {CAROL[1]}\n\n"
             "[bucket:backups]\nowner = alice\ngrants = carol:append bob:write\n"
             "delete_unversioned = owner\npath = {state}/configured/backups\n\n"
             "[bucket:open]\nowner = alice\ngrants = carol:append bob:write\npath = {state}/configured/open\n\n")
    BUCKETS = tempfile.mkdtemp(prefix="keel-append-")
    GATEWAY = Gateway(extra_config=extra.replace("{state}", BUCKETS))


def tearDownModule():
    GATEWAY.stop()
    shutil.rmtree(BUCKETS, ignore_errors=True)


def refused(fn):
    response = error_of(fn)
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"], response["Error"]["Message"]


class AppendGrantTest(unittest.TestCase):
    def setUp(self):
        self.alice = boto3_client(GATEWAY, "http")
        self.bob = boto3_client(GATEWAY, "http", user="bob")
        self.carol = boto3_client(GATEWAY, "http", access=CAROL[0], secret=CAROL[1])

    def test_creates_reads_and_lists_but_never_deletes_or_overwrites(self):
        self.carol.put_object(Bucket="open", Key="data/a", Body=b"first")
        self.assertEqual(self.carol.get_object(Bucket="open", Key="data/a")["Body"].read(), b"first")
        listed = [o["Key"] for o in self.carol.list_objects_v2(Bucket="open", Prefix="data/")["Contents"]]
        self.assertEqual(listed, ["data/a"])

        status, code, message = refused(lambda: self.carol.put_object(Bucket="open", Key="data/a", Body=b"garbage"))
        self.assertEqual((status, code), (403, "AccessDenied"))
        self.assertIn("append grant", message)
        self.assertIn("data/a", message)
        self.assertEqual(refused(lambda: self.carol.delete_object(Bucket="open", Key="data/a"))[:2],
                         (403, "AccessDenied"))
        result = error_of(lambda: self.carol.delete_objects(Bucket="open", Delete={"Objects": [{"Key": "data/a"}]}))
        self.assertEqual(result["Error"]["Code"], "AccessDenied")
        self.assertEqual(refused(lambda: self.carol.copy_object(Bucket="open", Key="data/a",
                                                                CopySource={"Bucket": "open", "Key": "data/a"},
                                                                MetadataDirective="REPLACE"))[:2],
                         (403, "AccessDenied"))
        self.assertEqual(refused(lambda: self.carol.put_object_tagging(
            Bucket="open", Key="data/a", Tagging={"TagSet": [{"Key": "k", "Value": "v"}]}))[:2], (403, "AccessDenied"))
        # Nothing of the attempts changed the object.
        self.assertEqual(self.alice.get_object(Bucket="open", Key="data/a")["Body"].read(), b"first")

        # A copy to a new key is a creation.
        self.carol.copy_object(Bucket="open", Key="data/b", CopySource={"Bucket": "open", "Key": "data/a"})
        self.assertEqual(self.carol.get_object(Bucket="open", Key="data/b")["Body"].read(), b"first")
        # A writer still overwrites and deletes.
        self.bob.put_object(Bucket="open", Key="data/b", Body=b"bob's")
        self.bob.delete_object(Bucket="open", Key="data/b")
        # Once deleted, the key is free to create again.
        self.carol.put_object(Bucket="open", Key="data/b", Body=b"again")

    def test_multipart_creates_but_does_not_replace(self):
        part = b"p" * (5 << 20)
        upload = self.carol.create_multipart_upload(Bucket="open", Key="big")["UploadId"]
        etag = self.carol.upload_part(Bucket="open", Key="big", UploadId=upload, PartNumber=1, Body=part)["ETag"]
        # Someone else creates the key meanwhile: completing would overwrite it.
        self.alice.put_object(Bucket="open", Key="big", Body=b"alice's")
        status, code, message = refused(lambda: self.carol.complete_multipart_upload(
            Bucket="open", Key="big", UploadId=upload, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]}))
        self.assertEqual((status, code), (403, "AccessDenied"))
        self.assertIn("append grant", message)
        self.assertEqual(self.alice.get_object(Bucket="open", Key="big")["Body"].read(), b"alice's")
        self.carol.abort_multipart_upload(Bucket="open", Key="big", UploadId=upload)
        # Starting an upload over an existing key is refused before any part is sent.
        self.assertEqual(refused(lambda: self.carol.create_multipart_upload(Bucket="open", Key="big"))[:2],
                         (403, "AccessDenied"))
        upload = self.carol.create_multipart_upload(Bucket="open", Key="big-new")["UploadId"]
        etag = self.carol.upload_part(Bucket="open", Key="big-new", UploadId=upload, PartNumber=1, Body=part)["ETag"]
        self.carol.complete_multipart_upload(Bucket="open", Key="big-new", UploadId=upload,
                                             MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})
        self.assertEqual(self.carol.head_object(Bucket="open", Key="big-new")["ContentLength"], len(part))

    def test_no_acl_or_policy_lifts_the_append_ceiling(self):
        self.carol.put_object(Bucket="open", Key="policy/a", Body=b"kept")
        self.alice.put_bucket_policy(Bucket="open", Policy=json.dumps({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Principal": {"AWS": ["carol"]}, "Action": ["s3:DeleteObject", "s3:PutObject"],
             "Resource": "arn:aws:s3:::open/*"}]}))
        self.alice.put_bucket_acl(Bucket="open", ACL="public-read-write")
        try:
            self.assertEqual(refused(lambda: self.carol.delete_object(Bucket="open", Key="policy/a"))[:2],
                             (403, "AccessDenied"))
            self.assertEqual(refused(lambda: self.carol.put_object(Bucket="open", Key="policy/a", Body=b"x"))[:2],
                             (403, "AccessDenied"))
        finally:
            self.alice.delete_bucket_policy(Bucket="open")
            self.alice.put_bucket_acl(Bucket="open", ACL="private")
        self.assertEqual(self.alice.get_object(Bucket="open", Key="policy/a")["Body"].read(), b"kept")

    def test_delete_unversioned_owner(self):
        self.bob.put_object(Bucket="backups", Key="k", Body=b"one")
        status, code, message = refused(lambda: self.bob.delete_object(Bucket="backups", Key="k"))
        self.assertEqual((status, code), (403, "AccessDenied"))
        self.assertIn("delete_unversioned", message)
        result = self.bob.delete_objects(Bucket="backups", Delete={"Objects": [{"Key": "k"}]})
        self.assertEqual([e["Code"] for e in result.get("Errors", [])], ["AccessDenied"])
        self.assertEqual(self.bob.get_object(Bucket="backups", Key="k")["Body"].read(), b"one")
        # Deleting a key that does not exist loses nothing: answered as S3 does.
        self.bob.delete_object(Bucket="backups", Key="missing")
        # Suspended versioning: the null delete marker would replace the object.
        self.alice.put_bucket_versioning(Bucket="backups", VersioningConfiguration={"Status": "Suspended"})
        self.assertEqual(refused(lambda: self.bob.delete_object(Bucket="backups", Key="k"))[:2], (403, "AccessDenied"))
        # Enabled: a delete adds a marker and keeps the object (a version); the null version stays protected.
        self.alice.put_bucket_versioning(Bucket="backups", VersioningConfiguration={"Status": "Enabled"})
        self.bob.put_object(Bucket="backups", Key="v", Body=b"versioned")
        self.bob.delete_object(Bucket="backups", Key="v")
        self.bob.delete_object(Bucket="backups", Key="k")  # a marker over k's null version
        self.assertEqual(refused(lambda: self.bob.delete_object(Bucket="backups", Key="k", VersionId="null"))[:2],
                         (403, "AccessDenied"))
        self.assertEqual(self.alice.get_object(Bucket="backups", Key="k", VersionId="null")["Body"].read(), b"one")
        # The owner may.
        self.alice.delete_object(Bucket="backups", Key="k", VersionId="null")
        self.assertEqual(error_of(lambda: self.alice.get_object(Bucket="backups", Key="k", VersionId="null"))
                         ["ResponseMetadata"]["HTTPStatusCode"], 404)


if __name__ == "__main__":
    unittest.main()
