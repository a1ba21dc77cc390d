"""Dedupe, corruption, interruption and catalog loss: the repository stays consistent."""
import os
import random
import shutil
import signal
import subprocess
import time
import unittest

from keelcli import KEEL, KeelTestCase, tree_state


class Dedupe(KeelTestCase):
    def test_one_byte_insert_in_64mib_adds_at_most_three_chunks(self):
        src = self.path("src")
        os.mkdir(src)
        data = random.Random(11).randbytes(64 << 20)
        big = os.path.join(src, "big.bin")
        with open(big, "wb") as f:
            f.write(data)
        self.init()
        first = self.keel_json("backup", src)
        self.assertGreater(first["chunks_added"], 30)
        mid = len(data) // 2
        with open(big, "wb") as f:
            f.write(data[:mid] + b"!" + data[mid:])
        second = self.keel_json("backup", src)
        self.assertLessEqual(second["chunks_added"], 3)
        self.assertGreaterEqual(second["chunks_added"], 1)


class Corruption(KeelTestCase):
    def test_flipped_byte_is_found_and_only_its_files_fail(self):
        src = self.path("src")
        os.mkdir(src)
        rnd = random.Random(5)
        # Two files in two packs (1 MiB packs): damage one, the other restores.
        for name in ("a.bin", "b.bin"):
            with open(os.path.join(src, name), "wb") as f:
                f.write(rnd.randbytes(3 << 20))
        self.init("--pack-size", "1", "--chunk-min", "64", "--chunk-avg", "256", "--chunk-max", "1024")
        self.keel("backup", src)
        out = self.path("first")
        self.keel("restore", "latest", "--target", out)
        # Find a data pack holding a chunk of a.bin: flip a byte inside each pack in turn
        # until check names a.bin (packs hold whole blobs, so byte 100 is inside a blob).
        packs = sorted(self.store.list("packs/").items(), key=lambda kv: -kv[1])
        victim = None
        for key, _ in packs:
            original = self.store.read(key)
            damaged = bytearray(original)
            damaged[100] ^= 0x40
            self.store.write(key, bytes(damaged))
            check = self.keel("check", "--read-data", expect=None)
            if b"a.bin" in check.stdout:
                victim = key
                break
            self.store.write(key, original)  # undo, try the next
        self.assertIsNotNone(victim, "no pack held a.bin")
        self.assertEqual(check.returncode, 6)
        report = check.stdout.decode()
        self.assertIn(os.path.basename(victim), report)
        self.assertIn("checksum mismatch", report)
        self.assertNotIn("b.bin", report)

        out = self.path("second")
        p = self.keel("restore", "latest", "--target", out, expect=6)  # damage in the repository
        self.assertIn("a.bin", p.stderr.decode())
        self.assertIn("checksum mismatch", p.stderr.decode())
        self.assertFalse(os.path.exists(os.path.join(out + src, "a.bin")))  # never a wrong file in its place
        with open(os.path.join(out + src, "b.bin"), "rb") as f, open(os.path.join(src, "b.bin"), "rb") as g:
            self.assertEqual(f.read(), g.read())


class Interruption(KeelTestCase):
    def test_kill_9_leaves_consistent_repo_and_next_backup_reuses(self):
        src = self.path("src")
        os.mkdir(src)
        rnd = random.Random(9)
        for i in range(12):
            with open(os.path.join(src, f"f{i:02d}.bin"), "wb") as f:
                f.write(rnd.randbytes(16 << 20))
        self.init("--pack-size", "8")
        env = dict(self.env)
        proc = subprocess.Popen([KEEL, "backup", src, "--json"], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        # Kill once a few packs are durable.
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            if len(self.store.list("packs/")) >= 4:
                break
            time.sleep(0.01)
        killed = proc.poll() is None
        if killed:
            proc.send_signal(signal.SIGKILL)
        proc.communicate()
        if not killed:
            self.skipTest("backup finished before it could be killed")
        self.assertEqual(self.keel_json("snapshots"), [])
        self.keel("check", "--read-data")
        stored = sum(self.store.list("packs/").values())
        snap = self.keel_json("backup", src)
        self.assertLess(snap["bytes_added"], (12 * 16 << 20) - stored + (1 << 20))
        self.keel("check", "--read-data")
        out = self.path("out")
        self.keel("restore", "latest", "--target", out)
        self.assertEqual(tree_state(src), tree_state(out + src))


class CatalogRebuild(KeelTestCase):
    def test_target_alone_rebuilds_the_catalog(self):
        src = self.path("src")
        os.makedirs(os.path.join(src, "d"))
        with open(os.path.join(src, "d/x"), "wb") as f:
            f.write(random.Random(1).randbytes(2 << 20))
        self.init()
        self.keel("backup", src, "--tag", "one")
        with open(os.path.join(src, "d/y"), "w") as f:
            f.write("second\n")
        self.keel("backup", src)
        self.keel("drill", "--verify-only")
        drills = self.keel_json("drills")
        before = self.keel_json("snapshots")
        shutil.rmtree(self.path("state"))  # lose the catalog
        rebuilt = self.keel_json("catalog", "rebuild")
        self.assertEqual(rebuilt["snapshots"], 2)
        # History is not on the target but in the catalog's copy there.
        self.assertEqual(rebuilt["history_records_added"], 1)
        self.assertEqual(self.keel_json("drills"), drills)
        self.assertEqual(self.keel_json("catalog", "rebuild")["history_records_added"], 0)
        # A tampered copy is named and never merged: the next older one is.
        copies = list(self.store.list("catalog/"))
        self.assertEqual(len(copies), 3)  # after two backups and a drill
        newest = max(copies, key=lambda k: k.rsplit("/", 1)[1])
        damaged = bytearray(self.store.read(newest))
        damaged[len(damaged) // 2] ^= 0x01
        self.store.write(newest, bytes(damaged))
        p = self.keel("catalog", "rebuild")
        self.assertIn(newest, p.stderr.decode())
        self.assertEqual(self.keel_json("drills"), drills)
        after = self.keel_json("snapshots")
        self.assertEqual([s["id"] for s in before], [s["id"] for s in after])
        self.assertEqual(after[0]["tags"], ["one"])
        out = self.path("out")
        self.keel("restore", "latest", "--target", out)
        self.assertEqual(tree_state(src), tree_state(out + src))
        self.keel("check", "--read-data")

    def test_each_catalog_keeps_its_three_newest_copies(self):
        src = self.path("src")
        os.makedirs(src)
        self.init()
        for i in range(5):
            with open(os.path.join(src, f"f{i}"), "w") as f:
                f.write(f"file {i}\n")
            self.keel("backup", src)
        copies = list(self.store.list("catalog/"))
        self.assertEqual(len(copies), 3)
        self.assertEqual(len({k.split("/")[1] for k in copies}), 1)


if __name__ == "__main__":
    unittest.main()
