"""Put-only keys (format 2): a host that can write backups but read nothing back."""
import json
import os
import unittest

from keelcli import KeelTestCase, last_json, tree_state

FULL = "correct horse"
PUT = "put only battery staple"


def write_tree(root, seed, files=6, size=700_000):
    """Incompressible files (and a secret-sounding name) below root."""
    os.makedirs(os.path.join(root, "finance"), exist_ok=True)
    for i in range(files):
        with open(os.path.join(root, "finance", f"payroll-{seed}-{i}.xlsx"), "wb") as f:
            f.write(os.urandom(size))


class PutOnlyTest(KeelTestCase):
    def setUp(self):
        super().setUp()
        self.keel("init", "--format", "2")
        added = json.loads(self.keel("key", "add", "--put-only", "--json", env={"KEEL_NEW_PASSWORD": PUT}).stdout)
        self.assertEqual(added["kind"], "put-only")
        # The put-only host: its own password and its own catalog.
        self.put_env = {"KEEL_PASSWORD": PUT, "XDG_DATA_HOME": self.path("put-host")}

    def put(self, *args, expect=0):
        return self.keel(*args, expect=expect, env=self.put_env)

    def put_json(self, *args, expect=0):
        return last_json(self.put(*args, "--json", expect=expect).stdout)

    def test_writes_but_cannot_read(self):
        src = self.path("src")
        write_tree(src, "a")
        first = self.put_json("backup", src)
        self.assertEqual(first["errors"], 0)
        # Incremental: its own catalog holds the trees it wrote.
        second = self.put_json("backup", src)
        self.assertEqual(second["bytes_read"], 0)
        self.assertEqual(second["parent"], first["snapshot"])

        # Snapshots: times, hosts and tags, no paths or sizes.
        listed = self.put_json("snapshots")
        self.assertEqual(len(listed), 2)
        self.assertNotIn("paths", listed[0])
        text = self.put("snapshots").stdout.decode()
        self.assertNotIn("src", text)
        self.assertIn("put-only", text)

        # Every reading or destructive command refuses with exit 2 naming the key's kind.
        snap = first["snapshot"][:8]
        refused = [("ls", "latest"), ("find", "*.xlsx"), ("restore", "latest", "--target", self.path("out")),
                   ("restore", "latest", "--stdout", "/finance/payroll-a-0.xlsx"), ("dump", "latest", "/finance/payroll-a-0.xlsx"),
                   ("diff", snap, second["snapshot"][:8]), ("stats",), ("forget", "--keep-last", "1"),
                   ("prune",), ("tag", "latest", "--add", "x"), ("key", "list"), ("check", "--read-data"),
                   ("mount", self.path("mnt")), ("drill",), ("repair",), ("unlock",)]
        os.makedirs(self.path("mnt"))
        for args in refused:
            with self.subTest(command=args[0]):
                p = self.put(*args, expect=2)
                err = p.stderr.decode()
                self.assertIn("put-only", err)
                self.assertIn("needs a full key", err)
                self.assertNotIn(b"payroll", p.stdout)
        self.assertFalse(os.path.exists(self.path("out")))

        # check without --read-data works.
        self.put("check")

        # A fresh put-only catalog (a host that lost its state) sees headers only,
        # and its backup still dedupes by id.
        fresh = {"KEEL_PASSWORD": PUT, "XDG_DATA_HOME": self.path("fresh-host")}
        listed = json.loads(self.keel("snapshots", "--json", env=fresh).stdout)
        self.assertEqual(len(listed), 2)
        self.assertNotIn("paths", listed[0])
        third = last_json(self.keel("backup", src, "--json", env=fresh).stdout)
        self.assertLess(third["bytes_added"], 64 * 1024)

        # No file name reaches the target in the clear.
        for dirpath, _, files in os.walk(self.repo):
            for name in files:
                with open(os.path.join(dirpath, name), "rb") as f:
                    self.assertNotIn(b"payroll", f.read(), os.path.join(dirpath, name))

        # The full key restores the put-only backup byte for byte.
        self.keel("check", "--read-data")
        out = self.path("restored")
        self.keel("restore", first["snapshot"][:8], "--target", out)
        restored = tree_state(os.path.join(out, src.lstrip("/")))
        self.assertEqual(restored, tree_state(src))

    def test_dedupe_both_ways(self):
        # Full key first, then the put-only host backs up the same data: it
        # has no parent (it cannot read the full key's snapshot), so every
        # file is read and chunked, and dedupes by id.
        a = self.path("a")
        write_tree(a, "a")
        full_first = self.keel_json("backup", a)
        put_second = self.put_json("backup", a)
        self.assertEqual(put_second["parent"], "")
        self.assertEqual(put_second["bytes_read"], put_second["bytes"])

        # Put-only first, then the full key.
        b = self.path("b")
        write_tree(b, "b")
        put_first = self.put_json("backup", b)
        # Another host name: no parent, so the full key too reads every file.
        full_second = self.keel_json("backup", b, "--host", "other-host")
        self.assertEqual(full_second["bytes_read"], full_second["bytes"])

        for name, first, second in (("full->put-only", full_first, put_second),
                                    ("put-only->full", put_first, full_second)):
            ratio = second["bytes"] / max(1, second["bytes_added"])
            print(f"\ndedupe {name}: first run added {first['bytes_added']} of {first['bytes']} bytes; "
                  f"second run added {second['bytes_added']} of {second['bytes']} bytes (ratio {ratio:.0f}:1)")
            self.assertGreater(first["bytes_added"], first["bytes"] * 0.9)
        # A put-only key dedupes against everything a full key stored.
        self.assertLess(put_second["bytes_added"], 16 * 1024)
        self.assertEqual(put_second["chunks_added"], 0)
        # A full key dedupes only against packs a full key vouched for
        # (docs/repository-format.md, "Vouched packs"): what only a put-only
        # key stored may be a false copy, so it stores every chunk again.
        self.assertEqual(full_second["chunks_added"], put_first["chunks_added"])
        self.assertGreater(full_second["bytes_added"], full_second["bytes"] * 0.9)
        # ... and from then on dedupes against its own copies.
        full_third = self.keel_json("backup", b, "--host", "third-host")
        self.assertEqual(full_third["chunks_added"], 0)
        self.keel("check", "--read-data")

    def test_full_key_repacks_put_only_packs(self):
        # Repack opens each blob under its old pack's key and seals it under its own.
        env = {"KEEL_REPO": self.path("small")}
        self.keel("init", "--format", "2", "--pack-size", "1", "--chunk-min", "16", "--chunk-avg", "64",
                  "--chunk-max", "256", env=env)
        self.keel("key", "add", "--put-only", env={**env, "KEEL_NEW_PASSWORD": PUT})
        put_env = {**self.put_env, **env}
        src = self.path("src")
        write_tree(src, "r", files=24, size=100 << 10)
        self.keel("backup", src, env=put_env)
        for i in range(0, 24, 2):
            os.remove(os.path.join(src, "finance", f"payroll-r-{i}.xlsx"))
        self.keel("backup", src, env=put_env)
        self.keel("forget", "--keep-last", "1", env=env)
        result = last_json(self.keel("prune", "--grace", "0", "--repack-threshold", "90%", "--json", env=env).stdout)
        self.assertGreater(result["packs_repacked"], 0)
        self.keel("check", "--read-data", env=env)
        out = self.path("out")
        self.keel("restore", "latest", "--target", out, env=env)
        self.assertEqual(tree_state(out + src), tree_state(src))

    def test_format_1_refuses_put_only_keys(self):
        repo1 = self.path("repo1")
        self.keel("init", env={"KEEL_REPO": repo1})
        p = self.keel("key", "add", "--put-only", env={"KEEL_REPO": repo1, "KEEL_NEW_PASSWORD": PUT}, expect=2)
        self.assertIn("format 2", p.stderr.decode())
        self.assertIn("keel migrate --format 2", p.stderr.decode())

    def test_migrate_format_1_then_put_only(self):
        # A format-1 repository with two snapshots in several packs.
        env = {"KEEL_REPO": self.path("old")}
        self.keel("init", "--pack-size", "1", env=env)
        a, b = self.path("a"), self.path("b")
        write_tree(a, "a", files=4, size=400_000)
        write_tree(b, "b", files=4, size=400_000)
        expected = {}
        for src in (a, b):
            expected[self.keel_json("backup", src, env=env)["snapshot"]] = (src, tree_state(src))
        packs = sum(len(files) for _, _, files in os.walk(self.path("old", "packs")))
        self.assertGreater(packs, 2)
        self.keel("migrate", expect=2, env=env)  # --format is required
        migrated = self.keel_json("migrate", "--format", "2", env=env)
        self.assertTrue(migrated["switched"])
        self.assertEqual((migrated["format_before"], migrated["packs"], migrated["packs_indexed"]), (1, packs, packs))
        self.assertEqual(len(os.listdir(self.path("old", "pack-index"))), packs)
        self.assertEqual(os.listdir(self.path("old", "locks")), [])

        # A put-only key, and its backup of data the format-1 key wrote: nothing uploaded twice.
        self.keel("key", "add", "--put-only", env={**env, "KEEL_NEW_PASSWORD": PUT})
        put_env = {**self.put_env, **env}
        again = last_json(self.keel("backup", a, "--json", env=put_env).stdout)
        print(f"\nput-only backup after migrate: {again['bytes_added']} of {again['bytes']} bytes added, "
              f"{again['chunks_added']} chunks")
        self.assertEqual(again["chunks_added"], 0)
        self.assertLess(again["bytes_added"], 16 * 1024)
        expected[again["snapshot"]] = (a, tree_state(a))
        self.keel("restore", again["snapshot"][:8], "--target", self.path("nope"), env=put_env, expect=2)

        # The full key (the format-1 password) restores old and new snapshots byte for byte.
        self.keel("check", "--read-data", env=env)
        for i, (snapshot, (src, state)) in enumerate(expected.items()):
            out = self.path(f"out{i}")
            self.keel("restore", snapshot[:8], "--target", out, env=env)
            self.assertEqual(tree_state(os.path.join(out, src.lstrip("/"))), state, snapshot)

        # A rerun finds nothing left to do.
        rerun = self.keel_json("migrate", "--format", "2", env=env)
        self.assertFalse(rerun["switched"])
        self.assertEqual((rerun["packs_indexed"], rerun["packs_already_indexed"]), (0, packs))


if __name__ == "__main__":
    unittest.main()
