"""boto3 against `keel gateway`, on a raw bucket and on a dedupe bucket: S3
semantics a backup product relies on. Keys that are any UTF-8 (blanks at
either end, all blanks, unicode, "..", percent signs, 1024 bytes) through
every operation and every XML body; retried multipart completions;
conditional reads, writes and copies; GetObjectAttributes and partNumber;
checksums end to end; listing edge cases; versioning and Object Lock
details; response overrides and bucket tagging."""
import base64
import concurrent.futures
import datetime
import hashlib
import os
import socket
import unittest
import urllib.parse
import xml.etree.ElementTree as ElementTree
import zlib

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from gateway_harness import USERS, boto3_client, error_of, start_raw_and_dedupe, stop_all

GATEWAYS = {}

ODD_KEYS = ["_", "_ ", " ", "   ", " lead", "trail ", "in  side", "tab\tkey", "ünïcødé/名前 ", "..", "../up", "a/../b",
            "./dot", "%", "100%25", "%2F", "a+b c", "q?x=y&z", "#frag", "semi;colon", "k" * 1024,
            "é" * 512]  # 1024 bytes of two-byte characters


def setUpModule():
    start_raw_and_dedupe(GATEWAYS)


def tearDownModule():
    stop_all(GATEWAYS)


def with_request_change(s3, operation, change):
    """Runs change(request_dict) before `operation` is sent (headers, query
    parameters this boto3 has no argument for); returns the unregister call."""
    event = f"before-call.s3.{operation}"

    def handler(params, **_):
        change(params)
    s3.meta.events.register(event, handler)
    return lambda: s3.meta.events.unregister(event, handler)


def add_headers(s3, operation, headers):
    return with_request_change(s3, operation, lambda params: params["headers"].update(headers))


def add_query(s3, operation, query):
    def change(params):
        params["url"] += ("&" if "?" in params["url"] else "?") + query
    return with_request_change(s3, operation, change)


class SemanticsTest(unittest.TestCase):
    mode = "raw"
    counter = 0

    def setUp(self):
        self.gateway = GATEWAYS[self.mode]
        self.s3 = boto3_client(self.gateway, "http")

    def new_bucket(self, name="sem", **create):
        SemanticsTest.counter += 1
        bucket = f"{name}-{self.mode}-{SemanticsTest.counter}"
        self.s3.create_bucket(Bucket=bucket, **create)
        return bucket

    def code(self, fn):
        return error_of(fn)["Error"]["Code"]

    def status(self, fn):
        return error_of(fn)["ResponseMetadata"]["HTTPStatusCode"]

    def test_concurrent_writes_and_a_batch_delete_survive_a_crash(self):
        # Writes and deletes commit in shared transactions (group commit): each
        # acknowledged one must still be there after a SIGKILL, the rest never.
        bucket = self.new_bucket()
        keys = [f"blk/{i:03d}" for i in range(48)]
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda k: self.s3.put_object(Bucket=bucket, Key=k, Body=k.encode()), keys))
        doomed = [{"Key": k} for k in keys[:24]] + [{"Key": "never-there"}]
        result = self.s3.delete_objects(Bucket=bucket, Delete={"Objects": doomed})
        self.assertEqual(sorted(d["Key"] for d in result["Deleted"]), sorted(d["Key"] for d in doomed))
        self.assertNotIn("Errors", result)
        self.gateway.crash_and_restart()
        s3 = boto3_client(self.gateway, "http")
        listed = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
        self.assertEqual(listed, keys[24:])
        for key in keys[24:]:
            self.assertEqual(s3.get_object(Bucket=bucket, Key=key)["Body"].read(), key.encode())

    # --- 1: keys are any UTF-8 -------------------------------------------------

    def test_odd_keys_through_every_operation(self):
        s3 = self.s3
        bucket = self.new_bucket()
        for key in ODD_KEYS:
            s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
        self.assertEqual(self.code(lambda: s3.put_object(Bucket=bucket, Key="k" * 1025, Body=b"")), "KeyTooLongError")
        listed = []
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, PaginationConfig={"PageSize": 3}):
            listed += [o["Key"] for o in page.get("Contents", [])]
        self.assertEqual(listed, sorted(ODD_KEYS, key=lambda k: k.encode()))
        v1 = []
        for page in s3.get_paginator("list_objects").paginate(Bucket=bucket, PaginationConfig={"PageSize": 4}):
            v1 += [o["Key"] for o in page.get("Contents", [])]
        self.assertEqual(v1, listed)
        for key in ODD_KEYS:
            self.assertEqual(s3.get_object(Bucket=bucket, Key=key)["Body"].read(), key.encode(), repr(key))
            self.assertEqual(s3.head_object(Bucket=bucket, Key=key)["ContentLength"], len(key.encode()))
            copy = ("copy/" + key).encode()[:1024].decode(errors="ignore")
            s3.copy_object(Bucket=bucket, Key=copy, CopySource={"Bucket": bucket, "Key": key})
            self.assertEqual(s3.get_object(Bucket=bucket, Key=copy)["Body"].read(), key.encode())
            s3.put_object_tagging(Bucket=bucket, Key=key, Tagging={"TagSet": [{"Key": " t ", "Value": "  v  "}]})
            self.assertEqual(s3.get_object_tagging(Bucket=bucket, Key=key)["TagSet"], [{"Key": " t ", "Value": "  v  "}])

        # The data loss: DeleteObjects of "_ " must delete "_ " and only it; " " is a key like any other.
        deleted = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "_ "}]})
        self.assertEqual([d["Key"] for d in deleted["Deleted"]], ["_ "])
        self.assertEqual(s3.get_object(Bucket=bucket, Key="_")["Body"].read(), b"_")
        self.assertEqual(self.code(lambda: s3.head_object(Bucket=bucket, Key="_ ")), "404")
        deleted = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": " "}, {"Key": "   "}]})
        self.assertEqual(sorted(d["Key"] for d in deleted["Deleted"]), [" ", "   "])
        remaining = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=" ")["Contents"]]
        self.assertEqual(remaining, [" lead"])

        # Everything else, in pages of DeleteObjects: the bucket empties.
        while True:
            keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
            if not keys:
                break
            result = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys]})
            self.assertNotIn("Errors", result)
        s3.delete_bucket(Bucket=bucket)

    def test_odd_keys_in_multipart_and_versions(self):
        s3 = self.s3
        bucket = self.new_bucket()
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        for key in [" ", "_ ", "ü .. %"]:
            upload = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
            part = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=1, Body=key.encode())
            listed = s3.list_multipart_uploads(Bucket=bucket)["Uploads"]
            self.assertIn(key, [u["Key"] for u in listed])
            s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload,
                                         MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
            self.assertEqual(s3.get_object(Bucket=bucket, Key=key)["Body"].read(), key.encode())
        s3.put_object(Bucket=bucket, Key="_", Body=b"plain")
        versions = s3.list_object_versions(Bucket=bucket)["Versions"]
        by_key = {v["Key"]: v["VersionId"] for v in versions}
        self.assertEqual(set(by_key), {" ", "_ ", "ü .. %", "_"})
        s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "_ ", "VersionId": by_key["_ "]},
                                                             {"Key": " ", "VersionId": by_key[" "]}]})
        left = {v["Key"] for v in s3.list_object_versions(Bucket=bucket)["Versions"]}
        self.assertEqual(left, {"ü .. %", "_"})

    def test_upload_listing_rolls_up_prefixes_and_pages_each_upload_once(self):
        """ListMultipartUploads: a delimiter rolls keys up into CommonPrefixes (each one entry of
        max-uploads), pages of every size list what one page does, and a key's several uploads come
        in the order they began, each once, however the pages cut them."""
        s3 = self.s3
        bucket = self.new_bucket()
        began = {}
        for key in ["a/1", "a/2", "b", "c/x/1", "c/y", "d", "k", "k", "k", "k y"]:
            began.setdefault(key, []).append(s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"])

        def pages(**params):
            uploads, prefixes, markers = [], [], {}
            while True:
                page = s3.list_multipart_uploads(Bucket=bucket, **params, **markers)
                uploads += [(u["Key"], u["UploadId"]) for u in page.get("Uploads", [])]
                prefixes += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
                if not page["IsTruncated"]:
                    return uploads, prefixes
                markers = {"KeyMarker": page["NextKeyMarker"], "UploadIdMarker": page["NextUploadIdMarker"]}

        in_order = [(key, upload) for key in sorted(began) for upload in began[key]]
        whole = s3.list_multipart_uploads(Bucket=bucket, Delimiter="/")
        self.assertEqual(whole.get("Delimiter"), "/")
        self.assertEqual([p["Prefix"] for p in whole["CommonPrefixes"]], ["a/", "c/"])
        rolled = [u for u in in_order if "/" not in u[0]]
        self.assertEqual([(u["Key"], u["UploadId"]) for u in whole["Uploads"]], rolled)
        for size in (1, 2, 3):
            self.assertEqual(pages(Delimiter="/", MaxUploads=size), (rolled, ["a/", "c/"]), size)
            self.assertEqual(pages(MaxUploads=size), (in_order, []), size)
        self.assertEqual(pages(Prefix="c/", Delimiter="/"), ([("c/y", began["c/y"][0])], ["c/x/"]))
        self.assertEqual(pages(Prefix="k", MaxUploads=1), ([("k", u) for u in began["k"]] + [("k y", began["k y"][0])], []))

    # --- 2: retries -------------------------------------------------------------

    def test_retried_completion_and_reuploaded_parts(self):
        s3 = self.s3
        bucket = self.new_bucket()
        upload = s3.create_multipart_upload(Bucket=bucket, Key="big")["UploadId"]
        first, second, replaced = os.urandom(5 << 20), os.urandom(1000), os.urandom(5 << 20)
        etag2 = s3.upload_part(Bucket=bucket, Key="big", UploadId=upload, PartNumber=2, Body=second)["ETag"]
        s3.upload_part(Bucket=bucket, Key="big", UploadId=upload, PartNumber=1, Body=first)
        etag1 = s3.upload_part(Bucket=bucket, Key="big", UploadId=upload, PartNumber=1, Body=replaced)["ETag"]
        parts = {"Parts": [{"PartNumber": 1, "ETag": etag1}, {"PartNumber": 2, "ETag": etag2}]}
        done = s3.complete_multipart_upload(Bucket=bucket, Key="big", UploadId=upload, MultipartUpload=parts)
        again = s3.complete_multipart_upload(Bucket=bucket, Key="big", UploadId=upload, MultipartUpload=parts)
        self.assertEqual(again["ETag"], done["ETag"])
        self.assertEqual(s3.get_object(Bucket=bucket, Key="big")["Body"].read(), replaced + second)
        other = {"Parts": [{"PartNumber": 1, "ETag": etag1}]}
        self.assertEqual(self.code(lambda: s3.complete_multipart_upload(
            Bucket=bucket, Key="big", UploadId=upload, MultipartUpload=other)), "NoSuchUpload")
        self.assertEqual(self.code(lambda: s3.complete_multipart_upload(
            Bucket=bucket, Key="other", UploadId=upload, MultipartUpload=parts)), "NoSuchUpload")

    # --- 3: conditional requests -----------------------------------------------

    def put_dated(self, bucket, key, body=b"body"):
        """Puts an object; returns its ETag and times an hour before and after its modification."""
        etag = self.s3.put_object(Bucket=bucket, Key=key, Body=body)["ETag"]
        modified = self.s3.head_object(Bucket=bucket, Key=key)["LastModified"]
        return etag, modified - datetime.timedelta(hours=1), modified + datetime.timedelta(hours=1)

    def test_conditional_reads(self):
        s3 = self.s3
        bucket = self.new_bucket()
        etag, before, after = self.put_dated(bucket, "k")
        for call in (s3.get_object, s3.head_object):
            self.assertEqual(self.status(lambda: call(Bucket=bucket, Key="k", IfModifiedSince=after)), 304)
            self.assertEqual(call(Bucket=bucket, Key="k", IfModifiedSince=before)["ETag"], etag)
            self.assertEqual(self.status(lambda: call(Bucket=bucket, Key="k", IfUnmodifiedSince=before)), 412)
            self.assertEqual(call(Bucket=bucket, Key="k", IfUnmodifiedSince=after)["ETag"], etag)
            self.assertEqual(self.status(lambda: call(Bucket=bucket, Key="k", IfMatch='"0"')), 412)
            self.assertEqual(self.status(lambda: call(Bucket=bucket, Key="k", IfNoneMatch=etag)), 304)
            # If-Match decides over If-Unmodified-Since, If-None-Match over If-Modified-Since.
            self.assertEqual(call(Bucket=bucket, Key="k", IfMatch=etag, IfUnmodifiedSince=before)["ETag"], etag)
            self.assertEqual(call(Bucket=bucket, Key="k", IfNoneMatch='"0"', IfModifiedSince=after)["ETag"], etag)

    def test_conditional_writes(self):
        s3 = self.s3
        bucket = self.new_bucket()
        undo = add_headers(s3, "PutObject", {"If-None-Match": "*"})
        s3.put_object(Bucket=bucket, Key="once", Body=b"first")
        self.assertEqual(self.code(lambda: s3.put_object(Bucket=bucket, Key="once", Body=b"second")),
                         "PreconditionFailed")
        undo()
        self.assertEqual(s3.get_object(Bucket=bucket, Key="once")["Body"].read(), b"first")
        etag = s3.head_object(Bucket=bucket, Key="once")["ETag"]
        undo = add_headers(s3, "PutObject", {"If-Match": '"00000000000000000000000000000000"'})
        self.assertEqual(self.code(lambda: s3.put_object(Bucket=bucket, Key="once", Body=b"x")), "PreconditionFailed")
        self.assertEqual(self.code(lambda: s3.put_object(Bucket=bucket, Key="missing", Body=b"x")), "NoSuchKey")
        undo()
        undo = add_headers(s3, "PutObject", {"If-Match": etag})
        s3.put_object(Bucket=bucket, Key="once", Body=b"replaced")
        undo()
        self.assertEqual(s3.get_object(Bucket=bucket, Key="once")["Body"].read(), b"replaced")

        upload = s3.create_multipart_upload(Bucket=bucket, Key="once")["UploadId"]
        part = s3.upload_part(Bucket=bucket, Key="once", UploadId=upload, PartNumber=1, Body=b"mp")
        parts = {"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]}
        undo = add_headers(s3, "CompleteMultipartUpload", {"If-None-Match": "*"})
        self.assertEqual(self.code(lambda: s3.complete_multipart_upload(
            Bucket=bucket, Key="once", UploadId=upload, MultipartUpload=parts)), "PreconditionFailed")
        undo()
        s3.complete_multipart_upload(Bucket=bucket, Key="once", UploadId=upload, MultipartUpload=parts)

    def test_copy_source_conditions(self):
        s3 = self.s3
        bucket = self.new_bucket()
        etag, before, after = self.put_dated(bucket, "src", b"0123456789")
        src = {"Bucket": bucket, "Key": "src"}
        failing = [{"CopySourceIfMatch": '"0"'}, {"CopySourceIfNoneMatch": etag},
                   {"CopySourceIfModifiedSince": after}, {"CopySourceIfUnmodifiedSince": before}]
        for condition in failing:
            self.assertEqual(self.code(lambda: s3.copy_object(Bucket=bucket, Key="dst", CopySource=src, **condition)),
                             "PreconditionFailed", condition)
        s3.copy_object(Bucket=bucket, Key="dst", CopySource=src, CopySourceIfMatch=etag, CopySourceIfModifiedSince=before)
        upload = s3.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
        for condition in failing:
            self.assertEqual(self.code(lambda: s3.upload_part_copy(Bucket=bucket, Key="mp", UploadId=upload,
                                                                   PartNumber=1, CopySource=src, **condition)),
                             "PreconditionFailed")
        self.assertEqual(self.code(lambda: s3.upload_part_copy(Bucket=bucket, Key="mp", UploadId=upload, PartNumber=1,
                                                               CopySource=src, CopySourceRange="bytes=5-10")),
                         "InvalidRange")
        for malformed in ("bytes=5-", "bytes=-1", "0-2", "bytes=6-5"):
            self.assertEqual(self.code(lambda: s3.upload_part_copy(Bucket=bucket, Key="mp", UploadId=upload,
                                                                   PartNumber=1, CopySource=src,
                                                                   CopySourceRange=malformed)), "InvalidArgument")
        part = s3.upload_part_copy(Bucket=bucket, Key="mp", UploadId=upload, PartNumber=1, CopySource=src,
                                   CopySourceRange="bytes=2-9", CopySourceIfNoneMatch='"0"')
        s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=upload, MultipartUpload={
            "Parts": [{"PartNumber": 1, "ETag": part["CopyPartResult"]["ETag"]}]})
        self.assertEqual(s3.get_object(Bucket=bucket, Key="mp")["Body"].read(), b"23456789")

    # --- 4: attributes and parts -----------------------------------------------

    def multipart_object(self, bucket, key, sizes, completion=lambda bodies: {}, **create):
        """An object uploaded in parts of `sizes` random bytes; `completion(bodies)`: more arguments for
        CompleteMultipartUpload, such as the object's checksum."""
        s3 = self.s3
        upload = s3.create_multipart_upload(Bucket=bucket, Key=key, **create)["UploadId"]
        bodies, parts = [], []
        for number, size in enumerate(sizes, 1):
            body = os.urandom(size)
            extra = {"ChecksumAlgorithm": create["ChecksumAlgorithm"]} if create else {}
            answer = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=number, Body=body, **extra)
            part = {"PartNumber": number, "ETag": answer["ETag"]}
            for name in ("ChecksumCRC32", "ChecksumCRC32C", "ChecksumSHA1", "ChecksumSHA256"):
                if name in answer:
                    part[name] = answer[name]
            bodies.append(body)
            parts.append(part)
        done = s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": parts},
                                            **completion(bodies))
        return bodies, parts, done

    def test_object_attributes_and_part_numbers(self):
        s3 = self.s3
        bucket = self.new_bucket()
        bodies, _, done = self.multipart_object(bucket, "mp", [5 << 20, 5 << 20, 1234])
        attributes = s3.get_object_attributes(Bucket=bucket, Key="mp", ObjectAttributes=[
            "ETag", "ObjectParts", "StorageClass", "ObjectSize"], MaxParts=2)
        self.assertEqual('"' + attributes["ETag"] + '"', done["ETag"])
        self.assertEqual(attributes["ObjectSize"], sum(map(len, bodies)))
        self.assertEqual(attributes["StorageClass"], "STANDARD")
        parts = attributes["ObjectParts"]
        self.assertEqual((parts["TotalPartsCount"], parts["IsTruncated"], parts["NextPartNumberMarker"]), (3, True, 2))
        self.assertEqual([p["Size"] for p in parts["Parts"]], [5 << 20, 5 << 20])
        rest = s3.get_object_attributes(Bucket=bucket, Key="mp", ObjectAttributes=["ObjectParts"], PartNumberMarker=2)
        self.assertEqual([p["PartNumber"] for p in rest["ObjectParts"]["Parts"]], [3])
        for number, body in enumerate(bodies, 1):
            got = s3.get_object(Bucket=bucket, Key="mp", PartNumber=number)
            self.assertEqual(got["Body"].read(), body)
            self.assertEqual(got["PartsCount"], 3)
            self.assertEqual(s3.head_object(Bucket=bucket, Key="mp", PartNumber=number)["ContentLength"], len(body))
        self.assertEqual(self.code(lambda: s3.get_object(Bucket=bucket, Key="mp", PartNumber=4)), "InvalidPartNumber")
        s3.put_object(Bucket=bucket, Key="single", Body=b"one part")
        self.assertEqual(s3.get_object(Bucket=bucket, Key="single", PartNumber=1)["Body"].read(), b"one part")
        self.assertEqual(self.code(lambda: s3.get_object(Bucket=bucket, Key="single", PartNumber=2)),
                         "InvalidPartNumber")
        self.assertNotIn("ObjectParts", s3.get_object_attributes(Bucket=bucket, Key="single",
                                                                 ObjectAttributes=["ObjectParts"]))
        self.assertEqual(self.code(lambda: s3.get_object_attributes(Bucket=bucket, Key="none",
                                                                    ObjectAttributes=["ETag"])), "NoSuchKey")

    # --- 5: checksums -----------------------------------------------------------

    def test_checksums_end_to_end(self):
        s3 = self.s3
        bucket = self.new_bucket()
        body = os.urandom(100000)
        for algorithm, expected in (("SHA256", base64.b64encode(hashlib.sha256(body).digest()).decode()),
                                    ("SHA1", base64.b64encode(hashlib.sha1(body).digest()).decode()),
                                    ("CRC32", base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode())):
            key = "object-" + algorithm
            put = s3.put_object(Bucket=bucket, Key=key, Body=body, ChecksumAlgorithm=algorithm)
            self.assertEqual(put["Checksum" + algorithm], expected)
            head = s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
            self.assertEqual(head["Checksum" + algorithm], expected)
            got = s3.get_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
            self.assertEqual(got["Body"].read(), body)
            attributes = s3.get_object_attributes(Bucket=bucket, Key=key, ObjectAttributes=["Checksum"])
            self.assertEqual(attributes["Checksum"]["Checksum" + algorithm], expected)
        wrong = base64.b64encode(hashlib.sha256(b"other").digest()).decode()
        self.assertEqual(self.code(lambda: s3.put_object(Bucket=bucket, Key="bad", Body=body, ChecksumSHA256=wrong)),
                         "BadDigest")
        self.assertEqual(self.code(lambda: s3.head_object(Bucket=bucket, Key="bad")), "404")

        bodies, parts, done = self.multipart_object(bucket, "mp", [5 << 20, 4321], ChecksumAlgorithm="CRC32")
        raw = b"".join(zlib.crc32(b).to_bytes(4, "big") for b in bodies)
        composite = base64.b64encode(zlib.crc32(raw).to_bytes(4, "big")).decode() + "-2"
        self.assertEqual(done["ChecksumCRC32"], composite)
        self.assertEqual(s3.head_object(Bucket=bucket, Key="mp", ChecksumMode="ENABLED")["ChecksumCRC32"], composite)
        part2 = s3.head_object(Bucket=bucket, Key="mp", ChecksumMode="ENABLED", PartNumber=2)
        self.assertEqual(part2["ChecksumCRC32"], parts[1]["ChecksumCRC32"])
        attributes = s3.get_object_attributes(Bucket=bucket, Key="mp", ObjectAttributes=["Checksum", "ObjectParts"])
        self.assertEqual(attributes["Checksum"]["ChecksumCRC32"], composite)
        self.assertEqual([p["ChecksumCRC32"] for p in attributes["ObjectParts"]["Parts"]],
                         [p["ChecksumCRC32"] for p in parts])

        # The object's checksum sent with the completion is the object's, not the completion body's: a
        # composite one (SHA-256 over the parts' SHA-256s, then -N) as CompleteMultipartUpload returns it.
        def composite_sha256(bodies):
            joined = b"".join(hashlib.sha256(b).digest() for b in bodies)
            return {"ChecksumSHA256": base64.b64encode(hashlib.sha256(joined).digest()).decode() + f"-{len(bodies)}"}
        *_, done = self.multipart_object(bucket, "sha", [5 << 20, 99], completion=composite_sha256,
                                         ChecksumAlgorithm="SHA256")
        self.assertTrue(done["ChecksumSHA256"].endswith("-2"))

        def full_crc32(bodies, wrong=False):
            crc = zlib.crc32(b"".join(bodies)) ^ (1 if wrong else 0)
            return {"ChecksumCRC32": base64.b64encode(crc.to_bytes(4, "big")).decode()}
        undo = add_headers(s3, "CreateMultipartUpload", {"x-amz-checksum-type": "FULL_OBJECT"})
        try:
            self.assertEqual(self.code(lambda: self.multipart_object(
                bucket, "wrong", [5 << 20, 5], completion=lambda b: full_crc32(b, wrong=True),
                ChecksumAlgorithm="CRC32")), "BadDigest")
            bodies, parts, done = self.multipart_object(bucket, "full", [5 << 20, 777], completion=full_crc32,
                                                        ChecksumAlgorithm="CRC32")
        finally:
            undo()
        full = base64.b64encode(zlib.crc32(b"".join(bodies)).to_bytes(4, "big")).decode()
        self.assertEqual(done["ChecksumCRC32"], full)
        self.assertEqual(s3.head_object(Bucket=bucket, Key="full", ChecksumMode="ENABLED")["ChecksumCRC32"], full)
        self.assertEqual(s3.get_object(Bucket=bucket, Key="full", ChecksumMode="ENABLED")["Body"].read(),
                         b"".join(bodies))

        upload = s3.create_multipart_upload(Bucket=bucket, Key="listed", ChecksumAlgorithm="SHA256")["UploadId"]
        answer = s3.upload_part(Bucket=bucket, Key="listed", UploadId=upload, PartNumber=1, Body=b"p",
                                ChecksumAlgorithm="SHA256")
        listing = s3.list_parts(Bucket=bucket, Key="listed", UploadId=upload)
        self.assertEqual(listing["ChecksumAlgorithm"], "SHA256")
        self.assertEqual(listing["Parts"][0]["ChecksumSHA256"], answer["ChecksumSHA256"])
        self.assertEqual(self.code(lambda: s3.upload_part(Bucket=bucket, Key="listed", UploadId=upload, PartNumber=2,
                                                          Body=b"q")), "InvalidRequest")
        self.assertEqual(self.code(lambda: s3.complete_multipart_upload(
            Bucket=bucket, Key="listed", UploadId=upload, MultipartUpload={"Parts": [
                {"PartNumber": 1, "ETag": answer["ETag"], "ChecksumSHA256": wrong}]})), "InvalidPart")

    # --- 6: listings --------------------------------------------------------------

    def test_listing_edge_cases(self):
        s3 = self.s3
        bucket = self.new_bucket("lst")
        s3.put_object(Bucket=bucket, Key="a", Body=b"")
        s3.put_object(Bucket=bucket, Key="ctl\x01key", Body=b"")
        for call in (s3.list_objects, s3.list_objects_v2):
            page = call(Bucket=bucket, MaxKeys=0)
            self.assertFalse(page["IsTruncated"])
            self.assertNotIn("Contents", page)
        self.assertIn("ctl\x01key", [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]])

        # This boto3 has no arguments for ListBuckets pages: the query is added and the XML read here.
        names = sorted(self.new_bucket("pg") for _ in range(3))
        prefix = "pg-" + self.mode

        def list_buckets(query):
            bodies = []
            undo = add_query(s3, "ListBuckets", query)
            def keep(http_response, **_):
                bodies.append(http_response.content)
            s3.meta.events.register("after-call.s3.ListBuckets", keep)
            try:
                s3.list_buckets()
            finally:
                undo()
                s3.meta.events.unregister("after-call.s3.ListBuckets", keep)
            root = ElementTree.fromstring(bodies[-1])
            ns = {"s3": "http://s3.amazonaws.com/doc/2006-03-01/"}
            token = root.find("s3:ContinuationToken", ns)
            return [n.text for n in root.findall("s3:Buckets/s3:Bucket/s3:Name", ns)], \
                None if token is None else token.text
        first, token = list_buckets(f"max-buckets=2&prefix={prefix}")
        self.assertEqual(len(first), 2)
        self.assertTrue(all(n.startswith(prefix) for n in first))
        self.assertIsNotNone(token)
        rest, more = list_buckets(f"max-buckets=1000&prefix={prefix}&continuation-token={urllib.parse.quote(token)}")
        self.assertIsNone(more)
        self.assertEqual(first + rest, sorted(first + rest))
        self.assertTrue(set(names) <= set(first + rest))

    # --- 7: versioning and Object Lock details ---------------------------------

    def test_versioning_headers(self):
        s3 = self.s3
        bucket = self.new_bucket()
        self.assertNotIn("DeleteMarker", s3.delete_object(Bucket=bucket, Key="never-there"))
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Suspended"})
        self.assertNotIn("VersionId", s3.put_object(Bucket=bucket, Key="k", Body=b"x"))
        upload = s3.create_multipart_upload(Bucket=bucket, Key="m")["UploadId"]
        part = s3.upload_part(Bucket=bucket, Key="m", UploadId=upload, PartNumber=1, Body=b"y")
        done = s3.complete_multipart_upload(Bucket=bucket, Key="m", UploadId=upload,
                                            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
        self.assertNotIn("VersionId", done)

    def test_object_lock_details(self):
        s3 = self.s3
        plain = self.new_bucket()
        rule = {"ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 1}}}
        error = error_of(lambda: s3.put_object_lock_configuration(Bucket=plain, ObjectLockConfiguration=rule))
        self.assertEqual((error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]),
                         ("InvalidBucketState", 409))
        s3.put_bucket_versioning(Bucket=plain, VersioningConfiguration={"Status": "Enabled"})
        s3.put_object_lock_configuration(Bucket=plain, ObjectLockConfiguration=rule)
        self.assertEqual(s3.get_object_lock_configuration(Bucket=plain)["ObjectLockConfiguration"], rule)
        for days in (0, -1):
            bad = {"ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": days}}}
            self.assertEqual(self.code(lambda: s3.put_object_lock_configuration(
                Bucket=plain, ObjectLockConfiguration=bad)), "InvalidRetentionPeriod")

        version = s3.put_object(Bucket=plain, Key="k", Body=b"x")["VersionId"]  # GOVERNANCE by default
        later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=2)
        compliance = {"Mode": "COMPLIANCE", "RetainUntilDate": later}
        self.assertEqual(self.code(lambda: s3.put_object_retention(Bucket=plain, Key="k", VersionId=version,
                                                                   Retention=compliance)), "AccessDenied")
        s3.put_object_retention(Bucket=plain, Key="k", VersionId=version, Retention=compliance,
                                BypassGovernanceRetention=True)
        self.assertEqual(s3.get_object_retention(Bucket=plain, Key="k", VersionId=version)["Retention"]["Mode"],
                         "COMPLIANCE")

    # --- 8: small things ----------------------------------------------------------

    def test_response_overrides_and_bucket_tagging(self):
        s3 = self.s3
        bucket = self.new_bucket()
        s3.put_object(Bucket=bucket, Key="k", Body=b"x", ContentType="text/plain", ContentEncoding="gzip")
        got = s3.get_object(Bucket=bucket, Key="k", ResponseContentType="application/json",
                            ResponseContentDisposition="attachment; filename=k.json", ResponseCacheControl="no-cache")
        self.assertEqual((got["ContentType"], got["ContentDisposition"], got["CacheControl"], got["ContentEncoding"]),
                         ("application/json", "attachment; filename=k.json", "no-cache", "gzip"))
        error = error_of(lambda: s3.get_bucket_tagging(Bucket=bucket))
        self.assertEqual((error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]), ("NoSuchTagSet", 404))
        tags = [{"Key": "team", "Value": " backups "}, {"Key": "a b", "Value": ""}]
        s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": tags})
        self.assertEqual(s3.get_bucket_tagging(Bucket=bucket)["TagSet"], tags[::-1])  # by key
        s3.delete_bucket_tagging(Bucket=bucket)
        self.assertEqual(self.code(lambda: s3.get_bucket_tagging(Bucket=bucket)), "NoSuchTagSet")


    def test_tag_order_and_rfc2047_metadata(self):
        s3 = self.s3
        bucket = self.new_bucket()
        # Tags come back by key (byte order), however they were given: S3's conformance tests expect
        # x-amz-tagging "foo=bar&bar" back as bar, foo; RGW answers the same.
        s3.put_object(Bucket=bucket, Key="t", Body=b"x", Tagging="foo=bar&bar&Zed=1&%C3%A9=2&a%20b=3")
        self.assertEqual([(t["Key"], t["Value"]) for t in s3.get_object_tagging(Bucket=bucket, Key="t")["TagSet"]],
                         [("Zed", "1"), ("a b", "3"), ("bar", ""), ("foo", "bar"), ("é", "2")])
        s3.put_object_tagging(Bucket=bucket, Key="t", Tagging={"TagSet": [{"Key": k, "Value": ""} for k in "cab"]})
        self.assertEqual([t["Key"] for t in s3.get_object_tagging(Bucket=bucket, Key="t")["TagSet"]], ["a", "b", "c"])
        # RFC 2047 encoded-words are decoded before storing, and a value with characters outside
        # printable ASCII goes out as one encoded-word as S3 sends it (MimeUtility's choice): Q when
        # most of its characters are printable ASCII, else B. One of ASCII text comes back plain.
        japanese = "日本語のメタ"
        sent = {"b": "=?UTF-8?B?SMOpbGxv?=", "q": "=?utf-8?q?caf=C3=A9_au_lait?=", "latin": "=?ISO-8859-1?Q?caf=E9?=",
                "ascii": "=?UTF-8?B?SGVsbG8=?=", "two": "=?UTF-8?B?SMOp?= =?UTF-8?B?bGxv?=",
                "bad": "=?UTF-8?B?not-base64!?=", "plain": "x%20y", "control": "=?UTF-8?Q?=04mymeta?=", "tab": "a\tb",
                "mostly": "=?UTF-8?B?" + base64.b64encode(japanese.encode()).decode() + "?=",
                "specials": "=?UTF-8?Q?=3D_=5F=3F=C3=A9?= ok"}
        s3.put_object(Bucket=bucket, Key="m", Body=b"x", Metadata=sent)
        expected = {"b": "=?UTF-8?Q?H=C3=A9llo?=", "q": "=?UTF-8?Q?caf=C3=A9_au_lait?=",
                    "latin": "=?UTF-8?Q?caf=C3=A9?=", "ascii": "Hello", "two": "=?UTF-8?Q?H=C3=A9llo?=",
                    "bad": "=?UTF-8?B?not-base64!?=", "plain": "x%20y",
                    "control": "=?UTF-8?Q?=04mymeta?=",  # as S3's conformance tests expect it back
                    "tab": "a\tb", "mostly": sent["mostly"], "specials": "=?UTF-8?Q?=3D_=5F=3F=C3=A9_ok?="}
        self.assertEqual(s3.head_object(Bucket=bucket, Key="m")["Metadata"], expected)
        # A control character sent raw is refused by the HTTP parser (400, as RGW; RFC 9110 field values).
        self.assertEqual(self.code(lambda: s3.put_object(Bucket=bucket, Key="raw", Body=b"x",
                                                         Metadata={"c": "\x04mymeta"})), "InvalidRequest")
        self.assertEqual(s3.get_object(Bucket=bucket, Key="m")["Metadata"], expected)
        # What came back, sent again, is stored the same: the round trip is stable.
        s3.copy_object(Bucket=bucket, Key="m2", CopySource={"Bucket": bucket, "Key": "m"}, MetadataDirective="REPLACE",
                       Metadata=expected)
        self.assertEqual(s3.head_object(Bucket=bucket, Key="m2")["Metadata"], expected)
        upload = s3.create_multipart_upload(Bucket=bucket, Key="mp", Metadata={"b": sent["b"], "q": sent["q"]})
        part = s3.upload_part(Bucket=bucket, Key="mp", UploadId=upload["UploadId"], PartNumber=1, Body=b"p")
        s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=upload["UploadId"],
                                     MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
        self.assertEqual(s3.head_object(Bucket=bucket, Key="mp")["Metadata"], {"b": expected["b"], "q": expected["q"]})

    def test_where_rgw_differs(self):
        """What the differential test (test_differential.py) leaves to this side, RGW 16 answering
        otherwise: the versions after a null version-id-marker, a delete-marker version read (405)
        and deleted by DeleteObjects, If-None-Match: * over a delete marker, a descending part list, a copy
        from a deleted source, a copy's bytes after its source's null version is overwritten (ListBuckets'
        prefix and max-buckets: test_listing_edge_cases)."""
        s3 = self.s3
        bucket = self.new_bucket("rgwdiff")
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        old = [s3.put_object(Bucket=bucket, Key="k", Body=body)["VersionId"] for body in (b"1", b"22")]
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Suspended"})
        s3.delete_object(Bucket=bucket, Key="k")  # a null delete marker, the newest version of k
        s3.put_object(Bucket=bucket, Key="m", Body=b"3")
        seen, params = [], {}
        while True:
            page = s3.list_object_versions(Bucket=bucket, MaxKeys=1, **params)
            seen += [(v["Key"], v["VersionId"]) for v in page.get("Versions", []) + page.get("DeleteMarkers", [])]
            if not page["IsTruncated"]:
                break
            params = {"KeyMarker": page["NextKeyMarker"], "VersionIdMarker": page["NextVersionIdMarker"]}
        # After the page ending at k's null marker come k's older versions, newest first (RGW 16 skips them).
        self.assertEqual(seen, [("k", "null"), ("k", old[1]), ("k", old[0]), ("m", "null")])
        marker = error_of(lambda: s3.get_object(Bucket=bucket, Key="k", VersionId="null"))
        self.assertEqual((marker["ResponseMetadata"]["HTTPStatusCode"], marker["Error"]["Code"]), (405, "MethodNotAllowed"))
        deleted = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "k", "VersionId": "null"}]})["Deleted"]
        self.assertEqual(deleted, [{"Key": "k", "VersionId": "null", "DeleteMarker": True, "DeleteMarkerVersionId": "null"}])
        self.assertEqual(s3.get_object(Bucket=bucket, Key="k")["Body"].read(), b"22")
        # If-None-Match: * writes over a delete marker: the key has no current object (RGW 16 refuses, 412).
        s3.delete_object(Bucket=bucket, Key="k")
        undo = add_headers(s3, "PutObject", {"If-None-Match": "*"})
        try:
            s3.put_object(Bucket=bucket, Key="k", Body=b"333")
            self.assertEqual(self.code(lambda: s3.put_object(Bucket=bucket, Key="k", Body=b"4")), "PreconditionFailed")
        finally:
            undo()
        self.assertEqual(s3.get_object(Bucket=bucket, Key="k")["Body"].read(), b"333")

        upload = s3.create_multipart_upload(Bucket=bucket, Key="desc")["UploadId"]
        parts = [{"PartNumber": n, "ETag": s3.upload_part(Bucket=bucket, Key="desc", UploadId=upload, PartNumber=n,
                                                          Body=os.urandom(5 << 20 if n == 1 else 10))["ETag"]}
                 for n in (1, 2)]
        self.assertEqual(self.code(lambda: s3.complete_multipart_upload(
            Bucket=bucket, Key="desc", UploadId=upload, MultipartUpload={"Parts": parts[::-1]})), "InvalidPartOrder")
        self.assertEqual(self.status(lambda: s3.head_object(Bucket=bucket, Key="desc")), 404)
        s3.complete_multipart_upload(Bucket=bucket, Key="desc", UploadId=upload, MultipartUpload={"Parts": parts})

        # A copy whose source's current version is a delete marker: 404 NoSuchKey, as S3 (RGW 16
        # copies the version under the marker), with or without copy conditions.
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        s3.put_object(Bucket=bucket, Key="gone", Body=b"old")
        s3.delete_object(Bucket=bucket, Key="gone")
        for condition in ({}, {"CopySourceIfUnmodifiedSince": datetime.datetime(2099, 1, 1, tzinfo=datetime.timezone.utc)}):
            self.assertEqual(self.code(lambda: s3.copy_object(Bucket=bucket, Key="copy-of-gone", **condition,
                                                              CopySource={"Bucket": bucket, "Key": "gone"})),
                             "NoSuchKey")

        # A copy made while versioning is suspended keeps its own bytes when the null version of a
        # source that also has versioned versions is overwritten (RGW 16 then serves the source's new
        # bytes under the copy's name: differential seed 3 op #313).
        s3.put_object(Bucket=bucket, Key="src", Body=b"v" * 70016)
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Suspended"})
        s3.put_object(Bucket=bucket, Key="src", Body=b"1", ContentType="image/png")
        s3.copy_object(Bucket=bucket, Key="dst", CopySource={"Bucket": bucket, "Key": "src"})
        s3.put_object(Bucket=bucket, Key="src", Body=b"x" * 1024)
        copy = s3.get_object(Bucket=bucket, Key="dst")
        self.assertEqual((copy["Body"].read(), copy["ContentType"]), (b"1", "image/png"))


    def test_get_object_torrent_finds_no_torrent(self):
        bucket = self.new_bucket("torrent")
        self.s3.put_object(Bucket=bucket, Key="Avatar.mpg", Body=b"A" * 4096)
        error = error_of(lambda: self.s3.get_object_torrent(Bucket=bucket, Key="Avatar.mpg"))
        self.assertEqual((error["ResponseMetadata"]["HTTPStatusCode"], error["Error"]["Code"]), (404, "NoSuchKey"))
        self.assertIn("no torrent is kept", error["Error"]["Message"])
        self.assertEqual(self.code(lambda: self.s3.get_object_torrent(Bucket=bucket, Key="absent")), "NoSuchKey")
        bob = boto3_client(self.gateway, "http", user="bob")
        self.assertEqual(self.code(lambda: bob.get_object_torrent(Bucket=bucket, Key="Avatar.mpg")), "AccessDenied")

    def put_cut_short(self, bucket, key, body, sent, query="", headers=None):
        """A signed PUT of `body` that sends only `sent` bytes of it and hangs up, as a client that
        crashes mid-upload: returns what the gateway answered (b"" when it just closed)."""
        base = self.gateway.urls["http"]
        target = f"/{bucket}/{urllib.parse.quote(key)}" + (f"?{query}" if query else "")
        all_headers = {"Content-Length": str(len(body)), "x-amz-content-sha256": hashlib.sha256(body).hexdigest()}
        all_headers.update(headers or {})
        request = AWSRequest(method="PUT", url=base + target, headers=all_headers)
        SigV4Auth(Credentials(*USERS["alice"]), "s3", "us-east-1").add_auth(request)
        host, port = base.split("/")[2].rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as conn:
            head = f"PUT {target} HTTP/1.1\r\nHost: {host}:{port}\r\n"
            head += "".join(f"{k}: {v}\r\n" for k, v in request.headers.items()) + "\r\n"
            try:  # the gateway may answer and close before all of it is sent
                conn.sendall(head.encode() + body[:sent])
                conn.shutdown(socket.SHUT_WR)
                return conn.recv(4096)
            except OSError:
                return b""

    def test_a_body_cut_short_stores_nothing(self):
        s3 = self.s3
        bucket = self.new_bucket("cut")
        old = os.urandom(300_000)
        s3.put_object(Bucket=bucket, Key="k", Body=old)
        body = os.urandom(2_000_000)
        for sent in (0, 1_000_000, len(body) - 1):
            answer = self.put_cut_short(bucket, "k", body, sent)
            self.assertFalse(answer.startswith(b"HTTP/1.1 200"), answer)
            self.assertEqual(s3.get_object(Bucket=bucket, Key="k")["Body"].read(), old)
            self.put_cut_short(bucket, "new key", body, sent)
            self.assertEqual(self.status(lambda: s3.head_object(Bucket=bucket, Key="new key")), 404)
        # aws-chunked with an unsigned trailer, cut inside a chunk.
        chunked = b"%x\r\n" % len(body) + body + b"\r\n0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n"
        self.put_cut_short(bucket, "k", chunked, 600_000, headers={
            "x-amz-content-sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER", "Content-Encoding": "aws-chunked",
            "x-amz-decoded-content-length": str(len(body)), "x-amz-trailer": "x-amz-checksum-crc32"})
        self.assertEqual(s3.get_object(Bucket=bucket, Key="k")["Body"].read(), old)

        versioned = self.new_bucket("cutv")
        s3.put_bucket_versioning(Bucket=versioned, VersioningConfiguration={"Status": "Enabled"})
        s3.put_object(Bucket=versioned, Key="k", Body=old)
        self.put_cut_short(versioned, "k", body, 1_500_000)
        self.assertEqual([v["Size"] for v in s3.list_object_versions(Bucket=versioned)["Versions"]], [len(old)])

        upload = s3.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
        self.put_cut_short(bucket, "mp", body, 700_000, query=f"partNumber=1&uploadId={upload}")
        self.assertEqual(s3.list_parts(Bucket=bucket, Key="mp", UploadId=upload).get("Parts", []), [])
        part = s3.upload_part(Bucket=bucket, Key="mp", UploadId=upload, PartNumber=1, Body=body)
        s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=upload, MultipartUpload={
            "Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
        self.assertEqual(s3.get_object(Bucket=bucket, Key="mp")["Body"].read(), body)


class DedupeSemanticsTest(SemanticsTest):
    mode = "dedupe"


if __name__ == "__main__":
    unittest.main()
