"""Restore features: streaming one file, find, resuming with --overwrite if-changed."""
import os
import random
import signal
import subprocess
import time
import unittest

from keelcli import KEEL, KeelTestCase, tree_state


def make_files(root, count=12, size=1 << 20, seed=21):
    rnd = random.Random(seed)
    os.makedirs(os.path.join(root, "sub"))
    for i in range(count):
        with open(os.path.join(root, "sub" if i % 2 else "", f"file{i:02d}.bin"), "wb") as f:
            f.write(rnd.randbytes(size + i))


class Restore(KeelTestCase):
    def test_stdout_streams_one_file(self):
        src = self.path("src")
        make_files(src, count=2, size=5 << 20)
        with open(os.path.join(src, "sparse"), "wb") as f:
            f.truncate(20 << 20)
            f.write(b"head")
            f.seek(10 << 20)
            f.write(b"middle")
        self.init()
        self.keel("backup", src)
        for name in ("file00.bin", "sparse"):
            p = self.keel("restore", "latest", "--stdout", f"{src}/{name}")
            with open(os.path.join(src, name), "rb") as f:
                self.assertEqual(p.stdout, f.read())
        self.keel("restore", "latest", "--stdout", f"{src}/sub", expect=2)  # a directory
        self.keel("restore", "latest", "--stdout", f"{src}/missing", expect=9)

    def test_find_searches_every_snapshot(self):
        src = self.path("src")
        make_files(src, count=4, size=1000)
        self.init()
        self.keel("backup", src)
        os.remove(os.path.join(src, "file02.bin"))
        self.keel("backup", src)
        hits = self.keel_json("find", "file02.bin")
        self.assertEqual(len(hits), 1)  # only in the first snapshot
        self.assertEqual(len(self.keel_json("find", "*.bin")), 4 + 3)
        self.assertEqual(len(self.keel_json("find", f"{src}/sub/*")), 2 * 2)
        self.keel("find", "nothing-like-this", expect=9)

    def test_if_changed_keeps_correct_files_and_repairs_others(self):
        src = self.path("src")
        make_files(src)
        self.init()
        self.keel("backup", src)
        out = self.path("out")
        self.keel("restore", "latest", "--target", out)
        restored = out + src
        damaged = os.path.join(restored, "file00.bin")
        with open(damaged, "r+b") as f:
            f.seek(1000)
            f.write(b"\xff\xfe")
        os.remove(os.path.join(restored, "sub/file01.bin"))
        kept_inode = os.stat(os.path.join(restored, "file02.bin")).st_ino
        report = self.keel_json("restore", "latest", "--target", out, "--overwrite", "if-changed")
        self.assertEqual(report["files_kept"], 10)
        self.assertEqual(tree_state(src), tree_state(restored))
        self.assertEqual(os.stat(os.path.join(restored, "file02.bin")).st_ino, kept_inode)

    def test_restore_killed_midway_resumes_byte_identical(self):
        src = self.path("src")
        make_files(src, count=40, size=4 << 20)
        self.init()
        self.keel("backup", src)
        out = self.path("out")
        proc = subprocess.Popen([KEEL, "restore", "latest", "--target", out, "--readers", "1"], env=self.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        report = self.keel_json("restore", "latest", "--target", out, "--overwrite", "if-changed")
        self.assertEqual(report["failures"], [])
        self.assertEqual(tree_state(src), tree_state(out + src))


if __name__ == "__main__":
    unittest.main()
