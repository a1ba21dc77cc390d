"""Crash hygiene: what a keel process killed with SIGKILL leaves behind (its lease,
its unfinished uploads, its maintenance lock) is removed by the next command on
the same host, and `keel unlock` removes stale locks and leases on request."""
import os
import shutil
import signal
import subprocess
import time
import unittest

from keelcli import KEEL, ON_S3, KeelTestCase, tree_state


def wait_for(predicate, timeout=60.0, step=0.01):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False


class KilledProcesses(KeelTestCase):
    def start_backup_from_pipe(self):
        """A backup of stdin fed 24 MiB and then held open: it has a lease and uploads in flight."""
        p = subprocess.Popen([KEEL, "backup", "--stdin", "--stdin-name", "big"], env=self.env,
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # Distinct bytes (a repeated block dedupes to less than a pack), so
        # once the backup has taken them all its last pack is still open.
        p.stdin.write(os.urandom(24 << 20))
        p.stdin.flush()
        return p

    def start_settled_backup(self):
        """A backup from a pipe that has taken all its input and sits with its lease and an
        open upload. Chunk and pack boundaries are content-defined, so a run whose last chunk
        sealed its pack has nothing open: that run is killed and another started."""
        def held():
            return bool(self.store.list("running/") and self.uploads())
        for _ in range(10):
            p = self.start_backup_from_pipe()
            if wait_for(held) and (time.sleep(1.0) or wait_for(held, timeout=3.0)):
                return p
            self.kill(p)
        self.fail("no backup ever sat with a lease and an upload in flight")

    def uploads(self):
        tmp = os.path.join(self.repo, "tmp")
        return [n for n in os.listdir(tmp) if n.endswith(".upload")] if os.path.isdir(tmp) else []

    def kill(self, p):
        p.send_signal(signal.SIGKILL)
        p.wait()
        if p.stdin:
            try:
                p.stdin.close()
            except BrokenPipeError:
                pass

    @unittest.skipIf(ON_S3, "tmp/*.upload files are the local target's")
    def test_killed_backup_leaves_nothing_after_the_next_command(self):
        self.init("--pack-size", "4")
        self.kill(self.start_settled_backup())
        self.assertEqual(len(self.store.list("running/")), 1)
        self.assertTrue(self.uploads())
        self.keel("snapshots")
        self.assertEqual(self.store.list("running/"), {})
        self.assertEqual(self.uploads(), [])
        # A live backup's lease and uploads are left alone.
        live = self.start_settled_backup()
        try:
            self.keel("snapshots")
            self.assertEqual(len(self.store.list("running/")), 1)
            self.assertTrue(self.uploads())
        finally:
            self.kill(live)

    def test_killed_prune_leaves_no_lock_behind(self):
        self.init()
        src = self.path("src")
        os.makedirs(src)
        for i in range(40):
            with open(os.path.join(src, f"f{i}"), "wb") as f:
                f.write(os.urandom(64 << 10))
        self.keel("backup", src)
        self.keel("backup", src)
        self.keel("forget", "--keep-last", "1")
        # Killed while it holds the lock (tried until the kill lands inside it).
        for _ in range(20):
            p = subprocess.Popen([KEEL, "prune", "--grace", "0"], env=self.env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            seen = wait_for(lambda: self.store.list("locks/") or p.poll() is not None, step=0.0005)
            held = seen and bool(self.store.list("locks/"))
            self.kill(p)
            if held and self.store.list("locks/"):
                break
        else:
            self.skipTest("prune finished each time before it could be killed holding its lock")
        self.keel("snapshots")
        self.assertEqual(self.store.list("locks/"), {})
        self.keel("prune", "--grace", "0")  # not refused as locked
        self.keel("check", "--read-data")

    @unittest.skipIf(ON_S3, "the repository is copied back between runs as a directory")
    def test_migration_killed_at_each_step_leaves_a_working_repository(self):
        """keel migrate --format 2 killed with SIGKILL once each step's object is there: the
        repository restores every snapshot and checks clean, as format 1 or 2, and a rerun
        completes the migration."""
        self.init("--pack-size", "1")
        sources = {}
        for name in ("a", "b"):
            src = self.path("src", name)
            os.makedirs(src)
            for i in range(8):
                with open(os.path.join(src, f"f{i}"), "wb") as f:
                    f.write(os.urandom(600 << 10))
            sources[self.keel_json("backup", src)["snapshot"]] = (src, tree_state(src))
        packs = len(self.store.list("packs/"))
        state = self.env["XDG_DATA_HOME"]
        shutil.copytree(self.repo, self.path("repo-before"))
        shutil.copytree(state, self.path("state-before"))

        def config_switched():
            return self.store.read("config").startswith(b"KEELCFG2")
        steps = {
            "lock taken": lambda: bool(self.store.list("locks/")),
            "keys-v2 written": lambda: os.path.exists(os.path.join(self.repo, "keys-v2")),
            "first pack indexes written": lambda: len(self.store.list("pack-index/")) >= 2,
            "every pack indexed": lambda: len(self.store.list("pack-index/")) == packs,
            "config switched": config_switched,
        }
        landed = {}
        for step, reached in steps.items():
            with self.subTest(step=step):
                for _ in range(30):
                    shutil.rmtree(self.repo)
                    shutil.rmtree(state)
                    shutil.copytree(self.path("repo-before"), self.repo)
                    shutil.copytree(self.path("state-before"), state)
                    p = subprocess.Popen([KEEL, "migrate", "--format", "2"], env=self.env,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    seen = wait_for(lambda: reached() or p.poll() is not None, step=0.0002)
                    self.kill(p)
                    if seen and p.returncode == -signal.SIGKILL and reached():
                        break
                else:
                    self.skipTest(f"the migration finished each time before it could be killed after: {step}")
                landed[step] = "format 2" if config_switched() else "format 1"
                # Whatever it was, the repository works: every snapshot restores byte for byte.
                for i, (snapshot, (src, expected)) in enumerate(sources.items()):
                    out = self.path(f"out-{len(landed)}-{i}")
                    self.keel("restore", snapshot[:8], "--target", out)
                    self.assertEqual(tree_state(out + src), expected)
                self.keel("check", "--read-data")
                # And a rerun completes it.
                rerun = self.keel_json("migrate", "--format", "2")
                self.assertEqual(rerun["switched"], landed[step] == "format 1")
                self.assertEqual(rerun["packs_indexed"] + rerun["packs_already_indexed"], packs)
                self.assertTrue(config_switched())
                self.assertEqual(len(self.store.list("pack-index/")), packs)
                self.assertEqual(self.store.list("locks/"), {})
                self.keel("check", "--read-data")
        print(f"\nmigrate killed after: {landed}")

    def test_unlock_asks_and_removes_only_stale_leases(self):
        self.init()
        live = self.start_backup_from_pipe()
        try:
            self.assertTrue(wait_for(lambda: self.store.list("running/")))
            # Only stale ones without --all: the live backup's lease stays.
            report = self.keel_json("unlock", "--yes")
            self.assertEqual(report["removed"], [])
            self.assertEqual(len(report["kept"]), 1)
            self.assertEqual(report["kept"][0]["kind"], "backup")
            self.assertEqual(report["kept"][0]["pid"], live.pid)
            self.assertEqual(len(self.store.list("running/")), 1)
            # --all takes what is in use too, but without a terminal only with --yes.
            p = self.keel("unlock", "--all", expect=2, input=b"")
            self.assertIn("give --yes", p.stderr.decode())
            self.assertEqual(len(self.store.list("running/")), 1)
            report = self.keel_json("unlock", "--all", "--yes")
            self.assertEqual([r["pid"] for r in report["removed"]], [live.pid])
            self.assertEqual(self.store.list("running/"), {})
        finally:
            self.kill(live)
        self.assertIn("nothing to remove", self.keel("unlock", "--yes").stdout.decode())


if __name__ == "__main__":
    unittest.main()
