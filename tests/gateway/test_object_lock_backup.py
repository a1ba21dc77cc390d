"""Object Lock repositories (docs/immutable.md), end to end on `keel gateway`:
bucket 'vault' owned by alice, with versioning and Object Lock on, where carol
(the backup host) has only the `append` grant. alice inits a GOVERNANCE
repository; carol backs up; every object keel wrote is locked, and a pack
whose lock an administrator shortened is extended by the next backup
(PutObjectRetention, no data sent again). The attack with carol's
credentials (delete, overwrite with garbage, shorten a retention, delete a
version, keel forget of a snapshot and prune) fails with clear errors (forget by
keep rules keeps the locked snapshots) and every snapshot
restores byte for byte. alice, the administrator, bypasses GOVERNANCE and
deletes a snapshot's version. A bucket without Object Lock and a local
directory are refused by `keel init --object-lock`."""
import datetime
import json
import os
import shutil
import tempfile
import unittest

from gateway_harness import Gateway, KeelRepositoryTest, boto3_client, enable_object_lock, error_of

CAROL = KeelRepositoryTest.CAROL
DAY = datetime.timedelta(days=1)


class ObjectLockBackup(KeelRepositoryTest, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="keel-lock-e2e-")
        extra = (f"[user:carol]\naccess_key = {CAROL[0]}\nsecret_key = {CAROL[1]}\n\n"
                 f"[bucket:vault]\nowner = alice\ngrants = carol:append\npath = {cls.tmp}/vault\n\n"
                 f"[bucket:plain]\nowner = alice\npath = {cls.tmp}/plain\n\n")
        cls.gateway = Gateway(extra_config=extra)
        cls.alice = boto3_client(cls.gateway, "http")
        cls.carol = boto3_client(cls.gateway, "http", access=CAROL[0], secret=CAROL[1])
        enable_object_lock(cls.alice, "vault")

    @classmethod
    def tearDownClass(cls):
        cls.gateway.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def keys(self, prefix="repo/"):
        return [o["Key"] for page in self.alice.get_paginator("list_objects_v2").paginate(Bucket="vault", Prefix=prefix)
                for o in page.get("Contents", [])]

    def requests(self, operation):
        return sum(v for k, v in self.gateway.metrics().items()
                   if k.startswith("keel_gateway_requests_total") and f'"{operation}"' in k)

    def test_refused_without_object_lock(self):
        p = self.keel("init", "--object-lock", "governance", "--lock-period", "1d", user="alice",
                      repo="s3://plain/repo", expect=2)
        self.assertIn("has no Object Lock", p.stderr)
        self.assertIn("plain", p.stderr)
        self.assertIn("object-lock-enabled", p.stderr)
        p = self.keel("init", "--object-lock", "compliance", "--lock-period", "1d", user="alice",
                      repo=os.path.join(self.tmp, "local"), expect=2)
        self.assertIn("cannot lock objects", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "local")))

    def test_locked_backups_survive_the_attack(self):
        self.keel("init", "--object-lock", "governance", "--lock-period", "1d", user="alice")
        source, snapshots = self.back_up_runs(2, 3 << 20, "--append-only")

        # Every object keel wrote but its leases is locked a period and a margin ahead.
        now = datetime.datetime.now(datetime.timezone.utc)
        keys = self.keys()
        for prefix in ("repo/config", "repo/keys/", "repo/packs/", "repo/snapshots/", "repo/log/", "repo/catalog/"):
            found = [k for k in keys if k.startswith(prefix)]
            self.assertTrue(found, prefix)
            for key in found:
                head = self.alice.head_object(Bucket="vault", Key=key)
                self.assertEqual(head.get("ObjectLockMode"), "GOVERNANCE", key)
                self.assertGreater(head["ObjectLockRetainUntilDate"], now + DAY, key)
        for key in (k for k in keys if k.startswith("repo/running/")):
            self.assertNotIn("ObjectLockMode", self.alice.head_object(Bucket="vault", Key=key))

        # An administrator shortens a pack's lock; the next backup (a host that knows nothing of the
        # repository's locks) extends it by PutObjectRetention, sending no data again.
        # The largest pack holds file data every snapshot uses (a small one may hold an old tree).
        pack = max((o for o in self.alice.list_objects_v2(Bucket="vault", Prefix="repo/packs/")["Contents"]),
                   key=lambda o: o["Size"])["Key"]
        self.alice.put_object_retention(Bucket="vault", Key=pack, BypassGovernanceRetention=True,
                                        Retention={"Mode": "GOVERNANCE", "RetainUntilDate": now + datetime.timedelta(hours=1)})
        retention_calls, puts = self.requests("PutObjectRetention"), self.requests("PutObject")
        self.keel("backup", "--append-only", source, state="carol2")
        self.assertGreater(self.requests("PutObjectRetention"), retention_calls)
        self.assertGreater(self.alice.head_object(Bucket="vault", Key=pack)["ObjectLockRetainUntilDate"], now + DAY)
        self.assertLess(self.requests("PutObject") - puts, 8)  # snapshot, log entry, lease: no pack rewritten

        # The attack, with the backup host's credentials.
        snapshot_object = next(k for k in keys if k.startswith("repo/snapshots/"))
        version = self.alice.head_object(Bucket="vault", Key=pack)["VersionId"]
        short = {"Mode": "GOVERNANCE", "RetainUntilDate": now + datetime.timedelta(minutes=5)}
        for attempt in (lambda: self.carol.delete_object(Bucket="vault", Key=pack),
                        lambda: self.carol.delete_object(Bucket="vault", Key=pack, VersionId=version),
                        lambda: self.carol.put_object(Bucket="vault", Key=snapshot_object, Body=os.urandom(512)),
                        lambda: self.carol.put_object(Bucket="vault", Key="repo/config", Body=b"garbage"),
                        lambda: self.carol.put_object_retention(Bucket="vault", Key=pack, Retention=short)):
            self.assertEqual(error_of(attempt)["Error"]["Code"], "AccessDenied")
        p = self.keel("forget", snapshots[0][0], expect=8)
        self.assertIn("Object Lock GOVERNANCE retention until", p.stderr)
        # Keep rules keep what is locked, and say until when.
        report = json.loads(self.keel("--json", "forget", "--keep-last", "1").stdout)
        self.assertEqual((report["removed"], report["kept_locked"]), (0, 2))
        self.assertEqual(sum("locked_until" in s for s in report["snapshots"]), 2)
        # Prune with the append grant is refused before it takes a lock it could not remove.
        p = self.keel("--json", "prune", "--grace", "0s", expect=7)
        self.assertIn("no lock taken", p.stderr)
        self.restore_all_as_of(snapshots, source)
        # Without the append grant's ceiling, a locked version still cannot go without the bypass.
        error = error_of(lambda: self.alice.delete_object(Bucket="vault", Key=pack, VersionId=version))["Error"]
        self.assertIn("GOVERNANCE", error["Message"])
        self.restore_all_as_of(snapshots, source, user="alice")

        # The administrator bypasses GOVERNANCE: the first snapshot's object goes.
        first = next(k for k in keys if k.startswith("repo/snapshots/" + snapshots[0][0][:8]))
        for v in self.alice.list_object_versions(Bucket="vault", Prefix=first)["Versions"]:
            self.alice.delete_object(Bucket="vault", Key=first, VersionId=v["VersionId"],
                                     BypassGovernanceRetention=True)
        self.assertNotIn(first, self.keys())
        listed = self.keel("snapshots", user="alice", state="alice2").stdout
        self.assertNotIn(snapshots[0][0][:8], listed)
        self.assertIn(snapshots[1][0][:8], listed)


if __name__ == "__main__":
    unittest.main()
