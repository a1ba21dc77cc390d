"""Back up and restore trees with every kind of file; content and metadata must match."""
import os
import random
import subprocess
import unittest

from keelcli import KeelTestCase, last_json, tree_state


def make_tree(root):
    rnd = random.Random(7)
    os.makedirs(os.path.join(root, "docs/deep/er/still"))
    os.makedirs(os.path.join(root, "empty-dir"))
    with open(os.path.join(root, "docs/readme.txt"), "w") as f:
        f.write("hello keel\n" * 1000)
    with open(os.path.join(root, "docs/deep/er/still/random.bin"), "wb") as f:
        f.write(rnd.randbytes(3 * 1024 * 1024 + 17))
    open(os.path.join(root, "empty-file"), "w").close()
    with open(os.path.join(root, "name with spaces & ünïcode"), "w") as f:
        f.write("odd names survive\n")
    os.symlink("docs/readme.txt", os.path.join(root, "link-to-readme"))
    os.symlink("/nonexistent/target", os.path.join(root, "dangling-link"))
    os.link(os.path.join(root, "docs/readme.txt"), os.path.join(root, "hardlink-to-readme"))
    os.mkfifo(os.path.join(root, "a-fifo"))
    # Sparse: 64 MiB with 4 KiB of data at 0 and at 32 MiB.
    with open(os.path.join(root, "sparse.img"), "wb") as f:
        f.truncate(64 << 20)
        f.write(b"S" * 4096)
        f.seek(32 << 20)
        f.write(b"T" * 4096)
    # Modes, owners and xattrs.
    script = os.path.join(root, "script.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\necho hi\n")
    os.chmod(script, 0o4751)
    secret = os.path.join(root, "docs/secret")
    with open(secret, "w") as f:
        f.write("top secret\n")
    os.chmod(secret, 0o600)
    # Set-id bits on a file of another owner: restore's chown clears them,
    # so its chmod must come after.
    other_setid = os.path.join(root, "docs/setid-other")
    with open(other_setid, "w") as f:
        f.write("#!/bin/sh\n")
    if os.geteuid() == 0:
        os.chown(secret, 1234, 5678)
        os.chown(other_setid, 1234, 5678)
    os.chmod(other_setid, 0o6750)
    try:
        os.setxattr(os.path.join(root, "docs/readme.txt"), "user.keel.test", b"xattr value \x00\x01")
    except OSError:
        pass
    os.utime(os.path.join(root, "docs/readme.txt"), ns=(1_600_000_000_123_456_789, 1_600_000_000_123_456_789))
    os.utime(os.path.join(root, "docs/deep"), ns=(1_500_000_000_000_000_001, 1_500_000_000_000_000_001))


class RoundTrip(KeelTestCase):
    def test_every_file_kind_round_trips(self):
        src = self.path("src")
        os.mkdir(src)
        make_tree(src)
        self.init()
        snap = self.keel_json("backup", src)
        self.assertEqual(snap["errors"], 0)
        out = self.path("out")
        self.keel("restore", "latest", "--target", out)
        restored = out + src
        self.assertEqual(tree_state(src), tree_state(restored))
        # Holes stay holes: far fewer blocks than the file size.
        st = os.stat(os.path.join(restored, "sparse.img"))
        self.assertLess(st.st_blocks * 512, 8 << 20)
        # Hard links are restored as links.
        self.assertEqual(os.stat(os.path.join(restored, "docs/readme.txt")).st_ino,
                         os.stat(os.path.join(restored, "hardlink-to-readme")).st_ino)

    def test_second_backup_adds_almost_nothing_and_reads_nothing(self):
        src = self.path("src")
        os.mkdir(src)
        make_tree(src)
        self.init()
        first = self.keel_json("backup", src)
        second = self.keel_json("backup", src)
        self.assertEqual(second["parent"], first["snapshot"])
        self.assertEqual(second["bytes_read"], 0)
        self.assertLess(second["bytes_added"], 4096)
        self.assertEqual(len(self.keel_json("snapshots")), 2)

    def test_restore_subtree_single_file_and_include(self):
        src = self.path("src")
        os.mkdir(src)
        make_tree(src)
        self.init()
        self.keel("backup", src)
        sub = self.path("sub")
        self.keel("restore", f"latest:{src}/docs", "--target", sub)
        # readme.txt's hard link lies outside docs/, so only content and metadata compare.
        def unlinked(state):
            return {k: {f: v for f, v in e.items() if f != "hardlink_group"} for k, e in state.items()}
        self.assertEqual(unlinked(tree_state(os.path.join(src, "docs"))), unlinked(tree_state(sub)))
        one = self.path("one")
        self.keel("restore", f"latest:{src}/docs/readme.txt", "--target", one)
        with open(os.path.join(one, "readme.txt")) as f:
            self.assertEqual(f.read(), "hello keel\n" * 1000)
        inc = self.path("inc")
        self.keel("restore", "latest", "--target", inc, "--include", f"{src}/docs/deep")
        self.assertTrue(os.path.exists(inc + src + "/docs/deep/er/still/random.bin"))
        self.assertFalse(os.path.exists(inc + src + "/docs/readme.txt"))
        self.keel("restore", "latest:/no/such/path", "--target", self.path("x"), expect=9)

    def test_ls_lists_from_the_catalog(self):
        src = self.path("src")
        os.mkdir(src)
        make_tree(src)
        self.init()
        self.keel("backup", src)
        entries = self.keel_json("ls", "latest", src + "/docs")
        names = sorted(os.path.basename(e["path"]) for e in entries)
        self.assertEqual(names, ["deep", "readme.txt", "secret", "setid-other"])
        recursive = self.keel("ls", "-R", "latest", src).stdout.decode()
        self.assertIn(src + "/docs/deep/er/still/random.bin", recursive)

    def test_stdin_stream(self):
        self.init()
        data = random.Random(3).randbytes(5 * 1024 * 1024)
        snap = self.keel_json("backup", "--stdin", "--stdin-name", "db.sql", input=data)
        self.assertEqual(snap["bytes"], len(data))
        out = self.path("out")
        self.keel("restore", "latest:/db.sql", "--target", out)
        with open(os.path.join(out, "db.sql"), "rb") as f:
            self.assertEqual(f.read(), data)

    def test_stream_from_a_command_is_saved_only_if_the_command_succeeds(self):
        self.init()
        blob = self.path("dump.bin")
        data = random.Random(4).randbytes(3 * 1024 * 1024)
        with open(blob, "wb") as f:
            f.write(data)
        snap = last_json(self.keel("backup", "--json", "--stdin-from-command", "--stdin-name", "db.dump", "--",
                                   "sh", "-c", 'cat "$0"', blob).stdout)
        self.assertEqual(snap["bytes"], len(data))
        out = self.path("out")
        self.keel("restore", "latest:/db.dump", "--target", out)
        with open(os.path.join(out, "db.dump"), "rb") as f:
            self.assertEqual(f.read(), data)

        # A dump cut short by its command's failure or death is no snapshot; the exit says so.
        for command, cause in [('head -c 1000000 "$0"; exit 3', "exited with status 3"),
                               ('head -c 1000000 "$0"; kill -9 $$', "exited with status 137 (signal 9)")]:
            p = self.keel("backup", "--stdin-from-command", "--", "sh", "-c", command, blob, expect=1)
            self.assertIn("no snapshot saved", p.stderr.decode())
            self.assertIn(cause, p.stderr.decode())
            self.assertNotIn("skipped", p.stderr.decode())
        self.assertEqual(len(self.keel_json("snapshots")), 1)
        p = self.keel("backup", "--stdin-from-command", "--", "no-such-command-here", expect=1)
        self.assertIn("cannot start no-such-command-here", p.stderr.decode())
        self.keel("backup", "--stdin-from-command", expect=2)
        self.keel("backup", "--stdin", "--stdin-from-command", "--", "true", expect=2)
        self.keel("check", "--read-data")

    def test_excludes(self):
        src = self.path("src")
        os.makedirs(os.path.join(src, "keep/node_modules/pkg"))
        for name in ["keep/a.txt", "keep/b.tmp", "keep/node_modules/pkg/index.js"]:
            with open(os.path.join(src, name), "w") as f:
                f.write(name)
        self.init()
        self.keel("backup", src, "--exclude", "*.tmp", "--exclude", "node_modules")
        listed = self.keel("ls", "-R", "latest", src).stdout.decode()
        self.assertIn("keep/a.txt", listed)
        self.assertNotIn("b.tmp", listed)
        self.assertNotIn("node_modules", listed)

    def test_missing_path_is_a_clear_error(self):
        self.init()
        p = self.keel("backup", self.path("does-not-exist"), expect=9)
        self.assertIn("does-not-exist", p.stderr.decode())


class UnreadableFiles(KeelTestCase):
    def test_unreadable_file_is_reported_and_skipped(self):
        """Run keel as an unprivileged user so permissions bite even when the suite runs as root."""
        prefix, keel = self.unprivileged()
        src = self.path("src")
        os.mkdir(src)
        for name in ("ok.txt", "locked.txt"):
            with open(os.path.join(src, name), "w") as f:
                f.write(name)
        os.mkdir(os.path.join(src, "locked-dir"))
        os.chmod(os.path.join(src, "locked.txt"), 0o000)
        os.chmod(os.path.join(src, "locked-dir"), 0o000)
        os.chmod(src, 0o755)
        env = dict(self.env, HOME=self.tmp)

        def run(*args):
            return subprocess.run(prefix + [keel, *args], env=env, capture_output=True, timeout=300)

        self.assertEqual(run("init").returncode, 0)
        p = run("backup", src, "--json")
        self.assertEqual(p.returncode, 3, p.stderr.decode())
        report = last_json(p.stdout)
        skipped = sorted(os.path.basename(s["path"]) for s in report["skipped"])
        self.assertEqual(skipped, ["locked-dir", "locked.txt"])
        self.assertIn("locked.txt", p.stderr.decode())
        listed = run("ls", "-R", "latest", src).stdout.decode()
        self.assertIn("ok.txt", listed)
        self.assertNotIn("locked.txt", listed)


class Passwords(KeelTestCase):
    def test_wrong_password_exit_code_and_key_slots(self):
        self.init()
        p = self.keel("snapshots", expect=5, env={"KEEL_PASSWORD": "wrong"})
        self.assertIn("wrong password", p.stderr.decode())
        pwfile = self.path("newpw")
        with open(pwfile, "w") as f:
            f.write("second password\n")
        added = self.keel_json("key", "add", "--new-password-file", pwfile)
        self.keel("snapshots", env={"KEEL_PASSWORD": "second password"})
        slots = self.keel_json("key", "list")
        self.assertEqual(len(slots), 2)
        current = [s for s in slots if s["current"]][0]
        # The slot in use cannot be removed; the other one can.
        self.keel("key", "remove", current["id"][:12], expect=2)
        self.keel("key", "remove", added["id"][:12])
        self.keel("snapshots", expect=5, env={"KEEL_PASSWORD": "second password"})

    def test_init_twice_refused_and_no_repo(self):
        self.init()
        self.keel("init", expect=4)
        self.keel("snapshots", expect=4, env={"KEEL_REPO": self.path("nothing-here")})
        self.keel("snapshots", expect=2, env={"KEEL_PASSWORD": "", "KEEL_REPO": self.repo})


if __name__ == "__main__":
    unittest.main()
