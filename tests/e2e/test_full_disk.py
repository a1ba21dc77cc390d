"""Full disks, for real: the repository, the catalog's directory and a restore's target each on
a small tmpfs that fills up in the middle of a command. Each command fails with exit 7 (3 for
a restore that wrote what fitted), names the cause, leaves the repository consistent and
loses nothing written before; once space is freed the next run finishes the job.
Needs root (mount); skipped otherwise and on an S3 target."""
import os
import subprocess
import unittest

from keelcli import ON_S3, KeelTestCase, last_json, names_below, tree_state

MIB = 1 << 20


def write_file(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


@unittest.skipIf(ON_S3, "a local file system that fills up")
class FullDisk(KeelTestCase):

    def setUp(self):
        super().setUp()
        self.mounts = []

    def tearDown(self):
        for mnt in reversed(self.mounts):
            subprocess.run(["umount", "-l", mnt], check=False)
        super().tearDown()

    def small_disk(self, name, size):
        """A tmpfs of `size` at a new directory `name` below the scratch directory."""
        if os.geteuid() != 0:
            self.skipTest("mounting a small file system needs root")
        mnt = self.path(name)
        os.makedirs(mnt)
        p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", mnt], capture_output=True)
        if p.returncode != 0:
            self.skipTest("cannot mount a tmpfs here: " + p.stderr.decode())
        self.mounts.append(mnt)
        return mnt

    def grow(self, mnt, size):
        subprocess.run(["mount", "-o", f"remount,size={size}", mnt], check=True)

    def snapshot_ids(self):
        return [s["id"] for s in self.keel_json("snapshots")]

    def assert_restores(self, snapshot, src):
        out = self.path("restored-" + snapshot[:8] + "-" + str(len(os.listdir(self.tmp))))
        self.keel("restore", snapshot, "--target", out)
        self.assertEqual(tree_state(out + src), tree_state(src))

    def test_repository_fills_in_a_backup_loses_nothing_and_the_next_backup_recovers(self):
        self.repo = os.path.join(self.small_disk("repo-disk", "24m"), "repo")
        self.env["KEEL_REPO"] = self.repo
        small, big = self.path("small"), self.path("big")
        write_file(os.path.join(small, "a.bin"), os.urandom(2 * MIB))
        write_file(os.path.join(small, "notes.txt"), b"kept\n" * 1000)
        for i in range(4):  # incompressible: 40 MiB of packs cannot fit in the 22 MiB left
            write_file(os.path.join(big, f"b{i}.bin"), os.urandom(10 * MIB))
        self.init()
        self.keel("backup", small)
        first = self.snapshot_ids()

        p = self.keel("backup", big, expect=7)
        err = p.stderr.decode()
        self.assertIn("No space left on device", err)
        self.assertIn(self.repo, err)
        # Nothing of the failed backup stays behind to keep the disk full; nothing is lost.
        self.assertEqual(names_below(os.path.join(self.repo, "tmp")), [])
        self.assertEqual(self.snapshot_ids(), first)
        self.keel("check", "--read-data")
        self.assert_restores(first[0], small)

        self.grow(os.path.dirname(self.repo), "128m")
        self.keel("backup", big)
        self.keel("check", "--read-data")
        self.assertEqual(len(self.snapshot_ids()), 2)
        self.assert_restores("latest", big)
        self.assert_restores(first[0], small)

    def test_catalog_disk_fills_in_a_backup_and_the_next_backup_recovers(self):
        state = self.small_disk("state-disk", "600k")
        self.env["XDG_DATA_HOME"] = state
        src = self.path("many")
        for i in range(3000):  # a catalog row or more each: more than 600 KiB of catalog
            write_file(os.path.join(src, f"d{i % 30}", f"f{i}.txt"), f"file {i}\n".encode())
        small = self.path("small")
        write_file(os.path.join(small, "a.txt"), b"before the disk filled\n")
        self.init()
        self.keel("backup", small)
        first = self.snapshot_ids()
        p = self.keel("backup", src, expect=7)
        err = p.stderr.decode()
        self.assertIn("catalog", err)
        self.assertIn("full", err)
        # The catalog on the full disk still answers, and what it held before is there.
        self.assertEqual(self.snapshot_ids()[: len(first)], first)

        self.grow(state, "64m")
        self.keel("check")
        before = self.snapshot_ids()  # the failed backup's snapshot may be on the target, whole
        self.keel("backup", src)
        self.keel("check", "--read-data")
        self.assertEqual(len(self.snapshot_ids()), len(before) + 1)
        self.assert_restores("latest", src)
        self.assert_restores(first[0], small)

    def test_restore_target_fills_and_only_the_files_that_fit_are_in_place(self):
        src = self.path("src")
        files = {f"small/s{i}.bin": os.urandom(MIB) for i in range(4)}
        files["large/big.bin"] = os.urandom(40 * MIB)
        for name, data in files.items():
            write_file(os.path.join(src, name), data)
        self.init()
        self.keel("backup", src)
        target = os.path.join(self.small_disk("target-disk", "16m"), "out")

        p = self.keel("restore", "latest", "--target", target, "--json", expect=3)
        report = last_json(p.stdout)
        err = p.stderr.decode()
        self.assertIn("No space left on device", err)
        self.assertIn("big.bin", err)
        self.assertGreaterEqual(report["files_failed"], 1)
        self.assertFalse(report["verified"])
        # Every file at its own name is whole; no partial file is left to fill the disk.
        self.assertEqual([p for p in names_below(target) if ".keel-partial-" in p], [])
        found = 0
        for name, data in files.items():
            path = target + os.path.join(src, name)
            if os.path.exists(path):
                found += 1
                with open(path, "rb") as f:
                    self.assertEqual(f.read(), data, name)
        self.assertEqual(found, report["files_verified"])
        self.assertEqual(found + report["files_failed"], len(files))

        self.grow(os.path.dirname(target), "96m")
        self.keel("restore", "latest", "--target", target)
        self.assertEqual(tree_state(target + src), tree_state(src))


if __name__ == "__main__":
    unittest.main()
