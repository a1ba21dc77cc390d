#!/usr/bin/env python3
"""Self-test of fault_proxy.py: a tiny HTTP/1.1 server on 127.0.0.1, the proxy in front of it as
a subprocess, and plain http.client requests that must observe each fault (or none).

  python3 tests/s3/fault_proxy_selftest.py        # unittest; about 10 s
"""

import hashlib
import http.client
import http.server
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fault_proxy  # noqa: E402

PROXY = fault_proxy.__file__
MIB = 1 << 20


def pattern(n):
    return bytes(i % 251 for i in range(n))


class Backend(http.server.BaseHTTPRequestHandler):
    """GET /bytes/N: N pattern bytes; GET /chunked/N: the same, chunked; PUT: digest of the body."""

    protocol_version = "HTTP/1.1"
    seen = []  # (method, path) of every request that reached the server

    def log_message(self, *args):
        pass

    def do_GET(self):
        Backend.seen.append(("GET", self.path))
        kind, _, size = self.path.strip("/").partition("/")
        data = pattern(int(size))
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if kind == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            third = len(data) // 3 + 1
            for i in range(0, len(data), third):
                piece = data[i:i + third]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    def do_HEAD(self):
        Backend.seen.append(("HEAD", self.path))
        self.send_response(200)
        self.send_header("Content-Length", self.path.rpartition("/")[2])
        self.end_headers()

    def do_PUT(self):
        Backend.seen.append(("PUT", self.path))
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        reply = json.dumps({"length": len(body), "sha256": hashlib.sha256(body).hexdigest()})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply.encode())


class BackendServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # the proxy cuts connections on purpose


class Proxy(fault_proxy.ProxyProcess):
    """The proxy in front of the backend; connections made through it close on stop()."""

    def __init__(self, upstream_port, *rules, seed=1, max_seconds=60):
        super().__init__(upstream_port, rules, seed=seed, max_seconds=max_seconds)
        self.connections = []

    def connection(self, timeout=10):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        self.connections.append(conn)
        return conn

    def stop(self):
        for conn in self.connections:
            conn.close()
        return super().stop()


def get(conn, path):
    conn.request("GET", path)
    response = conn.getresponse()
    return response.status, response.read()


class FaultProxyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = BackendServer(("127.0.0.1", 0), Backend)
        threading.Thread(target=cls.server.serve_forever, daemon=True).start()
        cls.upstream = cls.server.server_address[1]

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()
        cls.server.server_close()

    def setUp(self):
        Backend.seen.clear()
        self.proxy = None

    def tearDown(self):
        if self.proxy and self.proxy.process.poll() is None:
            self.proxy.stop()

    def start(self, *rules, **kwargs):
        self.proxy = Proxy(self.upstream, *rules, **kwargs)
        return self.proxy

    def test_without_rules_traffic_passes_unchanged(self):
        proxy = self.start()
        conn = proxy.connection()
        for path, size in (("/bytes/0", 0), ("/bytes/1", 1), ("/bytes/3000000", 3000000),
                           ("/chunked/100000", 100000)):
            status, body = get(conn, path)  # all on one kept-alive connection
            self.assertEqual((status, body), (200, pattern(size)), path)
        payload = os.urandom(2 * MIB + 3)
        conn.request("PUT", "/bucket/key", body=payload)
        response = conn.getresponse()
        self.assertEqual(response.status, 200)
        self.assertEqual(json.loads(response.read()),
                         {"length": len(payload), "sha256": hashlib.sha256(payload).hexdigest()})
        conn.request("HEAD", "/bytes/10")
        response = conn.getresponse()
        self.assertEqual((response.status, response.read()), (200, b""))
        conn.close()
        stats = proxy.stop()
        self.assertEqual(stats["requests"], 6)
        self.assertEqual(stats["forwarded"], 6)
        self.assertEqual(stats["connections"], 1)
        self.assertEqual(sum(stats["injected"].values()), 0)

    def test_expect_100_continue_passes(self):
        proxy = self.start()
        payload = pattern(50000)
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:
            s.sendall(b"PUT /bucket/key HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(payload))
            interim = s.recv(4096)
            self.assertTrue(interim.startswith(b"HTTP/1.1 100"), interim)
            s.sendall(payload)
            reply = http.client.HTTPResponse(s)
            reply.begin()
            self.assertEqual(reply.status, 200)
            self.assertEqual(json.loads(reply.read())["sha256"], hashlib.sha256(payload).hexdigest())

    def test_503_answers_with_s3_error_without_forwarding(self):
        proxy = self.start("503:every=2")
        conn = proxy.connection()
        statuses = []
        for i in range(4):
            status, body = get(conn, f"/bytes/{i + 10}")
            statuses.append(status)
            if status == 503:
                self.assertIn(b"<Error><Code>SlowDown</Code>", body)
                self.assertIn(f"<Resource>/bytes/{i + 10}</Resource>".encode(), body)
        self.assertEqual(statuses, [200, 503, 200, 503])
        self.assertEqual(Backend.seen, [("GET", "/bytes/10"), ("GET", "/bytes/12")])
        # a 503 to a PUT consumes its body, so the kept-alive connection stays usable
        conn.request("PUT", "/bucket/key", body=pattern(100000))
        response = conn.getresponse()
        self.assertEqual(response.status, 200)
        response.read()
        conn.request("PUT", "/bucket/key", body=pattern(100000))
        response = conn.getresponse()
        self.assertEqual(response.status, 503)
        response.read()
        stats = proxy.stop()
        self.assertEqual(stats["injected"]["503"], 3)
        self.assertEqual(stats["rules"], [{"rule": "503:every=2", "matched": 6, "fired": 3}])
        self.assertIn("503=3", proxy.stderr)

    def test_503_code_method_filter_and_limit(self):
        proxy = self.start("503:every=1,method=PUT,limit=2,code=ServiceUnavailable")
        statuses = []
        conn = proxy.connection()
        for _ in range(3):
            conn.request("PUT", "/bucket/key", body=b"abc")
            response = conn.getresponse()
            body = response.read()
            statuses.append(response.status)
            if response.status == 503:
                self.assertIn(b"<Code>ServiceUnavailable</Code>", body)
            self.assertEqual(get(conn, "/bytes/5"), (200, pattern(5)))
        conn.close()
        self.assertEqual(statuses, [503, 503, 200])
        stats = proxy.stop()
        self.assertEqual(stats["rules"][0]["matched"], 3)
        self.assertEqual(stats["rules"][0]["fired"], 2)

    def test_reset_request_cuts_the_upload(self):
        proxy = self.start("reset-request:every=1")
        conn = proxy.connection()
        with self.assertRaises((ConnectionResetError, BrokenPipeError)):
            conn.request("PUT", "/bucket/key", body=pattern(4 * MIB))
            conn.getresponse().read()
        self.assertEqual(Backend.seen, [])
        self.assertEqual(proxy.stop()["injected"]["reset-request"], 1)

    def test_reset_response_cuts_the_download(self):
        proxy = self.start("reset-response:every=1")
        conn = proxy.connection()
        conn.request("GET", "/bytes/2000000")
        response = conn.getresponse()  # the head arrives whole
        self.assertEqual(response.status, 200)
        with self.assertRaises(ConnectionResetError):  # RST, not a clean end (see truncate)
            response.read()
        self.assertEqual(Backend.seen, [("GET", "/bytes/2000000")])
        self.assertEqual(proxy.stop()["injected"]["reset-response"], 1)

    def test_reset_response_without_body_cuts_the_head(self):
        proxy = self.start("reset-response:every=1")
        conn = proxy.connection()
        conn.request("GET", "/bytes/0")
        with self.assertRaises(ConnectionResetError):
            conn.getresponse()
        proxy.stop()

    def test_truncate_sends_less_than_content_length(self):
        proxy = self.start("truncate:every=1")
        conn = proxy.connection()
        conn.request("GET", "/bytes/1000000")
        response = conn.getresponse()
        self.assertEqual(response.getheader("Content-Length"), "1000000")
        with self.assertRaises(http.client.IncompleteRead) as caught:
            response.read()
        self.assertEqual(len(caught.exception.partial), 500000)
        self.assertEqual(caught.exception.partial, pattern(500000))
        # a chunked response ends without its last chunk
        conn = proxy.connection()
        conn.request("GET", "/chunked/300000")
        with self.assertRaises(http.client.IncompleteRead):
            conn.getresponse().read()
        self.assertEqual(proxy.stop()["injected"]["truncate"], 2)

    def test_stall_adds_latency_and_keeps_the_body(self):
        proxy = self.start("stall:every=2,seconds=1.5")
        conn = proxy.connection()
        timings = []
        for _ in range(2):
            began = time.monotonic()
            self.assertEqual(get(conn, "/bytes/100000"), (200, pattern(100000)))
            timings.append(time.monotonic() - began)
        self.assertLess(timings[0], 1.0)
        self.assertGreaterEqual(timings[1], 1.5)
        self.assertLess(timings[1], 5.0)
        self.assertEqual(proxy.stop()["injected"]["stall"], 1)

    def test_corrupt_inverts_one_byte_of_the_request_body(self):
        proxy = self.start("corrupt:every=2,method=PUT")
        conn = proxy.connection()
        payload = os.urandom(300000)
        replies = []
        for _ in range(2):
            conn.request("PUT", "/bucket/key", body=payload)
            response = conn.getresponse()
            self.assertEqual(response.status, 200)
            replies.append(json.loads(response.read()))
        conn.close()
        corrupted = bytearray(payload)
        corrupted[len(payload) // 2] ^= 0xFF
        self.assertEqual(replies[0]["sha256"], hashlib.sha256(payload).hexdigest())
        self.assertEqual(replies[1], {"length": len(payload),
                                      "sha256": hashlib.sha256(corrupted).hexdigest()})
        self.assertEqual(proxy.stop()["injected"]["corrupt"], 1)

    def fault_pattern(self, seed):
        proxy = self.start("503:p=0.5", seed=seed)
        conn = proxy.connection()
        statuses = [get(conn, "/bytes/1")[0] for _ in range(24)]
        proxy.stop()
        return statuses

    def test_probability_rules_replay_with_the_same_seed(self):
        first, again, other = self.fault_pattern(7), self.fault_pattern(7), self.fault_pattern(8)
        self.assertEqual(first, again)
        self.assertNotEqual(first, other)
        self.assertIn(503, first)
        self.assertIn(200, first)

    def run_proxy(self, *args, timeout=10):
        return subprocess.run([sys.executable, PROXY, *args], capture_output=True, text=True,
                              timeout=timeout)

    def test_refuses_non_loopback_addresses(self):
        result = self.run_proxy("--upstream", "192.0.2.1:80")  # TEST-NET-1: never contacted
        self.assertEqual(result.returncode, 2)
        self.assertIn("not a loopback address", result.stderr)
        result = self.run_proxy("--listen", "0.0.0.0:0", "--upstream", "127.0.0.1:80")
        self.assertEqual(result.returncode, 2)
        self.assertIn("not a loopback address", result.stderr)

    def test_rejects_malformed_rules(self):
        for rule in ("explode:p=1", "503", "503:p=2", "stall:every=1,seconds=1000", "503:every"):
            result = self.run_proxy("--upstream", "127.0.0.1:80", "--rule", rule)
            self.assertEqual(result.returncode, 2, rule)
            self.assertIn(rule, result.stderr)

    def test_stops_by_itself_after_max_seconds(self):
        with tempfile.TemporaryDirectory() as tmp:
            stats_file = os.path.join(tmp, "stats.json")
            began = time.monotonic()
            result = self.run_proxy("--upstream", f"127.0.0.1:{self.upstream}",
                                    "--max-seconds", "0.5", "--stats-file", stats_file)
            self.assertLess(time.monotonic() - began, 5)
            self.assertEqual(result.returncode, 0)
            self.assertIn("--max-seconds", result.stderr)
            with open(stats_file) as f:
                self.assertEqual(json.load(f)["requests"], 0)

    def test_upstream_down_gives_502(self):
        with socket.socket() as s:  # a port nothing listens on
            s.bind(("127.0.0.1", 0))
            dead_port = s.getsockname()[1]
        self.proxy = Proxy(dead_port)
        status, body = get(self.proxy.connection(), "/x")
        self.assertEqual(status, 502)
        self.assertIn(b"upstream unreachable", body)
        self.assertEqual(self.proxy.stop()["upstream_errors"], 1)


if __name__ == "__main__":
    unittest.main()
