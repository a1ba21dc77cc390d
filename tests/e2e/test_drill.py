"""Restore drills: keel drill against RTO/RPO objectives, its reports, and the keel drills history."""
import os
import random
import re
import subprocess
import time
import unittest
import xml.etree.ElementTree as ET

from keelcli import KEEL, KeelTestCase, last_json

OBJECTIVES_MISSED = 10
PARTIAL = 3


def make_files(root, count, size, seed=41):
    """`count` files of random content in a few directories; returns their total size."""
    rnd = random.Random(seed)
    total = 0
    for i in range(count):
        d = os.path.join(root, f"dir{i % 4}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"file{i:03d}.bin"), "wb") as f:
            data = rnd.randbytes(size + i)
            f.write(data)
            total += len(data)
    return total


def regular_files(root):
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            full = os.path.join(dirpath, name)
            with open(full, "rb") as f:
                out[os.path.relpath(full, root)] = f.read()
    return out


class Drill(KeelTestCase):
    def backup(self, count=12, size=256 << 10):
        self.src = self.path("src")
        self.total = make_files(self.src, count, size)
        self.count = count
        self.init()
        self.snapshot = self.keel_json("backup", self.src)["snapshot"]

    def test_generous_rto_is_met_and_the_scratch_restore_is_removed(self):
        self.backup()
        scratch = self.path("scratch")
        r = self.keel_json("drill", "--rto", "1h", "--rpo", "1d", "--scratch", scratch)
        self.assertTrue(r["rto_met"])
        self.assertTrue(r["rpo_met"])
        self.assertTrue(r["objectives_met"])
        self.assertEqual(r["snapshot"], self.snapshot)
        self.assertEqual(r["rto_seconds"], 3600)
        self.assertEqual(r["rpo_seconds"], 86400)
        self.assertEqual((r["files"], r["bytes"], r["errors"]), (self.count, self.total, 0))
        self.assertEqual(r["failures"], [])
        self.assertFalse(r["verify_only"])
        self.assertGreater(r["first_file_seconds"], 0)
        self.assertLessEqual(r["first_file_seconds"], r["seconds"])
        self.assertGreater(r["throughput_bps"], 0)
        self.assertGreaterEqual(r["rpo_seen_seconds"], 0)
        # The timeline rises to every byte, ending when the drill did.
        timeline = r["timeline"]
        self.assertGreaterEqual(len(timeline), 2)
        self.assertEqual([s["bytes_done"] for s in timeline], sorted(s["bytes_done"] for s in timeline))
        self.assertEqual(timeline[-1]["bytes_done"], self.total)
        self.assertAlmostEqual(timeline[-1]["t_seconds"], r["seconds"], places=5)
        # Restored into a subdirectory of the scratch directory, then removed.
        self.assertTrue(r["scratch"].startswith(scratch + "/"))
        self.assertEqual(os.listdir(scratch), [])

        p = self.keel("drill", "--rto", "30m", "--scratch", scratch)
        out = p.stdout.decode()
        self.assertIn(f"drill of snapshot {self.snapshot[:8]}: objectives met", out)
        self.assertRegex(out, r"RTO\s+met: took .*, objective 30m00s")
        self.assertRegex(out, r"RPO\s+not set")
        self.assertRegex(out, rf"files\s+{self.count}\n")

    def test_keep_leaves_an_identical_copy(self):
        self.backup(count=6)
        scratch = self.path("scratch")
        r = self.keel_json("drill", "--keep", "--scratch", scratch)
        self.assertTrue(r["scratch_kept"])
        self.assertEqual(os.listdir(scratch), [os.path.basename(r["scratch"])])
        self.assertEqual(regular_files(r["scratch"] + self.src), regular_files(self.src))

    def test_verify_only_reads_every_byte_and_writes_nothing(self):
        self.backup()
        tmpdir, cwd = self.path("tmpdir"), self.path("cwd")
        os.mkdir(tmpdir)
        os.mkdir(cwd)
        env = dict(self.env, TMPDIR=tmpdir)
        p = subprocess.run([KEEL, "drill", "--verify-only", "--rto", "1h", "--json"], env=env, cwd=cwd,
                           capture_output=True, timeout=600)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        r = last_json(p.stdout)
        self.assertTrue(r["verify_only"])
        self.assertEqual(r["scratch"], "")
        self.assertEqual((r["files"], r["bytes"], r["errors"]), (self.count, self.total, 0))
        self.assertEqual(r["timeline"][-1]["bytes_done"], self.total)
        self.assertTrue(r["rto_met"])
        self.assertEqual(os.listdir(tmpdir), [])
        self.assertEqual(os.listdir(cwd), [])
        self.keel("drill", "--verify-only", "--scratch", self.path("x"), expect=2)
        self.keel("drill", "--verify-only", "--keep", expect=2)

    def test_a_zero_rto_is_missed(self):
        self.backup()
        p = self.keel("drill", "--verify-only", "--rto", "0s", expect=OBJECTIVES_MISSED)
        out = p.stdout.decode()
        self.assertIn("objectives missed: RTO", out)
        self.assertRegex(out, r"RTO\s+missed: took .*, objective 0\.00s")
        r = self.keel_json("drill", "--rto", "0s", "--scratch", self.path("scratch"), expect=OBJECTIVES_MISSED)
        self.assertFalse(r["rto_met"])
        self.assertTrue(r["rpo_met"])
        self.assertFalse(r["objectives_met"])
        self.assertEqual(r["errors"], 0)
        self.assertGreater(r["seconds"], 0)

    def test_an_old_restore_point_misses_the_rpo(self):
        self.backup(count=2)
        time.sleep(2)
        r = self.keel_json("drill", "--verify-only", "--rpo", "1s", expect=OBJECTIVES_MISSED)
        self.assertFalse(r["rpo_met"])
        self.assertTrue(r["rto_met"])
        self.assertEqual(r["rpo_seconds"], 1)
        self.assertGreaterEqual(r["rpo_seen_seconds"], 2)
        p = self.keel("drill", "--verify-only", "--rpo", "1s", expect=OBJECTIVES_MISSED)
        self.assertRegex(p.stdout.decode(), r"RPO\s+missed: newest complete restore point .* old, objective 1\.00s")
        self.assertTrue(self.keel_json("drill", "--verify-only", "--rpo", "1h")["rpo_met"])

    def test_a_corrupted_pack_fails_files_and_misses_the_rto(self):
        self.backup()
        key, _ = max(self.store.list("packs/").items(), key=lambda kv: kv[1])  # the data pack
        damaged = bytearray(self.store.read(key))
        damaged[100] ^= 0x40  # inside its first blob
        self.store.write(key, bytes(damaged))

        r = self.keel_json("drill", "--rto", "1h", "--scratch", self.path("scratch"), expect=OBJECTIVES_MISSED)
        self.assertGreater(r["errors"], 0)
        self.assertEqual(r["errors"], len(r["failures"]))
        self.assertFalse(r["rto_met"])
        self.assertLess(r["seconds"], 3600)  # missed for the errors, not the time
        # Failures name the file as in the snapshot, not in the (removed) scratch directory.
        self.assertTrue(r["failures"][0]["path"].startswith(self.src + "/"), r["failures"])
        p = self.keel("drill", "--rto", "1h", "--scratch", self.path("scratch"), expect=OBJECTIVES_MISSED)
        self.assertRegex(p.stdout.decode(), r"RTO\s+missed: \d+ items failed to restore")
        self.assertIn("failed to restore " + self.src, p.stderr.decode())

        # Without an RTO there is no objective to miss, but the drill is still not clean.
        r = self.keel_json("drill", "--verify-only", expect=PARTIAL)
        self.assertGreater(r["errors"], 0)
        self.assertTrue(r["rto_met"])

    def test_drills_lists_the_history_in_order_and_survives_a_catalog_rebuild(self):
        self.backup(count=4)
        self.keel("drill", "--rto", "1h", "--scratch", self.path("scratch"))
        self.keel("drill", "--verify-only", "--rto", "0s", expect=OBJECTIVES_MISSED)
        self.keel("drill", "--verify-only", "--sample", "50%", "--seed", "3", "--rpo", "1d")
        drills = self.keel_json("drills")
        self.assertEqual(len(drills), 3)
        self.assertEqual([d["id"] for d in drills], sorted(d["id"] for d in drills))
        self.assertEqual([d["started_unix_ns"] for d in drills], sorted(d["started_unix_ns"] for d in drills))
        self.assertEqual([d["snapshot"] for d in drills], [self.snapshot] * 3)
        self.assertEqual([d["verify_only"] for d in drills], [False, True, True])
        self.assertEqual([d["rto_seconds"] for d in drills], [3600, 0, None])
        self.assertEqual([d["rpo_seconds"] for d in drills], [None, None, 86400])
        self.assertEqual([d["rto_met"] for d in drills], [True, False, True])
        self.assertEqual([d["sample"] for d in drills], [1, 1, 0.5])
        self.assertEqual(drills[2]["seed"], 3)
        self.assertEqual(drills[0]["files"], 4)

        self.keel("catalog", "rebuild")
        self.assertEqual(self.keel_json("drills"), drills)
        out = self.keel("drills").stdout.decode()
        self.assertIn("3 drills", out)
        self.assertEqual(out.count(self.snapshot[:8]), 3)
        self.assertIn("MISSED 0.00s", out)

    def test_html_report_is_self_contained(self):
        self.backup()
        report = self.path("report.html")
        r = self.keel_json("drill", "--verify-only", "--rto", "1h", "--html", report)
        with open(report, encoding="utf-8") as f:
            html = f.read()
        self.assertTrue(html.startswith("<!DOCTYPE html>"))
        self.assertIn(r["snapshot"], html)
        self.assertIn("objectives met", html)
        self.assertNotIn("http://", html)
        self.assertNotIn("https://", html)
        self.assertNotRegex(html, r"<script|<link|@import|url\(")
        svg = ET.fromstring(re.search(r"<svg.*?</svg>", html, re.S).group(0))  # well-formed
        points = svg.find("polyline").get("points").split()
        self.assertGreaterEqual(len(points), 1)
        # A missed drill says so.
        self.keel("drill", "--verify-only", "--rto", "0s", "--html", report, expect=OBJECTIVES_MISSED)
        with open(report, encoding="utf-8") as f:
            self.assertIn("objectives missed: RTO", f.read())

    def test_sample_restores_about_half_the_files_repeatably(self):
        self.backup(count=60, size=4096)
        first = self.keel_json("drill", "--verify-only", "--sample", "50%", "--seed", "42")
        self.assertEqual((first["sample"], first["seed"]), (0.5, 42))
        self.assertGreaterEqual(first["files"], 15)
        self.assertLessEqual(first["files"], 45)
        again = self.keel_json("drill", "--verify-only", "--sample", "0.5", "--seed", "42")
        self.assertEqual((again["files"], again["bytes"]), (first["files"], first["bytes"]))
        # A random seed is reported, and repeats the sample.
        chosen = self.keel_json("drill", "--verify-only", "--sample", "50%")
        self.assertNotEqual(chosen["seed"], 0)
        repeat = self.keel_json("drill", "--verify-only", "--sample", "50%", "--seed", str(chosen["seed"]))
        self.assertEqual((repeat["files"], repeat["bytes"]), (chosen["files"], chosen["bytes"]))
        # A restoring drill writes just the sampled files.
        kept = self.keel_json("drill", "--sample", "50%", "--seed", "42", "--keep", "--scratch", self.path("scratch"))
        on_disk = regular_files(kept["scratch"])
        self.assertEqual(len(on_disk), kept["files"])
        # ... the same files as the verify-only drill with that seed.
        self.assertEqual((kept["files"], kept["bytes"]), (first["files"], first["bytes"]))
        self.assertEqual(sum(len(v) for v in on_disk.values()), kept["bytes"])
        self.assertEqual(self.keel_json("drill", "--verify-only")["files"], 60)

    def test_bad_values_are_usage_errors(self):
        self.backup(count=1)
        for args in (["--rto", "30"], ["--rto", "1.5h"], ["--rpo", "soon"], ["--sample", "0"], ["--sample", "150%"],
                     ["--sample", "50"]):
            p = self.keel("drill", "--verify-only", *args, expect=2)
            self.assertIn(args[0], p.stderr.decode())
        self.keel("drill", "deadbeef", "--verify-only", expect=9)
        self.assertEqual(self.keel_json("drills"), [])


if __name__ == "__main__":
    unittest.main()
