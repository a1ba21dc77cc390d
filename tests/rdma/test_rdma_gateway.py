"""keel backup and restore through `keel gateway` with the RDMA data plane,
on the Soft-RoCE device of tests/rdma/run-in-vm.sh (RXE_IP), or any RDMA
device at KEEL_RDMA_TEST_IP. Exits 77 (skipped) when there is none.

- payloads go by RDMA both ways (client stats and gateway metrics say so),
  into a raw bucket and into a dedupe bucket;
- a gateway without rdma_listen declines and the client falls back to HTTP;
- the gateway killed mid-backup: the client carries on over a new session or
  HTTP, nothing is lost, and the next run is clean."""
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../gateway"))
from gateway_harness import KEEL, Gateway, same_tree  # noqa: E402

IP = os.environ.get("KEEL_RDMA_TEST_IP") or os.environ.get("RXE_IP")
RDMA_PORT = 7471


def make_tree(root, seed, sizes):
    """Random (incompressible) files, so every byte reaches the target."""
    os.makedirs(root)
    rng = __import__("random").Random(seed)
    for i, size in enumerate(sizes):
        with open(os.path.join(root, f"file{i}"), "wb") as f:
            f.write(rng.randbytes(size))
    os.makedirs(os.path.join(root, "small"))
    for i in range(20):
        with open(os.path.join(root, "small", f"s{i}"), "w") as f:
            f.write(f"small file {i} {seed}\n" * (i + 1))


class RdmaGateway(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # Buckets the clients create are dedupe buckets; "shared" is raw.
        cls.gateway = Gateway(dedupe=True, rdma_listen=f"{IP}:{RDMA_PORT}")
        cls.tmp = tempfile.mkdtemp(prefix="keel-rdma-e2e-")

    @classmethod
    def tearDownClass(cls):
        cls.gateway.stop()
        subprocess.run(["rm", "-rf", cls.tmp])

    def keel(self, repo, *args, bucket="shared", endpoint=None, rdma=f"{IP}:{RDMA_PORT}", expect=0):
        env = self.gateway.env()
        env.update(KEEL_PASSWORD="rdma e2e", XDG_DATA_HOME=os.path.join(self.tmp, "state"),
                   KEEL_CATALOG=os.path.join(self.tmp, repo.replace("/", "_") + ".db"))
        command = [KEEL, "--repo", f"s3://{bucket}/{repo}", "--endpoint", endpoint or self.gateway.urls["http"],
                   "--rdma", rdma, *args]
        p = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, expect, f"{' '.join(command)}\nstdout: {p.stdout}\nstderr: {p.stderr}")
        return p

    def keel_json(self, repo, *args, **kw):
        return json.loads(self.keel(repo, "--json", *args, **kw).stdout.splitlines()[-1])  # after the status lines

    def round_trip(self, repo, tree, **kw):
        """init, backup, restore; the backup's and the restore's transfer stats."""
        self.keel(repo, "init", **kw)
        backup = self.keel_json(repo, "backup", tree, **kw)
        out = os.path.join(self.tmp, repo + "-restored")
        restore = self.keel_json(repo, "restore", backup["snapshot"], "--target", out, **kw)
        self.assertTrue(same_tree(tree, os.path.join(out, tree.lstrip("/"))) or same_tree(tree, out))
        return backup["transfer"], restore["transfer"]

    def test_backup_and_restore_move_payloads_by_rdma(self):
        tree = os.path.join(self.tmp, "tree-rdma")
        make_tree(tree, 1, [5 << 20, 2 << 20, 200 << 10])
        before = self.gateway.metrics()
        sent, received = self.round_trip("rdma", tree)
        self.assertEqual(sent["rdma_fallbacks"], 0)
        self.assertEqual(sent["http_put_requests"], 0)
        self.assertGreaterEqual(sent["rdma_put_bytes"], 7 << 20)
        self.assertLess(sent["http_bytes_sent"], 1 << 20)  # XML only
        self.assertEqual(received["rdma_fallbacks"], 0)
        self.assertGreaterEqual(received["rdma_get_bytes"], 7 << 20)
        self.assertLess(received["http_bytes_received"], 1 << 20)
        after = self.gateway.metrics()

        def grew(name):
            return after.get(name, 0) - before.get(name, 0)
        self.assertGreaterEqual(grew('keel_gateway_rdma_bytes_total{operation="UploadPart"}')
                                + grew('keel_gateway_rdma_bytes_total{operation="PutObject"}'), 7 << 20)
        self.assertGreaterEqual(grew('keel_gateway_rdma_bytes_total{operation="GetObject"}'), 7 << 20)

    def test_dedupe_bucket_moves_payloads_by_rdma(self):
        tree = os.path.join(self.tmp, "tree-dedupe")
        make_tree(tree, 4, [4 << 20, 1 << 20])
        before = self.gateway.metrics()
        sent, received = self.round_trip("dedupe", tree, bucket="deduped")
        self.assertEqual(sent["rdma_fallbacks"], 0)
        self.assertEqual(sent["http_put_requests"], 0)
        self.assertGreaterEqual(sent["rdma_put_bytes"], 5 << 20)
        self.assertEqual(received["rdma_fallbacks"], 0)
        self.assertGreaterEqual(received["rdma_get_bytes"], 5 << 20)
        after = self.gateway.metrics()
        # The bytes went through the gateway's chunker into its repository, not to raw files.
        stored = sum(v - before.get(k, 0) for k, v in after.items()
                     if k.startswith("keel_gateway_dedupe_logical_bytes_total"))
        self.assertGreaterEqual(stored, 5 << 20)

    def test_gateway_without_rdma_declines_and_the_client_falls_back(self):
        plain = Gateway()
        try:
            tree = os.path.join(self.tmp, "tree-declined")
            make_tree(tree, 2, [3 << 20])
            # A live session with the RDMA gateway, requests to the plain one: declined (501).
            sent, received = self.round_trip("declined", tree, endpoint=plain.urls["http"])
            self.assertGreater(sent["rdma_fallbacks"], 0)
            self.assertEqual(sent["rdma_put_requests"], 0)
            self.assertGreaterEqual(sent["http_put_bytes"], 3 << 20)
            self.assertGreater(received["rdma_fallbacks"], 0)
            self.assertEqual(received["rdma_get_requests"], 0)
            declined = [k for k, v in plain.metrics().items() if 'status="501"' in k and v > 0]
            self.assertTrue(declined, "the plain gateway declined nothing")
            # Nobody listening for RDMA at all: HTTP from the start (the snapshot and index objects).
            with open(os.path.join(tree, "new"), "wb") as f:
                f.write(os.urandom(1 << 20))
            sent = self.keel_json("declined", "backup", tree, endpoint=plain.urls["http"],
                                  rdma=f"{IP}:{RDMA_PORT + 1}")["transfer"]
            self.assertGreater(sent["rdma_fallbacks"], 0)
            self.assertEqual(sent["rdma_put_requests"], 0)
            self.assertGreaterEqual(sent["http_put_bytes"], 1 << 20)
        finally:
            plain.stop()

    def test_gateway_killed_mid_backup_loses_nothing(self):
        tree = os.path.join(self.tmp, "tree-killed")
        make_tree(tree, 3, [16 << 20])
        self.keel("killed", "init")
        env = self.gateway.env()
        env.update(KEEL_PASSWORD="rdma e2e", XDG_DATA_HOME=os.path.join(self.tmp, "state"),
                   KEEL_CATALOG=os.path.join(self.tmp, "killed.db"))
        backup = subprocess.Popen([KEEL, "--repo", "s3://shared/killed", "--endpoint", self.gateway.urls["http"],
                                   "--rdma", f"{IP}:{RDMA_PORT}", "--json", "backup", tree], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        start = self.gateway.metrics().get('keel_gateway_rdma_requests_total{operation="UploadPart"}', 0)
        deadline = time.monotonic() + 60
        while self.gateway.metrics().get('keel_gateway_rdma_requests_total{operation="UploadPart"}', 0) <= start:
            self.assertLess(time.monotonic(), deadline, "no part went over RDMA within 60 s")
            self.assertIsNone(backup.poll(), "the backup ended before any part went over RDMA")
            time.sleep(0.02)
        self.gateway.crash_and_restart()
        out, err = backup.communicate(timeout=300)
        self.assertEqual(backup.returncode, 0, f"the backup did not survive the crash: {err}")
        sent = json.loads(out.splitlines()[-1])["transfer"]
        # The old session is gone: a new one, or HTTP for what the old one could not carry.
        self.assertGreater(sent["rdma_reconnects"] + sent["rdma_fallbacks"], 0, sent)
        self.keel("killed", "check")
        # The next run is clean: all by RDMA again, and everything restores.
        again = self.keel_json("killed", "backup", tree)["transfer"]
        self.assertEqual(again["rdma_fallbacks"], 0)
        out_dir = os.path.join(self.tmp, "killed-restored")
        restored = self.keel_json("killed", "restore", json.loads(out.splitlines()[-1])["snapshot"], "--target", out_dir)
        self.assertEqual(restored["transfer"]["rdma_fallbacks"], 0)
        self.assertTrue(same_tree(tree, os.path.join(out_dir, tree.lstrip("/"))) or same_tree(tree, out_dir))


if __name__ == "__main__":
    if not IP:
        print("no RDMA device: set KEEL_RDMA_TEST_IP, or run it in tests/rdma/run-in-vm.sh (skipped)")
        sys.exit(77)
    unittest.main(verbosity=2)
