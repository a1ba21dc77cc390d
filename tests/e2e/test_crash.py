"""Crash hygiene: what a keel process killed with SIGKILL leaves behind (its lease,
its unfinished uploads, its maintenance lock) is removed by the next command on
the same host, and `keel unlock` removes stale locks and leases on request."""
import os
import signal
import subprocess
import time
import unittest

from keelcli import KEEL, ON_S3, KeelTestCase


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
