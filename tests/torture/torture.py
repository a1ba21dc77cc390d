#!/usr/bin/env python3
"""Torture driver: many simulated hosts, one repository, random kills; nothing may be lost or misreported.

Each simulated host has its own catalog (--catalog) and its own source tree, which changes between its
backups (files added, modified, deleted; some large, some compressible, some shared with other hosts so
that dedupe spans hosts). In each round every host runs a few random operations (backup, forget,
prune, restore, check) at the same time as the others, against ONE repository (a local directory, or
Ceph RGW through tests/s3/with-rgw.sh, optionally behind tests/s3/fault_proxy.py), and a seeded share of
those processes is SIGKILLed at a random moment. After each round, with nothing running:

- every snapshot any catalog (or a fresh one) lists is restored from every host's catalog and from a
  fresh catalog and compared byte for byte with the manifest (path -> size, sha256) the driver took of
  the source when it backed it up; the sizes `restore --json` and `snapshots --json` report must agree;
- a snapshot the driver recorded (a backup that exited 0, or one a killed backup left and a round
  verified) must still be listed unless the driver forgot it;
- a snapshot nobody recorded must be the complete result of one of its host's killed backups;
- `check` (and `check --read-data` every few rounds) must exit 0 and print no error line.

Every failure prints the seed, the round and the exact commands of the run so far; the same
`--seed S --rounds R` replays the same command sequence (kill moments are seeded; where a kill lands
depends on timing). The repair work of issue 16 is still going on, so fault classes known to be under
repair can be switched off (--no-...); the CI tests say which they switch off and why.

Standard library only (Debian's python3). `--json` prints a summary object on stdout.
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_KEEL = os.path.join(HERE, "../../build/cli/keel")
PASSWORD = "torture horse battery"
# Output lines that make a clean check unclean even with exit 0.
ERROR_MARKERS = ("error", "corrupt", "mismatch", "damaged", "missing", "failed", "no such")


class Failure(Exception):
    pass


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def manifest_of(root):
    """path (relative to root) -> (size, sha256) of every regular file below root."""
    out = {}
    for dirpath, dirnames, files in os.walk(root):
        dirnames.sort()
        for name in sorted(files):
            full = os.path.join(dirpath, name)
            out[os.path.relpath(full, root)] = (os.path.getsize(full), sha256_file(full))
    return out


class Repo:
    """Where the repository lives and the environment keel needs to reach it."""

    def __init__(self, args, work):
        self.env = dict(os.environ, KEEL_PASSWORD=PASSWORD)
        for k in ("KEEL_REPO", "KEEL_CATALOG", "KEEL_PASSWORD_FILE"):
            self.env.pop(k, None)
        self.proxy = None
        if args.target == "local":
            self.location = os.path.join(work, "repo")
            self.direct_env = self.env
            return
        if "S3_ENDPOINT" not in os.environ:
            raise SystemExit("--target s3 needs S3_ENDPOINT etc.: run under tests/s3/with-rgw.sh")
        self.location = f"s3://torture-{args.seed}-{secrets.token_hex(4)}/repo"
        self.env.update(KEEL_S3_ENDPOINT=os.environ["S3_ENDPOINT"], AWS_ACCESS_KEY_ID=os.environ["S3_ACCESS_KEY"],
                        AWS_SECRET_ACCESS_KEY=os.environ["S3_SECRET_KEY"],
                        AWS_REGION=os.environ.get("S3_REGION", "us-east-1"), KEEL_S3_TIMEOUT="10s")
        self.direct_env = dict(self.env)
        if args.faults:
            sys.path.insert(0, os.path.join(HERE, "../s3"))
            import fault_proxy
            port = int(os.environ["S3_ENDPOINT"].rsplit(":", 1)[1])
            rules = ["503:p=0.05", "reset-response:p=0.01", "truncate:p=0.01", "reset-request:p=0.01,method=PUT"]
            self.proxy = fault_proxy.ProxyProcess(port, rules, seed=args.seed, max_seconds=args.duration + 7200)
            self.proxy.__enter__()
            self.env["KEEL_S3_ENDPOINT"] = self.proxy.endpoint

    def faults_injected(self):
        if not self.proxy:
            return 0
        try:
            if self.proxy.stats is not None:
                return sum(self.proxy.stats.get("injected", {}).values())
            with open(self.proxy.stats_file) as f:
                return sum(json.load(f).get("injected", {}).values())
        except (OSError, ValueError, TypeError):
            return 0

    def close(self):
        if self.proxy and self.proxy.process.poll() is None:
            self.proxy.stop()


class Torture:
    def __init__(self, args):
        self.args = args
        self.keel = os.path.abspath(args.keel)
        self.work = args.workdir or tempfile.mkdtemp(prefix=f"keel-torture-{args.seed}-")
        os.makedirs(self.work, exist_ok=True)
        self.repo = Repo(args, self.work)
        self.log_lock = threading.Lock()
        self.commands = []  # (round, host, argv, kill_after, outcome)
        self.failures = []
        self.counters = {"hosts": args.hosts, "rounds": 0, "operations": {}, "kills": 0, "kills_by_operation": {}, "faults_injected": 0,
                         "snapshots_restored": 0, "restores_verified": 0, "bytes_compared": 0, "checks": 0,
                         "lost": 0, "false_reports": 0, "failures": 0}
        self.hosts = [Host(self, i) for i in range(args.hosts)]
        # Files several hosts hold, so that dedupe spans hosts (and a prune of one host's data
        # must not take another's).
        rng = random.Random(f"{args.seed}:shared")
        self.shared = [make_content(rng, rng.choice([64 << 10, 512 << 10, 1 << 20, 2 << 20]))
                       for _ in range(4)]
        self.fresh_n = 0

    # ---- running keel

    def run(self, rnd, host, argv, kill_after=None, env=None, timeout=600):
        """Runs keel; SIGKILLs it after kill_after seconds if given. Returns (rc, stdout, stderr, killed)."""
        full = [self.keel, "--repo", self.repo.location, *argv]
        start = time.monotonic()
        p = subprocess.Popen(full, env=env or self.repo.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        killed = threading.Event()

        def kill():
            if p.poll() is None:
                killed.set()
                p.send_signal(signal.SIGKILL)
        timer = None
        if kill_after is not None:
            timer = threading.Timer(kill_after, kill)
            timer.start()
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            err += b"\n[torture: timed out]"
        if timer:
            timer.cancel()
        was_killed = killed.is_set() and p.returncode == -signal.SIGKILL
        outcome = "killed" if was_killed else f"exit {p.returncode}"
        with self.log_lock:
            self.commands.append((rnd, host, full, kill_after, outcome, round(time.monotonic() - start, 2)))
            if was_killed:
                self.counters["kills"] += 1
        return p.returncode, out.decode(errors="replace"), err.decode(errors="replace"), was_killed

    def count(self, kind):
        with self.log_lock:
            self.counters["operations"][kind] = self.counters["operations"].get(kind, 0) + 1

    def fail(self, rnd, kind, message, lost=False):
        with self.log_lock:
            self.failures.append({"round": rnd, "kind": kind, "message": message})
            self.counters["failures"] += 1
            self.counters["lost" if lost else "false_reports"] += 1
        print(f"FAILURE round {rnd} [{kind}]: {message}", file=sys.stderr, flush=True)

    def fresh_catalog(self):
        self.fresh_n += 1
        return os.path.join(self.work, "fresh", f"catalog-{self.fresh_n}.db")

    # ---- the run

    def setup(self):
        rc, out, err, _ = self.run(0, "-", ["init", "--chunk-min", "16", "--chunk-avg", "64", "--chunk-max", "256",
                                            "--pack-size", "1", "--format", str(self.args.format)])
        if rc != 0:
            raise SystemExit(f"keel init failed ({rc}): {err}")

    def round(self, rnd):
        threads = [threading.Thread(target=h.play, args=(rnd,)) for h in self.hosts]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if self.args.no_concurrent_prune:
            # prunes drawn this round run now, alone
            for h in self.hosts:
                h.run_deferred_prunes(rnd)
        self.verify(rnd)
        self.counters["rounds"] = rnd
        self.counters["faults_injected"] = self.repo.faults_injected()

    def list_snapshots(self, rnd, who, catalog):
        rc, out, err, _ = self.run(rnd, who, ["--catalog", catalog, "snapshots", "--json"], env=self.repo.direct_env)
        if rc != 0:
            self.fail(rnd, "snapshots", f"{who}: `snapshots` exited {rc}: {err.strip()[-800:]}")
            return None
        return {s["id"]: s for s in json.loads(out)}

    def verify(self, rnd):
        fresh = self.fresh_catalog()
        truth = self.list_snapshots(rnd, "fresh", fresh)
        if truth is None:
            return
        listings = {"fresh": truth}
        for h in self.hosts:
            listing = self.list_snapshots(rnd, h.name, h.catalog)
            if listing is not None:
                listings[h.name] = listing
        # Recorded snapshots must still be there unless forgotten.
        for h in self.hosts:
            for sid in list(h.recorded):
                if sid in truth:
                    continue
                if sid in h.maybe_forgotten:
                    del h.recorded[sid]
                    continue
                self.fail(rnd, "lost", f"snapshot {sid} of {h.name} (backed up in round {h.recorded[sid][1]}) is "
                          f"no longer in the repository, and the driver never forgot it", lost=True)
                del h.recorded[sid]
            h.maybe_forgotten.clear()
        # Each catalog must list what the repository holds (catalogs follow the repository).
        for who, listing in listings.items():
            if who == "fresh" or self.args.no_catalog_sync_check:
                continue
            extra = set(listing) - set(truth)
            if extra:
                self.fail(rnd, "catalog", f"{who}'s `snapshots` lists {sorted(extra)} that the repository no longer holds")
            missing = set(truth) - set(listing)
            if missing:
                self.fail(rnd, "catalog", f"{who}'s `snapshots` does not list {sorted(missing)} that the repository holds")
        # Snapshots nobody recorded must be what a killed backup of their host left.
        by_name = {h.name: h for h in self.hosts}
        # (one a host's catalog lists that the repository does not hold was reported above)
        restores = []
        for sid in sorted(truth):
            info = truth[sid]
            owner = by_name.get(info.get("host"))
            if owner is None:
                self.fail(rnd, "unknown", f"snapshot {sid} has host {info.get('host')!r}, no host of this run")
                continue
            if sid not in owner.recorded:
                match = [m for m in owner.pending if self.listing_matches(info, m[0])]
                if not match:
                    self.fail(rnd, "unknown", f"snapshot {sid} of {owner.name} matches no backup the driver ran "
                              f"(files {info.get('files')}, bytes {info.get('bytes')})", lost=True)
                    continue
                owner.recorded[sid] = (match[0][0], match[0][1], True)
            manifest = owner.recorded[sid][0]
            if not self.listing_matches(info, manifest):
                self.fail(rnd, "metadata", f"snapshot {sid} of {owner.name}: `snapshots` says files={info.get('files')} "
                          f"bytes={info.get('bytes')}, its source had {len(manifest)} files, "
                          f"{sum(s for s, _ in manifest.values())} bytes")
            catalogs = [("fresh", self.fresh_catalog())]
            if not self.args.no_cross_host_restore:
                catalogs += [(h.name, h.catalog) for h in self.hosts]
            else:
                catalogs += [(owner.name, owner.catalog)]
            restores += [(who, catalog, sid, owner, manifest) for who, catalog in catalogs]
            self.counters["snapshots_restored"] += 1
        # Restores mostly wait (key derivation, I/O): a few at once.
        with concurrent.futures.ThreadPoolExecutor(self.args.verify_jobs) as pool:
            list(pool.map(lambda r: self.restore_and_compare(rnd, *r), restores))
        # A killed backup's manifest stays a candidate only until the next round has verified it.
        for h in self.hosts:
            h.pending = [m for m in h.pending if m[1] == rnd]
        self.check(rnd, read_data=self.args.read_data_every and rnd % self.args.read_data_every == 0)

    @staticmethod
    def listing_matches(info, manifest):
        return info.get("files") == len(manifest) and info.get("bytes") == sum(s for s, _ in manifest.values())

    def restore_and_compare(self, rnd, who, catalog, sid, owner, manifest):
        target = os.path.join(self.work, "restore", f"r{rnd}-{who}-{sid[:12]}")
        shutil.rmtree(target, ignore_errors=True)
        rc, out, err, _ = self.run(rnd, who, ["--catalog", catalog, "restore", sid, "--target", target, "--json"],
                                   env=self.repo.direct_env)
        self.count("verify-restore")
        try:
            if rc != 0:
                self.fail(rnd, "restore", f"restore of {owner.name}'s snapshot {sid} from {who}'s catalog exited {rc}: "
                          f"{err.strip()[-800:]}", lost=(who == "fresh"))
                return False
            got = manifest_of(os.path.join(target, owner.src.lstrip("/")))
            with self.log_lock:
                self.counters["bytes_compared"] += sum(s for s, _ in got.values())
                self.counters["restores_verified"] += 1
            if got != manifest:
                diff = sorted(p for p in set(got) | set(manifest) if got.get(p) != manifest.get(p))
                self.fail(rnd, "restore-lie", f"restore of {owner.name}'s snapshot {sid} from {who}'s catalog exited 0 "
                          f"but {len(diff)} files differ from the source, e.g. {diff[:5]}", lost=(who == "fresh"))
                return False
            report = document(out)
            total = sum(s for s, _ in manifest.values())
            if report.get("files") != len(manifest) or report.get("bytes") != total:
                self.fail(rnd, "metadata", f"restore of {sid} from {who}'s catalog reports files={report.get('files')} "
                          f"bytes={report.get('bytes')}, restored {len(manifest)} files, {total} bytes")
            return True
        finally:
            shutil.rmtree(target, ignore_errors=True)

    def check(self, rnd, read_data):
        for who, catalog in [(self.hosts[rnd % len(self.hosts)].name, self.hosts[rnd % len(self.hosts)].catalog),
                             ("fresh", self.fresh_catalog())]:
            argv = ["--catalog", catalog, "check", "--json"] + (["--read-data"] if read_data else [])
            rc, out, err, _ = self.run(rnd, who, argv, env=self.repo.direct_env)
            self.count("verify-check-read-data" if read_data else "verify-check")
            self.counters["checks"] += 1
            problems = check_problems(rc, out, err)
            if problems:
                self.fail(rnd, "check", f"`{' '.join(argv)}` from {who}'s catalog exited {rc} on a repository whose "
                          f"snapshots all restore: {problems[-6:]}")

    def replay_text(self, upto_round=None):
        lines = [f"# replay: python3 {os.path.relpath(os.path.abspath(__file__))} {' '.join(self.replay_args())}",
                 f"# commands (round, host, argv, kill after s, outcome, seconds):"]
        for rnd, host, argv, kill_after, outcome, secs in self.commands:
            if upto_round is not None and rnd > upto_round:
                continue
            k = f" [SIGKILL after {kill_after:.2f}s]" if kill_after is not None else ""
            lines.append(f"r{rnd} {host}: {' '.join(argv[1:])}{k} -> {outcome} ({secs}s)")
        return "\n".join(lines)

    def replay_args(self):
        a = self.args
        out = ["--seed", str(a.seed), "--rounds", str(self.counters["rounds"]), "--hosts", str(a.hosts),
               "--target", a.target, "--ops", str(a.ops)]
        for flag in ("faults", "no_concurrent_prune", "no_grace_zero", "no_cross_host_restore",
                     "no_catalog_sync_check", "no_concurrent_check", "no_resume_restore", "no_kill"):
            if getattr(a, flag):
                out.append("--" + flag.replace("_", "-"))
        if a.kill_rate != 0.25:
            out += ["--kill-rate", str(a.kill_rate)]
        if a.read_data_every != 3:
            out += ["--read-data-every", str(a.read_data_every)]
        return out


def make_content(rng, size):
    """Half compressible text, half incompressible bytes, by the draw."""
    if rng.random() < 0.5:
        words = [b"keel", b"backup", b"chunk", b"torture", b"pack", b"prune", b"snapshot", b"restore\n"]
        out = bytearray()
        while len(out) < size:
            out += rng.choice(words) + b" "
        return bytes(out[:size])
    return rng.randbytes(size)


class Host:
    def __init__(self, t, i):
        self.t = t
        self.name = f"host{i}"
        self.dir = os.path.join(t.work, self.name)
        self.src = os.path.join(self.dir, "src")
        self.catalog = os.path.join(self.dir, "catalog.db")
        os.makedirs(self.src, exist_ok=True)
        self.recorded = {}        # snapshot id -> (manifest, round backed up, adopted from a killed backup)
        self.pending = []         # (manifest, round) of killed backups: they may or may not have left a snapshot
        self.maybe_forgotten = set()
        self.deferred_prunes = []
        self.files = 0

    def rng(self, rnd, what):
        return random.Random(f"{self.t.args.seed}:{rnd}:{self.name}:{what}")

    def kill_after(self, rng, typical):
        if self.t.args.no_kill or rng.random() >= self.t.args.kill_rate:
            return None
        return rng.uniform(0.0, typical)

    def play(self, rnd):
        rng = self.rng(rnd, "ops")
        try:
            for n in range(self.t.args.ops):
                kind = rng.choices(["backup", "forget", "prune", "restore", "check"], weights=[4, 2, 1, 3, 1])[0]
                if kind in ("forget", "restore") and not self.recorded:
                    kind = "backup"
                getattr(self, "op_" + kind)(rnd, random.Random(rng.random()))
        except Exception as e:  # a driver bug must not hide behind a thread
            self.t.fail(rnd, "driver", f"{self.name}: {type(e).__name__}: {e}")
            raise

    def mutate(self, rng):
        """Adds, modifies and deletes files of the source tree."""
        existing = sorted(os.path.relpath(os.path.join(d, f), self.src)
                          for d, _, fs in os.walk(self.src) for f in fs)
        for _ in range(rng.randint(1, 6)):
            action = rng.choices(["add", "modify", "delete", "shared", "large"], weights=[4, 3, 2, 1, 1])[0]
            if action in ("modify", "delete") and not existing:
                action = "add"
            if action == "add" or action == "large" or action == "shared":
                self.files += 1
                sub = rng.choice(["", "a", "a/b", "c"])
                rel = os.path.join(sub, f"f{self.files}.bin")
                if action == "shared":
                    data = rng.choice(self.t.shared)
                elif action == "large":
                    data = make_content(rng, rng.randint(256 << 10, 1536 << 10))
                else:
                    data = make_content(rng, rng.choice([0, 1, 100, 4096, rng.randint(1, 64 << 10)]))
                os.makedirs(os.path.join(self.src, sub), exist_ok=True)
                with open(os.path.join(self.src, rel), "wb") as f:
                    f.write(data)
                existing.append(rel)
            elif action == "modify":
                rel = rng.choice(existing)
                path = os.path.join(self.src, rel)
                size = os.path.getsize(path)
                with open(path, "r+b") as f:
                    if size and rng.random() < 0.6:
                        f.seek(rng.randrange(size))
                        f.write(rng.randbytes(rng.randint(1, 4096)))
                    else:
                        f.seek(0, os.SEEK_END)
                        f.write(make_content(rng, rng.randint(1, 32 << 10)))
                # the same size and mtime second would let an incremental backup skip the file
                st = os.stat(path)
                os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + rng.randint(1, 10) * 1_000_000_000))
            else:
                rel = rng.choice(existing)
                os.remove(os.path.join(self.src, rel))
                existing.remove(rel)
        # keep a host to a few MB
        total = sum(os.path.getsize(os.path.join(self.src, p)) for p in existing)
        while total > self.t.args.host_bytes and existing:
            rel = existing.pop(0)
            total -= os.path.getsize(os.path.join(self.src, rel))
            os.remove(os.path.join(self.src, rel))

    def keel(self, rnd, argv, kill_after=None):
        result = self.t.run(rnd, self.name, ["--catalog", self.catalog, *argv], kill_after=kill_after)
        if result[3]:
            with self.t.log_lock:
                kills = self.t.counters["kills_by_operation"]
                kills[argv[0]] = kills.get(argv[0], 0) + 1
        return result

    def op_backup(self, rnd, rng):
        self.t.count("backup")
        self.mutate(rng)
        manifest = manifest_of(self.src)
        rc, out, err, killed = self.keel(rnd, ["backup", self.src, "--host", self.name, "--json"],
                                         self.kill_after(rng, 2.0))
        if killed:
            self.pending.append((manifest, rnd))
            return
        if rc != 0:
            self.t.fail(rnd, "backup", f"{self.name}: backup exited {rc}: {err.strip()[-800:]}")
            self.pending.append((manifest, rnd))
            return
        sid = document(out)["snapshot"]
        self.recorded[sid] = (manifest, rnd, False)

    def op_forget(self, rnd, rng):
        self.t.count("forget")
        keep = rng.randint(1, 3)
        before = set(self.recorded)
        rc, out, err, killed = self.keel(rnd, ["forget", "--host", self.name, "--keep-last", str(keep), "--json"],
                                         self.kill_after(rng, 0.5))
        if killed or rc != 0:
            self.maybe_forgotten |= before
            if not killed:
                self.t.fail(rnd, "forget", f"{self.name}: forget exited {rc}: {err.strip()[-800:]}")
            return
        removed = removed_ids(document(out))
        self.maybe_forgotten |= removed

    def op_prune(self, rnd, rng):
        argv = ["prune", "--json"]
        if not self.t.args.no_grace_zero and rng.random() < 0.5:
            argv += ["--grace", "0"]
        if rng.random() < 0.3:
            argv += ["--repack-threshold", "90%"]
        kill_after = self.kill_after(rng, 1.0)
        if self.t.args.no_concurrent_prune:
            self.deferred_prunes.append((argv, kill_after))
            return
        self.prune(rnd, argv, kill_after)

    def run_deferred_prunes(self, rnd):
        for argv, kill_after in self.deferred_prunes:
            self.prune(rnd, argv, kill_after)
        self.deferred_prunes = []

    def prune(self, rnd, argv, kill_after):
        self.t.count("prune")
        rc, out, err, killed = self.keel(rnd, argv, kill_after)
        if not killed and rc not in (0, 8):  # 8: another prune holds the lock
            self.t.fail(rnd, "prune", f"{self.name}: prune exited {rc}: {err.strip()[-800:]}")

    def op_restore(self, rnd, rng):
        live = sorted(set(self.recorded) - self.maybe_forgotten)
        if not live:
            return self.op_backup(rnd, rng)
        self.t.count("restore")
        sid = rng.choice(live)
        manifest = self.recorded[sid][0]
        target = os.path.join(self.dir, f"restore-r{rnd}")
        shutil.rmtree(target, ignore_errors=True)
        rc, out, err, killed = self.keel(rnd, ["restore", sid, "--target", target, "--json"], self.kill_after(rng, 1.0))
        try:
            how = "restore"
            if killed and not self.t.args.no_resume_restore:
                # resume into what the killed restore left: whatever it says must be true
                mode = rng.choice(["never", "if-changed"])
                how = f"restore --overwrite {mode} after a killed restore"
                self.t.count("restore-resumed")
                rc, out, err, killed = self.keel(rnd, ["restore", sid, "--target", target, "--overwrite", mode, "--json"])
            if killed:
                return
            if rc != 0:
                self.t.fail(rnd, "restore", f"{self.name}: {how} of its own snapshot {sid} exited {rc} "
                            f"while other hosts worked: {err.strip()[-800:]}")
                return
            got = manifest_of(os.path.join(target, self.src.lstrip("/")))
            if got != manifest:
                diff = sorted(p for p in set(got) | set(manifest) if got.get(p) != manifest.get(p))
                self.t.fail(rnd, "restore-lie", f"{self.name}: {how} of {sid} exited 0 but {len(diff)} files differ "
                            f"from the source: {diff[:5]}")
            with self.t.log_lock:
                self.t.counters["bytes_compared"] += sum(s for s, _ in got.values())
        finally:
            shutil.rmtree(target, ignore_errors=True)

    def op_check(self, rnd, rng):
        self.t.count("check")
        argv = ["check", "--json"] + (["--read-data"] if rng.random() < 0.3 else [])
        rc, out, err, killed = self.keel(rnd, argv, self.kill_after(rng, 1.0))
        problems = [] if killed else check_problems(rc, out, err)
        if problems and not self.t.args.no_concurrent_check:
            self.t.fail(rnd, "check", f"{self.name}: `{' '.join(argv)}` while other hosts worked exited {rc}: "
                        f"{problems[-6:]}")


def document(out):
    """The document of a keel --json command: its last line (long commands stream status lines before it)."""
    lines = out.splitlines()
    return json.loads(lines[-1] if lines else out)


def check_problems(rc, out, err):
    """What makes a check unclean: its exit code, the problems its --json lists, error lines on stderr."""
    problems = []
    try:
        report = document(out)
        for p in report.get("problems", []):
            problems.append(p.get("message", str(p)) if isinstance(p, dict) else str(p))
        if report.get("ok") is not True and not problems:
            problems.append("ok is not true")
    except ValueError:
        problems.append(f"no JSON report on stdout: {out.strip()[-300:]!r}")
    problems += [line for line in err.splitlines() if any(m in line.lower() for m in ERROR_MARKERS)]
    if rc != 0 and not problems:
        problems.append(f"exit {rc}: {err.strip()[-300:]}")
    return problems


def removed_ids(report):
    """The ids forget --json says it removed, wherever in the document they are."""
    out = set()

    def walk(node):
        if isinstance(node, dict):
            decision = node.get("decision") or node.get("action")
            if decision == "remove" or node.get("removed") is True or node.get("keep") is False:
                if isinstance(node.get("id"), str):
                    out.add(node["id"])
            for k, v in node.items():
                if k in ("removed", "remove") and isinstance(v, list):
                    for x in v:
                        if isinstance(x, str):
                            out.add(x)
                        elif isinstance(x, dict) and isinstance(x.get("id"), str):
                            out.add(x["id"])
                walk(v)
        elif isinstance(node, list):
            for x in node:
                walk(x)
    walk(report)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keel", default=os.environ.get("KEEL_BIN", DEFAULT_KEEL))
    ap.add_argument("--hosts", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=0, help="seconds: run rounds until this much time passed "
                    "(long mode; --rounds is then a minimum)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--ops", type=int, default=3, help="operations per host per round")
    ap.add_argument("--target", choices=["local", "s3"], default="local")
    ap.add_argument("--format", type=int, choices=[1, 2], default=1,
                    help="repository format (2: blob keys per writer, vouched packs, docs/repository-format.md)")
    ap.add_argument("--faults", action="store_true", help="s3: through tests/s3/fault_proxy.py (503s, resets, truncations)")
    ap.add_argument("--kill-rate", type=float, default=0.25, help="share of operations SIGKILLed at a random moment")
    ap.add_argument("--host-bytes", type=int, default=4 << 20, help="a host's source tree stays under this")
    ap.add_argument("--read-data-every", type=int, default=3, help="check --read-data every N rounds (0: never)")
    ap.add_argument("--verify-jobs", type=int, default=3, help="verification restores at once")
    ap.add_argument("--workdir")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--keep-going", action="store_true", help="go on after a failing round (long mode)")
    ap.add_argument("--json", action="store_true", help="a summary object on stdout")
    # fault classes under repair (issue 16); CI switches them off until the fixes land
    ap.add_argument("--no-kill", action="store_true")
    ap.add_argument("--no-concurrent-prune", action="store_true", help="prunes run alone after the round's other operations")
    ap.add_argument("--no-grace-zero", action="store_true", help="prune never with --grace 0")
    ap.add_argument("--no-cross-host-restore", action="store_true",
                    help="verify from the owner's and a fresh catalog only, not from other hosts' catalogs")
    ap.add_argument("--no-catalog-sync-check", action="store_true",
                    help="a host's `snapshots` need not match the repository (others' new snapshots, forgotten ones)")
    ap.add_argument("--no-resume-restore", action="store_true",
                    help="after a killed restore, do not resume it with --overwrite never|if-changed")
    ap.add_argument("--no-concurrent-check", action="store_true", help="a check that fails while others work is not a failure")
    args = ap.parse_args()
    if args.seed is None:
        args.seed = secrets.randbelow(1 << 31)
    t = Torture(args)
    started = time.monotonic()
    print(f"torture: seed {args.seed}, {args.hosts} hosts, target {args.target}, work {t.work}", file=sys.stderr, flush=True)
    rc = 0
    try:
        t.setup()
        rnd = 0
        while True:
            rnd += 1
            n_fail = len(t.failures)
            t.round(rnd)
            print(f"torture: round {rnd} done, {len(t.failures)} failures, {t.counters['kills']} kills, "
                  f"{t.counters['restores_verified']} restores verified, {time.monotonic() - started:.0f}s",
                  file=sys.stderr, flush=True)
            if len(t.failures) > n_fail and not args.keep_going:
                break
            if rnd >= args.rounds and time.monotonic() - started >= args.duration:
                break
    finally:
        t.repo.close()
        t.counters["faults_injected"] = t.repo.faults_injected()
    t.counters["seconds"] = round(time.monotonic() - started, 1)
    t.counters["seed"] = args.seed
    t.counters["target"] = args.target + (" via fault proxy" if args.faults else "")
    if t.failures:
        rc = 1
        first = min(f["round"] for f in t.failures)
        print(f"\ntorture: {len(t.failures)} failures; seed {args.seed}, first in round {first}", file=sys.stderr)
        for f in t.failures[:30]:
            print(f"  round {f['round']} [{f['kind']}] {f['message']}", file=sys.stderr)
        replay = t.replay_text()
        print(replay, file=sys.stderr)
        with open(os.path.join(t.work, "commands.log"), "w") as f:
            f.write(replay + "\n")
    if args.json:
        print(json.dumps(dict(t.counters, failure_list=t.failures[:100]), indent=1))
    if args.keep or t.failures:
        print(f"torture: work directory kept: {t.work}", file=sys.stderr)
    else:
        subprocess.run(["chmod", "-R", "u+rwX", t.work], check=False)
        shutil.rmtree(t.work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
