"""boto3 against `keel gateway` (Debian's python3-boto3), over HTTP and over
TLS: versioning, delete markers and versioned reads and deletes; Object
Lock retention and legal holds; object tagging; Veeam's Smart Object
Storage API documents; Prometheus metrics."""
import base64
import datetime
import hashlib
import os
import re
import time
import unittest
import urllib.error
import urllib.request
import xml.etree.ElementTree as ElementTree

from gateway_harness import Gateway, boto3_client, error_of

GATEWAY = None


def setUpModule():
    global GATEWAY
    GATEWAY = Gateway()


def tearDownModule():
    GATEWAY.stop()


class FeatureTest(unittest.TestCase):
    scheme = "http"
    bucket_counter = 0

    def setUp(self):
        self.s3 = boto3_client(GATEWAY, self.scheme)

    def new_bucket(self, name, **create):
        FeatureTest.bucket_counter += 1
        bucket = f"{name}-{self.scheme}-{FeatureTest.bucket_counter}"
        self.s3.create_bucket(Bucket=bucket, **create)
        return bucket

    def test_versioning(self):
        s3 = self.s3
        bucket = self.new_bucket("versions")
        self.assertNotIn("Status", s3.get_bucket_versioning(Bucket=bucket))
        s3.put_object(Bucket=bucket, Key="doc", Body=b"before versioning")
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        self.assertEqual(s3.get_bucket_versioning(Bucket=bucket)["Status"], "Enabled")

        bodies = [os.urandom(1000 + i) for i in range(3)]
        ids = []
        for body in bodies:
            put = s3.put_object(Bucket=bucket, Key="doc", Body=body)
            self.assertEqual(put["ETag"], '"' + hashlib.md5(body).hexdigest() + '"')
            ids.append(put["VersionId"])
        self.assertEqual(len(set(ids)), 3)
        s3.put_object(Bucket=bucket, Key="dir/other", Body=b"x")

        listing = s3.list_object_versions(Bucket=bucket, Prefix="doc")
        versions = listing["Versions"]
        self.assertEqual([v["VersionId"] for v in versions], list(reversed(ids)) + ["null"])
        self.assertEqual([v["IsLatest"] for v in versions], [True, False, False, False])
        self.assertEqual(versions[0]["Size"], len(bodies[2]))

        for version_id, body in zip(ids, bodies):
            got = s3.get_object(Bucket=bucket, Key="doc", VersionId=version_id)
            self.assertEqual(got["Body"].read(), body)
            self.assertEqual(got["VersionId"], version_id)
        self.assertEqual(s3.get_object(Bucket=bucket, Key="doc", VersionId="null")["Body"].read(), b"before versioning")
        self.assertEqual(s3.head_object(Bucket=bucket, Key="doc", VersionId=ids[0])["ContentLength"], len(bodies[0]))
        self.assertEqual(error_of(lambda: s3.get_object(Bucket=bucket, Key="doc", VersionId="f" * 32))["Error"]["Code"],
                         "NoSuchVersion")

        # Pages of one version each, continued from the key and version markers.
        seen, markers = [], {}
        while True:
            page = s3.list_object_versions(Bucket=bucket, MaxKeys=1, **markers)
            seen += [(v["Key"], v["VersionId"]) for v in page.get("Versions", [])]
            if not page["IsTruncated"]:
                break
            markers = {"KeyMarker": page["NextKeyMarker"], "VersionIdMarker": page["NextVersionIdMarker"]}
        self.assertEqual(seen, [("dir/other", seen[0][1])] + [("doc", v) for v in reversed(ids)] + [("doc", "null")])
        rolled = s3.list_object_versions(Bucket=bucket, Delimiter="/")
        self.assertEqual([p["Prefix"] for p in rolled["CommonPrefixes"]], ["dir/"])
        self.assertEqual(len(rolled["Versions"]), 4)

        # A delete without a version adds a delete marker; the versions stay.
        deleted = s3.delete_object(Bucket=bucket, Key="doc")
        self.assertTrue(deleted["DeleteMarker"])
        marker_id = deleted["VersionId"]
        missing = error_of(lambda: s3.get_object(Bucket=bucket, Key="doc"))
        self.assertEqual(missing["Error"]["Code"], "NoSuchKey")
        self.assertEqual(missing["ResponseMetadata"]["HTTPHeaders"]["x-amz-delete-marker"], "true")
        self.assertEqual(error_of(lambda: s3.head_object(Bucket=bucket, Key="doc"))["ResponseMetadata"]["HTTPStatusCode"],
                         404)
        self.assertEqual([o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]], ["dir/other"])
        listing = s3.list_object_versions(Bucket=bucket, Prefix="doc")
        self.assertEqual([(m["VersionId"], m["IsLatest"]) for m in listing["DeleteMarkers"]], [(marker_id, True)])
        self.assertEqual(len(listing["Versions"]), 4)
        self.assertEqual(s3.get_object(Bucket=bucket, Key="doc", VersionId=ids[1])["Body"].read(), bodies[1])

        # Removing the marker brings the newest version back; removing a version deletes it.
        self.assertTrue(s3.delete_object(Bucket=bucket, Key="doc", VersionId=marker_id)["DeleteMarker"])
        self.assertEqual(s3.get_object(Bucket=bucket, Key="doc")["Body"].read(), bodies[2])
        s3.delete_object(Bucket=bucket, Key="doc", VersionId=ids[2])
        self.assertEqual(s3.get_object(Bucket=bucket, Key="doc")["Body"].read(), bodies[1])
        self.assertEqual(error_of(lambda: s3.get_object(Bucket=bucket, Key="doc", VersionId=ids[2]))["Error"]["Code"],
                         "NoSuchVersion")

        # Copy from an old version; DeleteObjects by version and with markers.
        copy = s3.copy_object(Bucket=bucket, Key="copy", CopySource={"Bucket": bucket, "Key": "doc", "VersionId": ids[0]})
        self.assertEqual(copy["CopySourceVersionId"], ids[0])
        self.assertEqual(s3.get_object(Bucket=bucket, Key="copy")["Body"].read(), bodies[0])
        result = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "copy"}, {"Key": "doc", "VersionId": ids[0]}]})
        by_key = {d["Key"]: d for d in result["Deleted"]}
        self.assertTrue(by_key["copy"]["DeleteMarker"])
        self.assertEqual(by_key["doc"]["VersionId"], ids[0])
        left = s3.list_object_versions(Bucket=bucket, Prefix="doc")["Versions"]
        self.assertEqual([v["VersionId"] for v in left], [ids[1], "null"])

        # Suspended: writes and deletes replace the null version.
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Suspended"})
        put = s3.put_object(Bucket=bucket, Key="doc", Body=b"suspended")
        self.assertNotIn("VersionId", put)  # as AWS: a Suspended bucket's writes name no version
        left = s3.list_object_versions(Bucket=bucket, Prefix="doc")["Versions"]
        self.assertEqual([(v["VersionId"], v["IsLatest"]) for v in left], [("null", True), (ids[1], False)])
        self.assertEqual(s3.delete_object(Bucket=bucket, Key="doc")["VersionId"], "null")
        listing = s3.list_object_versions(Bucket=bucket, Prefix="doc")
        self.assertEqual([v["VersionId"] for v in listing["Versions"]], [ids[1]])
        self.assertEqual([m["VersionId"] for m in listing["DeleteMarkers"]], ["null"])

    def test_versioned_multipart(self):
        s3 = self.s3
        bucket = self.new_bucket("mpversions")
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        upload = s3.create_multipart_upload(Bucket=bucket, Key="big")["UploadId"]
        part = s3.upload_part(Bucket=bucket, Key="big", UploadId=upload, PartNumber=1, Body=b"p" * 1000)
        done = s3.complete_multipart_upload(Bucket=bucket, Key="big", UploadId=upload,
                                            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
        self.assertEqual(s3.head_object(Bucket=bucket, Key="big")["VersionId"], done["VersionId"])
        self.assertNotEqual(done["VersionId"], "null")

    def test_object_lock(self):
        s3 = self.s3
        plain = self.new_bucket("nolock")
        self.assertEqual(error_of(lambda: s3.get_object_lock_configuration(Bucket=plain))["Error"]["Code"],
                         "ObjectLockConfigurationNotFoundError")
        bucket = self.new_bucket("locked", ObjectLockEnabledForBucket=True)
        self.assertEqual(s3.get_bucket_versioning(Bucket=bucket)["Status"], "Enabled")
        self.assertEqual(error_of(lambda: s3.put_bucket_versioning(
            Bucket=bucket, VersioningConfiguration={"Status": "Suspended"}))["Error"]["Code"], "InvalidBucketState")
        config = s3.get_object_lock_configuration(Bucket=bucket)["ObjectLockConfiguration"]
        self.assertEqual(config["ObjectLockEnabled"], "Enabled")
        self.assertNotIn("Rule", config)

        now = datetime.datetime.now(datetime.timezone.utc)
        soon, later, latest = (now + datetime.timedelta(days=d) for d in (1, 2, 3))

        # COMPLIANCE: extended but never shortened or removed; the version cannot be deleted.
        body = b"compliant"
        put = s3.put_object(Bucket=bucket, Key="c", Body=body, ObjectLockMode="COMPLIANCE",
                            ObjectLockRetainUntilDate=later,
                            ContentMD5=base64.b64encode(hashlib.md5(body).digest()).decode())
        version = put["VersionId"]
        head = s3.head_object(Bucket=bucket, Key="c")
        self.assertEqual(head["ObjectLockMode"], "COMPLIANCE")
        retention = s3.get_object_retention(Bucket=bucket, Key="c", VersionId=version)["Retention"]
        self.assertEqual(retention["Mode"], "COMPLIANCE")
        self.assertEqual(int(retention["RetainUntilDate"].timestamp()), int(later.timestamp()))
        shorten = lambda: s3.put_object_retention(Bucket=bucket, Key="c", VersionId=version,
                                                  Retention={"Mode": "COMPLIANCE", "RetainUntilDate": soon})
        self.assertEqual(error_of(shorten)["Error"]["Code"], "AccessDenied")
        relax = lambda: s3.put_object_retention(Bucket=bucket, Key="c", VersionId=version, BypassGovernanceRetention=True,
                                                Retention={"Mode": "GOVERNANCE", "RetainUntilDate": latest})
        self.assertEqual(error_of(relax)["Error"]["Code"], "AccessDenied")
        s3.put_object_retention(Bucket=bucket, Key="c", VersionId=version,
                                Retention={"Mode": "COMPLIANCE", "RetainUntilDate": latest})
        retention = s3.get_object_retention(Bucket=bucket, Key="c", VersionId=version)["Retention"]
        self.assertEqual(int(retention["RetainUntilDate"].timestamp()), int(latest.timestamp()))
        delete = lambda: s3.delete_object(Bucket=bucket, Key="c", VersionId=version, BypassGovernanceRetention=True)
        self.assertEqual(error_of(delete)["Error"]["Code"], "AccessDenied")
        # Without a version id a delete marker goes on top; the version stays.
        self.assertTrue(s3.delete_object(Bucket=bucket, Key="c")["DeleteMarker"])
        self.assertEqual(s3.get_object(Bucket=bucket, Key="c", VersionId=version)["Body"].read(), body)

        # GOVERNANCE: the owner may bypass it, another writer may not.
        put = s3.put_object(Bucket=bucket, Key="g", Body=b"governed", ObjectLockMode="GOVERNANCE",
                            ObjectLockRetainUntilDate=later)
        governed = put["VersionId"]
        self.assertEqual(error_of(lambda: s3.delete_object(Bucket=bucket, Key="g", VersionId=governed))["Error"]["Code"],
                         "AccessDenied")
        self.assertEqual(error_of(lambda: s3.put_object_retention(
            Bucket=bucket, Key="g", VersionId=governed, Retention={"Mode": "GOVERNANCE", "RetainUntilDate": soon}))
            ["Error"]["Code"], "AccessDenied")
        s3.put_object_retention(Bucket=bucket, Key="g", VersionId=governed, BypassGovernanceRetention=True,
                                Retention={"Mode": "GOVERNANCE", "RetainUntilDate": soon})
        s3.delete_object(Bucket=bucket, Key="g", VersionId=governed, BypassGovernanceRetention=True)
        self.assertEqual(error_of(lambda: s3.head_object(Bucket=bucket, Key="g", VersionId=governed))
                         ["ResponseMetadata"]["HTTPStatusCode"], 404)

        # Legal hold blocks deletion until it is lifted.
        held = s3.put_object(Bucket=bucket, Key="h", Body=b"held", ObjectLockLegalHoldStatus="ON")["VersionId"]
        self.assertEqual(s3.get_object_legal_hold(Bucket=bucket, Key="h")["LegalHold"]["Status"], "ON")
        self.assertEqual(error_of(lambda: s3.delete_object(Bucket=bucket, Key="h", VersionId=held,
                                                           BypassGovernanceRetention=True))["Error"]["Code"],
                         "AccessDenied")
        # DeleteObjects reports the locked versions one by one.
        free = s3.put_object(Bucket=bucket, Key="free", Body=b"free")["VersionId"]
        result = s3.delete_objects(Bucket=bucket, Delete={"Objects": [
            {"Key": "h", "VersionId": held}, {"Key": "c", "VersionId": version}, {"Key": "free", "VersionId": free}]})
        self.assertEqual(sorted((e["Key"], e["Code"]) for e in result["Errors"]),
                         [("c", "AccessDenied"), ("h", "AccessDenied")])
        self.assertEqual([d["Key"] for d in result["Deleted"]], ["free"])
        s3.put_object_legal_hold(Bucket=bucket, Key="h", VersionId=held, LegalHold={"Status": "OFF"})
        self.assertEqual(s3.get_object_legal_hold(Bucket=bucket, Key="h", VersionId=held)["LegalHold"]["Status"], "OFF")
        self.assertEqual(s3.head_object(Bucket=bucket, Key="h", VersionId=held)["ObjectLockLegalHoldStatus"], "OFF")
        s3.delete_object(Bucket=bucket, Key="h", VersionId=held)
        # A version that never had a legal hold has none to show: 404 NoSuchObjectLockConfiguration, as AWS.
        never = error_of(lambda: s3.get_object_legal_hold(Bucket=bucket, Key="free2", VersionId=s3.put_object(
            Bucket=bucket, Key="free2", Body=b"x")["VersionId"]))
        self.assertEqual((never["ResponseMetadata"]["HTTPStatusCode"], never["Error"]["Code"]),
                         (404, "NoSuchObjectLockConfiguration"))
        self.assertNotIn("ObjectLockLegalHoldStatus", s3.head_object(Bucket=bucket, Key="free2"))

        # Default retention applies to new versions.
        s3.put_object_lock_configuration(Bucket=bucket, ObjectLockConfiguration={
            "ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 1}}})
        rule = s3.get_object_lock_configuration(Bucket=bucket)["ObjectLockConfiguration"]["Rule"]
        self.assertEqual(rule["DefaultRetention"], {"Mode": "GOVERNANCE", "Days": 1})
        s3.put_object(Bucket=bucket, Key="d", Body=b"defaulted")
        self.assertEqual(s3.get_object_retention(Bucket=bucket, Key="d")["Retention"]["Mode"], "GOVERNANCE")

        # A copy takes lock headers without a body checksum.
        copied = s3.copy_object(Bucket=bucket, Key="copied", CopySource={"Bucket": bucket, "Key": "d"},
                                ObjectLockMode="COMPLIANCE", ObjectLockRetainUntilDate=later)
        self.assertEqual(s3.get_object_retention(Bucket=bucket, Key="copied", VersionId=copied["VersionId"])
                         ["Retention"]["Mode"], "COMPLIANCE")

        # Lock and tagging headers on a multipart upload apply to the version it completes into.
        upload = s3.create_multipart_upload(Bucket=bucket, Key="mp", ObjectLockMode="COMPLIANCE",
                                            ObjectLockRetainUntilDate=later, ObjectLockLegalHoldStatus="ON",
                                            Tagging="kind=backup", ContentType="application/x-keel")["UploadId"]
        part = s3.upload_part(Bucket=bucket, Key="mp", UploadId=upload, PartNumber=1, Body=b"m" * 1000)
        done = s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=upload,
                                            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
        retention = s3.get_object_retention(Bucket=bucket, Key="mp", VersionId=done["VersionId"])["Retention"]
        self.assertEqual((retention["Mode"], int(retention["RetainUntilDate"].timestamp())),
                         ("COMPLIANCE", int(later.timestamp())))
        self.assertEqual(s3.get_object_legal_hold(Bucket=bucket, Key="mp")["LegalHold"]["Status"], "ON")
        self.assertEqual(s3.get_object_tagging(Bucket=bucket, Key="mp")["TagSet"], [{"Key": "kind", "Value": "backup"}])
        head = s3.head_object(Bucket=bucket, Key="mp")
        self.assertEqual(head["ContentType"], "application/x-keel")
        self.assertNotIn("x-amz-tagging", head["ResponseMetadata"]["HTTPHeaders"])
        self.assertEqual(error_of(lambda: s3.delete_object(Bucket=bucket, Key="mp", VersionId=done["VersionId"],
                                                           BypassGovernanceRetention=True))["Error"]["Code"],
                         "AccessDenied")
        # ... and are checked when the upload starts.
        self.assertEqual(error_of(lambda: s3.create_multipart_upload(
            Bucket=bucket, Key="bad", ObjectLockMode="FOREVER", ObjectLockRetainUntilDate=later))["Error"]["Code"],
            "InvalidArgument")
        self.assertEqual(error_of(lambda: s3.create_multipart_upload(Bucket=bucket, Key="bad", Tagging="a=1&a=2"))
                         ["Error"]["Code"], "InvalidTag")
        self.assertEqual(error_of(lambda: s3.create_multipart_upload(
            Bucket=plain, Key="x", ObjectLockMode="GOVERNANCE", ObjectLockRetainUntilDate=later))["Error"]["Code"],
            "InvalidRequest")

        # Lock headers need Object Lock on the bucket.
        self.assertEqual(error_of(lambda: s3.put_object(Bucket=plain, Key="x", Body=b"x", ObjectLockMode="GOVERNANCE",
                                                        ObjectLockRetainUntilDate=later))["Error"]["Code"],
                         "InvalidRequest")

    def test_tagging(self):
        s3 = self.s3
        bucket = self.new_bucket("tags")
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        first = s3.put_object(Bucket=bucket, Key="t", Body=b"1", Tagging="team=backup&note=a%20b%26c")["VersionId"]
        tags = s3.get_object_tagging(Bucket=bucket, Key="t")
        # Listed by key, as S3 and RGW list them, not in the order x-amz-tagging gave them.
        self.assertEqual(tags["TagSet"], [{"Key": "note", "Value": "a b&c"}, {"Key": "team", "Value": "backup"}])
        self.assertEqual(tags["VersionId"], first)
        self.assertEqual(s3.head_object(Bucket=bucket, Key="t")["ResponseMetadata"]["HTTPHeaders"]["x-amz-tagging-count"],
                         "2")
        second = s3.put_object(Bucket=bucket, Key="t", Body=b"2")["VersionId"]
        self.assertEqual(s3.get_object_tagging(Bucket=bucket, Key="t")["TagSet"], [])
        s3.put_object_tagging(Bucket=bucket, Key="t", VersionId=second,
                              Tagging={"TagSet": [{"Key": "k" * 128, "Value": "v" * 256}]})
        self.assertEqual(s3.get_object_tagging(Bucket=bucket, Key="t")["TagSet"][0]["Value"], "v" * 256)
        self.assertEqual(len(s3.get_object_tagging(Bucket=bucket, Key="t", VersionId=first)["TagSet"]), 2)
        s3.delete_object_tagging(Bucket=bucket, Key="t", VersionId=first)
        self.assertEqual(s3.get_object_tagging(Bucket=bucket, Key="t", VersionId=first)["TagSet"], [])
        self.assertEqual(len(s3.get_object_tagging(Bucket=bucket, Key="t")["TagSet"]), 1)
        # Copies keep the tags unless told to replace them.
        s3.copy_object(Bucket=bucket, Key="copy", CopySource={"Bucket": bucket, "Key": "t"})
        self.assertEqual(len(s3.get_object_tagging(Bucket=bucket, Key="copy")["TagSet"]), 1)
        s3.copy_object(Bucket=bucket, Key="copy", CopySource={"Bucket": bucket, "Key": "t"},
                       TaggingDirective="REPLACE", Tagging="a=1")
        self.assertEqual(s3.get_object_tagging(Bucket=bucket, Key="copy")["TagSet"], [{"Key": "a", "Value": "1"}])
        # S3's limits.
        too_many = {"TagSet": [{"Key": f"k{i}", "Value": "v"} for i in range(11)]}
        for tagging in (too_many, {"TagSet": [{"Key": "k" * 129, "Value": "v"}]},
                        {"TagSet": [{"Key": "k", "Value": "v" * 257}]},
                        {"TagSet": [{"Key": "k", "Value": "1"}, {"Key": "k", "Value": "2"}]}):
            self.assertEqual(error_of(lambda: s3.put_object_tagging(Bucket=bucket, Key="t", Tagging=tagging))
                             ["Error"]["Code"], "InvalidTag")
        self.assertEqual(error_of(lambda: s3.put_object(Bucket=bucket, Key="u", Body=b"", Tagging="a=1&a=2"))
                         ["Error"]["Code"], "InvalidTag")
        self.assertEqual(error_of(lambda: s3.get_object_tagging(Bucket=bucket, Key="missing"))["Error"]["Code"],
                         "NoSuchKey")

    def test_veeam_sosapi(self):
        s3 = self.s3
        bucket = self.new_bucket("veeam")
        prefix = ".system-d26a9498-cb7c-4a87-a44a-8ae204f5ba6c/"
        system = ElementTree.fromstring(s3.get_object(Bucket=bucket, Key=prefix + "system.xml")["Body"].read())
        self.assertEqual(system.tag, "SystemInfo")
        self.assertEqual(system.findtext("ProtocolVersion"), '"1.0"')
        self.assertTrue(system.findtext("ModelName"))
        self.assertEqual(system.findtext("ProtocolCapabilities/CapacityInfo"), "true")
        self.assertEqual(system.findtext("ProtocolCapabilities/UploadSessions"), "false")
        self.assertEqual(system.findtext("ProtocolCapabilities/IAMSTS"), "false")
        self.assertEqual(system.findtext("SystemRecommendations/KbBlockSize"), "1024")

        s3.put_object(Bucket=bucket, Key="a", Body=b"x" * 1000)
        s3.put_object(Bucket=bucket, Key="b", Body=b"y" * 234)
        key = prefix + "capacity.xml"
        capacity = ElementTree.fromstring(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        self.assertEqual(capacity.tag, "CapacityInfo")
        fs = os.statvfs(GATEWAY.dir)
        self.assertEqual(int(capacity.findtext("Capacity")), fs.f_blocks * fs.f_frsize)
        self.assertGreater(int(capacity.findtext("Available")), 0)
        self.assertLessEqual(int(capacity.findtext("Available")), int(capacity.findtext("Capacity")))
        self.assertEqual(int(capacity.findtext("Used")), 1234)
        self.assertGreater(s3.head_object(Bucket=bucket, Key=key)["ContentLength"], 0)
        # Only the documents are generated; the prefix holds nothing else, and another user sees nothing.
        self.assertEqual(error_of(lambda: s3.get_object(Bucket=bucket, Key=prefix + "other.xml"))["Error"]["Code"],
                         "NoSuchKey")
        bob = boto3_client(GATEWAY, self.scheme, "bob")
        self.assertEqual(error_of(lambda: bob.get_object(Bucket=bucket, Key=key))["Error"]["Code"], "AccessDenied")

    def test_prometheus_metrics(self):
        def scrape():
            text = urllib.request.urlopen(GATEWAY.metrics_url).read().decode()
            values = {}
            for line in text.splitlines():
                if line and not line.startswith("#"):
                    name, value = line.rsplit(" ", 1)
                    values[name] = float(value)
            return values

        before = scrape()
        s3 = self.s3
        bucket = self.new_bucket("metrics")
        s3.put_object(Bucket=bucket, Key="m", Body=b"z" * 5000)
        s3.get_object(Bucket=bucket, Key="m")["Body"].read()
        error_of(lambda: s3.get_object(Bucket=bucket, Key="missing"))

        def grew(name):
            return after.get(name, 0) - before.get(name, 0)
        # A request is counted once its response is written, which the client may see first.
        deadline = time.monotonic() + 5
        while True:
            after = scrape()
            if grew('keel_gateway_request_duration_seconds_count{operation="GetObject"}') >= 2 or \
                    time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual(grew('keel_gateway_requests_total{operation="PutObject",status="200"}'), 1)
        self.assertEqual(grew('keel_gateway_requests_total{operation="GetObject",status="200"}'), 1)
        self.assertEqual(grew('keel_gateway_requests_total{operation="GetObject",status="404"}'), 1)
        self.assertGreaterEqual(grew('keel_gateway_received_bytes_total{operation="PutObject"}'), 5000)
        # The object, then the NoSuchKey document.
        self.assertGreater(grew('keel_gateway_sent_bytes_total{operation="GetObject"}'), 5000)
        self.assertEqual(grew('keel_gateway_request_duration_seconds_count{operation="GetObject"}'), 2)
        self.assertEqual(grew('keel_gateway_request_duration_seconds_bucket{operation="GetObject",le="+Inf"}'), 2)
        with self.assertRaises(urllib.error.HTTPError) as raised:
            urllib.request.urlopen(GATEWAY.metrics_url.replace("/metrics", "/other"))
        self.assertEqual(raised.exception.code, 404)


class TlsFeatureTest(FeatureTest):
    scheme = "https"


if __name__ == "__main__":
    unittest.main()
