"""Bucket lifecycle rules carried out by `keel gateway` (boto3; a raw and a
dedupe gateway, each sweeping every second with a lifecycle day of 2 s, as
RGW's rgw_lc_debug_interval): Get/Put/DeleteBucketLifecycle with S3's error
codes, x-amz-expiration on PUT and HEAD, x-amz-abort-date on
CreateMultipartUpload, then what the sweep does: current versions expired
(a delete marker in a versioned bucket), noncurrent versions beyond
NewerNoncurrentVersions removed, a lone delete marker removed, unfinished
uploads aborted, and nothing removed that Object Lock protects or no rule
names. The rules survive a crash of the gateway."""
import concurrent.futures
import datetime
import re
import time
import unittest

from gateway_harness import Gateway, boto3_client, enable_object_lock, error_of

DAY_S = 2
SERVER = f"lifecycle_interval = 1\nlifecycle_debug_day = {DAY_S}\n"
GATEWAYS = {}


def in_parallel(calls):
    """{name: fn()} of {name: fn}, each on its own thread (the raw and dedupe gateways side by side)."""
    with concurrent.futures.ThreadPoolExecutor(len(calls)) as pool:
        futures = {name: pool.submit(fn) for name, fn in calls.items()}
        return {name: future.result() for name, future in futures.items()}


def setUpModule():
    GATEWAYS.update(in_parallel({"raw": lambda: Gateway(server_extra=SERVER),
                                 "dedupe": lambda: Gateway(dedupe=True, server_extra=SERVER)}))


def tearDownModule():
    for gateway in GATEWAYS.values():
        gateway.stop()


def rule(rule_id, prefix, **actions):
    return {"ID": rule_id, "Filter": {"Prefix": prefix}, "Status": "Enabled", **actions}


def keys(s3, bucket):
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", []))


def versions(s3, bucket, prefix):
    listing = s3.list_object_versions(Bucket=bucket, Prefix=prefix)
    return ([(v["Key"], v["VersionId"]) for v in listing.get("Versions", [])],
            [(m["Key"], m["VersionId"]) for m in listing.get("DeleteMarkers", [])])


def counters_short(gateway, before):
    """The lifecycle counters of /metrics that have not grown (since `before`) by what
    test_rules_are_carried_out's rules remove: at least, as later sweeps go on expiring what
    the first ones made noncurrent. Polled with the buckets: a run counts once it returns."""
    least = {"sweeps": 1, "objects_expired": 7, "versions_expired": 2, "delete_markers_removed": 2,
             "uploads_aborted": 1}
    after = gateway.metrics()
    name = "keel_gateway_lifecycle_{}_total".format
    grown = {what: after[name(what)] - before.get(name(what), 0) for what in least}
    short = [f"{what}: {grown[what]} < {n}" for what, n in least.items() if grown[what] < n]
    if after["keel_gateway_lifecycle_last_sweep_seconds"] <= 0:
        short.append("no last sweep seconds")
    return short


class LifecycleTest(unittest.TestCase):
    def test_configuration_crud_and_errors(self):
        for mode, gateway in GATEWAYS.items():
            with self.subTest(mode=mode):
                s3 = boto3_client(gateway, "http")
                bucket = f"lc-crud-{mode}"
                s3.create_bucket(Bucket=bucket)
                missing = error_of(lambda: s3.get_bucket_lifecycle_configuration(Bucket=bucket))
                self.assertEqual((missing["ResponseMetadata"]["HTTPStatusCode"], missing["Error"]["Code"]),
                                 (404, "NoSuchLifecycleConfiguration"))
                days = {"Expiration": {"Days": 1}}

                def refused(rules):
                    e = error_of(lambda: s3.put_bucket_lifecycle_configuration(
                        Bucket=bucket, LifecycleConfiguration={"Rules": rules}))
                    return e["ResponseMetadata"]["HTTPStatusCode"], e["Error"]["Code"]
                self.assertEqual(refused([rule("x" * 256, "a/", **days)]), (400, "InvalidArgument"))
                self.assertEqual(refused([rule("same", "a/", **days), rule("same", "b/", **days)]),
                                 (400, "InvalidArgument"))
                self.assertEqual(refused([{**rule("r", "a/", **days), "Status": "enabled"}]), (400, "MalformedXML"))
                self.assertEqual(refused([rule("r", "a/", Expiration={"Days": 0})]), (400, "InvalidArgument"))
                self.assertEqual(refused([rule("r", "a/", Expiration={"Date": datetime.datetime(2030, 1, 1, 10)})]),
                                 (400, "InvalidArgument"))
                self.assertEqual(refused([rule("r", "a/")]), (400, "InvalidArgument"))
                # AWS: one condition goes straight into <Filter>, two or more into <And>.
                one_tag_and = {"And": {"Tags": [{"Key": "k", "Value": "v"}]}}
                self.assertEqual(refused([{**rule("r", "a/", **days), "Filter": one_tag_and}]), (400, "MalformedXML"))
                self.assertEqual(refused([rule("r", "a/", Transitions=[{"Days": 30, "StorageClass": "GLACIER"}])]),
                                 (400, "InvalidStorageClass"))

                s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": [
                    {"Prefix": "logs/", "Status": "Enabled", "Expiration": {"Days": 30}},
                    rule("parts", "", AbortIncompleteMultipartUpload={"DaysAfterInitiation": 7})]})
                got = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
                self.assertEqual(len(got), 2)
                self.assertTrue(got[0]["ID"])  # generated, as S3 does
                self.assertEqual((got[0]["Prefix"], got[0]["Expiration"]["Days"]), ("logs/", 30))
                self.assertEqual(got[1]["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"], 7)
                self.assertEqual(s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"][0]["ID"], got[0]["ID"])
                if mode == "raw":  # the configuration is in gateway.db, committed before the answer
                    gateway.crash_and_restart()
                    s3 = boto3_client(gateway, "http")
                    self.assertEqual(s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"], got)
                s3.delete_bucket_lifecycle(Bucket=bucket)
                self.assertEqual(error_of(lambda: s3.get_bucket_lifecycle_configuration(Bucket=bucket))["Error"]["Code"],
                                 "NoSuchLifecycleConfiguration")
                # Only the bucket's owner.
                bob = boto3_client(gateway, "http", user="bob")
                self.assertEqual(error_of(lambda: bob.get_bucket_lifecycle_configuration(Bucket="shared"))["Error"]["Code"],
                                 "AccessDenied")

    def test_rules_are_carried_out(self):
        # Clients made here: creating boto3 clients on several threads at once is not safe.
        clients = {mode: boto3_client(gateway, "http") for mode, gateway in GATEWAYS.items()}
        before = {mode: gateway.metrics() for mode, gateway in GATEWAYS.items()}
        state = in_parallel({mode: (lambda m=mode, s3=s3: self.set_up_buckets(m, s3)) for mode, s3 in clients.items()})
        deadline = time.monotonic() + 15
        while True:
            failures = {mode: self.failures(mode, *state[mode]) + counters_short(GATEWAYS[mode], before[mode])
                        for mode in GATEWAYS}
            if not any(failures.values()) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        self.assertEqual(failures, {mode: [] for mode in GATEWAYS})

    def set_up_buckets(self, mode, s3):
        plain, versioned, locked = f"lc-plain-{mode}", f"lc-versioned-{mode}", f"lc-locked-{mode}"
        for bucket in (plain, versioned):
            s3.create_bucket(Bucket=bucket)
        s3.create_bucket(Bucket=locked, ObjectLockEnabledForBucket=True)
        s3.put_bucket_versioning(Bucket=versioned, VersioningConfiguration={"Status": "Enabled"})

        s3.put_bucket_lifecycle_configuration(Bucket=plain, LifecycleConfiguration={"Rules": [
            rule("expire", "expire/", Expiration={"Days": 1}),
            {"ID": "tagged", "Status": "Enabled", "Expiration": {"Days": 1},
             "Filter": {"And": {"Prefix": "tagged/", "Tags": [{"Key": "temp", "Value": "yes"}]}}},
            {"ID": "large", "Status": "Enabled", "Expiration": {"Days": 1}, "Filter": {"ObjectSizeGreaterThan": 100}},
            # Prefix and Tag side by side, no <And>: as the ceph s3-tests tag cases send them (RGW's reading).
            {"ID": "side", "Status": "Enabled", "Expiration": {"Days": 1},
             "Filter": {"Prefix": "side/", "Tag": {"Key": "temp", "Value": "yes"}}},
            rule("uploads", "mp/", AbortIncompleteMultipartUpload={"DaysAfterInitiation": 1})]})
        shown = s3.get_bucket_lifecycle_configuration(Bucket=plain)["Rules"][3]["Filter"]
        self.assertEqual(shown, {"And": {"Prefix": "side/", "Tags": [{"Key": "temp", "Value": "yes"}]}})
        s3.put_object(Bucket=plain, Key="side/yes", Body=b"y", Tagging="temp=yes")
        s3.put_object(Bucket=plain, Key="side/no", Body=b"n", Tagging="temp=no")
        put = s3.put_object(Bucket=plain, Key="expire/a", Body=b"a")
        header = put["ResponseMetadata"]["HTTPHeaders"].get("x-amz-expiration", "")
        match = re.fullmatch(r'expiry-date="(.+)", rule-id="expire"', header)
        self.assertIsNotNone(match, header)
        # Named in real days, rounded to midnight UTC as S3 does: 1 to 2 days from now.
        expiry = datetime.datetime.strptime(match.group(1), "%a, %d %b %Y %H:%M:%S GMT")
        self.assertEqual((expiry - datetime.datetime.utcnow()).days, 1)
        self.assertIn("x-amz-expiration", s3.head_object(Bucket=plain, Key="expire/a")["ResponseMetadata"]["HTTPHeaders"])
        s3.put_object(Bucket=plain, Key="tagged/yes", Body=b"y", Tagging="temp=yes")
        s3.put_object(Bucket=plain, Key="tagged/no", Body=b"n", Tagging="temp=no")
        self.assertNotIn("x-amz-expiration",
                         s3.head_object(Bucket=plain, Key="tagged/no")["ResponseMetadata"]["HTTPHeaders"])
        s3.put_object(Bucket=plain, Key="big", Body=b"b" * 101)
        s3.put_object(Bucket=plain, Key="small", Body=b"s" * 100)
        upload = s3.create_multipart_upload(Bucket=plain, Key="mp/part")
        self.assertEqual(upload["AbortRuleId"], "uploads")
        self.assertIn("AbortDate", upload)
        s3.create_multipart_upload(Bucket=plain, Key="other/part")

        s3.put_bucket_lifecycle_configuration(Bucket=versioned, LifecycleConfiguration={"Rules": [
            rule("current", "cur/", Expiration={"Days": 1}),
            rule("noncurrent", "nc/", NoncurrentVersionExpiration={"NoncurrentDays": 1, "NewerNoncurrentVersions": 1}),
            rule("markers", "dm/", Expiration={"ExpiredObjectDeleteMarker": True})]})
        s3.put_object(Bucket=versioned, Key="cur/x", Body=b"x")
        gone = s3.put_object(Bucket=versioned, Key="cur/gone", Body=b"g")["VersionId"]
        s3.delete_object(Bucket=versioned, Key="cur/gone")
        s3.delete_object(Bucket=versioned, Key="cur/gone", VersionId=gone)  # a lone marker: the Days rule removes it
        nc = [s3.put_object(Bucket=versioned, Key="nc/y", Body=b"%d" % i)["VersionId"] for i in range(3)]
        lone = s3.put_object(Bucket=versioned, Key="dm/z", Body=b"z")["VersionId"]
        s3.delete_object(Bucket=versioned, Key="dm/z")
        s3.delete_object(Bucket=versioned, Key="dm/z", VersionId=lone)  # only the marker is left
        s3.put_object(Bucket=versioned, Key="dm/w", Body=b"w")
        s3.delete_object(Bucket=versioned, Key="dm/w")  # a marker with a version behind it stays

        # Object Lock wins: noncurrent versions under legal hold or retention are never removed.
        s3.put_bucket_lifecycle_configuration(Bucket=locked, LifecycleConfiguration={"Rules": [
            rule("all", "", NoncurrentVersionExpiration={"NoncurrentDays": 1}, Expiration={"Days": 1})]})
        held = s3.put_object(Bucket=locked, Key="held", Body=b"h", ObjectLockLegalHoldStatus="ON")["VersionId"]
        until = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
        retained = s3.put_object(Bucket=locked, Key="retained", Body=b"r", ObjectLockMode="GOVERNANCE",
                                 ObjectLockRetainUntilDate=until)["VersionId"]
        free = s3.put_object(Bucket=locked, Key="free", Body=b"f")["VersionId"]
        for key in ("held", "retained", "free"):
            s3.put_object(Bucket=locked, Key=key, Body=b"newer")
        return s3, plain, versioned, locked, nc, (held, retained, free)

    def failures(self, mode, s3, plain, versioned, locked, nc, locked_ids):
        """What does not yet look as the rules want it (empty when all does)."""
        out = []
        if keys(s3, plain) != ["side/no", "small", "tagged/no"]:
            out.append(f"{plain}: {keys(s3, plain)}")
        uploads = [u["Key"] for u in s3.list_multipart_uploads(Bucket=plain).get("Uploads", [])]
        if uploads != ["other/part"]:
            out.append(f"{plain} uploads: {uploads}")
        kept, markers = versions(s3, versioned, "cur/")
        if len(kept) != 1 or [k for k, _ in markers] != ["cur/x"]:  # expired: a marker on top, the version kept
            out.append(f"cur/: {kept} {markers}")
        kept, _ = versions(s3, versioned, "nc/")
        if kept != [("nc/y", nc[2]), ("nc/y", nc[1])]:
            out.append(f"nc/: {kept}, wanted {nc[2:0:-1]}")
        kept, markers = versions(s3, versioned, "dm/")
        if [k for k, _ in markers] != ["dm/w"] or [k for k, _ in kept] != ["dm/w"]:
            out.append(f"dm/: {kept} {markers}")
        held, retained, free = locked_ids
        kept, markers = versions(s3, locked, "")
        ids = {v for _, v in kept}
        # Current versions expire into delete markers; the free noncurrent one goes, the held and retained stay.
        if len(markers) != 3 or free in ids or held not in ids or retained not in ids:
            out.append(f"{locked}: {kept} {markers}")
        return out


if __name__ == "__main__":
    unittest.main()
