"""S3 only: retries through a fault-injecting proxy, TLS verification, orphaned uploads."""
import os
import random
import time
import unittest

from keelcli import ON_S3, KeelTestCase, tree_state

if ON_S3:
    from fault_proxy import ProxyProcess


def make_data(root, files=6, size=3 << 20, seed=4):
    rnd = random.Random(seed)
    os.makedirs(root)
    for i in range(files):
        with open(os.path.join(root, f"f{i}.bin"), "wb") as f:
            f.write(rnd.randbytes(size))
        with open(os.path.join(root, f"t{i}.txt"), "w") as f:
            f.write(f"text file {i}\n" * 2000)


@unittest.skipUnless(ON_S3, "needs an S3 server (run under tests/s3/with-rgw.sh with KEEL_TEST_TARGET=s3)")
class Faults(KeelTestCase):
    def test_backup_and_restore_survive_injected_faults(self):
        src = self.path("src")
        make_data(src)
        # Small packs and chunks: many multipart uploads and ranged reads to disturb.
        self.init("--pack-size", "6", "--chunk-min", "256", "--chunk-avg", "512", "--chunk-max", "2048")
        upstream = int(os.environ["S3_ENDPOINT"].rsplit(":", 1)[1])
        rules = ["503:every=7", "reset-response:every=11", "reset-request:every=3,method=PUT",
                 "truncate:every=5,method=GET", "stall:every=13,seconds=1"]
        with ProxyProcess(upstream, rules, seed=3) as proxy:
            via_proxy = {"KEEL_S3_ENDPOINT": proxy.endpoint}
            self.keel("backup", src, env=via_proxy)
            out = self.path("out")
            self.keel("restore", "latest", "--target", out, env=via_proxy)
            stats = proxy.stop()
        faults = stats["injected"]
        for mode in ("503", "reset-response", "reset-request", "truncate", "stall"):
            self.assertGreater(faults.get(mode, 0), 0, f"no {mode} fault was injected: {stats}")
        self.assertEqual(tree_state(src), tree_state(out + src))
        self.keel("check", "--read-data")  # directly, no proxy

    def test_a_server_that_stops_answering_is_timed_out_and_retried(self):
        src = self.path("src")
        make_data(src, files=2)
        self.init("--pack-size", "6")
        upstream = int(os.environ["S3_ENDPOINT"].rsplit(":", 1)[1])
        # Responses held for a minute: far past --s3-timeout, so each of those
        # requests must give up on its connection and go again.
        with ProxyProcess(upstream, ["stall:every=3,seconds=60,limit=4"], seed=1) as proxy:
            env = {"KEEL_S3_ENDPOINT": proxy.endpoint, "KEEL_S3_TIMEOUT": "1s"}
            started = time.monotonic()
            self.keel("backup", src, env=env)
            out = self.path("out")
            self.keel("restore", "latest", "--target", out, env=env)
            elapsed = time.monotonic() - started
            stats = proxy.stop()
        self.assertEqual(stats["injected"].get("stall", 0), 4, stats)
        self.assertLess(elapsed, 45, "a stalled request waited for the server instead of timing out")
        self.assertEqual(tree_state(src), tree_state(out + src))
        self.keel("check", "--read-data")

    def test_a_body_corrupted_on_the_way_is_refused_not_stored(self):
        src = self.path("src")
        make_data(src, files=2)
        self.init("--pack-size", "6")
        upstream = int(os.environ["S3_ENDPOINT"].rsplit(":", 1)[1])
        # One byte of the first pack part inverted between keel and the server:
        # the body no longer matches the SHA-256 keel signed, so the server
        # must refuse it (and keel say so) rather than store it.
        with ProxyProcess(upstream, ["corrupt:every=1,method=PUT,target=packs/,limit=1"], seed=1) as proxy:
            failed = self.keel("backup", src, expect=None, env={"KEEL_S3_ENDPOINT": proxy.endpoint})
            stats = proxy.stop()
        self.assertEqual(stats["injected"].get("corrupt", 0), 1, stats)
        self.assertNotEqual(failed.returncode, 0, "a corrupted upload was accepted")
        self.assertIn("XAmzContentSHA256Mismatch", failed.stderr.decode())
        self.keel("check", "--read-data")
        self.keel("backup", src)
        out = self.path("out")
        self.keel("restore", "latest", "--target", out)
        self.assertEqual(tree_state(src), tree_state(out + src))

    def test_unreachable_target_is_a_clear_io_error(self):
        self.init()
        p = self.keel("snapshots", expect=7, env={"KEEL_S3_ENDPOINT": "http://127.0.0.1:9"})
        self.assertIn("127.0.0.1:9", p.stderr.decode())


@unittest.skipUnless(ON_S3 and os.environ.get("S3_TLS_ENDPOINT"), "needs an S3 server with TLS")
class Tls(KeelTestCase):
    def test_tls_verifies_certificates(self):
        tls = {"KEEL_S3_ENDPOINT": os.environ["S3_TLS_ENDPOINT"]}
        ca = ["--ca-file", os.environ["S3_CA_FILE"]]
        p = self.keel("init", env=tls, expect=7)  # self-signed: refused without its CA
        self.assertIn("certificate", p.stderr.decode())
        self.keel("init", *ca, env=tls)
        src = self.path("src")
        make_data(src, files=2)
        self.keel("backup", src, *ca, env=tls)
        out = self.path("out")
        self.keel("restore", "latest", "--target", out, "--insecure-tls", env=tls)
        self.assertEqual(tree_state(src), tree_state(out + src))


if __name__ == "__main__":
    unittest.main()
