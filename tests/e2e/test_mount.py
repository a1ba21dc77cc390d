"""keel mount: the snapshots as a FUSE file tree, compared file by file with the source."""
import errno
import os
import random
import shutil
import signal
import subprocess
import time
import unittest

from keelcli import KEEL, ON_S3, KeelTestCase, tree_state


def fuse_unavailable():
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing (no FUSE in this kernel or container)"
    if not shutil.which("fusermount3"):
        return "fusermount3 is not installed (Debian package fuse3)"
    return None


def make_tree(root):
    rnd = random.Random(19)
    os.makedirs(os.path.join(root, "docs/deep"))
    os.makedirs(os.path.join(root, "private"), mode=0o700)
    with open(os.path.join(root, "docs/readme.txt"), "w") as f:
        f.write("hello mount\n" * 1000)
    with open(os.path.join(root, "docs/deep/random.bin"), "wb") as f:
        f.write(rnd.randbytes(5 * 1024 * 1024 + 17))
    open(os.path.join(root, "empty-file"), "w").close()
    with open(os.path.join(root, "name with spaces & ünïcode 名前.txt"), "w") as f:
        f.write("odd names survive\n")
    os.symlink("docs/readme.txt", os.path.join(root, "link-to-readme"))
    os.symlink("/nonexistent/target", os.path.join(root, "dangling-link"))
    # Sparse-ish: 64 MiB, data at the start, in the middle and at the end, holes between.
    with open(os.path.join(root, "sparse.img"), "wb") as f:
        f.truncate(64 << 20)
        f.write(rnd.randbytes(1 << 20))
        f.seek(32 << 20)
        f.write(rnd.randbytes(3 << 20))
        f.seek((64 << 20) - 4096)
        f.write(b"E" * 4096)
    script = os.path.join(root, "script.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\necho hi\n")
    os.chmod(script, 0o751)
    with open(os.path.join(root, "private/secret"), "w") as f:
        f.write("top secret\n")
    os.chmod(os.path.join(root, "private/secret"), 0o600)
    try:
        os.setxattr(os.path.join(root, "docs/readme.txt"), "user.origin", b"e2e")
    except OSError:
        pass  # a file system without user xattrs: the rest still counts
    # Times with nanoseconds, set last (children first, so directories keep theirs).
    for i, (dirpath, dirnames, filenames) in enumerate(sorted(os.walk(root), reverse=True)):
        for j, name in enumerate(filenames + dirnames + [""]):
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                stamp = 1_600_000_000_123_456_789 + (i * 100 + j) * 1_000_000_007
                os.utime(path, ns=(stamp, stamp))


@unittest.skipIf(ON_S3, "mount reads through the same repository code on every target; tested on local")
@unittest.skipIf(fuse_unavailable(), f"keel mount cannot be tested here: {fuse_unavailable()}")
class Mount(KeelTestCase):
    def setUp(self):
        super().setUp()
        self.src = self.path("src")
        make_tree(self.src)
        self.mnt = self.path("mnt")
        os.makedirs(self.mnt)
        self.init()
        self.keel("backup", self.src, "--host", "e2e-host", "--tag", "nightly")
        self.proc = None

    def tearDown(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if os.path.ismount(self.mnt):
            subprocess.run(["fusermount3", "-u", "-z", self.mnt], check=False)
        super().tearDown()

    def mount(self, *extra):
        self.proc = subprocess.Popen([KEEL, "mount", self.mnt, *extra], env=self.env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while not os.path.ismount(self.mnt):
            if self.proc.poll() is not None:
                self.fail(f"keel mount exited {self.proc.returncode}: {self.proc.stderr.read().decode()}")
            if time.monotonic() > deadline:
                self.fail("keel mount did not mount within 30 s")
            time.sleep(0.05)

    def snapshot_src(self):
        return os.path.join(self.mnt, "snapshots", "latest") + self.src

    def test_every_file_matches_the_source(self):
        self.mount()
        self.assertEqual(sorted(os.listdir(self.mnt)), ["hosts", "ids", "snapshots", "tags"])
        snap = self.keel_json("snapshots")[0]
        names = os.listdir(os.path.join(self.mnt, "snapshots"))
        self.assertEqual(len(names), 2)  # the snapshot and latest
        name = os.readlink(os.path.join(self.mnt, "snapshots", "latest"))
        self.assertIn(name, names)
        self.assertEqual(os.readlink(os.path.join(self.mnt, "hosts", "e2e-host", "latest")), "../../snapshots/" + name)
        self.assertEqual(os.listdir(os.path.join(self.mnt, "tags")), ["nightly"])
        self.assertEqual(os.readlink(os.path.join(self.mnt, "ids", snap["id"][:8])), "../snapshots/" + name)
        for via in ("hosts/e2e-host/latest", "tags/nightly/" + name, "ids/" + snap["id"][:8]):
            self.assertTrue(os.path.isfile(os.path.join(self.mnt, via) + self.src + "/docs/readme.txt"), via)

        expected, got = tree_state(self.src), tree_state(self.snapshot_src())
        self.assertEqual(sorted(expected), sorted(got))
        for rel in expected:
            self.assertEqual(expected[rel], got[rel], rel)
        self.assertEqual(os.stat(self.snapshot_src()).st_mtime_ns, os.stat(self.src).st_mtime_ns)

        # Holes: SEEK_HOLE finds one, and the file takes less room than its size.
        sparse = os.path.join(self.snapshot_src(), "sparse.img")
        with open(sparse, "rb") as f:
            self.assertLess(os.lseek(f.fileno(), 0, os.SEEK_HOLE), 64 << 20)
            self.assertEqual(os.lseek(f.fileno(), 0, os.SEEK_DATA), 0)
        self.assertLess(os.stat(sparse).st_blocks * 512, 16 << 20)

        # A 1 MiB read from the middle of a file, without reading from its start.
        with open(os.path.join(self.src, "sparse.img"), "rb") as f:
            f.seek(33 << 20)
            want = f.read(1 << 20)
        fd = os.open(sparse, os.O_RDONLY)
        try:
            started = time.monotonic()
            self.assertEqual(os.pread(fd, 1 << 20, 33 << 20), want)
            self.assertLess(time.monotonic() - started, 2.0)
        finally:
            os.close(fd)

        # Read-only.
        with self.assertRaises(OSError) as ctx:
            open(os.path.join(self.snapshot_src(), "docs/readme.txt"), "w")
        self.assertEqual(ctx.exception.errno, errno.EROFS)
        with self.assertRaises(OSError):
            os.mkdir(os.path.join(self.snapshot_src(), "new-dir"))

        # SIGTERM unmounts and exits cleanly.
        self.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.proc.wait(timeout=20), 0, self.proc.stderr.read().decode())
        self.assertFalse(os.path.ismount(self.mnt))
        self.assertEqual(os.listdir(self.mnt), [])

    def test_new_snapshots_appear_and_sigint_unmounts(self):
        self.mount("--cache-size", "1M")
        with open(os.path.join(self.src, "added.txt"), "w") as f:
            f.write("second snapshot\n")
        self.keel("backup", self.src, "--host", "other-host")
        deadline = time.monotonic() + 10
        while "other-host" not in os.listdir(os.path.join(self.mnt, "hosts")):
            self.assertLess(time.monotonic(), deadline, "the new snapshot did not appear")
            time.sleep(0.2)
        with open(os.path.join(self.mnt, "hosts/other-host/latest") + self.src + "/added.txt") as f:
            self.assertEqual(f.read(), "second snapshot\n")
        with open(os.path.join(self.snapshot_src(), "docs/deep/random.bin"), "rb") as f:
            got = f.read()  # larger than the cache: evictions on the way
        with open(os.path.join(self.src, "docs/deep/random.bin"), "rb") as f:
            self.assertEqual(got, f.read())
        self.proc.send_signal(signal.SIGINT)
        self.assertEqual(self.proc.wait(timeout=20), 0, self.proc.stderr.read().decode())
        self.assertFalse(os.path.ismount(self.mnt))

    def test_killed_mount_is_released_by_fusermount(self):
        self.mount()
        self.assertTrue(os.path.isdir(self.snapshot_src()))
        self.proc.kill()
        self.proc.wait()
        if os.path.ismount(self.mnt):
            subprocess.run(["fusermount3", "-u", self.mnt], check=True)
        self.assertFalse(os.path.ismount(self.mnt))
        self.assertEqual(os.listdir(self.mnt), [])

    def test_bad_mount_points_are_refused(self):
        self.keel("mount", expect=2)
        self.keel("mount", self.path("missing"), expect=2)
        self.keel("mount", os.path.join(self.src, "empty-file"), expect=2)


if __name__ == "__main__":
    unittest.main()
