"""Append-only backups (docs/immutable.md), end to end: `keel gateway` serves
bucket 'vault' owned by alice, where carol has only the `append` grant
(create, read, list; never delete or overwrite) and delete_unversioned =
owner. alice inits the repository; carol backs up with `keel --append-only`
several times and every snapshot restores byte for byte; the gateway saw not
one delete or overwrite. Then the attack with carol's credentials: delete a
pack, overwrite a snapshot with garbage, forget, prune: each fails with a
clear error and every snapshot still restores. alice (the owner) forgets and
prunes."""
import os
import random
import shutil
import json
import tempfile
import time
import unittest

from gateway_harness import Gateway, KeelRepositoryTest, boto3_client, error_of

CAROL = KeelRepositoryTest.CAROL
# Operations that delete, or that only a writer may use.
DELETING = ("DeleteObject", "DeleteObjects", "AbortMultipartUpload")


class AppendOnlyBackup(KeelRepositoryTest, unittest.TestCase):
    PASSWORD = "append e2e"

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="keel-append-e2e-")
        extra = (f"[user:carol]\naccess_key = {CAROL[0]}\nsecret_key = {CAROL[1]}\n\n"
                 f"[bucket:vault]\nowner = alice\ngrants = carol:append\ndelete_unversioned = owner\n"
                 f"path = {cls.tmp}/vault\n\n")
        cls.gateway = Gateway(extra_config=extra)

    @classmethod
    def tearDownClass(cls):
        cls.gateway.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def refused_requests(self):
        """(operation, status) -> count of the gateway's answers that were errors or deletions."""
        return {k: v for k, v in self.gateway.metrics().items()
                if k.startswith("keel_gateway_requests_total") and
                (any(f'"{op}"' in k for op in DELETING) or 'status="403"' in k)}

    def store_refuses_carol(self, prefix):
        """The attack on the store with carol's append credentials: deleting, overwriting
        and overwriting with garbage (re-encrypting) a pack, a snapshot and the config, and a
        batch delete; the gateway refuses each. Returns carol's client and the keys under prefix."""
        carol = boto3_client(self.gateway, "http", access=CAROL[0], secret=CAROL[1])
        keys = [o["Key"] for page in carol.get_paginator("list_objects_v2").paginate(Bucket="vault", Prefix=prefix)
                for o in page.get("Contents", [])]
        pack = next(k for k in keys if k.startswith(prefix + "packs/"))
        snapshot_object = next(k for k in keys if k.startswith(prefix + "snapshots/"))
        for attempt in (lambda: carol.delete_object(Bucket="vault", Key=pack),
                        lambda: carol.delete_object(Bucket="vault", Key=snapshot_object),
                        lambda: carol.put_object(Bucket="vault", Key=pack, Body=os.urandom(4096)),
                        lambda: carol.put_object(Bucket="vault", Key=snapshot_object, Body=os.urandom(512)),
                        lambda: carol.put_object(Bucket="vault", Key=prefix + "config", Body=b"garbage")):
            error = error_of(attempt)["Error"]
            self.assertEqual(error["Code"], "AccessDenied")
            self.assertIn("append grant", error["Message"])
        batch = {"Objects": [{"Key": k} for k in keys[:10]]}
        self.assertEqual(error_of(lambda: carol.delete_objects(Bucket="vault", Delete=batch))["Error"]["Code"],
                         "AccessDenied")
        return carol, keys

    def append_only_backups(self, source, rng, runs, size, frozen_name, change=lambda run: None, **where):
        """`runs` append-only backups of `source`, each after adding a file of `size` + run random
        bytes (and `change(run)`); returns (snapshot id, a frozen copy of the source) for each."""
        snapshots = []
        for run in range(runs):
            with open(os.path.join(source, f"file{run}"), "wb") as f:
                f.write(rng.randbytes(size + run))
            change(run)
            p = self.keel("--json", "backup", "--append-only", source, **where)
            frozen = os.path.join(self.tmp, f"{frozen_name}-{run}")
            shutil.copytree(source, frozen)
            snapshots.append((json.loads(p.stdout.splitlines()[-1])["snapshot"], frozen))  # after the status lines
        return snapshots

    def test_append_only_backups_survive_the_attack(self):
        self.keel("init", user="alice")
        rng = random.Random(18)
        source = os.path.join(self.tmp, "source")
        os.makedirs(source)
        def change(run):
            with open(os.path.join(source, "changing"), "w") as f:
                f.write(f"version {run}\n" * 1000)
        snapshots = self.append_only_backups(source, rng, 3, 3 << 20, "frozen", change)
        # A job runs its backups the same way; retention rules (which forget) do not go with it.
        p = self.keel("job", "add", "vault", "--append-only", "--paths", source, "--schedule", "@daily",
                      "--keep-last", "3", expect=2)
        self.assertIn("--append-only job cannot forget", p.stderr)
        self.keel("job", "add", "vault", "--append-only", "--paths", source, "--schedule", "@daily")
        self.assertIn("append-only", self.keel("job", "show", "vault").stdout)
        self.keel("job", "run", "vault")
        self.assertEqual(self.refused_requests(), {}, "an append-only backup tried to delete or overwrite")
        self.restore_all_as_of(snapshots, source)

        # The attack, with carol's credentials.
        carol, _ = self.store_refuses_carol("repo/")
        # keel's own maintenance with the append credentials: refused before anything is
        # deleted or a lock taken (one the append grant could never remove again).
        for args in (("forget", "--keep-last", "1", "--prune", "--grace", "0s"),
                     ("forget", "--keep-last", "10", "--prune", "--grace", "0s"),  # nothing to forget
                     ("prune", "--grace", "0s")):
            p = self.keel(*args, expect=7)
            self.assertIn("these credentials may not delete", p.stderr)
            self.assertIn("AccessDenied", p.stderr)
            self.assertIn("append grant", p.stderr)
            self.assertIn("no lock taken", p.stderr)
        leases = [o["Key"] for o in carol.list_objects_v2(Bucket="vault", Prefix="repo/locks/").get("Contents", [])]
        self.assertEqual(leases, [], "a maintenance lock was left behind")
        self.restore_all_as_of(snapshots, source)

        # The owner's credentials forget and prune.
        self.keel("forget", "--keep-last", "1", "--prune", "--grace", "0s", user="alice")
        listed = self.keel("snapshots", user="alice").stdout
        self.assertIn("1 snapshots", listed)
        self.assertIn("job:vault", listed)  # the job's run, of the last state of `source`, is the newest
        self.restore_all_as_of([("latest", snapshots[-1][1])], source, user="alice")

    def test_garbage_records_from_append_credentials(self):
        """Append credentials may create any new key: carol writes garbage under every kind of
        record keel lists (a condemnation, leases, a snapshot, a pack, a log entry, a catalog
        copy whose name overflows a time, a key slot). No host's sync, backup, restore, check,
        key list or prune fails for it: each is skipped with a warning naming it, check reports
        the condemnation (exit 6), and the owner's prune deletes nothing that a snapshot needs."""
        repo, owner, host = "s3://vault/garbage", "garbage-owner", "garbage-host"
        self.keel("init", user="alice", repo=repo, state=owner)
        rng = random.Random(1819)
        source = os.path.join(self.tmp, "garbage-source")
        os.makedirs(source)
        snapshots = self.append_only_backups(source, rng, 2, 1 << 20, "garbage-frozen", repo=repo, state=host)
        # The owner's catalog knows both snapshots before the garbage arrives.
        self.keel("snapshots", user="alice", repo=repo, state=owner)

        carol = boto3_client(self.gateway, "http", access=CAROL[0], secret=CAROL[1])
        name = lambda: os.urandom(32).hex()
        condemned = f"garbage/condemned/{name()}"
        pack = name()
        garbage = {condemned: b"KEELCDM1" + os.urandom(200),
                   f"garbage/locks/{name()}": b"KEELLSE1" + os.urandom(100),
                   f"garbage/running/{name()}": os.urandom(100),
                   f"garbage/snapshots/{name()}": b"KEELSNP1" + os.urandom(300),
                   f"garbage/packs/{pack[:2]}/{pack}": os.urandom(5000),
                   f"garbage/log/{time.time_ns():020d}-{os.urandom(8).hex()}": b"KEELLOG1" + os.urandom(80),
                   f"garbage/catalog/{os.urandom(8).hex()}/{'9' * 20}": b"KEELCAT1" + os.urandom(100),
                   f"garbage/keys/{name()}": b"KEELKEY2" + os.urandom(150)}
        for key, body in garbage.items():
            carol.put_object(Bucket="vault", Key=key, Body=body)

        def runs_and_names_condemned(*args, user="carol", state=host, expect=0):
            p = self.keel(*args, user=user, repo=repo, state=state, expect=expect)
            self.assertIn(condemned.removeprefix("garbage/"), p.stderr, args)
            return p

        # The backup host syncs in full (a fresh catalog) and backs up again.
        with open(os.path.join(source, "file2"), "wb") as f:
            f.write(rng.randbytes(1 << 20))
        p = runs_and_names_condemned("--json", "backup", "--append-only", source, state=host + "-fresh")
        frozen = os.path.join(self.tmp, "garbage-frozen-2")
        shutil.copytree(source, frozen)
        snapshots.append((json.loads(p.stdout.splitlines()[-1])["snapshot"], frozen))
        self.assertIn("it condemns nothing", p.stderr)
        # The owner: listing, key list, catalog rebuild, restore; check names the condemnation.
        listed = self.keel("snapshots", user="alice", repo=repo, state=owner).stdout
        self.assertIn("3 snapshots", listed)
        self.keel("key", "list", user="alice", repo=repo, state=owner)
        self.keel("catalog", "rebuild", user="alice", repo=repo, state=owner)
        p = runs_and_names_condemned("check", user="alice", state=owner, expect=6)
        self.assertIn("is damaged", p.stdout + p.stderr)
        self.restore_all_as_of(snapshots, source, user="alice", repo=repo, state=owner)
        # The owner's prune and forget run; nothing a snapshot needs goes.
        self.keel("prune", "--grace", "0s", user="alice", repo=repo, state=owner)
        self.keel("forget", "--keep-last", "2", "--prune", "--grace", "0s", user="alice", repo=repo, state=owner)
        self.keel("check", "--read-data", user="alice", repo=repo, state=owner, expect=6)
        self.restore_all_as_of(snapshots[1:], source, user="alice", repo=repo, state=owner)
        # repair moves the garbage aside (the garbage snapshot record counts as lost: exit 3);
        # then check is clean.
        self.assertIn(condemned.removeprefix("garbage/"),
                      self.keel("repair", user="alice", repo=repo, state=owner, expect=3).stdout)
        self.keel("check", "--read-data", user="alice", repo=repo, state=owner)
        self.restore_all_as_of(snapshots[1:], source, repo=repo, state=host)

    def test_put_only_key_with_append_credentials(self):
        """The host holds a put-only key and append-only credentials: it backs up, and can
        neither destroy nor read what the repository holds."""
        repo, full, put = "s3://vault/putonly", "the owner's full key", "the backup host's put-only key"
        refused_before = self.refused_requests()  # other tests' attacks on the same gateway
        self.keel("init", "--format", "2", user="alice", repo=repo, password=full, state="put-owner")
        self.keel("key", "add", "--put-only", user="alice", repo=repo, password=full, state="put-owner",
                  env={"KEEL_NEW_PASSWORD": put})
        rng = random.Random(1818)
        source = os.path.join(self.tmp, "put-source")
        os.makedirs(os.path.join(source, "payroll"))
        snapshots = []
        for run in range(2):
            with open(os.path.join(source, "payroll", f"salaries-{run}.xlsx"), "wb") as f:
                f.write(rng.randbytes((2 << 20) + run))
            p = self.keel("--json", "backup", "--append-only", source, repo=repo, password=put, state="put-host")
            frozen = os.path.join(self.tmp, f"put-frozen-{run}")
            shutil.copytree(source, frozen)
            snapshots.append((json.loads(p.stdout.splitlines()[-1])["snapshot"], frozen))
        self.assertEqual(self.refused_requests(), refused_before, "an append-only backup tried to delete or overwrite")

        carol, keys = self.store_refuses_carol("putonly/")
        # No file name is on the store in the clear.
        for key in keys:
            self.assertNotIn(b"salaries", carol.get_object(Bucket="vault", Key=key)["Body"].read(), key)

        # keel with the put-only key: forget, prune, reading names or bytes, changing keys: each
        # refused (exit 2), naming the key's kind; the listing shows no paths.
        out = os.path.join(self.tmp, "put-restore")
        for args in (("forget", "--keep-last", "1"), ("forget", "--keep-last", "1", "--prune", "--grace", "0s"),
                     ("forget", snapshots[0][0][:8]), ("prune", "--grace", "0s"), ("ls", "latest"),
                     ("find", "*.xlsx"), ("restore", "latest", "--target", out), ("dump", "latest", "/"),
                     ("tag", "latest", "--add", "x"), ("key", "remove", "0000"), ("unlock", "--yes"),
                     ("check", "--read-data")):
            with self.subTest(command=args):
                p = self.keel(*args, repo=repo, password=put, state="put-host", expect=2)
                self.assertIn("needs a full key", p.stderr)
                self.assertIn("put-only", p.stderr)
                self.assertNotIn("salaries", p.stdout + p.stderr)
        self.assertFalse(os.path.exists(out))
        listed = self.keel("snapshots", repo=repo, password=put, state="put-host").stdout
        self.assertIn("2 snapshots", listed)
        self.assertNotIn("put-source", listed)
        leases = [o["Key"] for o in carol.list_objects_v2(Bucket="vault", Prefix="putonly/locks/").get("Contents", [])]
        self.assertEqual(leases, [])

        # The owner's full key restores every snapshot byte for byte, and everything checks.
        self.keel("check", "--read-data", user="alice", repo=repo, password=full, state="put-owner")
        self.restore_all_as_of(snapshots, source, user="alice", repo=repo, password=full, state="put-owner")


if __name__ == "__main__":
    unittest.main()
