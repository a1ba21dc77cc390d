"""The command line as a whole: the command table, the generated man pages and
shell completions agree with each command's --help (they come from the same
option definitions)."""
import os
import pty
import select
import re
import shutil
import subprocess
import unittest

from keelcli import KEEL, KeelTestCase, json_lines


def help_options(text):
    """The long options a --help output lists."""
    return set(re.findall(r"^\s+(?:-\w \[ )?--([\w-]+)", text, re.M))


class CliTest(KeelTestCase):
    def commands(self):
        usage = self.keel("help").stdout.decode()
        return re.findall(r"^  (\w+)\s", usage, re.M)

    @staticmethod
    def documented(option, page):
        """An option, or an operand (listed by its name in capitals)."""
        return ("\\-\\-" + option.replace("-", "\\-") in page
                or "\\fI" + option.upper().replace("-", "_") + "\\fR" in page)

    def test_every_command_has_a_man_page_with_its_help_options(self):
        man_dir = self.path("man")
        self.keel("--generate-man", man_dir)
        commands = self.commands()
        for name in ("diff", "stats", "dump", "tag", "backup", "job", "gateway"):
            self.assertIn(name, commands)
        self.assertEqual(sorted(os.listdir(man_dir)), sorted(["keel.1"] + [f"keel-{c}.1" for c in commands]))
        for command in commands:
            with open(os.path.join(man_dir, f"keel-{command}.1")) as f:
                page = f.read()
            self.assertTrue(page.startswith(f'.TH KEEL\\-{command.upper()} 1'), command)
            if command in ("job",):
                continue  # one help per action, checked below
            for option in help_options(self.keel(command, "--help").stdout.decode()):
                self.assertTrue(self.documented(option, page), f"keel-{command}.1 lacks --{option}")
        with open(os.path.join(man_dir, "keel-job.1")) as f:
            job = f.read()
        for option in help_options(self.keel("job", "add", "--help").stdout.decode()):
            self.assertTrue(self.documented(option, job), f"keel-job.1 lacks --{option}")
        if shutil.which("groff"):
            p = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", os.path.join(man_dir, "keel-backup.1")],
                               capture_output=True)
            self.assertEqual(p.returncode, 0)
            self.assertEqual(p.stderr, b"", p.stderr.decode())

    def test_bash_completion_completes_commands_actions_and_options(self):
        script = self.path("keel.bash")
        with open(script, "wb") as f:
            f.write(self.keel("--generate-completion", "bash").stdout)

        def complete(*words):
            line = ["keel", *words]
            cmd = (f"source {script}; COMP_WORDS=({' '.join(repr(w) for w in line)}); "
                   f"COMP_CWORD={len(line) - 1}; _keel; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
            p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, cwd=self.tmp)
            self.assertEqual(p.returncode, 0, p.stderr)
            return set(p.stdout.split())

        self.assertIn("backup", complete("ba"))
        self.assertEqual(complete("--s3-timeout", "30s", "dif"), {"diff"})
        self.assertIn("--exclude", complete("backup", "--ex"))
        self.assertIn("--repo", complete("backup", "--re"))
        self.assertEqual(complete("job", ""), {"add", "list", "show", "run", "remove"})
        self.assertIn("--schedule", complete("job", "add", "--sch"))
        self.assertEqual(complete("gateway", "g"), {"gc"})
        self.assertIn("--dry-run", complete("gateway", "gc", "--dry"))
        self.assertIn("--add", complete("tag", "latest", "--a"))

    def test_zsh_completion_is_generated(self):
        text = self.keel("--generate-completion", "zsh").stdout.decode()
        self.assertTrue(text.startswith("#compdef keel"))
        self.assertIn("'--exclude:skip items matching this glob (repeatable)'", text)
        if shutil.which("zsh"):
            p = subprocess.run(["zsh", "-n", "-c", text], capture_output=True)
            self.assertEqual(p.returncode, 0, p.stderr)
        self.keel("--generate-completion", "fish", expect=2)

    def test_progress_line_on_a_terminal_and_none_in_a_pipe(self):
        src = self.path("big")
        os.makedirs(src)
        with open(os.path.join(src, "random.bin"), "wb") as f:
            f.write(os.urandom(192 << 20))  # long enough (> 250 ms) for the first redraw
        self.init()
        self.assertIn(b"files", self.on_terminal("backup", src))
        # In a pipe (a cron job, systemd): nothing but the summary on stdout.
        piped = self.keel("backup", src, "--force")
        self.assertEqual(piped.stderr, b"")
        self.assertIn(b"saved", piped.stdout)
        piped = self.keel("check", "--read-data")
        self.assertEqual(piped.stderr, b"")
        # A drill shows restore's progress line too.
        self.assertIn(b"files", self.on_terminal("drill", "--scratch", self.path("scratch")))

    def on_terminal(self, *args):
        """What keel writes to stderr when stderr is a terminal (stdout a pipe); asserts a redrawn status line."""
        primary, secondary = pty.openpty()
        p = subprocess.Popen([KEEL, *args], env=self.env, stdout=subprocess.PIPE, stderr=secondary)
        os.close(secondary)
        seen = b""
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # EIO: keel closed its end
                break
            if not chunk:
                break
            seen += chunk
        os.close(primary)
        p.communicate()
        self.assertEqual(p.returncode, 0)
        self.assertIn(b"\r\x1b[K[", seen)  # a redrawn status line, then cleared
        return seen

    def test_json_streams_status_lines_and_ends_with_the_document(self):
        self.init()
        # While a backup runs (stdin held open here), a status line comes every second.
        p = subprocess.Popen([KEEL, "backup", "--stdin", "--stdin-name", "dump.sql", "--json"], env=self.env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            p.stdin.write(os.urandom(1 << 20))
            p.stdin.flush()
            ready, _, _ = select.select([p.stdout], [], [], 60)
            self.assertTrue(ready, "no status line within 60 s of a backup that is still reading")
            first = p.stdout.readline()
            self.assertIsNone(p.poll())  # streamed while running, not printed at the end
            rest, err = p.communicate(input=os.urandom(1 << 20), timeout=120)
        finally:
            if p.poll() is None:
                p.kill()
        self.assertEqual(p.returncode, 0, err.decode())
        lines = json_lines(first + rest)
        status, document = lines[:-1], lines[-1]
        self.assertGreaterEqual(len(status), 2)  # the one read above, and the final one
        for line in status:
            self.assertEqual((line["type"], line["command"]), ("status", "backup"))
            for key in ("seconds", "files", "files_total", "bytes", "bytes_total", "bytes_read", "bytes_added",
                        "bytes_per_second", "eta_seconds"):
                self.assertIn(key, line)
        self.assertNotIn("type", document)
        self.assertEqual(document["bytes"], 2 << 20)
        self.assertEqual(status[-1]["bytes"], document["bytes"])  # the final status: all done
        self.assertEqual(status[-1]["files"], 1)

        # Each long command: status lines of its own, then the document it always printed, last.
        src = self.path("src")
        os.makedirs(src)
        for i in range(5):
            with open(os.path.join(src, f"f{i}"), "wb") as f:
                f.write(os.urandom(100_000 + i))
        self.keel("backup", src)
        other = self.path("other")
        self.keel("init", env={"KEEL_REPO": other, "KEEL_PASSWORD": "other secret"})
        for command, args, env, key, counts in [
                ("restore", ["restore", "latest", "--target", self.path("out")], {}, "verified", ("files",)),
                ("drill", ["drill", "--verify-only"], {}, "rto_met", ("files",)),
                ("check", ["check", "--read-data"], {}, "ok", ("packs",)),
                ("copy", ["copy", "--from-repo", self.repo],
                 {"KEEL_REPO": other, "KEEL_PASSWORD": "other secret", "KEEL_FROM_PASSWORD": "correct horse"},
                 "snapshots_copied", ("snapshots",)),
                ("prune", ["prune", "--grace", "0"], {}, "packs_deleted", ("snapshots", "packs"))]:
            lines = json_lines(self.keel(*args, "--json", env=env).stdout)
            self.assertIn(key, lines[-1], command)
            self.assertNotIn("type", lines[-1])
            self.assertGreaterEqual(len(lines), 2, command)
            for line in lines[:-1]:
                self.assertEqual((line["type"], line["command"]), ("status", command))
                for count in counts:
                    self.assertIn(count + "_total", line)
            final = lines[-2]
            if command in ("restore", "drill"):
                self.assertEqual((final["files"], final["files_total"]), (5, 5))
                self.assertEqual(final["bytes"], final["bytes_total"])
                self.assertEqual(final["eta_seconds"], 0)
            if command == "prune":  # every snapshot marked, ended in the last phase
                self.assertEqual((final["snapshots"], final["snapshots_total"]), (2, 2))  # the stdin and the tree backups
                self.assertEqual(final["phase"], "settle")
        # --quiet: the document alone.
        quiet = self.keel("restore", "latest", "--target", self.path("again"), "--json", "--quiet").stdout
        self.assertEqual(len(json_lines(quiet)), 1)


if __name__ == "__main__":
    unittest.main()
