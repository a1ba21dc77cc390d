"""Two hosts, one repository: each host's own catalog follows what the other did.

Host A and host B (each its own catalog) back up the same large file at the
same time, so the repository holds it twice; A's prune then deletes one copy.
B's catalog, which indexed the deleted copy, must still restore its snapshot,
and each host must list the other's snapshots without a full rebuild.
"""
import os
import subprocess
import unittest

from keelcli import KEEL, KeelTestCase, last_json


class TwoHosts(KeelTestCase):
    def host_env(self, name):
        return {"XDG_DATA_HOME": self.path("state-" + name)}

    def backup_at_once(self, src):
        """Both hosts back up `src` concurrently; returns {host: snapshot id}."""
        procs = {}
        for name in ("a", "b"):
            env = dict(self.env)
            env.update(self.host_env(name))
            procs[name] = subprocess.Popen([KEEL, "backup", src, "--host", "host-" + name, "--json"], env=env,
                                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        ids = {}
        for name, p in procs.items():
            out, err = p.communicate(timeout=600)
            self.assertEqual(p.returncode, 0, err.decode(errors="replace"))
            ids[name] = last_json(out)["snapshot"]
        return ids

    def test_prune_on_one_host_leaves_the_other_able_to_restore(self):
        a, b = self.host_env("a"), self.host_env("b")
        self.init()
        src = self.path("src")
        os.makedirs(src)
        big = os.urandom(24 << 20)
        with open(os.path.join(src, "big.bin"), "wb") as f:
            f.write(big)
        with open(os.path.join(src, "small.txt"), "w") as f:
            f.write("small file\n")
        self.keel("snapshots", env=a)  # each host has its catalog before the backups
        self.keel("snapshots", env=b)
        ids = self.backup_at_once(src)
        # The file was stored twice, by both hosts: the state the prune must handle.
        packs = self.store.list("packs/")
        self.assertGreaterEqual(sum(packs.values()), 2 * len(big), "both hosts should have stored the file")

        # Right after the backups, each host lists both snapshots.
        for env in (a, b):
            listed = sorted(s["id"] for s in self.keel_json("snapshots", env=env))
            self.assertEqual(listed, sorted(ids.values()))

        pruned = self.keel_json("prune", "--grace", "0", env=a)
        self.assertGreater(pruned["packs_deleted"], 0, "the prune should delete the duplicate copy")

        # B restores its own snapshot byte for byte, from its own (older) catalog.
        for name in ("big.bin", "small.txt"):
            with open(os.path.join(src, name), "rb") as f:
                want = f.read()
            got = self.keel("restore", ids["b"], "--stdout", f"{src}/{name}", env=b).stdout
            self.assertEqual(got, want, name)
        out = self.path("restored-a")
        self.keel("restore", ids["a"], "--target", out, env=b)
        with open(os.path.join(out, src.lstrip("/"), "big.bin"), "rb") as f:
            self.assertEqual(f.read(), big)

        for env in (a, b):
            p = self.keel("check", "--read-data", env=env)
            self.assertNotIn(b"header lists", p.stdout + p.stderr)
            self.assertNotIn(b"no such object", p.stdout + p.stderr)

    def test_forget_and_tag_on_one_host_show_on_the_other(self):
        a, b = self.host_env("a"), self.host_env("b")
        self.init()
        src = self.path("src")
        os.makedirs(src)
        with open(os.path.join(src, "f"), "w") as f:
            f.write("one\n")
        self.keel("snapshots", env=b)
        first = self.keel_json("backup", src, env=a)["snapshot"]
        second = self.keel_json("backup", src, env=a)["snapshot"]
        self.assertEqual(sorted(s["id"] for s in self.keel_json("snapshots", env=b)), sorted([first, second]))
        self.keel("forget", "--keep-last", "1", env=a)
        self.assertEqual([s["id"] for s in self.keel_json("snapshots", env=b)], [second])
        self.keel("tag", second, "--add", "kept", env=a)
        listed = self.keel_json("snapshots", env=b)
        self.assertEqual([s["tags"] for s in listed], [["kept"]])
        self.assertEqual(self.keel("restore", "latest", "--stdout", f"{src}/f", env=b).stdout, b"one\n")


if __name__ == "__main__":
    unittest.main()
