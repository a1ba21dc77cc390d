"""Corruption suite: every kind of object on the target (pack, snapshot, tree,
key slot, catalog copy, lease) and the local catalog, flipped, truncated and
deleted. For each: what check reports (exit code, and that it names the
object), what still restores byte for byte, and that keel repair recovers
everything not actually lost (issue 16: damage is confined).

Small data on a local target, so the whole suite runs in well under a minute.
"""
import glob
import os
import random
import re
import shutil
import subprocess
import time
import unittest

from keelcli import KEEL, KeelTestCase

FILES = 3
FILE_SIZE = 96 << 10


def write_random(path, size, seed):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(random.Random(seed).randbytes(size))


class Damage:
    """How an object is damaged: one byte flipped, cut in half, or removed."""

    @staticmethod
    def apply(root, key, how, offset=None):
        path = os.path.join(root, key)
        if how == "deleted":
            os.remove(path)
            return
        size = os.path.getsize(path)
        if how == "truncated":
            os.truncate(path, size // 2)
            return
        assert how == "flipped", how
        at = size // 2 if offset is None else offset
        with open(path, "r+b") as f:
            f.seek(at)
            byte = f.read(1)
            f.seek(at)
            f.write(bytes([byte[0] ^ 0x5A]))


class CorruptionCase(KeelTestCase):
    """Two snapshots of disjoint data, each with its own data pack and tree pack."""

    def setUp(self):
        super().setUp()
        self.init("--pack-size", "1")
        self.sources, self.snapshots, self.data_packs, self.tree_packs = {}, {}, {}, {}
        for n, name in enumerate(["a", "b"]):
            src = self.path("src_" + name)
            for i in range(FILES):
                write_random(os.path.join(src, f"f{i}"), FILE_SIZE, n * 100 + i)
            before = self.store.list("packs/")
            self.snapshots[name] = self.keel_json("backup", src)["snapshot"]
            new = {k: v for k, v in self.store.list("packs/").items() if k not in before}
            by_size = sorted(new, key=lambda k: new[k])
            self.assertGreaterEqual(len(by_size), 2, new)
            self.tree_packs[name], self.data_packs[name] = by_size[0], by_size[-1]
            self.sources[name] = src

    def fresh(self):
        """The environment of a host with no catalog yet."""
        return {"XDG_DATA_HOME": self.path("fresh-" + os.urandom(4).hex())}

    def pack_id(self, key):
        return os.path.basename(key)

    def restores_intact(self, name, env=None, skip=()):
        """Every file of snapshot `name` not in `skip` restores byte for byte."""
        src = self.sources[name]
        if not skip:  # the whole snapshot in one run: these suites start keel hundreds of times
            out = self.path("restored-" + os.urandom(4).hex())
            self.keel("restore", self.snapshots[name], "--target", out, env=env)
            self.assertEqual(sorted(os.listdir(out + src)), sorted(f"f{i}" for i in range(FILES)))
            for i in range(FILES):
                with open(os.path.join(src, f"f{i}"), "rb") as a, open(os.path.join(out + src, f"f{i}"), "rb") as b:
                    self.assertEqual(b.read(), a.read(), f"{name}:{src}/f{i}")
            shutil.rmtree(out)
            return
        for i in range(FILES):
            path = os.path.join(src, f"f{i}")
            if path in skip:
                continue
            p = self.keel("restore", self.snapshots[name], "--stdout", path, env=env)
            with open(path, "rb") as f:
                self.assertEqual(p.stdout, f.read(), f"{name}:{path}")

    def again(self, first):
        """A new repository for the next subtest."""
        if not first:
            self.tearDown()
            self.setUp()


class PackDamage(CorruptionCase):
    def check_names(self, key, env=None):
        p = self.keel("check", "--read-data", expect=6, env=env)
        self.assertIn(self.pack_id(key), p.stdout.decode() + p.stderr.decode())

    def test_flipped_data_pack(self):
        key = self.data_packs["a"]
        Damage.apply(self.repo, key, "flipped")
        self.check_names(key)
        self.restores_intact("b")
        self.restores_intact("b", env=self.fresh())
        dry = self.keel_json("repair", "--dry-run", expect=6)
        self.assertEqual([d["key"] for d in dry["damaged"]], [key])
        self.assertTrue(os.path.exists(os.path.join(self.repo, key)), "a dry run moves nothing")

        report = self.keel_json("repair", expect=3)
        self.assertEqual([d["moved_to"] for d in report["damaged"]], ["damaged/" + key])
        self.assertTrue(os.path.exists(os.path.join(self.repo, "damaged", key)))
        self.assertFalse(os.path.exists(os.path.join(self.repo, key)))
        # One byte loses one file; the others were salvaged into new packs.
        lost = [l.split(":", 1)[1] for l in report["lost"]]
        self.assertEqual(len(lost), 1, report)
        self.assertTrue(lost[0].startswith(self.sources["a"]), lost)
        self.assertGreater(report["blobs_salvaged"], 0)
        self.restores_intact("a", skip=lost)
        self.restores_intact("a", env=self.fresh(), skip=lost)
        self.restores_intact("b")
        # What remains wrong is only the lost file, and check says so.
        out = self.keel("check", "--read-data", expect=6).stdout.decode()
        self.assertIn(lost[0], out)
        self.assertNotIn(self.sources["b"], out)

    def test_truncated_data_pack(self):
        key = self.data_packs["a"]
        Damage.apply(self.repo, key, "truncated")
        self.check_names(key)
        self.check_names(key, env=self.fresh())
        self.restores_intact("b", env=self.fresh())
        report = self.keel_json("repair", expect=3)
        self.assertEqual([d["key"] for d in report["damaged"]], [key])
        self.assertEqual(len(report["lost"]), FILES, report)
        self.restores_intact("b")

    def test_deleted_data_pack(self):
        key = self.data_packs["a"]
        Damage.apply(self.repo, key, "deleted")
        # The pack is gone, so check names what is missing: the files.
        out = self.keel("check", expect=6).stdout.decode()
        for i in range(FILES):
            self.assertIn(os.path.join(self.sources["a"], f"f{i}"), out)
        self.assertNotIn(self.sources["b"], out)
        self.restores_intact("b")
        report = self.keel_json("repair", expect=3)
        self.assertEqual(report["damaged"], [])  # nothing left to move
        self.assertEqual(sorted(l.split(":", 1)[1] for l in report["lost"]),
                         [os.path.join(self.sources["a"], f"f{i}") for i in range(FILES)])
        self.restores_intact("b", env=self.fresh())

    def test_flipped_tree_pack(self):
        key = self.tree_packs["a"]
        Damage.apply(self.repo, key, "flipped")
        self.check_names(key)
        # A host without the trees cached lists and restores the other snapshot.
        fresh = self.fresh()
        snaps = self.keel_json("snapshots", env=fresh)
        self.assertIn(self.snapshots["b"], [s["id"] for s in snaps])
        self.restores_intact("b", env=fresh)
        report = self.keel_json("repair", expect=3)
        self.assertEqual([d["key"] for d in report["damaged"]], [key])
        self.assertTrue(any("directory listing" in l for l in report["lost"]), report)
        self.assertTrue(all(l.startswith(self.snapshots["a"][:8]) for l in report["lost"]), report)
        self.restores_intact("b", env=self.fresh())

    def test_truncated_and_deleted_tree_pack(self):
        for n, how in enumerate(("truncated", "deleted")):
            with self.subTest(how):
                self.again(n == 0)
                key = self.tree_packs["a"]
                Damage.apply(self.repo, key, how)
                if how == "truncated":
                    self.check_names(key, env=self.fresh())
                else:  # a host that never saw it can only say what is missing
                    out = self.keel("check", expect=6, env=self.fresh()).stdout.decode()
                    self.assertIn(self.snapshots["a"][:8], out)
                self.restores_intact("b", env=self.fresh())
                self.keel("repair", expect=3)
                self.restores_intact("b", env=self.fresh())


class SnapshotDamage(CorruptionCase):
    def key(self, name):
        return "snapshots/" + self.snapshots[name]

    def test_flipped_snapshot(self):
        Damage.apply(self.repo, self.key("a"), "flipped")
        # The host that made it still has it in its catalog; check reads the object.
        p = self.keel("check", "--read-data", expect=6)
        self.assertIn(self.snapshots["a"], p.stdout.decode())
        # A new host: every command goes on with the others, warning about it.
        fresh = self.fresh()
        p = self.keel("snapshots", "--json", env=fresh)
        self.assertEqual([s["id"] for s in __import__("json").loads(p.stdout)], [self.snapshots["b"]])
        self.assertIn(self.snapshots["a"], p.stderr.decode())
        self.restores_intact("b", env=fresh)
        self.keel("catalog", "rebuild")
        self.restores_intact("b")
        self.keel("forget", "--keep-last", "5", env=fresh)
        # repair moves it aside; what it held is listed as lost, nothing else.
        report = self.keel_json("repair", expect=3)
        self.assertEqual([d["key"] for d in report["damaged"]], [self.key("a")])
        self.assertEqual(report["lost"], [self.snapshots["a"][:8] + ":/ (snapshot record)"])
        self.assertTrue(os.path.exists(os.path.join(self.repo, "damaged", self.key("a"))))
        self.keel("check", "--read-data")
        self.keel("backup", self.sources["b"])

    def test_truncated_snapshot(self):
        Damage.apply(self.repo, self.key("a"), "truncated")
        self.keel("check", expect=6)
        self.restores_intact("b", env=self.fresh())
        self.keel("repair", expect=3)
        self.keel("check", "--read-data")

    def test_deleted_snapshot(self):
        Damage.apply(self.repo, self.key("a"), "deleted")
        self.keel("check", "--read-data")  # as forgotten: nothing to report
        snaps = self.keel_json("snapshots")
        self.assertEqual([s["id"] for s in snaps], [self.snapshots["b"]])
        self.restores_intact("b")
        self.assertEqual(self.keel_json("repair")["damaged"], [])


class KeySlotDamage(CorruptionCase):
    def add_slot(self):
        before = set(self.store.list("keys/"))
        pw = self.path("pw2")
        with open(pw, "w") as f:
            f.write("second password\n")
        self.keel("key", "add", "--new-password-file", pw)
        (key,) = set(self.store.list("keys/")) - before
        return key

    def test_damaged_second_slot(self):
        for n, how in enumerate(("flipped", "truncated")):
            with self.subTest(how):
                self.again(n == 0)
                key = self.add_slot()
                Damage.apply(self.repo, key, how)
                p = self.keel("check", expect=6)
                self.assertIn(key, p.stdout.decode())
                self.restores_intact("a", env=self.fresh())
                report = self.keel_json("repair")
                self.assertEqual([d["key"] for d in report["damaged"]], [key])
                self.assertEqual(report["lost"], [])
                self.keel("check", "--read-data")
                self.restores_intact("b", env=self.fresh())

    def test_deleted_second_slot(self):
        key = self.add_slot()
        Damage.apply(self.repo, key, "deleted")
        self.keel("check")
        self.keel("snapshots", env={"KEEL_PASSWORD": "second password"}, expect=5)

    def test_damaged_only_slot_is_not_a_wrong_password(self):
        (key,) = self.store.list("keys/")
        Damage.apply(self.repo, key, "flipped")
        p = self.keel("snapshots", expect=6)
        self.assertIn(key, p.stderr.decode())
        self.assertIn("damaged", p.stderr.decode())


class CatalogCopyDamage(CorruptionCase):
    def test_damaged_newest_copy(self):
        for n, how in enumerate(("flipped", "truncated", "deleted")):
            with self.subTest(how):
                self.again(n == 0)
                copies = sorted(self.store.list("catalog/"))
                self.assertTrue(copies)
                Damage.apply(self.repo, copies[-1], how)
                self.keel("check", "--read-data")
                fresh = self.fresh()
                p = self.keel("catalog", "rebuild", env=fresh)
                if how != "deleted" and len(copies) > 1:
                    self.assertIn(os.path.basename(copies[-1]), p.stderr.decode())
                self.restores_intact("a", env=fresh)
                self.restores_intact("b", env=fresh)
                self.assertEqual(self.keel_json("repair")["lost"], [])


class LeaseDamage(CorruptionCase):
    def captured_lease(self):
        """The bytes of a real backup lease (running/<id>), taken while it ran."""
        p = subprocess.Popen([KEEL, "backup", "--stdin", "--stdin-name", "x"], env=self.env, stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.time() + 30
            while not self.store.list("running/") and time.time() < deadline:
                time.sleep(0.01)
            (key,) = self.store.list("running/")
            body = self.store.read(key)
        finally:
            p.stdin.close()
            p.wait(timeout=60)
        return key, body

    def test_damaged_leases_hold_nothing_back(self):
        key, body = self.captured_lease()
        lock_key = "locks/" + os.path.basename(key)
        for how in ("flipped", "truncated"):
            for where in (key, lock_key):
                with self.subTest(how=how, where=where):
                    os.makedirs(os.path.join(self.repo, os.path.dirname(where)), exist_ok=True)
                    with open(os.path.join(self.repo, where), "wb") as f:
                        f.write(body)
                    Damage.apply(self.repo, where, how)
                    self.keel("check", "--read-data")
                    self.keel("backup", self.sources["a"])
                    self.keel("prune")  # not refused as locked; removes the damaged lease
                    self.assertFalse(os.path.exists(os.path.join(self.repo, where)))
                    self.restores_intact("a", env=self.fresh())


class LocalCatalogDamage(CorruptionCase):
    def catalog_path(self):
        (path,) = glob.glob(os.path.join(self.env["XDG_DATA_HOME"], "keel", "*", "catalog.db"))
        return path

    def damage(self, how):
        path = self.catalog_path()
        size = os.path.getsize(path)
        if how == "garbage":
            with open(path, "r+b") as f:
                f.seek((size // 2) & ~4095)
                f.write(os.urandom(4096))
        elif how == "header":
            with open(path, "r+b") as f:
                f.write(os.urandom(100))
        elif how == "truncated":
            os.truncate(path, size // 3)
        else:
            os.remove(path)
        return path

    def test_damaged_catalog_is_moved_aside_and_rebuilt(self):
        for how in ("garbage", "header", "truncated", "deleted"):
            for command in (["snapshots"], ["check", "--read-data"], ["restore"], ["backup"], ["catalog", "rebuild"]):
                with self.subTest(how=how, command=command[0]):
                    self.keel("drill", self.snapshots["b"], "--verify-only")  # history a copy must bring back
                    path = self.damage(how)
                    if command == ["restore"]:
                        self.restores_intact("a")
                    elif command == ["backup"]:
                        self.keel("backup", self.sources["b"])
                    else:
                        p = self.keel(*command)
                        if how != "deleted":
                            self.assertIn("moved aside", p.stderr.decode())
                    if how != "deleted":
                        self.assertTrue(glob.glob(path + ".corrupt-*"))
                    ids = [s["id"] for s in self.keel_json("snapshots")]
                    self.assertIn(self.snapshots["a"], ids)
                    self.assertIn(self.snapshots["b"], ids)
                    if how != "deleted":
                        self.assertTrue(self.keel_json("drills"), "history came back from the catalog copy")
                    self.restores_intact("b")


class PruneDuplicates(KeelTestCase):
    """Blobs stored twice (a repack in its grace period) are a normal state."""

    def test_check_after_repacking_prune_is_clean(self):
        self.init("--pack-size", "1")
        src = self.path("src")
        for i in range(8):
            write_random(os.path.join(src, f"f{i}"), 120 << 10, i)
        self.keel("backup", src)
        for i in range(6):
            os.remove(os.path.join(src, f"f{i}"))
        self.keel("backup", src)
        self.keel("forget", "--keep-last", "1")
        result = self.keel_json("prune", "--repack-threshold", "0.9")
        self.assertGreater(result["packs_repacked"], 0, result)
        p = self.keel("check", "--read-data")  # exited 6 before: "header lists a different set of blobs"
        self.assertIn("stored in more than one pack", p.stdout.decode())
        self.assertEqual(self.keel_json("check", "--read-data")["problems"], [])
        # A host with a fresh catalog sees the same.
        fresh = {"XDG_DATA_HOME": self.path("fresh")}
        self.keel("check", "--read-data", env=fresh)
        # Once the grace period is over, prune keeps one copy and reclaims the rest.
        self.keel("prune", "--grace", "0")
        self.assertEqual(self.keel_json("check", "--read-data")["blobs_stored_more_than_once"], 0)
        out = self.path("out")
        self.keel("restore", "latest", "--target", out)
        for i in (6, 7):
            with open(os.path.join(src, f"f{i}"), "rb") as a, open(os.path.join(out + src, f"f{i}"), "rb") as b:
                self.assertEqual(a.read(), b.read())

    def test_two_hosts_storing_the_same_data_at_once(self):
        self.init("--pack-size", "1")
        data = random.Random(7).randbytes(600 << 10)
        hosts = [dict(self.env, XDG_DATA_HOME=self.path(f"host{n}")) for n in range(2)]
        for env in hosts:
            subprocess.run([KEEL, "snapshots"], env=env, check=True, capture_output=True)
        # Both start before either has stored anything, then get the same data.
        runs = [subprocess.Popen([KEEL, "backup", "--stdin", "--stdin-name", "same.bin", "--json"], env=env,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                for env in hosts]
        deadline = time.time() + 30
        while len(self.store.list("running/")) < 2 and time.time() < deadline:
            time.sleep(0.01)
        time.sleep(1)  # each syncs its catalog just after writing its lease
        outs = [r.communicate(data, timeout=120) for r in runs]
        self.assertEqual([r.returncode for r in runs], [0, 0], outs)
        for n in range(2):
            p = self.keel("check", "--read-data", env={"XDG_DATA_HOME": self.path(f"host{n}")})
            self.assertIn("stored in more than one pack", p.stdout.decode())
        self.keel("prune", "--grace", "0", env={"XDG_DATA_HOME": self.path("host0")})
        for n in range(2):
            self.keel("check", "--read-data", env={"XDG_DATA_HOME": self.path(f"host{n}")})
        fresh = {"XDG_DATA_HOME": self.path("fresh")}
        for snap in self.keel_json("snapshots", env=fresh):
            p = self.keel("restore", snap["id"], "--stdout", "/same.bin", env=fresh)
            self.assertEqual(p.stdout, data)


if __name__ == "__main__":
    unittest.main()
