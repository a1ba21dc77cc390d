#!/usr/bin/env python3
r"""Fault-injecting HTTP/1.1 proxy for testing S3 client retries (Python 3 standard library only).

Listens on a loopback address, forwards each request to a loopback upstream, and injects faults
into chosen request/response exchanges according to a rule list:

  fault_proxy.py --listen 127.0.0.1:0 --upstream 127.0.0.1:18480 \
      --rule 503:every=7 --rule reset-response:p=0.05 --seed 1 --port-file PATH

A rule is MODE[:KEY=VALUE,...]. Modes:
  503             answer with 503 and an S3 XML error (SlowDown) without forwarding
  reset-request   read half of the request body, then reset the client connection (RST)
  reset-response  forward, send the response head and half its body, then reset (RST)
  stall           forward, then hold the response for `seconds` before relaying it
  truncate        forward, send fewer body bytes than Content-Length, then close (FIN)
  corrupt         forward the request with one byte in the middle of its body inverted (a
                  request with a Content-Length body; others are forwarded unchanged)
Keys: p=PROBABILITY (seeded PRNG) and/or every=N (the Nth, 2Nth, ... matching request);
method=PUT|POST and target=SUBSTRING (of the request target, query included) restrict which
requests a rule sees; limit=N caps how often it fires; seconds=S (stall, default 2, at most 120);
code=SlowDown|ServiceUnavailable (503). Every rule counts and draws for every request it matches,
so a schedule replays identically for the same request sequence and seed; the first rule (in
command-line order) that fires decides the fault.

Stats (requests, forwarded, faults per mode and per rule) go to stderr on exit (SIGTERM, SIGINT,
or --max-seconds) and as JSON to --stats-file, which is also rewritten after every fault.
Plain HTTP only: TLS traffic cannot be parsed. Only loopback addresses are accepted.
Python tests can run it with ProxyProcess (see below) after putting tests/s3 on sys.path.
"""

import argparse
import asyncio
import ipaddress
import json
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from xml.sax.saxutils import escape

MODES = ("503", "reset-request", "reset-response", "stall", "truncate", "corrupt")
# S3 error code -> (reason phrase, message) of the 503 answer
ERROR_CODES = {"SlowDown": ("Slow Down", "Please reduce your request rate."),
               "ServiceUnavailable": ("Service Unavailable", "Service is unable to handle request.")}
MAX_HEAD_BYTES = 64 * 1024
MAX_STALL_SECONDS = 120.0
COPY_BLOCK = 64 * 1024
# an upstream that answers before reading the whole request body gets this long to finish it
EARLY_RESPONSE_GRACE_SECONDS = 10.0


class Rule:
    def __init__(self, spec):
        self.spec = spec
        mode, _, params = spec.partition(":")
        if mode not in MODES:
            raise ValueError(f"rule {spec!r}: unknown mode {mode!r} (one of {', '.join(MODES)})")
        self.mode = mode
        self.p = 0.0
        self.every = 0
        self.methods = None
        self.target = None
        self.limit = None
        self.seconds = 2.0
        self.code = "SlowDown"
        for item in filter(None, params.split(",")):
            key, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"rule {spec!r}: {item!r} is not KEY=VALUE")
            try:
                self._set(key, value)
            except ValueError as e:
                raise ValueError(f"rule {spec!r}: {key}: {e}") from None
        if not self.p and not self.every:
            raise ValueError(f"rule {spec!r}: needs p=PROBABILITY or every=N")
        self.matched = 0
        self.fired = 0

    def _set(self, key, value):
        if key == "p":
            self.p = float(value)
            if not 0.0 <= self.p <= 1.0:
                raise ValueError("must be within [0, 1]")
        elif key == "every":
            self.every = int(value)
            if self.every < 1:
                raise ValueError("must be >= 1")
        elif key == "method":
            self.methods = {m.upper() for m in value.split("|")}
        elif key == "target":
            self.target = value
        elif key == "limit":
            self.limit = int(value)
        elif key == "seconds":
            self.seconds = float(value)
            if not 0.0 <= self.seconds <= MAX_STALL_SECONDS:
                raise ValueError(f"must be within [0, {MAX_STALL_SECONDS:g}]")
        elif key == "code":
            if value not in ERROR_CODES:
                raise ValueError(f"one of {', '.join(ERROR_CODES)}")
            self.code = value
        else:
            raise ValueError("unknown key")

    def matches(self, head):
        return ((self.methods is None or head.method in self.methods)
                and (self.target is None or self.target in head.target))


class Schedule:
    def __init__(self, rules, seed):
        self.rules = rules
        self.rng = random.Random(seed)

    def decide(self, head):
        chosen = None
        for rule in self.rules:
            if not rule.matches(head):
                continue
            rule.matched += 1
            hit = bool(rule.every) and rule.matched % rule.every == 0
            if rule.p and self.rng.random() < rule.p:
                hit = True
            if hit and chosen is None and (rule.limit is None or rule.fired < rule.limit):
                chosen = rule
        if chosen:
            chosen.fired += 1
        return chosen


class Head:
    """One HTTP/1.1 message head: start line and header fields, plus the raw bytes to relay."""

    def __init__(self, raw):
        self.raw = raw
        lines = raw.decode("latin-1").split("\r\n")
        self.start = lines[0].split(" ", 2)
        if len(self.start) < 2:
            raise ValueError(f"malformed start line {lines[0]!r}")
        self.fields = []
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                self.fields.append((name.strip().lower(), value.strip()))

    method = property(lambda self: self.start[0].upper())
    target = property(lambda self: self.start[1])
    status = property(lambda self: int(self.start[1]))
    # "HTTP/1.1" from either a request line or a status line
    protocol = property(lambda self: self.start[0] if self.start[0].startswith("HTTP/")
                        else self.start[-1])

    def get(self, name):
        values = [v for n, v in self.fields if n == name]
        return ", ".join(values) if values else None

    def has_token(self, name, token):
        value = self.get(name) or ""
        return token in (t.strip().lower() for t in value.split(","))

    def content_length(self):
        value = self.get("content-length")
        return int(value.split(",")[0]) if value is not None else None


async def read_head(reader):
    """Returns the next message head, or None on a clean end of stream between messages."""
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        if e.partial.strip():
            raise
        return None
    return Head(raw)


# A body is ("length", N), ("chunked",) or ("eof",): how the end of the message is found.
def request_body(head):
    if head.has_token("transfer-encoding", "chunked"):
        return ("chunked",)
    return ("length", head.content_length() or 0)


def response_body(request, head):
    if request.method == "HEAD" or head.status in (204, 304) or 100 <= head.status < 200:
        return ("length", 0)
    if head.has_token("transfer-encoding", "chunked"):
        return ("chunked",)
    length = head.content_length()
    return ("length", length) if length is not None else ("eof",)


async def relay_body(reader, writer, body):
    kind = body[0]
    if kind == "length":
        left = body[1]
        while left:
            data = await reader.read(min(left, COPY_BLOCK))
            if not data:
                raise asyncio.IncompleteReadError(b"", left)
            writer.write(data)
            left -= len(data)
            await writer.drain()
    elif kind == "chunked":
        while True:
            size_line = await reader.readuntil(b"\r\n")
            writer.write(size_line)
            size = int(size_line.split(b";")[0].strip(), 16)
            if size == 0:
                while True:  # trailer fields, then the empty line
                    line = await reader.readuntil(b"\r\n")
                    writer.write(line)
                    if line == b"\r\n":
                        break
                break
            await relay_body(reader, writer, ("length", size + 2))
        await writer.drain()
    else:
        while data := await reader.read(COPY_BLOCK):
            writer.write(data)
            await writer.drain()


class Discard:
    """A writer that drops what it is given: to skip a body the proxy answers itself."""

    def write(self, data):
        pass

    async def drain(self):
        pass


class FlipOneByte:
    """A writer that relays to `writer`, inverting the byte at `offset` of what passes through."""

    def __init__(self, writer, offset):
        self.writer, self.offset, self.seen = writer, offset, 0

    def write(self, data):
        at = self.offset - self.seen
        if 0 <= at < len(data):
            data = data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:]
        self.seen += len(data)
        self.writer.write(data)

    async def drain(self):
        await self.writer.drain()


async def read_part_of_body(reader, body):
    """Reads about half of a body (one block when its length is unknown) and returns it."""
    if body[0] == "length":
        return await reader.readexactly(body[1] // 2)
    data = await reader.read(COPY_BLOCK)
    return data[:max(1, len(data) // 2)]


async def flush(writer):
    await writer.drain()
    while writer.transport.get_write_buffer_size():
        await asyncio.sleep(0.001)


def reset(writer):
    """Closes with SO_LINGER 0 so the kernel sends RST instead of FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    writer.transport.abort()


def error_response(status, reason, code, message, resource, request_id, close):
    body = ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{code}</Code><Message>{escape(message)}</Message>"
            f"<Resource>{escape(resource)}</Resource><RequestId>{request_id}</RequestId></Error>"
            ).encode()
    head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\n"
            f"Content-Length: {len(body)}\r\nx-amz-request-id: {request_id}\r\n"
            f"Connection: {'close' if close else 'keep-alive'}\r\n\r\n").encode()
    return head + body


class Proxy:
    def __init__(self, upstream, schedule, stats_file, verbose):
        self.upstream = upstream
        self.schedule = schedule
        self.stats_file = stats_file
        self.verbose = verbose
        self.started = time.monotonic()
        self.counts = {"connections": 0, "requests": 0, "forwarded": 0, "upstream_errors": 0}
        self.injected = {mode: 0 for mode in MODES}
        self.tasks = set()

    def stats(self):
        return {**self.counts, "injected": dict(self.injected),
                "rules": [{"rule": r.spec, "matched": r.matched, "fired": r.fired}
                          for r in self.schedule.rules],
                "elapsed_s": round(time.monotonic() - self.started, 3)}

    def write_stats(self):
        if self.stats_file:
            tmp = f"{self.stats_file}.tmp"
            with open(tmp, "w") as f:
                json.dump(self.stats(), f, indent=1)
            os.replace(tmp, self.stats_file)

    def note_fault(self, rule, head):
        self.injected[rule.mode] += 1
        if self.verbose:
            print(f"fault_proxy: {rule.mode} ({rule.spec}) on {head.method} {head.target}",
                  file=sys.stderr)
        self.write_stats()

    async def handle(self, client_reader, client_writer):
        self.tasks.add(asyncio.current_task())
        self.counts["connections"] += 1
        conn = Exchange(self, client_reader, client_writer)
        try:
            while await conn.next():
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                ValueError, OSError):
            pass  # a peer went away or spoke something else: drop this connection only
        finally:
            conn.close()
            self.tasks.discard(asyncio.current_task())


class Exchange:
    """One client connection and its upstream connection, handled one request at a time."""

    def __init__(self, proxy, client_reader, client_writer):
        self.proxy = proxy
        self.creader, self.cwriter = client_reader, client_writer
        self.ureader = self.uwriter = None

    def close(self):
        for writer in (self.cwriter, self.uwriter):
            if writer is not None and not writer.is_closing():
                writer.transport.abort()

    def drop_upstream(self):
        if self.uwriter is not None:
            self.uwriter.transport.abort()
        self.ureader = self.uwriter = None

    async def next(self):
        """Handles one request; returns whether the client connection stays open."""
        request = await read_head(self.creader)
        if request is None:
            return False
        self.proxy.counts["requests"] += 1
        rule = self.proxy.schedule.decide(request)
        if rule:
            self.proxy.note_fault(rule, request)
        mode = rule.mode if rule else None
        body = request_body(request)
        expects_continue = request.has_token("expect", "100-continue")
        client_closes = request.has_token("connection", "close") or request.protocol == "HTTP/1.0"

        if mode == "503":
            request_id = f"faultproxy-{self.proxy.counts['requests']}"
            reason, message = ERROR_CODES[rule.code]
            # a client waiting for 100-continue never sends the body: answer and close
            close = expects_continue or client_closes
            if not expects_continue:
                await relay_body(self.creader, Discard(), body)
            self.cwriter.write(error_response(503, reason, rule.code,
                                              f"{message} (injected by fault_proxy)",
                                              request.target, request_id, close))
            await flush(self.cwriter)
            if close:
                await self.lingering_close()
            return not close

        if mode == "reset-request":
            if expects_continue:
                self.cwriter.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                await flush(self.cwriter)
            await read_part_of_body(self.creader, body)
            reset(self.cwriter)
            return False

        return await self.forward(request, body, expects_continue, client_closes, mode, rule)

    async def forward(self, request, body, expects_continue, client_closes, mode, rule):
        if self.uwriter is None or self.ureader.at_eof():
            self.drop_upstream()
            try:
                self.ureader, self.uwriter = await asyncio.open_connection(
                    *self.proxy.upstream, limit=MAX_HEAD_BYTES)
            except OSError as e:
                self.proxy.counts["upstream_errors"] += 1
                self.cwriter.write(error_response(502, "Bad Gateway", "BadGateway",
                                                  f"fault_proxy: upstream unreachable: {e}",
                                                  request.target, "faultproxy-upstream", True))
                await flush(self.cwriter)
                return False
        self.proxy.counts["forwarded"] += 1
        self.uwriter.write(request.raw)
        # the body goes up while the response head is awaited: a 100-continue must reach the
        # client before it sends the body, and an upstream may answer early
        upward = self.uwriter
        if mode == "corrupt" and body[0] == "length" and body[1]:
            upward = FlipOneByte(self.uwriter, body[1] // 2)
        sending = asyncio.ensure_future(relay_body(self.creader, upward, body))
        try:
            continued = False
            response = await read_head(self.ureader)
            while response is not None and 100 <= response.status < 200 and response.status != 101:
                continued |= response.status == 100
                self.cwriter.write(response.raw)
                await flush(self.cwriter)
                response = await read_head(self.ureader)
            if response is None:
                raise ConnectionResetError("upstream closed before responding")
            # a client still waiting for 100-continue will not send the body at all
            if not sending.done() and (continued or not expects_continue):
                await asyncio.wait({sending}, timeout=EARLY_RESPONSE_GRACE_SECONDS)
            body_sent = sending.done()
            if body_sent:
                sending.result()  # surfaces a client that vanished mid-body
        finally:
            if not sending.done():
                sending.cancel()

        reply = response_body(request, response)
        closes = (client_closes or not body_sent or reply[0] == "eof"
                  or response.has_token("connection", "close")
                  or (response.protocol == "HTTP/1.0"
                      and not response.has_token("connection", "keep-alive")))

        if mode == "stall":
            await asyncio.sleep(rule.seconds)
        if mode in ("reset-response", "truncate"):
            await self.cut_response(response, reply, mode)
            return False
        self.cwriter.write(response.raw)
        await relay_body(self.ureader, self.cwriter, reply)
        await flush(self.cwriter)
        if closes:
            self.drop_upstream()
            await self.lingering_close()
        return not closes

    async def cut_response(self, response, reply, mode):
        if reply == ("length", 0):
            self.cwriter.write(response.raw[:len(response.raw) // 2])
        else:
            self.cwriter.write(response.raw)
            self.cwriter.write(await read_part_of_body(self.ureader, reply))
        await flush(self.cwriter)
        self.drop_upstream()
        if mode == "reset-response":
            reset(self.cwriter)
        else:
            self.cwriter.close()

    async def lingering_close(self):
        """FIN, then drain what the client still sends for a moment, so that closing with
        unread input does not turn into a RST that could destroy the response in flight."""
        try:
            self.cwriter.write_eof()
            await asyncio.wait_for(self._drain_client(), timeout=2.0)
        except (asyncio.TimeoutError, OSError, ConnectionError):
            pass
        self.cwriter.close()

    async def _drain_client(self):
        while await self.creader.read(COPY_BLOCK):
            pass


def parse_address(text, what):
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"{what} {text!r}: expected HOST:PORT")
    host = host.strip("[]")
    try:
        infos = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise ValueError(f"{what} {text!r}: cannot resolve {host!r}: {e}") from None
    for info in infos:
        if not ipaddress.ip_address(info[4][0].split("%")[0]).is_loopback:
            raise ValueError(f"{what} {text!r}: {info[4][0]} is not a loopback address; "
                             "fault_proxy only serves and forwards on loopback")
    return host, int(port)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT (loopback; port 0: any)")
    ap.add_argument("--upstream", required=True, help="HOST:PORT of the server (loopback)")
    ap.add_argument("--rule", action="append", default=[], help="MODE[:KEY=VALUE,...]")
    ap.add_argument("--seed", type=int, default=0, help="PRNG seed for p= rules")
    ap.add_argument("--port-file", help="write the listening port here once listening")
    ap.add_argument("--stats-file", help="write fault statistics here as JSON")
    ap.add_argument("--max-seconds", type=float, default=600.0, help="stop after this long")
    ap.add_argument("--verbose", action="store_true", help="log every injected fault")
    args = ap.parse_args(argv)
    try:
        args.listen = parse_address(args.listen, "--listen")
        args.upstream = parse_address(args.upstream, "--upstream")
        args.rules = [Rule(spec) for spec in args.rule]
    except ValueError as e:
        ap.error(str(e))
    if args.max_seconds <= 0:
        ap.error("--max-seconds must be positive")
    return args


def summary(stats):
    faults = " ".join(f"{mode}={n}" for mode, n in stats["injected"].items() if n) or "none"
    return (f"fault_proxy: {stats['requests']} requests on {stats['connections']} connections, "
            f"{stats['forwarded']} forwarded, {stats['upstream_errors']} upstream errors; "
            f"injected: {faults}")


async def serve(args):
    proxy = Proxy(args.upstream, Schedule(args.rules, args.seed), args.stats_file, args.verbose)
    server = await asyncio.start_server(proxy.handle, *args.listen, limit=MAX_HEAD_BYTES)
    port = server.sockets[0].getsockname()[1]
    if args.port_file:
        with open(f"{args.port_file}.tmp", "w") as f:
            f.write(f"{port}\n")
        os.replace(f"{args.port_file}.tmp", args.port_file)
    if args.verbose:
        print(f"fault_proxy: {args.listen[0]}:{port} -> {args.upstream[0]}:{args.upstream[1]}",
              file=sys.stderr)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await asyncio.wait_for(stop.wait(), timeout=args.max_seconds)
    except asyncio.TimeoutError:
        print(f"fault_proxy: stopping after --max-seconds {args.max_seconds:g}", file=sys.stderr)
    server.close()
    for task in list(proxy.tasks):
        task.cancel()
    await asyncio.gather(*proxy.tasks, return_exceptions=True)
    stats = proxy.stats()
    print(summary(stats), file=sys.stderr)
    proxy.write_stats()


class ProxyProcess:
    """This proxy as a subprocess, for tests: `with ProxyProcess(18480, ["503:every=3"]) as p:`
    then talk to p.endpoint; stop() (or leaving the block) ends it and returns its stats."""

    def __init__(self, upstream_port, rules=(), seed=1, max_seconds=600, start_timeout=10):
        self.dir = tempfile.TemporaryDirectory(prefix="fault-proxy-")
        port_file = os.path.join(self.dir.name, "port")
        self.stats_file = os.path.join(self.dir.name, "stats.json")
        args = [sys.executable, os.path.abspath(__file__), "--listen", "127.0.0.1:0",
                "--upstream", f"127.0.0.1:{upstream_port}", "--seed", str(seed),
                "--port-file", port_file, "--stats-file", self.stats_file,
                "--max-seconds", str(max_seconds)]
        for rule in rules:
            args += ["--rule", rule]
        self.process = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
        self.stderr = ""
        deadline = time.monotonic() + start_timeout
        while not os.path.exists(port_file):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.process.kill()
                _, err = self.process.communicate()
                self.dir.cleanup()
                raise RuntimeError(f"fault_proxy did not start: {err.strip()}")
            time.sleep(0.02)
        with open(port_file) as f:
            self.port = int(f.read())
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.stats = None

    def stop(self):
        """SIGTERM, then the stats it wrote; its stderr summary lands in self.stderr."""
        if self.stats is None:
            self.process.send_signal(signal.SIGTERM)
            _, self.stderr = self.process.communicate(timeout=30)
            with open(self.stats_file) as f:
                self.stats = json.load(f)
            self.dir.cleanup()
        return self.stats

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.process.poll() is None:
            self.stop()
        self.dir.cleanup()


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
