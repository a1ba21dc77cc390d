"""The cleanup an S3 conformance suite runs before and after every case,
against `keel gateway` (a raw and a dedupe gateway): each user lists its
buckets, pages through ListObjectVersions (128 entries a page, also in
unversioned buckets), deletes every version and delete marker with a quiet
DeleteObjects that bypasses GOVERNANCE retention, asks GetObjectRetention
about each version refused with AccessDenied, waits out a short COMPLIANCE
retention, deletes again, then deletes the bucket. Unfinished multipart
uploads are not aborted first: DeleteBucket must still succeed. One bucket
the cleanup cannot delete makes every later case of such a suite fail, so
each state a case can leave behind is built here and must be cleaned."""
import datetime
import time
import unittest

from botocore.exceptions import ClientError

from gateway_harness import boto3_client, error_of, start_raw_and_dedupe, stop_all

GATEWAYS = {}
PAGE = 128


def setUpModule():
    start_raw_and_dedupe(GATEWAYS)


def tearDownModule():
    stop_all(GATEWAYS)


def version_pages(s3, bucket):
    """Pages of {'Key', 'VersionId'} from ListObjectVersions, following the
    Next markers exactly as returned (a missing one would break the call); the
    first page is asked with empty markers, as such a suite asks it."""
    args = {"Bucket": bucket, "MaxKeys": PAGE, "KeyMarker": "", "VersionIdMarker": ""}
    while True:
        page = s3.list_object_versions(**args)
        entries = page.get("Versions", []) + page.get("DeleteMarkers", [])
        if entries:
            yield [{"Key": e["Key"], "VersionId": e["VersionId"]} for e in entries]
        if not page["IsTruncated"]:
            return
        args["KeyMarker"] = page["NextKeyMarker"]
        args["VersionIdMarker"] = page["NextVersionIdMarker"]


def empty_and_delete(s3, bucket, longest_wait=60):
    """Deletes every version of `bucket` and the bucket; returns the seconds
    it waited for retention to expire."""
    latest_lock = None
    for entries in version_pages(s3, bucket):
        answer = s3.delete_objects(Bucket=bucket, Delete={"Objects": entries, "Quiet": True},
                                   BypassGovernanceRetention=True)
        for error in answer.get("Errors", []):
            if error["Code"] != "AccessDenied":
                continue
            try:
                until = s3.get_object_retention(Bucket=bucket, Key=error["Key"],
                                                VersionId=error["VersionId"])["Retention"]["RetainUntilDate"]
            except ClientError:
                continue
            latest_lock = until if latest_lock is None else max(latest_lock, until)
    waited = 0.0
    if latest_lock is not None:
        waited = max(0.0, (latest_lock - datetime.datetime.now(latest_lock.tzinfo)).total_seconds())
        if waited > longest_wait:
            raise AssertionError(f"bucket {bucket} is locked for {waited} more seconds")
        time.sleep(waited)
        for entries in version_pages(s3, bucket):
            s3.delete_objects(Bucket=bucket, Delete={"Objects": entries, "Quiet": True},
                              BypassGovernanceRetention=True)
    s3.delete_bucket(Bucket=bucket)
    return waited


def cleanup(clients, prefix):
    """Every user empties and deletes the buckets it lists under `prefix`."""
    for s3 in clients:
        for bucket in s3.list_buckets()["Buckets"]:
            if prefix in bucket["Name"]:
                empty_and_delete(s3, bucket["Name"])


ODD_KEYS = ["plain", " ", "_ ", "_", "  two", "trail ", "a b/c d", "ünïcødé/名前", "%2F", "q?x=y&z", "..", "k" * 1024]


class SuiteCleanupTest(unittest.TestCase):
    mode = "raw"
    counter = 0

    def setUp(self):
        self.gateway = GATEWAYS[self.mode]
        self.s3 = boto3_client(self.gateway, "http")
        self.bob = boto3_client(self.gateway, "http", user="bob")
        SuiteCleanupTest.counter += 1
        self.prefix = f"clean{SuiteCleanupTest.counter}-{self.mode}-"
        self.made = 0

    def bucket(self, s3=None, **create):
        self.made += 1
        name = f"{self.prefix}{self.made}"
        (s3 or self.s3).create_bucket(Bucket=name, **create)
        return name

    def locked_bucket(self):
        return self.bucket(ObjectLockEnabledForBucket=True)

    def assert_cleaned(self):
        cleanup([self.s3, self.bob], self.prefix)
        for s3 in (self.s3, self.bob):
            left = [b["Name"] for b in s3.list_buckets()["Buckets"] if self.prefix in b["Name"]]
            self.assertEqual(left, [])

    def test_objects_with_odd_keys_and_more_than_a_page(self):
        bucket = self.bucket()
        for key in ODD_KEYS:
            self.s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
        for n in range(PAGE + 7):
            self.s3.put_object(Bucket=bucket, Key=f"many/{n:04d}", Body=b"x")
        self.s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": [{"Key": "k", "Value": "v"}]})
        self.s3.put_object_tagging(Bucket=bucket, Key="plain", Tagging={"TagSet": [{"Key": "k", "Value": "v"}]})
        self.s3.put_object_acl(Bucket=bucket, Key=" ", ACL="public-read")
        self.assert_cleaned()

    def test_versioned_and_suspended_buckets_with_delete_markers(self):
        enabled = self.bucket()
        self.s3.put_bucket_versioning(Bucket=enabled, VersioningConfiguration={"Status": "Enabled"})
        suspended = self.bucket()
        self.s3.put_object(Bucket=suspended, Key="before", Body=b"null version")
        self.s3.put_bucket_versioning(Bucket=suspended, VersioningConfiguration={"Status": "Enabled"})
        for bucket in (enabled, suspended):
            for key in ODD_KEYS[:6]:
                for n in range(3):
                    self.s3.put_object(Bucket=bucket, Key=key, Body=bytes([n]))
                self.s3.delete_object(Bucket=bucket, Key=key)
            self.s3.delete_object(Bucket=bucket, Key="never written")
        for n in range(PAGE):
            self.s3.put_object(Bucket=enabled, Key="same", Body=bytes([n % 256]))
        self.s3.put_bucket_versioning(Bucket=suspended, VersioningConfiguration={"Status": "Suspended"})
        self.s3.put_object(Bucket=suspended, Key="before", Body=b"null again")
        self.s3.delete_object(Bucket=suspended, Key="_ ")
        self.s3.delete_object(Bucket=suspended, Key="only a marker")
        self.bucket()  # empty
        versioned_empty = self.bucket()
        self.s3.put_bucket_versioning(Bucket=versioned_empty, VersioningConfiguration={"Status": "Enabled"})
        self.assert_cleaned()

    def test_object_lock_governance_lifted_hold_and_default_retention(self):
        bucket = self.locked_bucket()
        far = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=30)
        self.s3.put_object(Bucket=bucket, Key="gov", Body=b"g", ObjectLockMode="GOVERNANCE",
                           ObjectLockRetainUntilDate=far)
        self.s3.put_object(Bucket=bucket, Key="gov", Body=b"g2")
        self.s3.put_object_retention(Bucket=bucket, Key="gov", Retention={"Mode": "GOVERNANCE",
                                                                         "RetainUntilDate": far})
        self.s3.put_object(Bucket=bucket, Key="held", Body=b"h", ObjectLockLegalHoldStatus="ON")
        self.s3.put_object_legal_hold(Bucket=bucket, Key="held", LegalHold={"Status": "OFF"})
        self.s3.delete_object(Bucket=bucket, Key="gov")
        defaulted = self.locked_bucket()
        self.s3.put_object_lock_configuration(Bucket=defaulted, ObjectLockConfiguration={
            "ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 1}}})
        for key in ODD_KEYS[:4]:
            self.s3.put_object(Bucket=defaulted, Key=key, Body=b"d")
        self.assert_cleaned()

    def test_short_compliance_retention_is_waited_out(self):
        bucket = self.locked_bucket()
        soon = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=3)
        self.s3.put_object(Bucket=bucket, Key="c o", Body=b"c", ObjectLockMode="COMPLIANCE",
                           ObjectLockRetainUntilDate=soon)
        self.s3.put_object(Bucket=bucket, Key="free", Body=b"f")
        refused = self.s3.delete_objects(Bucket=bucket, BypassGovernanceRetention=True, Delete={
            "Objects": [{"Key": v["Key"], "VersionId": v["VersionId"]}
                        for v in self.s3.list_object_versions(Bucket=bucket)["Versions"]], "Quiet": True})
        self.assertEqual([(e["Key"], e["Code"]) for e in refused["Errors"]], [("c o", "AccessDenied")])
        self.assertIn("VersionId", refused["Errors"][0])
        self.assert_cleaned()

    def test_unfinished_multipart_uploads_do_not_block_delete_bucket(self):
        bucket = self.bucket()
        for key in ("upload", " upload ", "ünï"):
            upload = self.s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
            self.s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=1, Body=b"p" * 1024)
        self.s3.create_multipart_upload(Bucket=bucket, Key="no parts")
        locked = self.locked_bucket()
        self.s3.create_multipart_upload(Bucket=locked, Key="locked upload")
        self.assert_cleaned()
        # The uploads went with their bucket: a bucket of the same name starts without them.
        self.s3.create_bucket(Bucket=bucket)
        self.assertEqual(self.s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []), [])
        self.s3.delete_bucket(Bucket=bucket)

    def test_acls_policies_and_access_settings(self):
        bucket = self.bucket()
        self.s3.put_object(Bucket=bucket, Key="obj", Body=b"o")
        self.s3.put_bucket_acl(Bucket=bucket, ACL="public-read-write")
        self.s3.put_bucket_policy(Bucket=bucket, Policy=(
            '{"Version": "2012-10-17", "Statement": [{"Effect": "Deny", "Principal": "*", '
            f'"Action": "s3:GetObject", "Resource": "arn:aws:s3:::{bucket}/*"}}]}}'))
        shared = self.bucket()
        self.s3.put_object(Bucket=shared, Key="obj", Body=b"o")
        bob_id, alice_id = (s3.list_buckets()["Owner"]["ID"] for s3 in (self.bob, self.s3))
        # Grants replace the ACL: alice keeps hers, or she could no longer list her bucket (as S3).
        self.s3.put_bucket_acl(Bucket=shared, GrantFullControl=f'id="{bob_id}", id="{alice_id}"')
        enforced = self.bucket(ObjectOwnership="BucketOwnerEnforced")
        self.s3.put_object(Bucket=enforced, Key="obj", Body=b"o")
        blocked = self.bucket()
        self.s3.put_public_access_block(Bucket=blocked, PublicAccessBlockConfiguration={
            "BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True,
            "RestrictPublicBuckets": True})
        # bob's own buckets, one of which he lets alice write to
        mine = self.bucket(self.bob)
        self.bob.put_object(Bucket=mine, Key="bob's", Body=b"b")
        self.bob.put_bucket_acl(Bucket=mine, ACL="public-read-write")
        self.s3.put_object(Bucket=mine, Key="alice's", Body=b"a")
        # ListBuckets lists the buckets a user owns, not those an ACL shares with it.
        self.assertNotIn(shared, [b["Name"] for b in self.bob.list_buckets()["Buckets"]])
        self.assertNotIn(mine, [b["Name"] for b in self.s3.list_buckets()["Buckets"]])
        self.assert_cleaned()

    def test_older_cleanup_one_delete_at_a_time(self):
        """The older form of such a cleanup: ListObjects (one page) and a plain DeleteObject of
        each key, then DeleteObject of each version and of each delete marker by id."""
        bucket = self.bucket()
        self.s3.put_object(Bucket=bucket, Key="_ ", Body=b"null version")
        self.s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        for key in ODD_KEYS[:6]:
            self.s3.put_object(Bucket=bucket, Key=key, Body=b"v")
        self.s3.delete_object(Bucket=bucket, Key="_")
        self.s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Suspended"})
        self.s3.put_object(Bucket=bucket, Key="_ ", Body=b"null again")
        for key in [o["Key"] for o in self.s3.list_objects(Bucket=bucket).get("Contents", [])]:
            self.s3.delete_object(Bucket=bucket, Key=key)
        for kind in ("Versions", "DeleteMarkers"):
            for entry in self.s3.list_object_versions(Bucket=bucket).get(kind, []):
                self.s3.delete_object(Bucket=bucket, Key=entry["Key"], VersionId=entry["VersionId"])
        self.s3.delete_bucket(Bucket=bucket)

    def test_bucket_deleted_twice_answers_no_such_bucket(self):
        bucket = self.bucket()
        self.s3.delete_bucket(Bucket=bucket)
        self.assertEqual(error_of(lambda: self.s3.delete_bucket(Bucket=bucket))["Error"]["Code"], "NoSuchBucket")


class DedupeSuiteCleanupTest(SuiteCleanupTest):
    mode = "dedupe"


if __name__ == "__main__":
    unittest.main()
