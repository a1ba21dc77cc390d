"""Helpers for end-to-end tests that drive the real keel binary."""
import json
import os
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

KEEL = os.environ.get("KEEL_BIN", os.path.join(os.path.dirname(__file__), "../../build/cli/keel"))
# KEEL_TEST_TARGET=s3 runs the suites against the S3 server named by S3_ENDPOINT
# (tests/s3/with-rgw.sh sets it); the default is a local directory.
ON_S3 = os.environ.get("KEEL_TEST_TARGET") == "s3"

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../s3"))


class LocalStore:
    """The repository's objects, read and written behind keel's back (faults, counts)."""

    def __init__(self, root):
        self.root = root

    def list(self, prefix):
        out = {}
        base = os.path.join(self.root, prefix)
        for dirpath, _, files in os.walk(os.path.dirname(base) if not prefix.endswith("/") else base):
            for f in files:
                key = os.path.relpath(os.path.join(dirpath, f), self.root)
                if key.startswith(prefix) and not key.startswith("tmp/"):
                    out[key] = os.path.getsize(os.path.join(dirpath, f))
        return out

    def read(self, key):
        with open(os.path.join(self.root, key), "rb") as f:
            return f.read()

    def write(self, key, data):
        with open(os.path.join(self.root, key), "r+b") as f:
            f.write(data)


class S3Store:
    def __init__(self, bucket, prefix):
        from s3client import S3Client
        self.s3 = S3Client.from_env()
        self.bucket, self.prefix = bucket, prefix

    def list(self, prefix):
        out, token = {}, None
        while True:
            query = {"list-type": "2", "prefix": self.prefix + prefix}
            if token:
                query["continuation-token"] = token
            r = self.s3.request("GET", "/" + self.bucket, query=query)
            assert r.status == 200, r.body
            root = ET.fromstring(r.body)
            ns = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
            for c in root.iter(ns + "Contents"):
                out[c.find(ns + "Key").text[len(self.prefix):]] = int(c.find(ns + "Size").text)
            if root.findtext(ns + "IsTruncated") != "true":
                return out
            token = root.findtext(ns + "NextContinuationToken")

    def read(self, key):
        r = self.s3.request("GET", f"/{self.bucket}/{self.prefix}{key}")
        assert r.status == 200, r.body
        return r.body

    def write(self, key, data):
        r = self.s3.request("PUT", f"/{self.bucket}/{self.prefix}{key}", body=data)
        assert r.status == 200, r.body


def json_lines(stdout):
    """The objects a --json command wrote, one a line: status lines ({"type": "status"}), then its document."""
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def last_json(stdout):
    """The document of a --json command: its last line (long commands stream status lines before it)."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        raise AssertionError("no --json output")
    return json.loads(lines[-1])


class KeelTestCase(unittest.TestCase):
    """Each test gets a scratch directory, a repository path and its own catalog home."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="keel-e2e-")
        self.env = dict(os.environ)
        if ON_S3:
            bucket = "keel-e2e-" + secrets.token_hex(6)
            # A prefix that every signed path, listing and copy must escape:
            # a space, '+' (a space once form-decoded), '%41' (an 'A' once
            # decoded twice) and non-ASCII.
            prefix = "keel repo+ü%41"
            self.repo = f"s3://{bucket}/{prefix}"
            self.store = S3Store(bucket, prefix + "/")
            self.env.update(KEEL_S3_ENDPOINT=os.environ["S3_ENDPOINT"], AWS_ACCESS_KEY_ID=os.environ["S3_ACCESS_KEY"],
                            AWS_SECRET_ACCESS_KEY=os.environ["S3_SECRET_KEY"],
                            AWS_REGION=os.environ.get("S3_REGION", "us-east-1"))
        else:
            self.repo = os.path.join(self.tmp, "repo")
            self.store = LocalStore(self.repo)
        self.env.update(KEEL_PASSWORD="correct horse", XDG_DATA_HOME=os.path.join(self.tmp, "state"),
                        KEEL_REPO=self.repo)

    def tearDown(self):
        subprocess.run(["chmod", "-R", "u+rwX", self.tmp], check=False)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def keel(self, *args, expect=0, env=None, input=None):
        """Runs keel; asserts the exit code; returns the CompletedProcess."""
        run_env = dict(self.env)
        run_env.update(env or {})
        p = subprocess.run([KEEL, *args], env=run_env, input=input, capture_output=True, timeout=600)
        if expect is not None and p.returncode != expect:
            self.fail(f"keel {' '.join(args)} exited {p.returncode}, expected {expect}\n"
                      f"stdout: {p.stdout.decode(errors='replace')}\nstderr: {p.stderr.decode(errors='replace')}")
        return p

    def keel_json(self, *args, expect=0, **kw):
        p = self.keel(*args, "--json", expect=expect, **kw)
        return last_json(p.stdout)

    def init(self, *extra):
        self.keel("init", *extra)

    def unprivileged(self):
        """A command prefix and a copy of keel that run it without root, so file permissions bite."""
        if os.geteuid() == 0:
            if not shutil.which("setpriv"):
                self.skipTest("setpriv not available to drop root")
            os.chmod(self.tmp, 0o777)
            prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        else:
            prefix = []
        # A copy of the binary, in case the build tree is not reachable by that user.
        keel = self.path("keel")
        shutil.copy(KEEL, keel)
        os.chmod(keel, 0o755)
        return prefix, keel


def names_below(root):
    """Every path below root, directories and files."""
    return [os.path.join(d, n) for d, dirs, files in os.walk(root) for n in dirs + files]


def tree_state(root, with_times=True):
    """Content and metadata of every entry below root, keyed by relative path."""
    state = {}
    inodes = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            st = os.lstat(full)
            entry = {"mode": stat.S_IMODE(st.st_mode), "type": stat.S_IFMT(st.st_mode),
                     "uid": st.st_uid, "gid": st.st_gid}
            if with_times and not stat.S_ISLNK(st.st_mode):
                entry["mtime_ns"] = st.st_mtime_ns
            if stat.S_ISREG(st.st_mode):
                with open(full, "rb") as f:
                    entry["content"] = f.read()
                entry["size"] = st.st_size
                if st.st_nlink > 1:
                    group = inodes.setdefault((st.st_dev, st.st_ino), rel)
                    entry["hardlink_group"] = group
            elif stat.S_ISLNK(st.st_mode):
                entry["target"] = os.readlink(full)
            try:
                entry["xattrs"] = {k: os.getxattr(full, k, follow_symlinks=False)
                                   for k in sorted(os.listxattr(full, follow_symlinks=False))}
            except OSError:
                pass
            state[rel] = entry
    return state
