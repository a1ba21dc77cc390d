"""keel repair --undelete (docs/immutable.md, "After an attack") end to end on
`keel gateway`: bucket 'vault' (owned by alice, versioning and Object Lock on)
holds a GOVERNANCE repository; bob, whose `write` grant may delete, backs up,
then plays the thief: delete markers over the config, the key slots, a
snapshot and packs, garbage versions over a snapshot and a pack. keel cannot
open the repository. alice, the administrator, runs `keel repair --undelete`:
the dry run lists what it would remove and changes nothing; --apply removes
exactly those markers and versions, and every snapshot restores byte for
byte. A local directory is refused (it keeps no versions)."""
import json
import os
import shutil
import tempfile
import unittest

from gateway_harness import Gateway, KeelRepositoryTest, boto3_client, enable_object_lock


class Undelete(KeelRepositoryTest, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="keel-undelete-e2e-")
        extra = f"[bucket:vault]\nowner = alice\ngrants = bob:write\npath = {cls.tmp}/vault\n\n"
        cls.gateway = Gateway(extra_config=extra)
        cls.alice = boto3_client(cls.gateway, "http")
        cls.bob = boto3_client(cls.gateway, "http", user="bob")
        enable_object_lock(cls.alice, "vault")

    @classmethod
    def tearDownClass(cls):
        cls.gateway.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def versions(self):
        """(key, version id, is a delete marker) of everything in the bucket."""
        out = []
        for page in self.alice.get_paginator("list_object_versions").paginate(Bucket="vault", Prefix="repo/"):
            out += [(v["Key"], v["VersionId"], False) for v in page.get("Versions", [])]
            out += [(v["Key"], v["VersionId"], True) for v in page.get("DeleteMarkers", [])]
        return out

    def current(self, prefix):
        return [o["Key"] for o in self.alice.list_objects_v2(Bucket="vault", Prefix=prefix).get("Contents", [])]

    def test_undelete_after_the_attack(self):
        self.keel("init", "--object-lock", "governance", "--lock-period", "1d", user="alice")
        source, snapshots = self.back_up_runs(2, 1 << 20, user="bob")

        # The attack with bob's credentials: locked versions stay, but are hidden.
        packs, snaps = self.current("repo/packs/"), self.current("repo/snapshots/")
        hidden = ["repo/config", *self.current("repo/keys/"), snaps[0], *packs[:-1]]
        for key in hidden:
            self.bob.delete_object(Bucket="vault", Key=key)
        garbage = {snaps[1]: 2, packs[-1]: 1}
        for key, times in garbage.items():
            for _ in range(times):
                self.bob.put_object(Bucket="vault", Key=key, Body=os.urandom(700))
        p = self.keel("snapshots", user="alice", state="alice-after", expect=4)
        self.assertIn("no keel repository", p.stderr)
        before = self.versions()

        # The dry run (the default) lists every marker and garbage version, and removes nothing.
        p = self.keel("--json", "repair", "--undelete", user="alice", expect=6)
        report = json.loads(p.stdout)
        self.assertTrue(report["dry_run"])
        markers = sorted(s["key"] for s in report["removed"] if s["delete_marker"])
        bad = sorted(s["key"] for s in report["removed"] if not s["delete_marker"])
        self.assertEqual(markers, sorted(k[len("repo/"):] for k in hidden))
        self.assertEqual(bad, sorted(k[len("repo/"):] for k, n in garbage.items() for _ in range(n)))
        self.assertEqual(sorted(report["restored"]), sorted(k[len("repo/"):] for k in hidden + list(garbage)))
        self.assertEqual(report["skipped"], [])
        self.assertEqual(self.versions(), before)

        # The administrator applies it: exactly those versions go.
        p = self.keel("repair", "--undelete", "--apply", user="alice")
        self.assertIn("brought back", p.stdout)
        removed = {(s["key"], s["version_id"]) for s in report["removed"]}
        after = {(k[len("repo/"):], v) for k, v, _ in self.versions()}
        self.assertEqual({(k[len("repo/"):], v) for k, v, _ in before} - after, removed)
        self.assertEqual([k for k, _, marker in self.versions() if marker and k in hidden], [])
        self.keel("check", "--read-data", user="alice", state="alice-check")
        self.restore_all_as_of(snapshots, source, user="alice")
        p = self.keel("repair", "--undelete", user="alice")  # nothing left to do
        self.assertIn("0 objects to bring back", p.stdout)

    def test_local_directory_refused(self):
        local = os.path.join(self.tmp, "local")
        self.keel("init", user="alice", state="local", repo=local)
        p = self.keel("repair", "--undelete", user="alice", state="local", repo=local, expect=2)
        self.assertIn("keeps no versions", p.stderr)


if __name__ == "__main__":
    unittest.main()
