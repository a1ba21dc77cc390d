"""The gateway under slow and flooding clients, on loopback: connections over the
server's and a client's cap are refused, an idle or slowloris request head and a
request body below the minimum rate are cut off, and the memory a flood took is
returned once it is over (docs/gateway.md, "Slow and flooding clients")."""
import os
import socket
import sys
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../s3"))

from gateway_harness import USERS, Gateway  # noqa: E402
from s3client import UNSIGNED_PAYLOAD, S3Client  # noqa: E402

LIMITS = ("max_connections = 30\nmax_connections_per_client = 12\nidle_timeout = 3\n"
          "min_body_rate = 20000\nbody_rate_window = 1\n")


class ConnectionLimits(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gateway = Gateway(server_extra=LIMITS)
        url = urllib.parse.urlsplit(cls.gateway.urls["http"])
        cls.address = (url.hostname, url.port)
        access, secret = USERS["alice"]
        cls.s3 = S3Client(cls.gateway.urls["http"], access, secret)

    @classmethod
    def tearDownClass(cls):
        cls.s3.close()
        cls.gateway.stop()

    def connect(self, source="127.0.0.1"):
        s = socket.create_connection(self.address, timeout=10, source_address=(source, 0))
        self.addCleanup(s.close)
        return s

    @staticmethod
    def answer_now(s, wait=1.0):
        """What the gateway sends before the client says anything (b"" if it closes; None if it waits)."""
        s.settimeout(wait)
        try:
            return s.recv(4096)
        except socket.timeout:
            return None

    def events(self):
        m = self.gateway.metrics()
        return {e: m.get(f'keel_gateway_connection_events_total{{event="{e}"}}', 0)
                for e in ("refused_server_cap", "refused_client_cap", "slow_body_cut")}

    def wait_all_closed(self):
        deadline = time.monotonic() + 15
        while self.gateway.metrics()["keel_gateway_connections_open"] > 0:
            self.assertLess(time.monotonic(), deadline, "connections stayed open")
            time.sleep(0.1)

    def signed_put_head(self, key, length):
        headers = {"content-length": str(length)}
        self.s3.sign("PUT", f"/shared/{key}", {}, headers, UNSIGNED_PAYLOAD)
        lines = [f"PUT /shared/{key} HTTP/1.1"] + [f"{k}: {v}" for k, v in headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    def rss_kib(self):
        with open(f"/proc/{self.gateway.process.pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))

    def test_1_connections_over_a_clients_cap_are_refused(self):
        self.wait_all_closed()
        before = self.events()
        sockets = [self.connect() for _ in range(15)]
        answers = [self.answer_now(s, 0.1) for s in sockets]
        refused = [a for a in answers if a and a.startswith(b"HTTP/1.1 503 ")]
        self.assertEqual(len(refused), 3, answers)
        # Another client address is not held back by this one's cap.
        self.assertIsNone(self.answer_now(self.connect("127.0.0.2")))
        self.assertEqual(self.events()["refused_client_cap"] - before["refused_client_cap"], 3)

    def test_2_connections_over_the_servers_cap_are_refused(self):
        self.wait_all_closed()
        before = self.events()
        sockets = [self.connect(f"127.0.0.{2 + i // 10}") for i in range(34)]  # 10, 10, 10, 4 per address
        answers = [self.answer_now(s, 0.05) for s in sockets]
        refused = [a for a in answers if a and a.startswith(b"HTTP/1.1 503 ")]
        self.assertEqual(len(refused), 4, answers)
        self.assertEqual(self.events()["refused_server_cap"] - before["refused_server_cap"], 4)

    def test_3_a_trickling_request_head_is_cut_at_the_idle_timeout(self):
        s = self.connect("127.0.0.9")
        started = time.monotonic()
        s.sendall(b"GET /shared HTTP/1.1\r\nHost: x\r\n")
        closed = False
        while time.monotonic() - started < 10:
            try:
                s.sendall(b"X-Slow: a\r\n")
            except OSError:
                closed = True
                break
            if self.answer_now(s, 0.5) is not None:  # b"" at the close
                closed = True
                break
        self.assertTrue(closed, "a head trickling in for 10 s was not cut off")
        self.assertLess(time.monotonic() - started, 6)

    def test_4_a_slow_body_is_cut_and_a_fast_one_stored(self):
        before = self.events()
        s = self.connect("127.0.0.10")
        s.sendall(self.signed_put_head("slow", 10 << 20))
        started, cut = time.monotonic(), False
        while time.monotonic() - started < 10:
            try:
                s.sendall(b"x" * 100)  # 500 bytes/s, the minimum being 20000
                answered = self.answer_now(s, 0.2) is not None
            except OSError:  # the cut, as a reset seen by either call
                answered = True
            if answered:
                cut = True
                break
        self.assertTrue(cut, "a body at 500 bytes/s was not cut off")
        self.assertLess(time.monotonic() - started, 5)
        self.assertEqual(self.events()["slow_body_cut"] - before["slow_body_cut"], 1)
        self.assertEqual(self.s3.request("HEAD", "/shared/slow").status, 404)
        body = os.urandom(3 << 20)
        self.assertEqual(self.s3.request("PUT", "/shared/fast", body=body).status, 200)
        self.assertEqual(self.s3.request("GET", "/shared/fast").body, body)

    def test_5_memory_returns_after_a_flood_of_stalled_bodies(self):
        self.wait_all_closed()
        baseline = self.rss_kib()
        chunk = os.urandom(900 << 10)
        for round in range(6):
            sockets = [self.connect(f"127.0.1.{i % 3 + 1}") for i in range(30)]
            for i, s in enumerate(sockets):
                s.sendall(self.signed_put_head(f"flood-{round}-{i}", 8 << 20))
                s.sendall(chunk)  # then nothing: each is cut after the next window
            self.wait_all_closed()
        time.sleep(0.5)
        grown = self.rss_kib() - baseline
        self.assertLess(grown, 16 << 10, f"RSS grew by {grown} KiB over the flood and stayed")


if __name__ == "__main__":
    unittest.main()
