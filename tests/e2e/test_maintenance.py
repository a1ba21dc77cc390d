"""Retention and space reclamation: keel forget and keel prune on the real binary.

A prune must never cost data: not the snapshots it keeps, and not a backup
that runs while it works (which takes no lock).
"""
import os
import random
import re
import shutil
import signal
import subprocess
import time
import unittest

from keelcli import KEEL, KeelTestCase, tree_state


def write_random(path, size, seed):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    rnd = random.Random(seed)
    with open(path, "wb") as f:
        for done in range(0, size, 4 << 20):
            f.write(rnd.randbytes(min(4 << 20, size - done)))


class Forget(KeelTestCase):
    def test_dry_run_shows_what_goes_and_why_and_removes_nothing(self):
        src = self.path("src")
        self.init()
        ids = []
        for i in range(4):
            write_random(os.path.join(src, f"f{i}"), 64 << 10, i)
            tags = ["--tag", "pinned"] if i == 0 else []
            ids.append(self.keel_json("backup", src, *tags)["snapshot"])
        p = self.keel("forget", "--keep-last", "2", "--keep-tag", "pinned", "--dry-run")
        out = p.stdout.decode()
        self.assertIn("host ", out)
        verdicts = {}
        for line in out.splitlines():
            m = re.match(r"\s+(keep|would remove)\s+([0-9a-f]{8})\s+(.*)", line)
            if m:
                verdicts[m.group(2)] = (m.group(1), m.group(3))
        self.assertEqual(verdicts[ids[3][:8]][0], "keep")
        self.assertIn("last 1", verdicts[ids[3][:8]][1])
        self.assertIn("last 2", verdicts[ids[2][:8]][1])
        self.assertEqual(verdicts[ids[1][:8]][0], "would remove")
        self.assertEqual(verdicts[ids[0][:8]][0], "keep")
        self.assertIn("tag pinned", verdicts[ids[0][:8]][1])
        self.assertIn("would remove 1 snapshots, kept 3", out)
        self.assertEqual(len(self.keel_json("snapshots")), 4)

        result = self.keel_json("forget", "--keep-last", "2", "--keep-tag", "pinned")
        self.assertEqual(result["removed"], 1)
        self.assertEqual([s["id"] for s in self.keel_json("snapshots")], [ids[0], ids[2], ids[3]])
        self.assertNotIn(f"snapshots/{ids[1]}", self.store.list("snapshots/"))

    def test_empty_policy_and_bad_options_are_usage_errors(self):
        self.init()
        p = self.keel("forget", expect=2)
        self.assertIn("no retention rule", p.stderr.decode())
        self.keel("forget", "--keep-last", "1", "--group-by", "planet", expect=2)
        self.keel("prune", "--grace", "soon", expect=2)
        self.keel("prune", "--repack-threshold", "150%", expect=2)
        self.keel("prune", "--max-repack", "lots", expect=2)

    def test_job_selects_the_job_tag(self):
        src = self.path("src")
        write_random(os.path.join(src, "a"), 1 << 10, 1)
        self.init()
        nightly = [self.keel_json("backup", src, "--tag", "job:nightly")["snapshot"] for _ in range(3)]
        manual = self.keel_json("backup", src)["snapshot"]
        result = self.keel_json("forget", "--job", "nightly", "--keep-last", "1")
        self.assertEqual(sorted(s["id"] for s in result["snapshots"]), sorted(nightly))
        self.assertEqual(sorted(s["id"] for s in self.keel_json("snapshots")), sorted([nightly[-1], manual]))


class Prune(KeelTestCase):
    def pack_bytes(self):
        return sum(self.store.list("packs/").values())

    def half_forgotten(self, files, size, seed):
        """Backs up `files` files, removes every other one, backs up again and forgets the
        first snapshot: about half of every data pack is garbage. Returns the source."""
        src = self.path("src")
        for i in range(files):
            write_random(os.path.join(src, f"f{i:02d}"), size, seed + i)
        self.keel("backup", src)
        for i in range(0, files, 2):
            os.remove(os.path.join(src, f"f{i:02d}"))
        self.keel("backup", src)
        self.keel("forget", "--keep-last", "1")
        return src

    def test_forget_then_prune_grace_0_reclaims_space_and_keeps_what_remains(self):
        self.init("--pack-size", "4")
        src = self.path("src")
        states = []
        for i in range(4):
            # Each backup replaces one 6 MiB file: the old ones become garbage once forgotten.
            for old in os.listdir(src) if os.path.isdir(src) else []:
                if old.startswith("big"):
                    os.remove(os.path.join(src, old))
            write_random(os.path.join(src, f"big{i}"), 6 << 20, 100 + i)
            write_random(os.path.join(src, "small", f"s{i}"), 50 << 10, 200 + i)
            self.keel("backup", src)
            states.append(tree_state(src))
        before = self.pack_bytes()
        dry = self.keel("prune", "--grace", "0", "--dry-run").stdout.decode()
        self.assertIn("would condemn", dry)
        self.assertEqual(self.pack_bytes(), before)

        result = self.keel_json("forget", "--keep-last", "2", "--prune", "--grace", "0")
        self.assertEqual(result["removed"], 2)
        pruned = result["prune"]
        self.assertGreater(pruned["packs_deleted"], 0)
        self.assertEqual(pruned["packs_waiting"], 0)
        after = self.pack_bytes()
        self.assertLess(after, before - (10 << 20))
        self.assertEqual(pruned["bytes_deleted"] - pruned["bytes_written"], before - after)
        self.assertEqual(self.store.list("condemned/"), {})
        self.keel("check", "--read-data")
        snaps = self.keel_json("snapshots")
        self.assertEqual(len(snaps), 2)
        for snap, state in zip(snaps, states[2:]):
            out = self.path("out-" + snap["id"][:8])
            self.keel("restore", snap["id"], "--target", out)
            self.assertEqual(tree_state(out + src), state)

    def test_default_grace_condemns_first_and_deletes_later(self):
        self.init()
        src = self.path("src")
        write_random(os.path.join(src, "a"), 3 << 20, 1)
        self.keel("backup", src)
        os.remove(os.path.join(src, "a"))
        write_random(os.path.join(src, "b"), 1 << 20, 2)
        self.keel("backup", src)
        self.keel("forget", "--keep-last", "1")
        before = self.store.list("packs/")
        first = self.keel_json("prune")
        self.assertGreater(first["packs_condemned"], 0)
        self.assertEqual(first["packs_deleted"], 0)
        self.assertEqual(self.store.list("packs/"), before)
        self.assertEqual(len(self.store.list("condemned/")), 1)
        text = self.keel("prune", "--dry-run").stdout.decode()
        self.assertIn("would wait", text)
        self.assertIn("grace until", text)
        second = self.keel_json("prune", "--grace", "0")
        self.assertEqual(second["packs_deleted"], first["packs_condemned"])
        self.assertEqual(self.store.list("condemned/"), {})
        self.keel("check", "--read-data")

    def test_repack_keeps_data_readable(self):
        self.init("--pack-size", "2", "--chunk-min", "16", "--chunk-avg", "64", "--chunk-max", "256")
        src = self.half_forgotten(files=40, size=100 << 10, seed=300)
        result = self.keel_json("prune", "--grace", "0", "--repack-threshold", "90%")
        self.assertGreater(result["packs_repacked"], 0)
        self.assertGreater(result["packs_written"], 0)
        self.keel("check", "--read-data")
        out = self.path("out")
        self.keel("restore", "latest", "--target", out)
        self.assertEqual(tree_state(out + src), tree_state(src))

    def test_a_second_prune_is_refused_while_one_holds_the_lock(self):
        # Enough packs that the first prune works for a while (it repacks them all).
        self.init("--pack-size", "1")
        self.half_forgotten(files=24, size=2 << 20, seed=400)
        first = subprocess.Popen([KEEL, "prune", "--grace", "0", "--repack-threshold", "100%"], env=self.env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.time() + 60
        while first.poll() is None and not self.store.list("locks/") and time.time() < deadline:
            time.sleep(0.001)
        if first.poll() is not None:
            first.communicate()
            self.skipTest("the first prune finished before its lock was seen")
        first.send_signal(signal.SIGSTOP)
        try:
            second = self.keel("prune", expect=8)
            self.assertIn("locked by a maintenance run", second.stderr.decode())
        finally:
            first.send_signal(signal.SIGCONT)
        out, err = first.communicate(timeout=300)
        self.assertEqual(first.returncode, 0, err.decode())
        self.assertEqual(self.store.list("locks/"), {})
        self.keel("prune")  # the lock is free again
        self.keel("check", "--read-data")


class ConcurrentBackup(KeelTestCase):
    def test_backup_running_while_prune_deletes_loses_nothing(self):
        """Prune --grace 0 runs again and again while a backup of a few hundred MiB
        runs; that backup dedupes against packs whose snapshots were forgotten."""
        self.init("--pack-size", "8")
        shared = self.path("old", "shared.bin")
        write_random(shared, 48 << 20, 1)
        write_random(self.path("old", "gone.bin"), 16 << 20, 2)
        self.keel("backup", self.path("old"))
        # Keeping only snapshots with a tag none has forgets them all.
        self.keel("forget", "--keep-tag", "none-has-this")
        self.assertEqual(self.keel_json("snapshots"), [])

        src = self.path("src")
        os.makedirs(src)
        shutil.copyfile(shared, os.path.join(src, "shared.bin"))  # same bytes: the backup dedupes against old packs
        for i in range(8):
            write_random(os.path.join(src, f"new{i}.bin"), 32 << 20, 10 + i)

        backup = subprocess.Popen([KEEL, "backup", src, "--json"], env=self.env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        prunes = during = 0
        while backup.poll() is None:
            started_during = bool(self.store.list("running/"))
            self.keel("prune", "--grace", "0", "--json")
            prunes += 1
            during += started_during
        out, err = backup.communicate()
        self.assertEqual(backup.returncode, 0, err.decode())
        self.assertGreater(during, 0, "no prune ran while the backup did")
        self.assertEqual(self.store.list("running/"), {})

        self.keel("check", "--read-data")
        restored = self.path("restored")
        self.keel("restore", "latest", "--target", restored)
        self.assertEqual(tree_state(restored + src), tree_state(src))

        # Settled: what the backup used is back in use, the rest is gone.
        final = self.keel_json("prune", "--grace", "0")
        self.assertEqual(final["packs_waiting"], 0)
        self.assertEqual(self.store.list("condemned/"), {})
        self.keel("check", "--read-data")
        restored = self.path("restored-again")
        self.keel("restore", "latest", "--target", restored)
        self.assertEqual(tree_state(restored + src), tree_state(src))
        stored = sum(self.store.list("packs/").values())
        # At most one pack mixing gone.bin with shared.bin stays in use.
        self.assertLess(stored, (48 + 8 * 32 + 12) << 20, "the forgotten gone.bin was not reclaimed")


if __name__ == "__main__":
    unittest.main()
