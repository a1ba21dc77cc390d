"""Bad command lines and bad surroundings: every one gets a clear message in the
user's terms and the exit code docs/exit-codes.md gives, and loses nothing."""
import os
import unittest

from keelcli import ON_S3, KeelTestCase


class Numbers(KeelTestCase):
    """Sizes, counts and durations are checked before use: none wraps around."""

    def refused(self, *args):
        p = self.keel(*args, expect=2)
        return p.stderr.decode()

    def test_pack_size_out_of_range_creates_nothing(self):
        err = self.refused("init", "--pack-size", "17592186044416")
        self.assertIn("--pack-size '17592186044416': too large: give a whole number from 1 to 4096 (MiB)", err)
        self.assertIn("too small", self.refused("init", "--pack-size", "0"))
        self.assertIn("--pack-size '-5'", self.refused("init", "--pack-size", "-5"))
        self.assertIn("--pack-size '64M'", self.refused("init", "--pack-size", "64M"))
        self.assertEqual(self.store.list("keys/"), {})

    def test_chunk_sizes_are_checked_in_kib_without_overflow(self):
        err = self.refused("init", "--chunk-avg", "4194304")
        self.assertIn("--chunk-avg '4194304': too large: give a whole number from 1 to 65536 (KiB)", err)
        self.assertNotIn("avg 0", err)
        self.assertIn("--compression '20'", self.refused("init", "--compression", "20"))
        self.assertIn("--compression '-8'", self.refused("init", "--compression", "-8"))
        self.assertIn("--compression 'fastest'", self.refused("init", "--compression", "fastest"))

    def test_negative_counts_and_huge_durations_change_nothing(self):
        self.init()
        src = self.path("src")
        os.makedirs(src)
        with open(os.path.join(src, "f"), "wb") as f:
            f.write(b"keep me" * 1000)
        self.keel("backup", src)
        self.keel("backup", src)
        self.assertIn("--keep-last '-1'", self.refused("forget", "--keep-last", "-1"))
        self.assertIn("--keep-daily '4294967296'", self.refused("forget", "--keep-daily", "4294967296"))
        self.assertEqual(len(self.keel_json("snapshots")), 2)
        out = self.path("out")
        self.assertIn("--readers '-1'", self.refused("restore", "latest", "--target", out, "--readers", "-1"))
        self.assertFalse(os.path.exists(out))
        self.assertIn("--memory '0'", self.refused("backup", src, "--memory", "0"))
        self.assertIn("--grace '99999999999d': too long", self.refused("prune", "--grace", "99999999999d"))
        self.assertIn("--seed '-3'", self.refused("drill", "--verify-only", "--seed", "-3"))
        self.assertEqual(len(self.keel_json("snapshots")), 2)


class Surroundings(KeelTestCase):
    """What the command is pointed at is not what it expects."""

    def test_restore_into_a_target_that_cannot_be_created_exits_7(self):
        self.init()
        src = self.path("src")
        os.makedirs(src)
        with open(os.path.join(src, "f"), "wb") as f:
            f.write(b"data")
        self.keel("backup", src)
        blocker = self.path("a-file")
        with open(blocker, "w") as f:
            f.write("not a directory")
        p = self.keel("restore", "latest", "--target", os.path.join(blocker, "out"), expect=7)
        err = p.stderr.decode()
        self.assertIn("restore target " + os.path.join(blocker, "out"), err)
        self.assertNotIn("internal error", err)

    @unittest.skipIf(ON_S3, "a local repository path")
    def test_repository_path_that_is_a_file(self):
        path = self.path("repo-file")
        with open(path, "w") as f:
            f.write("x")
        p = self.keel("snapshots", env={"KEEL_REPO": path}, expect=4)
        self.assertIn(path + ": is a file, not a repository directory", p.stderr.decode())
        p = self.keel("snapshots", env={"KEEL_REPO": self.path("nothing-here")}, expect=4)
        self.assertIn("no such directory", p.stderr.decode())

    def test_password_file_that_is_a_directory(self):
        self.init()
        folder = self.path("secrets")
        os.makedirs(folder)
        p = self.keel("snapshots", "--password-file", folder, env={"KEEL_PASSWORD": ""}, expect=2)
        self.assertIn("password file " + folder + " is a directory", p.stderr.decode())
        self.assertNotIn("is empty", p.stderr.decode())

    def test_damaged_key_slot_is_not_a_wrong_password(self):
        self.init()
        self.keel("snapshots", env={"KEEL_PASSWORD": "not the password"}, expect=5)
        (slot, size), = self.store.list("keys/").items()
        data = bytearray(self.store.read(slot))
        data[size - 20] ^= 0x01  # inside the sealed master keys
        self.store.write(slot, bytes(data))
        p = self.keel("snapshots", expect=6)
        err = p.stderr.decode()
        self.assertIn("the key slot is damaged", err)
        self.assertIn(slot, err)
        self.assertNotIn("wrong password", err)


if __name__ == "__main__":
    unittest.main()
