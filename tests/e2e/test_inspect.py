"""keel diff, stats, dump and tag on real snapshots, and global options before the command."""
import io
import os
import random
import re
import tarfile
import unittest

from keelcli import KeelTestCase


class InspectTest(KeelTestCase):
    def setUp(self):
        super().setUp()
        self.src = self.path("src")
        rnd = random.Random(19)
        os.makedirs(os.path.join(self.src, "docs/deep"))
        os.makedirs(os.path.join(self.src, "gone"))
        self.write("docs/a.txt", b"alpha\n" * 1000)
        self.write("docs/deep/b.bin", rnd.randbytes(600_000))
        self.write("gone/c.txt", b"soon removed\n")
        self.write("same.txt", b"unchanged\n")
        self.write("chmod.txt", b"mode changes\n")
        os.symlink("docs/a.txt", os.path.join(self.src, "link"))
        # A long path that needs ustar's prefix field, and one that needs a pax header.
        long_dir = os.path.join(self.src, "l" * 90, "m" * 60)
        os.makedirs(long_dir)
        self.write(os.path.join("l" * 90, "m" * 60, "n" * 80), b"long name\n")
        self.write("x" * 200, b"very long name\n")
        self.init()

    def write(self, rel, data):
        with open(os.path.join(self.src, rel), "wb") as f:
            f.write(data)

    def backup(self, *extra):
        return self.keel_json("backup", self.src, *extra)["snapshot"]

    def test_diff_reports_added_removed_modified_and_metadata(self):
        first = self.backup()
        self.write("docs/a.txt", b"alpha, edited\n" * 1500)
        os.remove(os.path.join(self.src, "gone/c.txt"))
        os.rmdir(os.path.join(self.src, "gone"))
        self.write("docs/new.txt", b"new file\n")
        os.chmod(os.path.join(self.src, "chmod.txt"), 0o600)
        second = self.backup()

        out = self.keel_json("diff", first, second)
        prefix = self.src
        changes = {c["path"][len(prefix):]: c for c in out["changes"] if c["path"].startswith(prefix)}
        self.assertEqual(changes["/docs/a.txt"]["change"], "modified")
        self.assertEqual(changes["/docs/a.txt"]["size_before"], 6000)
        self.assertEqual(changes["/docs/a.txt"]["size_after"], 21000)
        self.assertEqual(changes["/docs/new.txt"]["change"], "added")
        self.assertEqual(changes["/gone"]["change"], "removed")
        self.assertEqual(changes["/gone/c.txt"]["change"], "removed")
        self.assertEqual(changes["/gone/c.txt"]["size_before"], 13)
        self.assertEqual(changes["/chmod.txt"]["change"], "metadata")
        self.assertIn("mode", changes["/chmod.txt"]["metadata"])
        self.assertNotIn("/same.txt", changes)
        self.assertNotIn("/docs/deep/b.bin", changes)
        self.assertEqual(out["summary"]["added"], 1)
        self.assertEqual(out["summary"]["removed"], 2)
        self.assertEqual(out["summary"]["modified"], 1)

        text = self.keel("diff", first, second).stdout.decode()
        self.assertIn(f"+  ", text)
        self.assertRegex(text, r"M\s+20\.5 KiB\s+" + re.escape(prefix + "/docs/a.txt"))
        self.assertRegex(text, r"-\s+13 B\s+" + re.escape(prefix + "/gone/c.txt"))
        self.assertRegex(text, r"U\s+13 B\s+" + re.escape(prefix + "/chmod.txt") + r"  \(mode")
        no_meta = self.keel_json("diff", first, second, "--no-metadata")
        self.assertFalse(any(c["change"] == "metadata" for c in no_meta["changes"]))
        # The same snapshot twice: nothing.
        self.assertEqual(self.keel_json("diff", second, second)["changes"], [])

    def test_stats_counts_dedup_and_compression(self):
        first = self.backup()
        second = self.backup("--force")  # the same data again: nothing new stored
        out = self.keel_json("stats")
        by_id = {s["id"]: s for s in out["snapshots"]}
        one = by_id[first]
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(self.src) for f in fs
                   if not os.path.islink(os.path.join(d, f)))
        self.assertEqual(one["restore_bytes"], size)
        self.assertEqual(by_id[second]["restore_bytes"], size)
        self.assertEqual(out["total"]["snapshots"], 2)
        self.assertEqual(out["total"]["restore_bytes"], 2 * size)
        # Two snapshots of the same files share every chunk: the repository
        # stores them once (only the trees above the source, whose times moved, differ).
        self.assertGreaterEqual(out["total"]["raw_bytes"], one["raw_bytes"])
        self.assertLess(out["total"]["raw_bytes"], one["raw_bytes"] + 4096)
        self.assertLess(out["total"]["stored_bytes"], one["stored_bytes"] + 4096)
        self.assertGreater(out["total"]["dedup_ratio"], 1.95 * one["dedup_ratio"])
        # 6000 bytes of "alpha\n" compress well; random data does not: stored is below raw.
        self.assertLess(one["stored_bytes"], one["raw_bytes"])
        self.assertGreater(one["compression_ratio"], 1.0)
        self.assertEqual(one["missing_blobs"], 0)
        self.assertGreater(out["pack_bytes"], 0)
        text = self.keel("stats", "latest").stdout.decode()
        self.assertIn("total", text)
        self.assertIn("packs", text)

    def test_dump_file_and_directory_as_tar(self):
        self.backup()
        out = self.keel("dump", "latest", self.src + "/docs/a.txt").stdout
        self.assertEqual(out, b"alpha\n" * 1000)
        archive = self.keel("dump", "latest", self.src).stdout
        names = {}
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
            for member in tar.getmembers():
                names[member.name] = member
                if member.isfile():
                    with open("/" + member.name, "rb") as f:
                        self.assertEqual(tar.extractfile(member).read(), f.read(), member.name)
        base = self.src.lstrip("/")
        self.assertTrue(names[base].isdir())
        self.assertTrue(names[base + "/link"].issym())
        self.assertEqual(names[base + "/link"].linkname, "docs/a.txt")
        self.assertIn(base + "/" + "x" * 200, names)  # through a pax header
        self.assertIn(f"{base}/{'l' * 90}/{'m' * 60}/{'n' * 80}", names)
        self.assertEqual(names[base + "/docs/a.txt"].mode, os.stat(self.src + "/docs/a.txt").st_mode & 0o7777)
        self.assertEqual(names[base + "/docs/a.txt"].mtime, int(os.stat(self.src + "/docs/a.txt").st_mtime))
        # GNU tar reads it too.
        listing = self.keel("dump", "latest", self.src + "/docs").stdout
        tar_t = __import__("subprocess").run(["tar", "-tvf", "-"], input=listing, capture_output=True)
        self.assertEqual(tar_t.returncode, 0, tar_t.stderr)
        self.assertIn(base + "/docs/deep/b.bin", tar_t.stdout.decode())
        self.keel("dump", "latest", self.src + "/nope", expect=9)

    def test_tag_persists_in_the_repository(self):
        first = self.backup("--tag", "keep")
        out = self.keel_json("tag", first, "--add", "monthly", "--add", "audit", "--remove", "keep")
        self.assertEqual(out[0]["previous_id"], first)
        self.assertTrue(out[0]["changed"])
        self.assertEqual(out[0]["tags"], ["monthly", "audit"])
        new_id = out[0]["id"]
        # A fresh catalog, filled from the repository alone, sees the new tags.
        fresh = {"XDG_DATA_HOME": self.path("other-host")}
        snaps = self.keel_json("snapshots", env=fresh)
        self.assertEqual([(s["id"], s["tags"]) for s in snaps], [(new_id, ["monthly", "audit"])])
        # Tags unchanged: the snapshot keeps its id.
        same = self.keel_json("tag", new_id, "--add", "audit")
        self.assertFalse(same[0]["changed"])
        self.assertEqual(same[0]["id"], new_id)
        cleared = self.keel_json("tag", "latest", "--set", "")
        self.assertEqual(cleared[0]["tags"], [])
        # Again from the repository alone.
        third = {"XDG_DATA_HOME": self.path("third-host")}
        self.assertEqual(self.keel_json("snapshots", env=third)[0]["tags"], [])
        self.keel("tag", "latest", expect=2)
        self.keel("check")

    def test_global_options_with_values_before_the_command(self):
        # Each value-taking global option before the command (issue 15).
        self.keel("--s3-timeout", "30s", "snapshots")
        self.keel("--repo", self.repo, "--catalog", self.path("c.db"), "snapshots")
        p = self.keel("--s3-timeout", "30s", "--no-such-option", "snapshots", expect=2)
        self.assertNotIn(b"unknown command", p.stderr)
        p = self.keel("--s3-timeout", "30s", "bogus", expect=2)
        self.assertIn(b"unknown command 'bogus'", p.stderr)


if __name__ == "__main__":
    unittest.main()
