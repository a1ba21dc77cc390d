"""Differential test: the same seeded random sequence of S3 operations (boto3)
against Ceph RGW (started by tests/s3/with-rgw.sh) and against keel gateway, a
raw bucket and a dedupe bucket, comparing status codes, error codes, listed
keys and versions, ETags and bodies.

Every difference fails the test unless EXPECTED_DIFFERENCES names it: either a
deliberate one (documented in docs/gateway.md, "Differences from Ceph RGW") or
one still to be fixed (TODO with its issue). The two keel buckets must agree
with each other exactly.

    tests/s3/with-rgw.sh /usr/bin/python3 tests/gateway/test_differential.py
    KEEL_DIFF_LONG=1 ...          # thousands of operations (20 seeds of 400)
    KEEL_DIFF_SEEDS=7,8 KEEL_DIFF_OPS=1000 ...   # chosen seeds and length
    KEEL_DIFF_VERBOSE=1 ...       # print every operation and its results

A failure prints the seed, the operation's index and both results; rerun that
seed to reproduce it."""
import base64
import datetime
import email.header
import hashlib
import os
import random
import re
import sys
import unittest
import urllib.parse
import zlib
from xml.etree import ElementTree

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway_harness import Gateway, boto3_client  # noqa: E402

import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402
from botocore.exceptions import BotoCoreError, ClientError  # noqa: E402
from botocore.handlers import set_list_objects_encoding_type_url  # noqa: E402
from botocore.parsers import ResponseParserError  # noqa: E402

MIB = 1024 * 1024
LONG = os.environ.get("KEEL_DIFF_LONG") == "1"
SEEDS = ([int(s) for s in os.environ["KEEL_DIFF_SEEDS"].split(",")] if "KEEL_DIFF_SEEDS" in os.environ
         else list(range(1, 21)) if LONG else [1, 2, 3])
OPS = int(os.environ.get("KEEL_DIFF_OPS", "400" if LONG else "120"))
VERBOSE = os.environ.get("KEEL_DIFF_VERBOSE") == "1"
# Pages of a listing followed to its end: more than any seed's versions at MaxKeys 1.
EVERY_PAGE = 20 * OPS + 400

# Keys that have broken S3 servers: spaces anywhere (also all-space keys),
# dot segments, percent signs, characters URLs and XML treat specially,
# unicode, the 1024-byte maximum.
ODD_KEYS = [
    " ", "  ", " lead", "trail ", " both ", "a b", "a  b", "_", "_ ", " _",
    "..", ".", "../up", "a/../b", "./here", "dir/..", "dir/./x",
    "%", "%20", "%2F", "100%", "a%b", "%zz", "a+b", "a&b", "a=b", "a;b", "a?b", "a#b", "a:b", "a@b", "a,b",
    "<tag>", "a'b", 'a"b', "a*b", "~tilde", "!bang", "a$b", "(p)", "[b]", "{c}", "a|b", "a^b", "a`b", "a\\b",
    "ü", "é/ß", "日本語/ファイル", "emoji😀", "Ω≈ç√", "\u00a0nbsp", "zero\u200bwidth",
    "dir/", "dir/a", "dir/b/c", "dir/b/d", "dir//double", "/lead-slash", "dir/ sp", "dir /x", "dir/sub/deep/key",
    "k" * 1024, "é" * 512, "d/" + "x" * 1022,
]
# Keys S3 refuses (1025 bytes).
BAD_KEYS = ["k" * 1025, "é" * 513]
PREFIXES = ["", "d", "dir", "dir/", "dir/b", "a", " ", "%", "é", "日本", "k", "zzz", "."]
DELIMITERS = ["/", " ", "%", "b", "é", "/b"]

# Operations that read one key's current version (put_extra reads back what it wrote).
READS = ["get", "head", "get_part", "get_attributes", "get_dated", "get_overrides", "put_extra"]

# Differences keel does not share with RGW, matched by operation and field.
# reason: "deliberate: ..." (documented in docs/gateway.md) or "TODO issue N: ..." (to be fixed).
EXPECTED_DIFFERENCES = [
    # Deliberate: keel follows AWS where RGW 16 does not (docs/gateway.md, "Differential testing").
    {"ops": ["list_parts_and_abort"], "field": r"ListUploadsByDelimiter",
     "match": lambda op, rgw, keel: "/" in op["key"] and rgw == ([], []) and
     keel == ([], [op["key"][:op["key"].index("/") + 1]]),
     "reason": "deliberate: RGW 16 leaves an upload whose key has the delimiter out of ListMultipartUploads "
               "altogether; AWS rolls it up into CommonPrefixes (ListMultipartUploads, Delimiter)"},
    {"ops": ["multipart"], "field": r"Complete\.ETag", "match": lambda op, rgw, keel: rgw == "",
     "reason": "deliberate: RGW 16 answers CompleteMultipartUpload with an empty ETag; keel sends the quoted one, as AWS"},
    {"ops": ["multipart"], "field": r"Complete(Again)?\.(error\..*|ETag|VersionId)",
     "match": lambda op, rgw, keel: rgw in ("ResponseParserError", None, "<absent>") and len(op["key"].encode()) >= 1000,
     "reason": "deliberate: RGW 16 writes garbage into <Location> of CompleteMultipartUpload for keys near 1024 bytes"},
    {"ops": ["put_conditional"], "field": r".*", "match": lambda op, rgw, keel: "If-Match" in op["headers"],
     "reason": "deliberate: RGW 16 compares If-Match on PUT with the unquoted ETag, so the quoted form always fails"},
    {"ops": ["copy", "multipart"], "field": r"ETag|CompleteAgain\.ETag", "match": lambda op, rgw, keel: keel == f'"{rgw}"',
     "reason": "deliberate: RGW 16 writes the ETag of CopyObjectResult and of a re-sent CompleteMultipartUpload "
               "unquoted; AWS quotes it (CopyObject and CompleteMultipartUpload response examples)"},
    {"ops": ["get_version", "delete_version"], "field": r"error\.Code",
     "match": lambda op, rgw, keel: rgw == "NoSuchKey" and keel == "NoSuchVersion",
     "reason": "deliberate: a version id that does not exist is NoSuchVersion on AWS; RGW says NoSuchKey"},
    {"ops": ["copy"], "field": r"VersionId", "match": lambda op, rgw, keel: rgw is None and keel not in (None, "null"),
     "reason": "deliberate: RGW 16 sends no x-amz-version-id on CopyObject into a versioned bucket; AWS names the "
               "new copy's version (CopyObject, x-amz-version-id)"},
    {"ops": ["put", "put_conditional", "get", "head", "multipart", "copy", "delete", "delete_version", "get_version",
             "tagging", "list_parts_and_abort"], "field": r"(.*\.)?error\.Code",
     "match": lambda op, rgw, keel: rgw == "InvalidObjectName" and keel == "KeyTooLongError",
     "reason": "deliberate: a key over 1024 bytes is KeyTooLongError on AWS (S3 error codes); RGW says InvalidObjectName"},
    {"ops": ["delete", "delete_objects"], "field": r"(Deleted\[\d+\]\.)?DeleteMarker",
     "match": lambda op, rgw, keel: rgw == RGW_NO_MARKER and keel == AWS_ANOTHER_MARKER,
     "reason": "deliberate: a plain DELETE of a key whose current version is a delete marker inserts another "
               "marker on AWS (S3 user guide, 'Removing delete markers'); RGW 16 adds none"},
    {"ops": ["get_version"], "field": r"error\.(Code|Status)",
     "match": lambda op, rgw, keel: rgw in (404, "NoSuchKey") and keel in (405, "MethodNotAllowed"),
     "reason": "deliberate: GET of a version that is a delete marker answers 405 MethodNotAllowed on AWS "
               "(GetObject, 'If the specified version is a delete marker'); RGW 16 says 404 NoSuchKey"},
    {"ops": ["delete_objects"], "field": r"Deleted\[\d+\]\.(DeleteMarker|VersionId)",
     "match": lambda op, rgw, keel: rgw is None and keel is not None and any("VersionId" in o for o in op["objects"]),
     "reason": "deliberate: DeleteObjects of a version that is a delete marker answers <DeleteMarker>true and that "
               "version's id as <DeleteMarkerVersionId> on AWS (DeleteObjects, DeletedObject); RGW 16 sends neither"},
    {"ops": ["multipart"], "field": r"Complete(Again)?\.error\.Code",
     "match": lambda op, rgw, keel: op["descending"] and op["bad_etag"] and rgw == "InvalidPart" and keel == "InvalidPartOrder",
     "reason": "deliberate: a Complete whose part list is both out of order and names a wrong ETag is refused 400 by "
               "both; keel checks the list's order before the parts (InvalidPartOrder), RGW 16 the parts first"},
    {"ops": ["get_part"], "field": r".*", "match": lambda op, rgw, keel: op.get("rgw_whole_object"),
     "reason": "deliberate: RGW 16 ignores partNumber on GET/HEAD (200, the whole object); keel answers as AWS: 206 "
               "with the part and x-amz-mp-parts-count, 416 InvalidPartNumber past the last part (an object not "
               "uploaded in parts has one, the whole object, answered as a plain GET)"},
    {"ops": ["get_part"], "field": r"error\.(Code|Status)",
     "match": lambda op, rgw, keel: rgw in ("InvalidPart", 400) and keel in ("InvalidPartNumber", 416),
     "reason": "deliberate: a partNumber past the last part is 416 InvalidPartNumber on AWS; RGW 16 says 400 InvalidPart"},
    {"ops": ["get_attributes"], "field": r".*", "match": lambda op, rgw, keel: op.get("rgw_no_attributes"),
     "reason": "deliberate: RGW 16 has no GetObjectAttributes (it answers the object's bytes); keel answers as AWS"},
    {"ops": ["list_buckets"], "field": r"RGW ignores prefix and max-buckets", "match": lambda op, rgw, keel: rgw and not keel,
     "reason": "deliberate: RGW 16 ignores ListBuckets' prefix and max-buckets (it lists every bucket); keel pages "
               "and filters as AWS (ListBuckets), which the test checks against RGW's buckets with the prefix"},
    {"ops": ["put_extra"], "field": r"Get\.Checksum\.Checksum\w+", "match": lambda op, rgw, keel: rgw == "<absent>" and keel == "as sent",
     "reason": "deliberate: RGW 16 keeps no x-amz-checksum-* of a PutObject; keel returns it with x-amz-checksum-mode, as AWS"},
    {"ops": ["delete_version"], "field": r"VersionId",
     "match": lambda op, rgw, keel: rgw is None and (keel == op["version"] or op["version"] == "unknown"),
     "reason": "deliberate: DeleteObject of a version id the key does not have answers 204 naming that version on AWS; "
               "RGW 16 sends no x-amz-version-id"},
    {"ops": ["list_versions"], "field": r"RGW lists the key-marker", "match": lambda op, rgw, keel: rgw and not keel,
     "reason": "deliberate: RGW 16 lists the versions of the key-marker itself in a versioned bucket (without "
               "version-id-marker); S3 lists the keys after it (ListObjectVersions, key-marker)"},
    {"ops": ["list_versions"], "field": r"RGW lists a phantom copy of the current version",
     "match": lambda op, rgw, keel: rgw and not keel,
     "reason": "deliberate: RGW 16 at times lists a key's current version twice (a second, non-current version "
               "with another id and the same ETag and size, which no operation made; seen after versioning was "
               "suspended); S3 lists the versions that were written, as keel. The test leaves it out and compares "
               "what the pages list together"},
    {"ops": ["list_versions"], "field": r"RGW skips the versions after a null one",
     "match": lambda op, rgw, keel: rgw and not keel,
     "reason": "deliberate: RGW 16 given version-id-marker=null goes on with the next key, skipping the key's older "
               "versions; S3 lists them (versions newest first, null a version like any other), as keel"},
    {"ops": ["get", "head"], "field": r"VersionId", "match": lambda op, rgw, keel: rgw is None and keel == "null",
     "reason": "deliberate: GET/HEAD of a null version in a bucket with versioning on or suspended names it "
               "(x-amz-version-id: null) on AWS; RGW 16 sends none"},
    {"ops": ["get", "head", "get_version"], "field": r"Metadata\.\w+",
     "match": lambda op, rgw, keel: rgw != keel and rfc2047_text(rgw) == rfc2047_text(keel),
     "reason": "deliberate: AWS decodes RFC 2047 user metadata and sends a non-ASCII value re-encoded (Q when it is "
               "mostly ASCII, as S3's MimeUtility: =?UTF-8?Q?H=C3=A9llo?=); RGW 16 stores and returns it as sent"},
    {"ops": ["delete_version"], "field": r"DeleteMarker",
     "match": lambda op, rgw, keel: rgw is None and keel is True and op["version"] == "null",
     "reason": "deliberate: DeleteObject of a version that is a delete marker answers x-amz-delete-marker: true on "
               "AWS (DeleteObject); RGW 16 sends none when that marker is the null version"},
    {"ops": READS, "field": r".*", "match": lambda op, rgw, keel: op.get("rgw_denies_what_it_lists"),
     "reason": "deliberate: RGW 16 at times answers 404 NoSuchKey for a key whose current version its own "
               "ListObjectVersions shows (seeds 9102, 9103, 9111: after copies into a Suspended bucket onto a delete "
               "marker, a DeleteObject of a version id the key does not have, a put); keel serves what it lists"},
    {"ops": ["tagging"], "field": r"PutTagging\.VersionId", "match": lambda op, rgw, keel: rgw is None and keel,
     "reason": "deliberate: PutObjectTagging names the version it tagged (x-amz-version-id) on AWS; RGW 16 sends none"},
]


def rfc2047_text(value):
    """The text of a header value made of RFC 2047 encoded-words and plain words."""
    if not isinstance(value, str):
        return value
    return str(email.header.make_header(email.header.decode_header(value)))


def expected(op, field, rgw, keel):
    """The reason EXPECTED_DIFFERENCES gives for this difference; None when it names none.
    Each entry: 'ops' (operation names), 'field' (a regular expression over the field's
    path), 'match' (op, rgw value, keel value) -> bool, 'reason'."""
    for entry in EXPECTED_DIFFERENCES:
        if (op["name"] in entry["ops"] and re.fullmatch(entry["field"], field) and
                entry.get("match", lambda *_: True)(op, rgw, keel)):
            return entry["reason"]
    return None


UNKNOWN_VERSION = "3sL4kqtJlcpXroDTDmJ-rmSpXd3dIbrHY"


class Target:
    """One S3 endpoint and bucket; maps its version ids to ordinals shared by all targets."""

    def __init__(self, name, client, bucket):
        self.name = name
        self.s3 = client
        self.bucket = bucket
        # "unknown": a version id this target never gave, named so whenever a server echoes it
        self.ordinal_of = {"null": "null", UNKNOWN_VERSION: "unknown"}
        self.id_of = {"null": "null", "unknown": UNKNOWN_VERSION}
        # Ordinals name the operation that first showed a version (v12, then v12.1 ...), so
        # a version one server makes and the other does not shifts no later ordinal.
        self.operation = 0
        self.extra_headers = {}
        self.error_headers = {}  # of the last error answered
        self.markers = {}  # key -> its current delete marker's version id, before a delete (keel only)
        events = client.meta.events
        # Listings without encoding-type unless an operation asks for it (boto3 adds url by default).
        events.unregister("before-parameter-build.s3.ListObjects", set_list_objects_encoding_type_url)
        events.unregister("before-parameter-build.s3.ListObjectsV2", set_list_objects_encoding_type_url)
        events.unregister("before-parameter-build.s3.ListObjectVersions", set_list_objects_encoding_type_url)
        events.register("before-sign.s3", self._add_headers)

    def _add_headers(self, request, **_):
        for name, value in self.extra_headers.items():
            request.headers[name] = value

    def version(self, real):
        """The ordinal (v1, v2, ...) of a version id this target answered."""
        if real is None:
            return None
        if real not in self.ordinal_of:
            seen = sum(1 for o in self.ordinal_of.values() if o.split(".")[0] == f"v{self.operation}")
            ordinal = f"v{self.operation}" + (f".{seen}" if seen else "")
            self.ordinal_of[real] = ordinal
            self.id_of[ordinal] = real
        return self.ordinal_of[real]

    def real_version(self, ordinal):
        return self.id_of.get(ordinal, UNKNOWN_VERSION)

    def call(self, method, headers=None, **params):
        """(result, error): the response as a dict, or the S3 error as {'Status', 'Code'}."""
        self.extra_headers = headers or {}
        try:
            return getattr(self.s3, method)(Bucket=self.bucket, **params), None
        except ClientError as e:
            self.error_headers = e.response["ResponseMetadata"].get("HTTPHeaders", {})
            return None, {"Status": e.response["ResponseMetadata"]["HTTPStatusCode"],
                          "Code": e.response.get("Error", {}).get("Code")}
        except (BotoCoreError, ResponseParserError) as e:  # a response boto3 cannot parse
            return None, {"Status": None, "Code": type(e).__name__}
        finally:
            self.extra_headers = {}


def http_date(when):
    return when.strftime("%a, %d %b %Y %H:%M:%S GMT")


PAST = datetime.datetime(2001, 1, 1, tzinfo=datetime.timezone.utc)
FUTURE = datetime.datetime(2099, 1, 1, tzinfo=datetime.timezone.utc)


class Sequence:
    """A seeded random sequence of operations and the state they need
    (keys written, versions seen, uploads in progress); the same seed makes
    the same operations for every target."""

    def __init__(self, seed):
        self.random = random.Random(seed)
        self.keys = []  # keys put at least once
        self.versions = []  # version ordinals seen
        self.etags = {}  # key -> the ETag of its last put body
        self.multipart = set()  # keys last written by a multipart upload
        # Keys ever written by one: a refused put or copy, or a delete of the current version, can leave
        # (or make) a multipart version current again, which the sequence cannot tell.
        self.ever_multipart = set()
        self.written = set()
        self.marked = set()  # keys deleted without a version id in a bucket that has had versioning
        self.versioning = None
        # The operations added later (parts, overrides, dates, attributes, checksums, ListBuckets) draw
        # from a stream of their own, so that each seed's first operations stay those triaged before.
        self.extra = random.Random(f"extra-{seed}")

    def key(self):
        r = self.random
        if self.keys and r.random() < 0.5:
            return r.choice(self.keys)
        if r.random() < 0.02:
            return r.choice(BAD_KEYS)
        return r.choice(ODD_KEYS)

    def body(self):
        size = self.random.choice([0, 1, 17, 1000, 4096, 70000])
        return bytes(self.random.getrandbits(8) for _ in range(min(size, 64))) * (size // 64 + 1)

    def next(self):
        if self.extra.random() < 0.15:
            return self.next_extra()
        r = self.random
        choices = [("put", 24), ("get", 14), ("head", 6), ("delete", 8), ("delete_objects", 5), ("copy", 5),
                   ("list_v2", 10), ("list_v1", 6), ("list_versions", 6), ("multipart", 2), ("versioning", 1),
                   ("get_version", 4), ("delete_version", 3), ("put_conditional", 4), ("list_parts_and_abort", 1),
                   ("tagging", 3)]
        name = r.choices([c[0] for c in choices], weights=[c[1] for c in choices])[0]
        return getattr(self, "make_" + name)()

    # Each make_* returns {'name': ..., parameters...}; run() executes it on one target.
    def make_put(self):
        key, body = self.key(), self.body()
        op = {"name": "put", "key": key, "body": body}
        if self.random.random() < 0.3:
            op["content_type"] = self.random.choice(["text/plain", "application/x-thing; a=b", "image/png"])
            op["metadata"] = {"color": self.random.choice(["red", "blue green", "x%20y", "=?UTF-8?B?SMOpbGxv?="])}
        if len(key.encode()) <= 1024 and key not in self.keys:
            self.keys.append(key)
        self.etags[key] = '"' + hashlib.md5(body).hexdigest() + '"'
        self.multipart.discard(key)
        return op

    def make_put_conditional(self):
        self.written = set(self.keys)  # before make_put adds the key
        op = self.make_put()
        op["name"] = "put_conditional"
        r = self.random.random()
        # RGW 16 ignores If-None-Match: * in a bucket with versioning on (it writes a new version; S3
        # refuses, 412, as keel): there it goes only with keys not written yet, which both servers write.
        # And it refuses it (412) on a key whose current version is a delete marker, where S3 writes (no
        # current object, as keel): nor with keys deleted there.
        fresh = op["key"] not in self.written and op["key"] not in self.marked
        if r < 0.5 and (self.versioning is None or fresh):
            op["headers"] = {"If-None-Match": "*"}
        else:
            op["headers"] = {"If-Match": self.etags.get(op["key"], '"0123456789abcdef0123456789abcdef"')
                             if self.random.random() < 0.7 else '"ffffffffffffffffffffffffffffffff"'}
        return op

    def conditions(self, key):
        r = self.random
        kind = r.choice(["none", "none", "if_match", "if_match_bad", "if_none_match", "if_none_match_other",
                         "modified_past", "modified_future", "unmodified_past", "unmodified_future", "range",
                         "range_suffix", "range_open", "range_bad"])
        etag = self.etags.get(key, '"0123456789abcdef0123456789abcdef"')
        return {"none": {}, "if_match": {"IfMatch": etag}, "if_match_bad": {"IfMatch": '"deadbeef"'},
                "if_none_match": {"IfNoneMatch": etag}, "if_none_match_other": {"IfNoneMatch": '"deadbeef"'},
                "modified_past": {"IfModifiedSince": PAST}, "modified_future": {"IfModifiedSince": FUTURE},
                "unmodified_past": {"IfUnmodifiedSince": PAST}, "unmodified_future": {"IfUnmodifiedSince": FUTURE},
                "range": {"Range": f"bytes={r.randint(0, 100)}-{r.randint(100, 5000)}"},
                "range_suffix": {"Range": f"bytes=-{r.randint(1, 3000)}"},
                "range_open": {"Range": f"bytes={r.randint(0, 2000)}-"},
                "range_bad": {"Range": "bytes=999999-"}}[kind]

    def make_get(self):
        key = self.key()
        return {"name": "get", "key": key, "params": self.conditions(key)}

    def make_head(self):
        key = self.key()
        return {"name": "head", "key": key, "params": self.conditions(key)}

    def make_get_version(self):
        return {"name": "get_version", "key": self.key(), "version": self.pick_version()}

    def pick_version(self):
        if self.versions and self.random.random() < 0.85:
            return self.random.choice(self.versions)
        return self.random.choice(["null", "unknown"])

    def make_delete(self):
        key = self.key()
        if self.versioning:
            self.marked.add(key)
        return {"name": "delete", "key": key}

    def make_delete_version(self):
        return {"name": "delete_version", "key": self.key(), "version": self.pick_version()}

    def make_delete_objects(self):
        r = self.random
        keys = [self.key() for _ in range(r.randint(1, 6))]
        objects = []
        for key in keys:
            entry = {"Key": key}
            if r.random() < 0.2:
                entry["VersionId"] = self.pick_version()
            objects.append(entry)
        if self.versioning:
            self.marked.update(o["Key"] for o in objects if "VersionId" not in o)
        return {"name": "delete_objects", "objects": objects, "quiet": r.random() < 0.3}

    def make_copy(self):
        r = self.random
        source = self.key()
        if source in self.ever_multipart:
            # A CopyObject of a multipart object: S3 gives the copy the MD5 of its bytes as ETag (one
            # part), as keel does; RGW 16 keeps the source's "-N" ETag, and the two would differ in every
            # later listing of the copy. Copied multipart objects are in tests/gateway/test_s3_semantics.py.
            source = r.choice([k for k in ODD_KEYS if k not in self.ever_multipart] or ODD_KEYS)
        op = {"name": "copy", "source": source, "key": self.key(),
              "directive": r.choice(["COPY", "REPLACE"])}
        if r.random() < 0.3:
            op["condition"] = r.choice([{"CopySourceIfMatch": self.etags.get(op["source"], '"x"')},
                                        {"CopySourceIfNoneMatch": self.etags.get(op["source"], '"x"')},
                                        {"CopySourceIfModifiedSince": PAST},
                                        # RGW 16 copies on an if-unmodified-since in the past, which S3 refuses
                                        # (412, as keel): a future date keeps both servers' objects the same.
                                        {"CopySourceIfUnmodifiedSince": FUTURE}])
            if "CopySourceIfNoneMatch" in op["condition"]:
                # RGW 16 ignores x-amz-copy-source-if-none-match (and every x-amz-copy-source-if-* on a
                # copy that replaces the metadata): it copies where S3 refuses (412, as keel), so only
                # one that holds (the refusals are in tests/gateway/test_s3_semantics.py).
                op["condition"] = {"CopySourceIfNoneMatch": '"0123456789abcdef0123456789abcdef"'}
        self.multipart.discard(op["key"])
        if op["source"] in self.etags and len(op["key"].encode()) <= 1024:
            self.etags[op["key"]] = self.etags[op["source"]]
            if op["key"] not in self.keys:
                self.keys.append(op["key"])
        return op

    def listing(self):
        r = self.random
        params = {}
        if r.random() < 0.6:
            params["Prefix"] = r.choice(PREFIXES)
        if r.random() < 0.5:
            params["Delimiter"] = r.choice(DELIMITERS)
        if r.random() < 0.6:
            params["MaxKeys"] = r.choice([0, 1, 2, 3, 5, 1000])
        if r.random() < 0.4:
            params["EncodingType"] = "url"
        return params

    def make_list_v2(self):
        params = self.listing()
        r = self.random
        if r.random() < 0.3:
            params["StartAfter"] = self.key() if r.random() < 0.7 else r.choice(["", "a", "dir/", "\U0010ffff"])
        if r.random() < 0.2:
            params["FetchOwner"] = True
        return {"name": "list_v2", "params": params}

    def make_list_v1(self):
        params = self.listing()
        if self.random.random() < 0.3:
            params["Marker"] = self.key()
        return {"name": "list_v1", "params": params}

    def make_list_versions(self):
        params = self.listing()
        if self.random.random() < 0.3:
            params["KeyMarker"] = self.key()
        return {"name": "list_versions", "params": params}

    def make_versioning(self):
        self.versioning = "Suspended" if self.versioning == "Enabled" else "Enabled"
        return {"name": "versioning", "status": self.versioning}

    def make_multipart(self):
        r = self.random
        key = self.key()
        written = key in self.keys
        sizes = [5 * MIB] * r.randint(0, 2) + [r.choice([1, 1000, 100000])]
        parts = [bytes([r.getrandbits(8)]) * size for size in sizes]
        op = {"name": "multipart", "key": key, "parts": parts,
              "resend_part": r.random() < 0.4,  # upload part 1 twice, the second upload counts
              "retry_complete": r.random() < 0.4,  # send CompleteMultipartUpload again, as after a lost response
              "bad_etag": r.random() < 0.1, "descending": len(parts) > 1 and r.random() < 0.1,
              "if_none_match": r.random() < 0.15}
        # RGW 16 completes a descending part list (S3 refuses it, InvalidPartOrder, as keel): there with a
        # wrong ETag too, which both refuse. And it ignores If-None-Match: * on a Complete over an existing
        # key, in any bucket (seeds 119 and 121; S3 refuses, 412, as keel): there only for new keys.
        op["bad_etag"] = op["bad_etag"] or op["descending"]
        op["if_none_match"] = op["if_none_match"] and not (written or key in self.marked)
        if len(key.encode()) <= 1024 and key not in self.keys:
            self.keys.append(key)
        self.etags.pop(key, None)
        self.multipart.add(key)
        self.ever_multipart.add(key)
        return op

    def make_tagging(self):
        """Tags in a random order, by x-amz-tagging on a put or by PutObjectTagging, read back
        in the order the server lists them."""
        r = self.random
        names = r.sample(["b", "a", "Z", "_", "a b", "é", "10", "9", "k=v", "&"], r.randint(1, 6))
        tags = [(name, r.choice(["", "v", "x y", "ü"])) for name in names]
        op = {"name": "tagging", "key": self.key(), "tags": tags, "by_header": r.random() < 0.5}
        if op["by_header"]:
            op["body"] = self.body()
            if len(op["key"].encode()) <= 1024 and op["key"] not in self.keys:
                self.keys.append(op["key"])
            self.etags[op["key"]] = '"' + hashlib.md5(op["body"]).hexdigest() + '"'
            self.multipart.discard(op["key"])
        return op

    def make_list_parts_and_abort(self):
        return {"name": "list_parts_and_abort", "key": self.key()}

    def next_extra(self):
        """One of the later operations, drawn from self.extra; they write only keys already written
        (not by a multipart upload), so the main stream's choices stay as they were."""
        r = self.extra
        name = r.choices(["get_part", "get_overrides", "get_dated", "get_attributes", "list_buckets", "put_extra"],
                         weights=[4, 3, 4, 3, 2, 4])[0]
        key = r.choice(self.keys) if self.keys and r.random() < 0.85 else r.choice(ODD_KEYS)
        if name == "get_part":
            return {"name": name, "key": key, "part": r.choice([1, 1, 2, 3]), "head": r.random() < 0.4,
                    "checksum": r.random() < 0.3}
        if name == "get_overrides":
            every = {"ResponseContentType": "text/x-over; q=1", "ResponseContentLanguage": "de-CH",
                     "ResponseContentDisposition": 'attachment; filename="a b.txt"', "ResponseCacheControl": "no-cache",
                     "ResponseExpires": FUTURE, "ResponseContentEncoding": "identity"}
            return {"name": name, "key": key, "overrides": dict(r.sample(sorted(every.items()), r.randint(1, 6)))}
        if name == "get_dated":
            # If-Modified-Since / If-Unmodified-Since at the object's own Last-Modified, a second before or after.
            return {"name": name, "key": key, "header": r.choice(["IfModifiedSince", "IfUnmodifiedSince"]),
                    "offset": r.choice([-1, 0, 1]), "head": r.random() < 0.4}
        if name == "get_attributes":
            attributes = r.sample(["ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize"], r.randint(1, 5))
            return {"name": name, "key": key, "attributes": attributes, "max_parts": r.choice([None, 1, 2])}
        if name == "list_buckets":
            return {"name": name, "prefix": r.choice(["", "-", "-b", "-b2", "-x"]), "max": r.choice([None, 1, 2, 1000])}
        keys = [k for k in self.keys if k not in self.multipart]
        if not keys:
            return {"name": "get_part", "key": key, "part": 1, "head": True, "checksum": False}
        key = r.choice(keys)
        size = r.choice([0, 1, 17, 1000, 70000])
        body = bytes(r.getrandbits(8) for _ in range(min(size, 64))) * (size // 64 + 1)
        algorithm = r.choice(["CRC32", "SHA1", "SHA256", None])
        self.etags[key] = '"' + hashlib.md5(body).hexdigest() + '"'
        return {"name": "put_extra", "key": key, "body": body, "algorithm": algorithm,
                "encoding": r.choice(["gzip", "identity", "gzip, br", None]),
                "checksum": (algorithm, checksum_of(algorithm, body)) if algorithm else None}


def error(err):
    return {"error": err}


def checksum_of(algorithm, body):
    """The base64 x-amz-checksum-* value of body."""
    digest = (zlib.crc32(body).to_bytes(4, "big") if algorithm == "CRC32" else
              hashlib.new(algorithm.lower(), body).digest())
    return base64.b64encode(digest).decode()


def checksums(result, op_checksum=None):
    """The x-amz-checksum-* values of a response; the one the put sent shown as 'as sent'."""
    out = {}
    for field in ("ChecksumCRC32", "ChecksumCRC32C", "ChecksumCRC64NVME", "ChecksumSHA1", "ChecksumSHA256"):
        if result.get(field):
            sent = op_checksum and field == "Checksum" + op_checksum[0] and result[field] == op_checksum[1]
            out[field] = "as sent" if sent else result[field]
    return out


def aws_listing_encode(text):
    """A listing's encoding-type=url form on S3: every byte but ASCII letters, digits and -_.*/
    percent-encoded (%20 for a blank, '~' escaped, '*' and '/' kept)."""
    return urllib.parse.quote(text, safe="/*").replace("~", "%7E")


def listing_text(target, value, is_key, url, not_aws):
    """A key or other text field of a listing, decoded when encoding-type=url was asked for.
    keel must encode as S3 does (a value it encodes otherwise is added to not_aws); RGW 16
    encodes keys and common prefixes (with '/' as %2F in keys) and sends Prefix, Delimiter and
    markers plain."""
    if not url or value is None:
        return value
    if target.name == "rgw":
        return urllib.parse.unquote(value) if is_key else value
    decoded = urllib.parse.unquote(value)
    if aws_listing_encode(decoded) != value:
        not_aws.append(value)
    return decoded


def normalise_listing(target, page, fields, url):
    not_aws = []

    def text(value, is_key=False):
        return listing_text(target, value, is_key, url, not_aws)

    out = {"IsTruncated": page.get("IsTruncated"), "KeyCount": page.get("KeyCount"),
           "MaxKeys": page.get("MaxKeys"),
           # keel sends a ListObjects v1 Prefix plain, as botocore expects (docs/gateway.md)
           "Prefix": page.get("Prefix") if "NextMarker" in fields else text(page.get("Prefix")),
           "Delimiter": text(page.get("Delimiter")), "EncodingType": page.get("EncodingType"),
           "CommonPrefixes": [text(p["Prefix"], True) for p in page.get("CommonPrefixes", [])]}
    for field in fields:
        if field in page:
            out[field] = text(page[field]) if field.endswith(("Marker", "StartAfter")) and "Version" not in field \
                else page[field]
    out["Contents"] = [(text(o["Key"], True), o["ETag"], o["Size"], o.get("StorageClass"), "Owner" in o)
                       for o in page.get("Contents", [])]
    if "Versions" in page or "DeleteMarkers" in page:
        # Versions and delete markers merged in the order the XML lists them is
        # not kept by boto3; compare each list on its own.
        out["Versions"] = [(text(v["Key"], True), target.version(v["VersionId"]), v["IsLatest"], v["ETag"], v["Size"])
                           for v in page.get("Versions", [])]
        out["DeleteMarkers"] = [(text(m["Key"], True), target.version(m["VersionId"]), m["IsLatest"])
                                for m in page.get("DeleteMarkers", [])]
    for marker in ("NextVersionIdMarker", "VersionIdMarker"):
        if marker in out:
            out[marker] = target.version(out[marker]) if out[marker] else out[marker]
    out["NotAwsEncoded"] = not_aws
    return out


def run(target, op):
    """The operation's outcome on one target, normalised for comparison."""
    name = op["name"]
    if name in ("put", "put_conditional"):
        params = {"Key": op["key"], "Body": op["body"]}
        if "content_type" in op:
            params.update(ContentType=op["content_type"], Metadata=op["metadata"])
        result, err = target.call("put_object", headers=op.get("headers"), **params)
        if err:
            return error(err)
        return {"ETag": result.get("ETag"), "VersionId": target.version(result.get("VersionId"))}
    if name in ("get", "head", "get_version"):
        params = {"Key": op["key"], **op.get("params", {})}
        if name == "get_version":
            params["VersionId"] = target.real_version(op["version"])
        result, err = target.call("head_object" if name == "head" else "get_object", **params)
        if err:
            return error(err)
        out = {field: result.get(field) for field in ("ETag", "ContentLength", "ContentRange", "ContentType",
                                                         "Metadata", "DeleteMarker")}
        out["VersionId"] = target.version(result.get("VersionId"))
        out["Status"] = result["ResponseMetadata"]["HTTPStatusCode"]
        if name != "head":
            out["Body"] = hashlib.sha256(result["Body"].read()).hexdigest()
        return out
    if name in ("delete", "delete_version"):
        params = {"Key": op["key"]}
        if name == "delete_version":
            params["VersionId"] = target.real_version(op["version"])
        result, err = target.call("delete_object", **params)
        if err:
            return error(err)
        out = {"Status": result["ResponseMetadata"]["HTTPStatusCode"]}
        marker = {"Key": op["key"], "DeleteMarker": result.get("DeleteMarker"), "VersionId": result.get("VersionId")}
        if name == "delete" and op["key"] in op.get("on_marker", ()):
            label_delete_on_marker(target, op, marker, target.markers.get(op["key"]),
                                   op["versioned"] == "Suspended" and op["key"] in op["null_marker"])
        return dict(out, DeleteMarker=marker["DeleteMarker"], VersionId=target.version(marker["VersionId"]))
    if name == "delete_objects":
        objects = [dict(o, VersionId=target.real_version(o["VersionId"])) if "VersionId" in o else o
                   for o in op["objects"]]
        result, err = target.call("delete_objects", Delete={"Objects": objects, "Quiet": op["quiet"]})
        if err:
            return error(err)
        return {"Deleted": deleted_entries(target, op, result.get("Deleted", [])),
                "Errors": sorted(((e["Key"], e["Code"]) for e in result.get("Errors", [])), key=repr)}
    if name == "copy":
        params = {"Key": op["key"], "CopySource": {"Bucket": target.bucket, "Key": op["source"]},
                  "MetadataDirective": op["directive"], **op.get("condition", {})}
        if op["directive"] == "REPLACE":
            params["ContentType"] = "text/replaced"
        result, err = target.call("copy_object", **params)
        if err:
            return error(err)
        version = result.get("VersionId")
        if version is None and target.name == "rgw":
            # RGW 16 sends no x-amz-version-id on CopyObject (see EXPECTED_DIFFERENCES); learn the
            # new version's id from a HEAD so that its ordinal is the one keel's copy gets.
            head, _ = target.call("head_object", Key=op["key"])
            target.version((head or {}).get("VersionId"))
        return {"ETag": result["CopyObjectResult"]["ETag"], "VersionId": target.version(version)}
    if name in ("list_v2", "list_v1", "list_versions"):
        return list_all(target, op)
    if name == "versioning":
        result, err = target.call("put_bucket_versioning", VersioningConfiguration={"Status": op["status"]})
        if err:
            return error(err)
        return {"Status": target.call("get_bucket_versioning")[0].get("Status")}
    if name == "multipart":
        return multipart(target, op)
    if name == "tagging":
        out = {}
        if op["by_header"]:
            result, err = target.call("put_object", Key=op["key"], Body=op["body"],
                                      Tagging=urllib.parse.urlencode(op["tags"]))
            out["Put"] = error(err) if err else {"VersionId": target.version(result.get("VersionId"))}
        else:
            result, err = target.call("put_object_tagging", Key=op["key"],
                                      Tagging={"TagSet": [{"Key": k, "Value": v} for k, v in op["tags"]]})
            out["PutTagging"] = error(err) if err else {"VersionId": target.version(result.get("VersionId"))}
        result, err = target.call("get_object_tagging", Key=op["key"])
        out["TagSet"] = error(err) if err else [(t["Key"], t["Value"]) for t in result["TagSet"]]
        return out
    if name == "list_parts_and_abort":
        created, err = target.call("create_multipart_upload", Key=op["key"])
        if err:
            return error(err)
        upload = created["UploadId"]
        target.call("upload_part", Key=op["key"], UploadId=upload, PartNumber=3, Body=b"three")
        target.call("upload_part", Key=op["key"], UploadId=upload, PartNumber=1, Body=b"one")
        parts, err = target.call("list_parts", Key=op["key"], UploadId=upload, MaxParts=1)
        out = {"ListParts": error(err) if err else
               ([(p["PartNumber"], p["ETag"], p["Size"]) for p in parts.get("Parts", [])], parts["IsTruncated"],
                parts.get("NextPartNumberMarker"))}
        uploads, err = target.call("list_multipart_uploads", Prefix=op["key"])
        out["ListUploads"] = error(err) if err else [u["Key"] for u in uploads.get("Uploads", [])]
        # The bucket's only upload, rolled up at the first "/" of its key if it has one.
        uploads, err = target.call("list_multipart_uploads", Delimiter="/")
        out["ListUploadsByDelimiter"] = error(err) if err else (
            [u["Key"] for u in uploads.get("Uploads", [])], [p["Prefix"] for p in uploads.get("CommonPrefixes", [])])
        _, err = target.call("abort_multipart_upload", Key=op["key"], UploadId=upload)
        out["Abort"] = err
        _, err = target.call("abort_multipart_upload", Key=op["key"], UploadId=upload)
        out["AbortAgain"] = err
        return out
    return run_extra(target, op)


def run_extra(target, op):
    """The outcome of one of the operations next_extra makes."""
    name = op["name"]
    if name == "get_part":
        params = {"Key": op["key"], "PartNumber": op["part"]}
        if op["checksum"]:
            params["ChecksumMode"] = "ENABLED"
        result, err = target.call("head_object" if op["head"] else "get_object", **params)
        if target.name == "rgw":
            # RGW 16 ignores partNumber: the whole object, 200, whatever the part
            op["rgw_whole_object"] = not err and result.get("PartsCount") is None and result.get("ContentRange") is None
        if err:
            return error(err)
        out = {field: result.get(field) for field in ("ETag", "ContentLength", "ContentRange", "PartsCount")}
        out["Status"] = result["ResponseMetadata"]["HTTPStatusCode"]
        if not op["head"]:
            out["Body"] = hashlib.sha256(result["Body"].read()).hexdigest()
        return out
    if name == "get_overrides":
        result, err = target.call("get_object", Key=op["key"], **op["overrides"])
        if err:
            return error(err)
        headers = result["ResponseMetadata"]["HTTPHeaders"]
        return {h: headers.get(h) for h in ("content-type", "content-language", "content-disposition",
                                             "cache-control", "expires", "content-encoding")}
    if name == "get_dated":
        head, err = target.call("head_object", Key=op["key"])
        if err:
            return {"Head": error(err)}
        when = head["LastModified"] + datetime.timedelta(seconds=op["offset"])
        result, err = target.call("head_object" if op["head"] else "get_object", Key=op["key"], **{op["header"]: when})
        if err:
            return error(err)
        return {"Status": result["ResponseMetadata"]["HTTPStatusCode"], "ETag": result.get("ETag")}
    if name == "get_attributes":
        params = {"Key": op["key"], "ObjectAttributes": op["attributes"]}
        if op["max_parts"]:
            params["MaxParts"] = op["max_parts"]
        result, err = target.call("get_object_attributes", **params)
        if target.name == "rgw":  # RGW 16 answers with the object itself, which boto3 cannot parse (or reads as empty)
            op["rgw_no_attributes"] = bool(err and err["Code"] == "ResponseParserError") or (
                not err and all(result.get(f) is None for f in ("ETag", "ObjectSize", "StorageClass", "ObjectParts")))
        if err:
            return error(err)
        parts = result.get("ObjectParts", {})
        return {"ETag": result.get("ETag"), "ObjectSize": result.get("ObjectSize"),
                "StorageClass": result.get("StorageClass"), "Checksum": checksums(result.get("Checksum", {})),
                "VersionId": target.version(result.get("VersionId")), "DeleteMarker": result.get("DeleteMarker"),
                "Parts": {"Total": parts.get("TotalPartsCount"), "IsTruncated": parts.get("IsTruncated"),
                          "Sizes": [p.get("Size") for p in parts.get("Parts", [])]} if parts else None}
    if name == "list_buckets":
        return list_buckets(target, op)
    if name == "put_extra":
        params = {"Key": op["key"], "Body": op["body"]}
        if op["algorithm"]:
            params["ChecksumAlgorithm"] = op["algorithm"]
        if op["encoding"]:
            params["ContentEncoding"] = op["encoding"]
        result, err = target.call("put_object", **params)
        if err:
            return error(err)
        out = {"ETag": result.get("ETag"), "VersionId": target.version(result.get("VersionId"))}
        got, err = target.call("get_object", Key=op["key"], ChecksumMode="ENABLED")
        out["Get"] = error(err) if err else {
            "ETag": got.get("ETag"), "ContentEncoding": got.get("ContentEncoding"),
            "Body": hashlib.sha256(got["Body"].read()).hexdigest(), "Checksum": checksums(got, op["checksum"])}
        return out
    raise AssertionError(f"unknown operation {name}")


def list_buckets(target, op):
    """ListBuckets with a prefix (the seed's bucket name and more) and max-buckets, page by page;
    bucket names shown with the seed's bucket as B. The parameters are put in the URL and the answer
    read from its XML, as Debian's botocore (1.29) knows neither."""
    query = {"prefix": target.bucket + op["prefix"]}
    if op["max"]:
        query["max-buckets"] = str(op["max"])
    answer = {}

    def add_query(request, **_):
        request.url += "?" + urllib.parse.urlencode(sorted(query.items()), quote_via=urllib.parse.quote)

    def keep_body(http_response, **_):
        answer["body"] = http_response.content

    events = target.s3.meta.events
    events.register("before-sign.s3.ListBuckets", add_query, unique_id="diff-list-buckets-query")
    events.register("after-call.s3.ListBuckets", keep_body, unique_id="diff-list-buckets-body")
    pages = []
    try:
        for _ in range(6):
            try:
                target.s3.list_buckets()
            except ClientError as e:
                pages.append(error({"Status": e.response["ResponseMetadata"]["HTTPStatusCode"],
                                    "Code": e.response.get("Error", {}).get("Code")}))
                break
            root = ElementTree.fromstring(answer["body"])
            ns = {"s3": root.tag[1:].split("}")[0]} if root.tag.startswith("{") else {"s3": ""}
            names = [n.text for n in root.iterfind("s3:Buckets/s3:Bucket/s3:Name", ns)]
            token, prefix = root.findtext("s3:ContinuationToken", None, ns), root.findtext("s3:Prefix", None, ns)
            pages.append({"Buckets": [n.replace(target.bucket, "B", 1) for n in names],
                          "Prefix": prefix.replace(target.bucket, "B", 1) if prefix else prefix, "More": bool(token)})
            if not token:
                break
            query["continuation-token"] = token
    finally:
        events.unregister("before-sign.s3.ListBuckets", unique_id="diff-list-buckets-query")
        events.unregister("after-call.s3.ListBuckets", unique_id="diff-list-buckets-body")
    listed = [b for p in pages for b in p.get("Buckets", [])]
    if target.name == "rgw":
        op["rgw_lists_every_bucket"] = any("Prefix" in p and p["Prefix"] is None for p in pages)
    if op.get("rgw_lists_every_bucket"):
        # RGW 16 ignores prefix and max-buckets: its buckets with the prefix are what keel's pages must
        # list together, none of them longer than max-buckets.
        return {"listed": [b for b in listed if b.startswith("B" + op["prefix"])],
                "pages within max-buckets": target.name == "rgw" or
                all(len(p.get("Buckets", [])) <= (op["max"] or 10000) for p in pages),
                "RGW ignores prefix and max-buckets": target.name == "rgw"}
    return {"pages": pages}


# A plain DELETE of a key whose current version is a delete marker: AWS inserts another delete
# marker ("Removing delete markers", S3 user guide), RGW 16 adds none and answers 204 without
# x-amz-delete-marker. The test checks each server's answer against its own rule, names the
# outcome by these labels, and removes keel's extra marker again (by its version id) so that
# both servers hold the same versions for the operations that follow.
AWS_ANOTHER_MARKER = "another delete marker (AWS)"
RGW_NO_MARKER = "no new delete marker (RGW 16)"
# A plain DELETE in a Suspended bucket of a key whose current version is a null delete marker: AWS
# replaces it with another null marker (204, delete marker, version null) and keel does so; RGW 16
# answers that or nothing. Both leave one null marker.
NULL_MARKER_KEPT = "a null delete marker stays"


def current_markers(target, keys):
    """{key: version id of its current delete marker} for the keys whose current version is
    one, asked by HEAD (keel sends x-amz-delete-marker and the marker's x-amz-version-id on
    the 404, as AWS; RGW 16 sends neither, so this is asked of keel only)."""
    markers = {}
    for key in set(keys):
        if len(key.encode()) > 1024:
            # No HEAD of such a key (KeyTooLongError), yet DeleteObjects deletes it on both servers,
            # with delete markers (seed 9108 op #290): its listing says.
            result, err = target.call("list_object_versions", Prefix=key)
            current = [] if err else [m for m in result.get("DeleteMarkers", []) if m["Key"] == key and m["IsLatest"]]
            if current:
                markers[key] = current[0]["VersionId"]
            continue
        _, err = target.call("head_object", Key=key)
        if err and err["Status"] == 404 and target.error_headers.get("x-amz-delete-marker") == "true":
            markers[key] = target.error_headers.get("x-amz-version-id")
    return markers


def label_delete_on_marker(target, op, entry, previous, null_marker=False):
    """Rewrites one deletion's outcome ({'Key', 'DeleteMarker', 'VersionId'}) of a key whose
    current version was the delete marker `previous` (`null_marker`: a null one, in a Suspended
    bucket), by the rule of the target's server."""
    answer = (entry["DeleteMarker"], entry["VersionId"])
    if null_marker:
        if answer == (True, "null") or (target.name == "rgw" and answer == (None, None)):
            entry.update(DeleteMarker=NULL_MARKER_KEPT, VersionId=None)
        return
    if op["versioned"] == "Suspended" and answer == (True, "null"):
        # A null marker on a versioned one, as AWS inserts in a Suspended bucket: RGW 16 does so at
        # times (when the key holds a null version), and then both servers answer and hold the same.
        if target.name == "rgw":
            op.setdefault("rgw_null_markers", set()).add(entry["Key"])
            return
        if entry["Key"] in op.get("rgw_null_markers", ()):
            return
    if target.name == "rgw":
        if entry["DeleteMarker"] is None and entry["VersionId"] is None:
            entry.update(DeleteMarker=RGW_NO_MARKER)
        return
    added = entry["VersionId"]
    # In a Suspended bucket a null marker on a null marker replaces it: the same answer on both.
    # A new marker: a version id not seen before, or null on a versioned marker (Suspended bucket).
    if entry["DeleteMarker"] and added not in (None, previous) and (added == "null" or added not in target.ordinal_of):
        if len(entry["Key"].encode()) > 1024:  # refused by DeleteObject, deleted by DeleteObjects
            result, err = target.call("delete_objects", Delete={"Objects": [{"Key": entry["Key"], "VersionId": added}],
                                                                "Quiet": True})
            err = err or result.get("Errors")
        else:
            _, err = target.call("delete_object", Key=entry["Key"], VersionId=added)
        if err:
            raise AssertionError(f"{target.name}: removing the extra delete marker {added} of {entry['Key']!r}: {err}")
        entry.update(DeleteMarker=AWS_ANOTHER_MARKER, VersionId=None)


def deleted_entries(target, op, deleted):
    """DeleteObjects' <Deleted> entries in an order both servers share (by key, then the version
    asked for, then new markers first), delete-on-marker outcomes labelled, then ordinals given to
    new versions in that order (RGW and keel list the entries in different orders)."""
    entries = sorted(({"Key": d["Key"], "Asked": d.get("VersionId"), "DeleteMarker": d.get("DeleteMarker"),
                       "VersionId": d.get("DeleteMarkerVersionId")} for d in deleted),
                     key=lambda e: (e["Key"], target.ordinal_of.get(e["Asked"], e["Asked"] or ""),
                                    e["DeleteMarker"] is not True))
    seen = set()
    for entry in entries:
        if entry["Asked"] is not None:
            continue
        # A key named twice: its second deletion meets the marker its first one made.
        if entry["Key"] in seen and op.get("versioned"):
            label_delete_on_marker(target, op, entry, None, op["versioned"] == "Suspended")
        elif entry["Key"] in op.get("on_marker", ()):
            label_delete_on_marker(target, op, entry, target.markers.get(entry["Key"]),
                                   op["versioned"] == "Suspended" and entry["Key"] in op["null_marker"])
        seen.add(entry["Key"])
    return [dict(e, Asked=target.version(e["Asked"]), VersionId=target.version(e["VersionId"])) for e in entries]


def list_all(target, op):
    """Every page of a listing, following the target's own markers (at most 12 pages)."""
    name, params = op["name"], dict(op["params"])
    method = {"list_v2": "list_objects_v2", "list_v1": "list_objects", "list_versions": "list_object_versions"}[name]
    fields = {"list_v2": ["StartAfter"], "list_v1": ["Marker", "NextMarker"],
              "list_versions": ["KeyMarker", "NextKeyMarker", "VersionIdMarker", "NextVersionIdMarker"]}[name]
    pages, after_null = [], []
    # Every page where RGW may skip versions after a null version-id-marker (below): the pages are
    # then compared together, and the shorter listing must not stop early.
    # So do listings where RGW lists the key-marker's own versions: they take up RGW's first pages, so
    # twelve pages of each would stop at different keys. RGW, listed first, lists every page when
    # asked for a key-marker, and is cut back to twelve below when it does not list the marker.
    marker = op["params"].get("KeyMarker")
    every_page = op.get("rgw_skips_after_null") or op.get("rgw_lists_key_marker") or (
        name == "list_versions" and marker and target.name == "rgw")
    # "Every page": to the end of the listing (a long seed holds thousands of versions, one a page with
    # MaxKeys 1; 400 pages once cut keel's listing short of RGW's, seed 9301 op #1825).
    limit = EVERY_PAGE if every_page else 12
    while len(pages) < limit:
        page, err = target.call(method, **params)
        if err:
            pages.append(error(err))
            break
        normalised = normalise_listing(target, page, fields, params.get("EncodingType") == "url")
        if (target.name == "rgw" and normalised.get("NextKeyMarker") in normalised["CommonPrefixes"] and
                page.get("NextVersionIdMarker") in (params.get("VersionIdMarker", ""), "null")):
            # A page that ends in a common prefix: RGW 16 repeats the version-id-marker it was sent
            # (or "null" for none) as NextVersionIdMarker; keel sends none, a common prefix having no version
            # (docs/gateway.md, "Differential testing against Ceph RGW").
            del normalised["NextVersionIdMarker"]
            page = dict(page, NextVersionIdMarker="")
        pages.append(normalised)
        if not page.get("IsTruncated") or params.get("MaxKeys") == 0:
            break
        if name == "list_v2":
            params["ContinuationToken"] = page["NextContinuationToken"]
        elif name == "list_v1":
            marker = normalised.get("NextMarker") or (normalised["Contents"][-1][0] if normalised["Contents"] else None)
            if marker is None:
                break
            params["Marker"] = marker
        else:
            params["KeyMarker"] = normalised.get("NextKeyMarker", "")
            params["VersionIdMarker"] = page.get("NextVersionIdMarker", "")
            if target.name == "rgw" and params["VersionIdMarker"] == "null":
                after_null += versions_after_null(target, pages, params["KeyMarker"])
                limit = EVERY_PAGE if after_null else limit
    if len(pages) == EVERY_PAGE:
        raise AssertionError(f"{target.name}: {op} did not end within {EVERY_PAGE} pages")
    listed = [e for p in pages for e in p.get("Versions", []) + p.get("DeleteMarkers", [])]
    if name == "list_versions" and marker and target.name == "rgw":  # the first target
        op["rgw_lists_key_marker"] = any(e[0] == marker for e in listed)
        for e in listed:
            if e[0] == marker and e[1].split(".")[0] == f"v{target.operation}":
                # Seen first here, where keel (as S3) does not list it: named when both first show it,
                # or every later listing of the key would differ in name only (seed 9105 op #322).
                del target.ordinal_of[target.id_of.pop(e[1])]
    if name == "list_versions" and target.name == "rgw":
        phantoms = rgw_phantom_versions(target, listed)
        if phantoms:
            op["rgw_phantom_versions"] = True
            listed = renumber_listed(target, [e for e in listed if e not in phantoms])
    skipped = [e for e in after_null if e not in listed]
    if skipped:
        op["rgw_skips_after_null"] = True
        listed += skipped
    elif len(pages) > 12 and not op.get("rgw_skips_after_null") and not op.get("rgw_lists_key_marker"):
        # RGW listed them after all, or not the key-marker: compare page by page, as far as keel goes
        pages = pages[:12]
        listed = [e for p in pages for e in p.get("Versions", []) + p.get("DeleteMarkers", [])]
    if op.get("rgw_lists_key_marker") or op.get("rgw_skips_after_null") or op.get("rgw_phantom_versions"):
        # RGW 16 also lists the versions of the key-marker itself (S3 lists the keys after it, as
        # keel), or skips the versions after a null one: either shifts every page, so compare what
        # the pages list together (RGW's versions of the key-marker left out, those it skipped added).
        return {"listed": sorted((e for e in listed if target.name != "rgw" or e[0] != marker), key=repr),
                "CommonPrefixes": [c for p in pages for c in p.get("CommonPrefixes", [])],
                "NotAwsEncoded": [v for p in pages for v in p.get("NotAwsEncoded", [])],
                "RGW lists the key-marker": bool(op.get("rgw_lists_key_marker")) and target.name == "rgw",
                "RGW skips the versions after a null one": bool(skipped),
                "RGW lists a phantom copy of the current version": bool(op.get("rgw_phantom_versions")) and
                target.name == "rgw"}
    return {"pages": pages}


def has_versioned_version(target, key):
    """Whether the target lists a version of key other than the null one."""
    result, err = target.call("list_object_versions", Prefix=key)
    return not err and any(v["Key"] == key and v["VersionId"] != "null" for v in result.get("Versions", []))


def no_such_key(result):
    """Whether a read's result is NoSuchKey (get_dated's from its first HEAD, put_extra's from its GET)."""
    err = result.get("error") or result.get("Head", {}).get("error") or result.get("Get", {}).get("error") or {}
    return err.get("Code") == "NoSuchKey"


def lists_current_version(target, key):
    """Whether the target's ListObjectVersions shows a current version (not a delete marker) of key."""
    result, err = target.call("list_object_versions", Prefix=key)
    return not err and any(v["Key"] == key and v["IsLatest"] for v in result.get("Versions", []))


def rgw_phantom_versions(target, listed):
    """The versions RGW 16 lists that no operation made: after versioning was suspended it lists,
    besides a key's newest version with bytes (current, or under a delete marker), a non-current
    one with another id and that version's ETag and size (seeds 6, 7, 12 and 19 of the long mode;
    AWS keeps a key's versions as they were when versioning is suspended, as keel). Such a version first shows in a listing (its ordinal is the
    listing's own), which no version an operation made does; its ordinal is forgotten again so that
    later operations never name it."""
    new = [e for e in listed if len(e) == 5 and not e[2] and e[1].split(".")[0] == f"v{target.operation}"]
    phantoms = [e for e in new if any(o[0] == e[0] and o[3:5] == e[3:5] for o in listed if len(o) == 5 and o not in new)]
    for e in phantoms:
        target.ordinal_of.pop(target.id_of.pop(e[1]), None)
    return phantoms


def renumber_listed(target, listed):
    """`listed` with the versions it showed first numbered again without the phantoms: a phantom
    took an ordinal of this listing, which shifted those given after it (v374.1 where keel, which
    lists no phantom, says v374) for the rest of the seed."""
    prefix = f"v{target.operation}"
    fresh = [(real, o) for real, o in target.ordinal_of.items() if o.split(".")[0] == prefix]
    renamed = {}
    for i, (real, old) in enumerate(fresh):
        new = prefix + (f".{i}" if i else "")
        renamed[old] = new
        del target.id_of[old]
    for real, old in fresh:
        target.ordinal_of[real] = renamed[old]
        target.id_of[renamed[old]] = real
    return [(e[0], renamed.get(e[1], e[1])) + tuple(e[2:]) for e in listed]


def versions_after_null(target, pages, key):
    """The versions (and delete markers) of `key` that a page ending at its null version leaves to
    the next page. RGW 16 at times lists none of them (seen after a null delete marker): given
    version-id-marker=null it goes on with the next key. S3 lists a key's versions newest first, the null version among them ("the null
    version ID is a valid version ID"), and the next page goes on with the older ones, as keel.
    Those RGW skips are the key's versions its pages have not listed yet (asked unpaginated)."""
    shown = {e[:2] for p in pages for e in p.get("Versions", []) + p.get("DeleteMarkers", [])}
    every, err = target.call("list_object_versions", Prefix=key)
    if err:
        raise AssertionError(f"{target.name}: listing the versions of {key!r}: {err}")
    whole = normalise_listing(target, every, [], False)
    return [e for e in whole["Versions"] + whole["DeleteMarkers"] if e[0] == key and e[:2] not in shown]


def multipart(target, op):
    out = {}
    created, err = target.call("create_multipart_upload", Key=op["key"])
    if err:
        return error(err)
    upload = created["UploadId"]
    etags = []
    for number, body in enumerate(op["parts"], start=1):
        if op["resend_part"] and number == 1:
            target.call("upload_part", Key=op["key"], UploadId=upload, PartNumber=1, Body=b"first try " + body[:100])
        part, err = target.call("upload_part", Key=op["key"], UploadId=upload, PartNumber=number, Body=body)
        if err:
            out[f"part{number}"] = err
            etags.append('"none"')
        else:
            etags.append(part["ETag"])
    out["PartETags"] = etags
    parts = [{"PartNumber": n, "ETag": '"00000000000000000000000000000000"' if op["bad_etag"] and n == 1 else e}
             for n, e in enumerate(etags, start=1)]
    if op["descending"]:
        parts.reverse()
    headers = {"If-None-Match": "*"} if op["if_none_match"] else None
    done, err = target.call("complete_multipart_upload", headers=headers, Key=op["key"], UploadId=upload,
                            MultipartUpload={"Parts": parts})
    out["Complete"] = error(err) if err else {"ETag": done["ETag"], "VersionId": target.version(done.get("VersionId"))}
    if err and err["Code"] == "ResponseParserError" and target.name == "rgw":
        # RGW 16's unparseable answer for a key near 1024 bytes (see EXPECTED_DIFFERENCES): learn the
        # new version's id from a HEAD so that its ordinal is the one keel's upload gets.
        head, _ = target.call("head_object", Key=op["key"])
        target.version((head or {}).get("VersionId"))
    if op["retry_complete"]:
        again, err = target.call("complete_multipart_upload", Key=op["key"], UploadId=upload,
                                 MultipartUpload={"Parts": parts})
        out["CompleteAgain"] = error(err) if err else {"ETag": again["ETag"]}
    if err:
        target.call("abort_multipart_upload", Key=op["key"], UploadId=upload)
    got, err = target.call("get_object", Key=op["key"])
    out["Get"] = error(err) if err else {"ETag": got["ETag"], "Body": hashlib.sha256(got["Body"].read()).hexdigest()}
    return out


def flatten(value, path=""):
    """{'a.b[0]': leaf} for comparing nested results field by field."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            out.update(flatten(v, f"{path}.{k}" if path else k))
        return out
    if isinstance(value, list) and value and isinstance(value[0], dict):
        out = {f"{path}.len": len(value)}
        for i, v in enumerate(value):
            out.update(flatten(v, f"{path}[{i}]"))
        return out
    return {path: value}


def differences(reference, other):
    a, b = flatten(reference), flatten(other)
    return [(field, a.get(field, "<absent>"), b.get(field, "<absent>"))
            for field in sorted(set(a) | set(b), key=str) if a.get(field, "<absent>") != b.get(field, "<absent>")]


def describe(op):
    shown = {k: (f"<{len(v)} bytes>" if isinstance(v, bytes) else v) for k, v in op.items()}
    if "parts" in op:
        shown["parts"] = [len(p) for p in op["parts"]]
    return repr(shown)[:400]


def rgw_client():
    endpoint = os.environ.get("S3_ENDPOINT")
    if not endpoint:
        raise unittest.SkipTest("no RGW: run under tests/s3/with-rgw.sh")
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=os.environ["S3_ACCESS_KEY"],
                        aws_secret_access_key=os.environ["S3_SECRET_KEY"], region_name="us-east-1",
                        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1},
                                      signature_version="s3v4"))


class DifferentialTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.rgw = rgw_client()
        cls.raw = Gateway()
        cls.dedupe = Gateway(dedupe=True)

    @classmethod
    def tearDownClass(cls):
        cls.raw.stop()
        cls.dedupe.stop()

    def test_lifecycle_configuration(self):
        """Put/Get/DeleteBucketLifecycleConfiguration (the configuration, not expiry: RGW's debug
        interval is not set here), valid and refused configurations, compared by status, error
        code and the rules GET shows (generated IDs compared by their presence)."""
        days = {"Expiration": {"Days": 1}}

        def rule(rule_id, prefix="a/", **actions):
            return {"ID": rule_id, "Filter": {"Prefix": prefix}, "Status": "Enabled", **(actions or days)}
        configurations = [
            [rule("r1"), rule("r2", "b/", NoncurrentVersionExpiration={"NoncurrentDays": 2})],
            [{"Prefix": "logs/", "Status": "Enabled", "Expiration": {"Days": 3}}],
            [{"ID": "tags", "Status": "Disabled", "Expiration": {"Date": datetime.datetime(2030, 1, 1)},
              "Filter": {"And": {"Prefix": "t/", "Tags": [{"Key": "k", "Value": "v"}]}}}],
            [rule("mp", "", AbortIncompleteMultipartUpload={"DaysAfterInitiation": 2})],
            [rule("dm", "", Expiration={"ExpiredObjectDeleteMarker": True})],
            [rule("x" * 256)],
            [rule("same"), rule("same", "b/")],
            [{**rule("r"), "Status": "enabled"}],
            [rule("zero", Expiration={"Days": 0})],
            [rule("noon", Expiration={"Date": datetime.datetime(2030, 1, 1, 12)})],
        ]
        targets = [("rgw", self.rgw), ("keel-raw", boto3_client(self.raw, "http")),
                   ("keel-dedupe", boto3_client(self.dedupe, "http"))]
        bucket = f"diff-lifecycle-{os.getpid()}"
        results = {name: [] for name, _ in targets}
        for name, s3 in targets:
            s3.create_bucket(Bucket=bucket)
            for rules in [None] + configurations:
                try:
                    if rules is not None:
                        s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": rules})
                    got = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
                    # A generated ID is compared by its presence; RGW lists the rules in its own order.
                    shown = sorted(repr({**r, "ID": r["ID"] if r["ID"] in [c.get("ID") for c in rules] else "generated"})
                                   for r in got)
                    results[name].append(("ok", shown))
                except ClientError as e:
                    results[name].append((e.response["ResponseMetadata"]["HTTPStatusCode"], e.response["Error"]["Code"]))
                s3.delete_bucket_lifecycle(Bucket=bucket)
            s3.delete_bucket(Bucket=bucket)
        self.maxDiff = None
        self.assertEqual(results["keel-raw"], results["keel-dedupe"])
        # Deliberate differences (docs/gateway.md, "Lifecycle"), by index in [None] + configurations:
        # keel follows AWS where RGW 16 does not.
        deliberate = {
            3: "RGW shows <And> with a prefix and one tag as a <Filter> of two conditions, which AWS refuses",
            4: "RGW shows <Filter><Prefix></Prefix></Filter> as the rule's older <Prefix>; keel as sent",
            5: "the same, for the ExpiredObjectDeleteMarker rule",
            10: "a Date not at midnight: RGW MalformedXML, keel (as AWS) InvalidArgument",
        }
        differing = {i: (rgw, keel) for i, (rgw, keel) in enumerate(zip(results["rgw"], results["keel-raw"]))
                     if rgw != keel}
        self.assertEqual(sorted(differing), sorted(deliberate),
                         f"configurations on which RGW and keel differ (index 0: none set): {differing}")
        self.assertEqual(differing[10][1], (400, "InvalidArgument"))

    def test_seeds(self):
        expected_seen, unexpected = {}, []
        for seed in SEEDS:
            bucket = f"diff-{seed}-{os.getpid()}"
            targets = [Target("rgw", self.rgw, bucket), Target("keel-raw", boto3_client(self.raw, "http"), bucket),
                       Target("keel-dedupe", boto3_client(self.dedupe, "http"), bucket)]
            for t in targets:
                t.s3.create_bucket(Bucket=bucket)
                for more in ("-b1", "-b2", "-c"):  # for ListBuckets with a prefix and max-buckets
                    t.s3.create_bucket(Bucket=bucket + more)
            sequence = Sequence(seed)
            for index in range(OPS):
                op = sequence.next()
                for t in targets:
                    t.operation = index
                if op["name"] in ("delete", "delete_objects") and sequence.versioning:
                    plain = [op["key"]] if op["name"] == "delete" else \
                        [o["Key"] for o in op["objects"] if "VersionId" not in o]
                    for t in targets[1:]:
                        t.markers = current_markers(t, plain)
                    op.update(on_marker=sorted(targets[1].markers), versioned=sequence.versioning,
                              null_marker=sorted(k for k, v in targets[1].markers.items() if v == "null"))
                    if op.get("quiet") and (op["on_marker"] or len(plain) > len(set(plain))):
                        # A delete on a delete marker is labelled (and keel's extra marker removed) from
                        # the <Deleted> entries, which a quiet DeleteObjects does not send.
                        op["quiet"] = False
                if op["name"] == "copy":
                    head, err = targets[1].call("head_object", Key=op["source"])
                    if err and targets[1].error_headers.get("x-amz-delete-marker") == "true":
                        # RGW 16 copies the version under a source's current delete marker (seed 10
                        # op #351); S3 answers 404 NoSuchKey, as keel (test_where_rgw_differs checks it).
                        continue
                    if sequence.versioning == "Suspended" and has_versioned_version(targets[1], op["source"]):
                        # RGW 16 shares such a copy's bytes with the source's null version: once that is
                        # overwritten, RGW serves the new bytes under the copy's name (seed 3 op #313; S3
                        # and keel keep the copy's own: test_where_rgw_differs checks it).
                        continue
                    if head and "CopySourceIfMatch" in op.get("condition", {}):
                        # RGW 16 copies whatever x-amz-copy-source-if-match says (seed 13 op #198; S3
                        # refuses a failing one, 412, as keel: tests/gateway/test_s3_semantics.py), and the
                        # ETag the sequence remembers is stale after a refused put: the source's ETag
                        # asked of keel (both hold the same) keeps the condition true on both servers.
                        op["condition"] = {"CopySourceIfMatch": head["ETag"]}
                results = [run(t, op) for t in targets]
                if op["name"] in READS and no_such_key(results[0]) and not no_such_key(results[1]):
                    op["rgw_denies_what_it_lists"] = lists_current_version(targets[0], op["key"])
                if op["name"] == "put_conditional" and "If-Match" in op["headers"] and \
                        "error" in results[0] and "error" not in results[1]:
                    # RGW 16 refuses the quoted If-Match that holds (an expected difference above): the
                    # same put without it gives RGW the object keel wrote, or every later operation on
                    # the key would differ (seed 109 op #167).
                    run(targets[0], dict(op, headers={}))
                for ordinal in [v for v in targets[0].ordinal_of.values() if v not in sequence.versions]:
                    if ordinal not in ("null", "unknown"):
                        sequence.versions.append(ordinal)
                if VERBOSE:
                    print(f"seed {seed} #{index} {describe(op)}\n  " +
                          "\n  ".join(f"{t.name}: {r}" for t, r in zip(targets, results)), flush=True)
                where = f"seed {seed} op #{index} {describe(op)}"
                for field, raw, dedupe in differences(results[1], results[2]):
                    unexpected.append(f"{where}: keel-raw and keel-dedupe differ in {field}: {raw!r} / {dedupe!r}")
                for field, rgw, keel in differences(results[0], results[1]):
                    reason = expected(op, field, rgw, keel)
                    if reason:
                        expected_seen.setdefault(reason, []).append(f"{where} {field}: rgw {rgw!r} keel {keel!r}")
                    else:
                        unexpected.append(f"{where}: {field}: rgw {rgw!r}, keel {keel!r}")
        for reason, seen in expected_seen.items():
            print(f"expected difference ({len(seen)}x) {reason}\n  e.g. {seen[0][:600]}", file=sys.stderr)
        if unexpected:
            kinds = {}
            for line in unexpected:
                kind = re.sub(r"\[\d+\]", "[]", re.sub(r"^seed \d+ op #\d+ \{'name': '(\w+)'.*\}: ([^:]+): .*", r"\1 \2", line))
                kinds[kind] = kinds.get(kind, 0) + 1
            summary = "\n".join(f"  {n} x {kind}" for kind, n in sorted(kinds.items(), key=lambda k: -k[1]))
            by_seed = {}
            for line in unexpected:
                by_seed.setdefault(line.split(" op ")[0], []).append(line)
            self.fail(f"{len(unexpected)} unexpected differences from RGW, by operation and field:\n{summary}\n"
                      f"in {', '.join(by_seed)}; the first of each seed (a difference early in a seed can change the "
                      "state that later ones see):\n" + "\n".join(line for lines in by_seed.values() for line in lines[:8]))


if __name__ == "__main__":
    unittest.main(verbosity=2)
