"""Helpers for end-to-end tests that drive the real keel binary."""
import json
import os
import shutil
import stat
import subprocess
import tempfile
import unittest

KEEL = os.environ.get("KEEL_BIN", os.path.join(os.path.dirname(__file__), "../../build/cli/keel"))


class KeelTestCase(unittest.TestCase):
    """Each test gets a scratch directory, a repository path and its own catalog home."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="keel-e2e-")
        self.repo = os.path.join(self.tmp, "repo")
        self.env = dict(os.environ)
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
        return json.loads(p.stdout)

    def init(self, *extra):
        self.keel("init", *extra)


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
