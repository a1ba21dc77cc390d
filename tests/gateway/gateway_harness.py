"""Starts `keel gateway` on loopback with a generated configuration and a
self-signed certificate, for tests that drive it with real S3 clients."""
import filecmp
import json
import os
import random
import shutil
import subprocess
import tempfile

KEEL = os.environ.get("KEEL_BIN", os.path.join(os.path.dirname(__file__), "../../build/cli/keel"))
# The clients under test are Debian's (scripts/setup.sh installs them).
CLIENT_PATH = "/usr/bin:/bin"

USERS = {
    "alice": ("AKIDALICE000000000001", "alice-secret-key-0000000000000000000000"),
    "bob": ("AKIDBOB00000000000002", "bob-secret-key-00000000000000000000000"),
}


def client(name):
    """The path of a Debian client; fails loudly when it is missing."""
    path = shutil.which(name, path=CLIENT_PATH)
    if path is None:
        raise AssertionError(f"S3 client '{name}' is not installed in /usr/bin: run scripts/setup.sh")
    return path


class Gateway:
    """A gateway with users alice and bob, bucket 'shared' (alice's, bob may
    read) and bucket 'alice-private', listening on HTTP and HTTPS. With
    dedupe=True, buckets created through the API are dedupe buckets in a
    fresh keel repository (self.repo)."""

    def __init__(self, dedupe=False, rdma_listen=None, extra_config="", server_extra=""):
        """`rdma_listen`: serve the RDMA data plane there too (an address on an RDMA device);
        `extra_config`: more sections (users, buckets) appended to the configuration;
        `server_extra`: more `key = value` lines for the [server] section."""
        self.dir = tempfile.mkdtemp(prefix="keel-gateway-")
        self.cert = os.path.join(self.dir, "cert.pem")
        key = os.path.join(self.dir, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                        "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                        "-keyout", key, "-out", self.cert], check=True, capture_output=True)
        state = os.path.join(self.dir, "state")
        users = "".join(f"[user:{name}]\naccess_key = {a}\nsecret_key = {s}\nemail = {name}@example.com\n\n"
                        for name, (a, s) in USERS.items())
        rdma = f"rdma_listen = {rdma_listen}\n" if rdma_listen else ""
        config = (f"[server]\nlisten = 127.0.0.1:0\ntls_listen = 127.0.0.1:0\ntls_certificate = {self.cert}\n"
                  f"tls_key = {key}\nstate_dir = {state}\nthreads = 4\nmetrics_listen = 127.0.0.1:0\n{rdma}{server_extra}\n{users}"
                  f"[bucket:shared]\nowner = alice\ngrants = bob:read\npath = {state}/configured/shared\n\n"
                  f"[bucket:alice-private]\nowner = alice\npath = {state}/configured/alice-private\n\n"
                  + extra_config)
        if dedupe:
            self.repo = os.path.join(self.dir, "repo")
            password = os.path.join(self.dir, "password")
            with open(password, "w") as f:
                f.write("gateway test password\n")
            catalog = os.path.join(self.dir, "catalog.db")
            subprocess.run([KEEL, "init", "--repo", self.repo, "--password-file", password, "--catalog", catalog],
                           check=True, capture_output=True)
            config += f"\n[dedupe]\nrepository = {self.repo}\npassword_file = {password}\ncatalog = {catalog}\n"
        self.config = os.path.join(self.dir, "gateway.conf")
        with open(self.config, "w") as f:
            f.write(config)
        self.rdma = rdma_listen
        self.start()

    def start(self):
        self.process = subprocess.Popen([KEEL, "gateway", "--config", self.config], stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
        self.urls = {}
        for _ in range(4 if self.rdma else 3):
            line = self.process.stdout.readline()
            if line.startswith("metrics on "):
                self.metrics_url = line.split()[-1]
                continue
            if line.startswith("rdma on "):
                continue
            if not line.startswith("listening on "):
                self.process.kill()
                error = self.process.stderr.read()
                self.stop()
                raise AssertionError(f"keel gateway did not start: {line}{error}")
            url = line.split()[-1]
            self.urls["https" if url.startswith("https") else "http"] = url

    def crash_and_restart(self):
        """SIGKILL, as a crash, then the gateway again on the same addresses and state."""
        self.process.kill()
        self.process.wait()
        self.process.stdout.close()
        self.process.stderr.close()
        def port(url):
            return url.split("/")[2].rsplit(":", 1)[1]
        with open(self.config) as f:
            config = f.read()
        for key, url in (("\nlisten", self.urls["http"]), ("\ntls_listen", self.urls["https"]),
                         ("\nmetrics_listen", self.metrics_url)):
            config = config.replace(f"{key} = 127.0.0.1:0", f"{key} = 127.0.0.1:{port(url)}")
        with open(self.config, "w") as f:
            f.write(config)
        self.start()

    def metrics(self):
        """The Prometheus exposition as {'name{labels}': value}."""
        import urllib.request
        with urllib.request.urlopen(self.metrics_url, timeout=10) as r:
            lines = r.read().decode().splitlines()
        return {k: float(v) for k, v in (line.rsplit(" ", 1) for line in lines if line and not line.startswith("#"))}

    def env(self, user="alice", scheme="http"):
        access, secret = USERS[user]
        env = dict(os.environ, AWS_ACCESS_KEY_ID=access, AWS_SECRET_ACCESS_KEY=secret, AWS_DEFAULT_REGION="us-east-1",
                   AWS_EC2_METADATA_DISABLED="true", HOME=self.dir)
        env.pop("AWS_PROFILE", None)
        if scheme == "https":
            env["AWS_CA_BUNDLE"] = self.cert
        return env

    def halt(self):
        """Stops the server and keeps its state (start() serves it again)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process.stdout.close()
        self.process.stderr.close()

    def stop(self):
        self.halt()
        shutil.rmtree(self.dir, ignore_errors=True)


def start_raw_and_dedupe(gateways):
    """For a module's setUpModule: a gateway with raw buckets and one with dedupe buckets, as "raw" and "dedupe"."""
    gateways["raw"] = Gateway()
    gateways["dedupe"] = Gateway(dedupe=True)


def stop_all(gateways):
    """For a module's tearDownModule."""
    for gateway in gateways.values():
        gateway.stop()


def boto3_client(gateway, scheme, user="alice", secret=None, access=None):
    """A boto3 S3 client for the gateway: path-style, SigV4 (presigned URLs too), no retries."""
    import boto3
    from botocore.config import Config
    a, s = USERS[user]
    return boto3.client("s3", endpoint_url=gateway.urls[scheme], aws_access_key_id=access or a,
                        aws_secret_access_key=secret or s, region_name="us-east-1",
                        verify=gateway.cert if scheme == "https" else None,
                        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1},
                                      signature_version="s3v4"))


def enable_object_lock(client, bucket):
    """Versioning, then Object Lock, on `bucket` (as its owner turns them on)."""
    client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    client.put_object_lock_configuration(Bucket=bucket, ObjectLockConfiguration={"ObjectLockEnabled": "Enabled"})


def error_of(fn):
    """The botocore ClientError response that fn() raises; AssertionError when it succeeds."""
    from botocore.exceptions import ClientError
    try:
        fn()
    except ClientError as e:
        return e.response
    raise AssertionError("the call succeeded; an S3 error was expected")


def same_tree(a, b):
    """Whether two directory trees hold the same names and bytes."""
    cmp = filecmp.dircmp(a, b)
    if cmp.left_only or cmp.right_only or cmp.diff_files or cmp.funny_files:
        return False
    return all(filecmp.cmp(os.path.join(a, f), os.path.join(b, f), shallow=False) for f in cmp.common_files) and \
        all(same_tree(os.path.join(a, d), os.path.join(b, d)) for d in cmp.common_dirs)


class KeelRepositoryTest:
    """A mixin for unittest cases that drive `keel` against s3://vault/repo on self.gateway,
    as carol (CAROL, the backup host) or a user of USERS, with state under self.tmp."""
    CAROL = ("AKIDCAROL00000000003", "carol-secret-key-000000000000000000000")
    PASSWORD = "keel e2e"

    def keel(self, *args, user="carol", state=None, repo="s3://vault/repo", expect=0, password=None, env=None):
        """Runs keel as `user` (its catalog and data under self.tmp, named `state`) with `password`
        (default self.PASSWORD) and `env` added; checks the exit code."""
        access, secret = self.CAROL if user == "carol" else USERS[user]
        state = state or user
        env = dict(self.gateway.env(), AWS_ACCESS_KEY_ID=access, AWS_SECRET_ACCESS_KEY=secret,
                   KEEL_PASSWORD=password or self.PASSWORD, XDG_DATA_HOME=os.path.join(self.tmp, "state-" + state),
                   KEEL_CATALOG=os.path.join(self.tmp, state + ".db"), KEEL_JOBS=os.path.join(self.tmp, "jobs.db"),
                   **(env or {}))
        command = [KEEL, *args, "--repo", repo, "--endpoint", self.gateway.urls["http"], "--s3-timeout", "20s"]
        p = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, expect, f"{' '.join(command)}\nstdout: {p.stdout}\nstderr: {p.stderr}")
        return p

    def back_up_runs(self, runs, size, *args, user="carol"):
        """`runs` backups as `user` (with `args`) of self.tmp/source, which gains a random file of
        `size` + n bytes before run n; returns the source and [(snapshot id, a frozen copy of it)]."""
        rng = random.Random(18)
        source = os.path.join(self.tmp, "source")
        os.makedirs(source)
        snapshots = []
        for run in range(runs):
            with open(os.path.join(source, f"file{run}"), "wb") as f:
                f.write(rng.randbytes(size + run))
            p = self.keel("--json", "backup", *args, source, user=user)
            frozen = os.path.join(self.tmp, f"frozen-{run}")
            shutil.copytree(source, frozen)
            snapshots.append((json.loads(p.stdout.splitlines()[-1])["snapshot"], frozen))  # status lines come first
        return source, snapshots

    def restore_all_as_of(self, snapshots, source, user="carol", **keel_args):
        """Restores each (snapshot, frozen copy of `source` as it was then) and compares the two."""
        import random
        for n, (snapshot, tree) in enumerate(snapshots):
            out = os.path.join(self.tmp, f"restored-{user}-{n}-{random.randrange(1 << 30)}")
            self.keel("restore", snapshot, "--target", out, user=user, **keel_args)
            self.assertTrue(same_tree(tree, os.path.join(out, source.lstrip("/"))), f"snapshot {snapshot} differs")
