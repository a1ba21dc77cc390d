"""keel copy: local -> the repository under test (S3 in the s3_rgw run) -> local,
incremental, and resumed after kill -9."""
import os
import random
import signal
import subprocess
import time
import unittest

from keelcli import KEEL, KeelTestCase, tree_state


def write_random(path, size, seed):
    rng = random.Random(seed)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(rng.randbytes(size))


class Copy(KeelTestCase):
    def setUp(self):
        super().setUp()
        self.first = self.path("first")  # a local repository, its own password
        self.last = self.path("last")    # the copy of the copy
        self.first_env = {"KEEL_REPO": self.first, "KEEL_PASSWORD": "first secret"}
        self.keel("init", "--pack-size", "4", env=self.first_env)
        self.keel("init", "--pack-size", "4")
        self.keel("init", env={"KEEL_REPO": self.last, "KEEL_PASSWORD": "last secret"})

    def source(self):
        src = self.path("src")
        write_random(os.path.join(src, "big.bin"), 12 << 20, 1)
        os.makedirs(os.path.join(src, "docs", "deep"), exist_ok=True)
        for i in range(20):
            with open(os.path.join(src, "docs", "deep" if i % 2 else "", f"note{i}.txt"), "w") as f:
                f.write(f"note {i}\n" * (200 + i))
        with open(os.path.join(src, "docs", "same.txt"), "w") as f:
            f.write("a line\n" * 5000)
        os.symlink("docs/same.txt", os.path.join(src, "link"))
        return src

    def copy_into_tested(self, *extra, expect=0):
        return self.keel_json("copy", "--from-repo", self.first, *extra, expect=expect,
                              env={"KEEL_FROM_PASSWORD": "first secret"})

    def copy_into_last(self):
        return self.keel_json("copy", "--from-repo", self.repo, env={
            "KEEL_REPO": self.last, "KEEL_PASSWORD": "last secret", "KEEL_FROM_PASSWORD": "correct horse"})

    def restore_from(self, env, snapshot, name):
        out = self.path(name)
        self.keel("restore", snapshot, "--target", out, env=env)
        return out

    def test_local_to_tested_to_local_then_incremental(self):
        src = self.source()
        first = self.keel_json("backup", src, env=self.first_env)
        copied = self.copy_into_tested()
        self.assertEqual(copied["snapshots_copied"], 1)
        self.assertEqual(copied["chunks_sent"], first["chunks_added"])
        again = self.copy_into_last()
        self.assertEqual(again["snapshots_copied"], 1)
        last_env = {"KEEL_REPO": self.last, "KEEL_PASSWORD": "last secret"}
        out = self.restore_from(last_env, "latest", "out1")
        self.assertEqual(tree_state(src), tree_state(os.path.join(out, src.lstrip("/"))))
        snaps = self.keel_json("snapshots", env=last_env)
        self.assertEqual(len(snaps), 1)
        self.assertEqual(snaps[0]["paths"], [src])

        # Nothing new: nothing is read or sent.
        idle = self.copy_into_tested()
        self.assertEqual((idle["snapshots_copied"], idle["chunks_read"], idle["chunks_sent"]), (0, 0, 0))
        self.assertTrue(idle["snapshots"][0]["already_copied"])

        # A change: only its chunks travel, and only they are read.
        write_random(os.path.join(src, "new.bin"), 3 << 20, 2)
        with open(os.path.join(src, "docs", "note3.txt"), "a") as f:
            f.write("changed\n")
        second = self.keel_json("backup", src, env=self.first_env)
        self.assertGreater(second["chunks_added"], 0)
        step = self.copy_into_tested()
        self.assertEqual(step["snapshots_copied"], 1)
        self.assertEqual(step["chunks_sent"], second["chunks_added"])
        self.assertEqual(step["chunks_read"], second["chunks_added"])
        self.copy_into_last()
        self.assertEqual(len(self.keel_json("snapshots", env=last_env)), 2)
        out = self.restore_from(last_env, "latest", "out2")
        self.assertEqual(tree_state(src), tree_state(os.path.join(out, src.lstrip("/"))))
        self.keel("check", "--read-data")
        self.keel("check", "--read-data", env=last_env)

    def test_filters_and_dry_run(self):
        src = self.source()
        self.keel("backup", src, "--tag", "keep", env=self.first_env)
        self.keel("backup", src, "--host", "other", env=self.first_env)
        plan = self.copy_into_tested("--tag", "keep", "--dry-run")
        self.assertEqual(len(plan["snapshots"]), 1)
        self.assertEqual(self.keel_json("snapshots"), [])
        self.copy_into_tested("--host", "other")
        snaps = self.keel_json("snapshots")
        self.assertEqual([s["host"] for s in snaps], ["other"])
        self.assertEqual(self.copy_into_tested("--newer-than", "1h")["snapshots_copied"], 1)
        self.assertEqual(self.copy_into_tested("--older-than", "1h")["snapshots"], [])

    def test_wrong_source_password_and_same_repository_are_refused(self):
        self.keel("copy", "--from-repo", self.first, expect=5, env={"KEEL_FROM_PASSWORD": "wrong"})
        p = self.keel("copy", "--from-repo", self.repo, expect=2, env={"KEEL_FROM_PASSWORD": "correct horse"})
        self.assertIn("same repository", p.stderr.decode())

    def test_a_killed_copy_resumes_and_sends_only_what_is_missing(self):
        src = self.path("src")
        for i in range(6):
            write_random(os.path.join(src, f"part{i}.bin"), 8 << 20, 10 + i)
        first = self.keel_json("backup", src, env=self.first_env)
        env = dict(self.env, KEEL_FROM_PASSWORD="first secret")
        proc = subprocess.Popen([KEEL, "copy", "--from-repo", self.first], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            if len(self.store.list("packs/")) >= 2:
                break
            time.sleep(0.02)
        killed = proc.poll() is None
        if killed:
            proc.send_signal(signal.SIGKILL)
        proc.wait()
        if not killed:
            self.skipTest("the copy finished before it could be killed")
        self.assertEqual(self.keel_json("snapshots"), [])
        resumed = self.copy_into_tested()
        self.assertEqual(resumed["snapshots_copied"], 1)
        self.assertLess(resumed["chunks_sent"], first["chunks_added"])
        out = self.restore_from({}, "latest", "out")
        self.assertEqual(tree_state(src), tree_state(os.path.join(out, src.lstrip("/"))))
        self.keel("check", "--read-data")


if __name__ == "__main__":
    unittest.main()
