"""Scheduled backup jobs: keel job add/list/show/run/remove, hooks, locks, history, metrics, keel scheduler."""
import datetime
import os
import random
import re
import signal
import sqlite3
import subprocess
import time
import unittest
import urllib.request

from keelcli import KEEL, KeelTestCase, json_lines, last_json, tree_state

PARTIAL = 3
LOCKED = 8
NOT_FOUND = 9
USAGE = 2
FAILURE = 1
DAY_NS = 86400 * 10**9


class JobTestCase(KeelTestCase):
    INIT_ARGS = ()

    def setUp(self):
        super().setUp()
        self.jobs_db = self.path("jobs.db")
        self.env["KEEL_JOBS"] = self.jobs_db
        self.src = self.path("src")
        os.makedirs(self.src)
        for i in range(3):
            with open(os.path.join(self.src, f"f{i}.txt"), "w") as f:
                f.write(f"file {i}\n" * 100)
        self.init(*self.INIT_ARGS)

    def add(self, name="nightly", *extra, **kw):
        return self.keel("job", "add", name, "--paths", self.src, "--schedule", "0 3 * * *", "--timezone", "UTC",
                         *extra, **kw)

    def runs(self, name="nightly"):
        return self.keel_json("job", "show", name, "--runs", "0")["runs"]

    def make_due(self, name="nightly"):
        """Pretends the job was added two days ago, so its fires since then were missed."""
        with sqlite3.connect(self.jobs_db) as db:
            db.execute("UPDATE jobs SET created_ns = created_ns - ? WHERE name = ?", (2 * DAY_NS, name))

    def snapshots(self):
        return self.keel_json("snapshots")


class JobDefinitions(JobTestCase):
    def test_add_list_show_remove(self):
        out = self.add("nightly", "--tag", "db", "--keep-daily", "7", "--keep-weekly", "4", "--rpo", "24h",
                       "--exclude", "*.tmp", "--before", "true", "--after", "true").stdout.decode()
        self.assertIn("added job nightly", out)
        self.assertIn("(UTC), next run", out)

        listed = self.keel_json("job", "list")
        self.assertEqual([j["name"] for j in listed], ["nightly"])
        job, status = listed[0]["job"], listed[0]["status"]
        self.assertEqual(job["paths"], [self.src])
        self.assertEqual(job["repo"], self.repo)
        self.assertEqual(job["tags"], ["db"])
        self.assertEqual(job["memory_mib"], 256)
        self.assertEqual(job["excludes"], ["*.tmp"])
        self.assertEqual((job["retention"]["daily"], job["retention"]["weekly"], job["retention"]["last"]), (7, 4, 0))
        self.assertEqual(job["rpo_seconds"], 86400)
        self.assertEqual((job["before"], job["after"]), ("true", "true"))
        self.assertEqual(job["password_file"], "")  # the password itself is never stored
        self.assertTrue(os.path.isabs(job["catalog"]) and os.path.exists(job["catalog"]), job["catalog"])
        self.assertRegex(status["next_run"], r"T03:00:00\.000Z$")
        self.assertFalse(status["running"])
        self.assertIsNone(status["last_run"])
        self.assertFalse(status["rpo_met"])  # no successful run yet

        shown = self.keel_json("job", "show", "nightly")
        self.assertEqual(shown["job"]["schedule"], "0 3 * * *")
        self.assertEqual(shown["runs"], [])
        text = self.keel("job", "show", "nightly").stdout.decode()
        self.assertRegex(text, r"schedule\s+0 3 \* \* \* \(UTC\)")
        self.assertRegex(text, r"RPO\s+MISSED: no successful run, objective 24h00m00s")
        self.assertIn("nightly", self.keel("job", "list").stdout.decode())

        self.assertIn("exists already", self.add("nightly", expect=USAGE).stderr.decode())
        self.keel("job", "remove", "nightly")
        self.assertEqual(self.keel_json("job", "list"), [])
        self.keel("job", "remove", "nightly", expect=NOT_FOUND)
        self.keel("job", "run", "nightly", expect=NOT_FOUND)

    def test_bad_definitions_are_refused_with_the_reason(self):
        def refused(*args):
            p = self.keel("job", "add", *args, expect=USAGE)
            return p.stderr.decode()
        self.assertIn("hour: 25 is out of range 0-23",
                      refused("a", "--paths", self.src, "--schedule", "0 25 * * *"))
        self.assertIn("unknown time zone 'Mars/Base'",
                      refused("a", "--paths", self.src, "--schedule", "@daily", "--timezone", "Mars/Base"))
        self.assertIn("--paths", refused("a", "--schedule", "@daily"))
        self.assertIn("--schedule", refused("a", "--paths", self.src))
        self.assertIn("job name 'a/b'", refused("a/b", "--paths", self.src, "--schedule", "@daily"))
        self.assertIn("--rpo", refused("a", "--paths", self.src, "--schedule", "@daily", "--rpo", "soon"))
        self.assertIn("--keep-tag goes with", refused("a", "--paths", self.src, "--schedule", "@daily", "--keep-tag", "x"))
        self.assertEqual(self.keel_json("job", "list"), [])

    def test_add_checks_the_repository_and_password(self):
        p = self.keel("job", "add", "a", "--paths", self.src, "--schedule", "@daily", env={"KEEL_PASSWORD": "wrong"},
                      expect=5)
        self.assertIn("password", p.stderr.decode())
        self.assertEqual(self.keel_json("job", "list"), [])


class JobRuns(JobTestCase):
    def test_run_backs_up_with_hooks_in_order_and_records_history(self):
        log = self.path("hooks.log")
        self.add("nightly", "--tag", "db",
                 "--before", f'echo "before $KEEL_JOB $KEEL_JOB_PHASE $KEEL_REPO $KEEL_JOB_PATHS" >> {log}',
                 "--after", f'echo "after $KEEL_JOB_PHASE $KEEL_JOB_OUTCOME $KEEL_SNAPSHOT" >> {log}')
        r = self.keel_json("job", "run", "nightly")
        self.assertEqual(r["exit_code"], 0)
        run = r["run"]
        self.assertEqual(run["outcome"], "success")
        self.assertEqual(run["files"], 3)
        self.assertEqual(run["snapshot"], r["backup"]["snapshot"])
        self.assertGreater(run["bytes_added"], 0)
        with open(log) as f:
            lines = f.read().splitlines()
        self.assertEqual(lines, [f"before nightly before {self.repo} {self.src}",
                                 f"after after success {run['snapshot']}"])

        snaps = self.snapshots()
        self.assertEqual(len(snaps), 1)
        self.assertEqual(sorted(snaps[0]["tags"]), ["db", "job:nightly"])

        # Human output, and a second run that reads nothing.
        out = self.keel("job", "run", "nightly").stdout.decode()
        self.assertRegex(out, r"job nightly: success: snapshot [0-9a-f]{8} saved")
        runs = self.runs()
        self.assertEqual([x["outcome"] for x in runs], ["success", "success"])
        self.assertEqual(runs[1]["bytes_read"], 0)  # unchanged files are not read again
        self.assertLess(runs[1]["bytes_added"], 4096)  # a directory tree or two (the job store sits beside src)
        self.assertGreater(runs[1]["started_unix_ns"], runs[0]["started_unix_ns"])

        # History is not part of the rebuildable index.
        self.keel("catalog", "rebuild")
        self.assertEqual(len(self.runs()), 2)
        status = self.keel_json("job", "list")[0]["status"]
        self.assertEqual(status["last_success"]["id"], runs[1]["id"])

    def test_the_jobs_password_file_is_used_and_never_the_password(self):
        password_file = self.path("password")
        with open(password_file, "w") as f:
            f.write(self.env["KEEL_PASSWORD"] + "\n")
        self.add("nightly", "--password-file", password_file)
        with open(self.jobs_db, "rb") as f:
            self.assertNotIn(self.env["KEEL_PASSWORD"].encode(), f.read())
        wrong = self.path("wrong")
        with open(wrong, "w") as f:
            f.write("wrong\n")
        # No KEEL_PASSWORD; the job's file wins over KEEL_PASSWORD_FILE.
        r = self.keel_json("job", "run", "nightly", env={"KEEL_PASSWORD": "", "KEEL_PASSWORD_FILE": wrong})
        self.assertEqual(r["run"]["outcome"], "success")
        # A flag wins over the job's file.
        r = self.keel_json("job", "run", "nightly", "--password-file", wrong, env={"KEEL_PASSWORD": ""}, expect=5)
        self.assertEqual(r["run"]["outcome"], "failed")

    def test_failing_before_hook_fails_the_run_and_backs_up_nothing(self):
        log = self.path("after.log")
        self.add("nightly", "--before", "echo dumping; exit 4", "--after", f"echo after >> {log}")
        p = self.keel("job", "run", "nightly", "--json", expect=FAILURE)
        r = last_json(p.stdout)
        self.assertEqual(r["run"]["outcome"], "failed")
        self.assertIn("before hook exited 4", r["run"]["message"])
        self.assertIsNone(r["backup"])
        self.assertIn("before hook exited 4", p.stderr.decode())
        self.assertIn("dumping", p.stderr.decode())  # hook output goes to stderr, never into --json
        self.assertEqual(self.snapshots(), [])
        self.assertFalse(os.path.exists(log))
        self.assertEqual([x["outcome"] for x in self.runs()], ["failed"])

    def test_failing_after_hook_fails_a_run_that_saved_its_snapshot(self):
        self.add("nightly", "--after", "exit 5")
        r = self.keel_json("job", "run", "nightly", expect=FAILURE)
        self.assertEqual(r["run"]["outcome"], "failed")
        self.assertIn("after hook exited 5", r["run"]["message"])
        self.assertEqual(len(self.snapshots()), 1)
        self.assertEqual(r["run"]["snapshot"], self.snapshots()[0]["id"])

    def test_stream_job_backs_up_what_its_command_prints_and_nothing_when_it_fails(self):
        dump = self.path("dump.sql")
        with open(dump, "wb") as f:
            f.write(random.Random(5).randbytes(2 << 20))
        flag = self.path("fail")
        command = f'cat {dump}; if [ -e {flag} ]; then exit 7; fi'
        self.keel("job", "add", "db", "--stdin-from-command", command, "--stdin-name", "app.sql",
                  "--schedule", "@daily", "--timezone", "UTC")
        shown = self.keel_json("job", "show", "db")["job"]
        self.assertEqual((shown["stream_command"], shown["stream_name"], shown["paths"]), (command, "app.sql", []))
        self.assertRegex(self.keel("job", "show", "db").stdout.decode(), r"command +" + re.escape(command) + r" \(as app.sql\)")
        r = self.keel_json("job", "run", "db")
        self.assertEqual((r["run"]["outcome"], r["run"]["files"]), ("success", 1))
        out = self.path("out")
        self.keel("restore", "latest:/app.sql", "--target", out)
        with open(os.path.join(out, "app.sql"), "rb") as f, open(dump, "rb") as g:
            self.assertEqual(f.read(), g.read())

        open(flag, "w").close()  # the dump now ends with exit 7: as if cut short
        r = self.keel_json("job", "run", "db", expect=FAILURE)
        self.assertEqual(r["run"]["outcome"], "failed")
        self.assertIn("exited with status 7", r["run"]["message"])
        self.assertEqual(len(self.snapshots()), 1)

        for bad in (["--paths", self.src, "--stdin-from-command", "true"],
                    ["--stdin-from-command", "true", "--exclude", "*.tmp"]):
            p = self.keel("job", "add", "bad", *bad, "--schedule", "@daily", expect=USAGE)
            self.assertIn("stdin-from-command", p.stderr.decode())

    def test_missing_path_fails_with_its_exit_code(self):
        self.add("nightly")
        os.rename(self.src, self.src + ".moved")
        r = self.keel_json("job", "run", "nightly", expect=NOT_FOUND)
        self.assertEqual(r["run"]["outcome"], "failed")
        self.assertIn(self.src, r["run"]["message"])

    def test_unreadable_file_makes_the_run_partial(self):
        prefix, keel = self.unprivileged()
        os.chmod(os.path.join(self.src, "f1.txt"), 0o000)
        # Everything as that user: its own repository, catalog and job store.
        env = dict(self.env, HOME=self.tmp, KEEL_REPO=self.path("user-repo"), XDG_DATA_HOME=self.path("user-state"),
                   KEEL_JOBS=self.path("user-jobs.db"))

        def run(*args):
            return subprocess.run(prefix + [keel, *args], env=env, capture_output=True, timeout=300)

        self.assertEqual(run("init").returncode, 0)
        self.assertEqual(run("job", "add", "nightly", "--paths", self.src, "--schedule", "@daily").returncode, 0)
        p = run("job", "run", "nightly", "--json")
        self.assertEqual(p.returncode, PARTIAL, p.stderr.decode())
        r = last_json(p.stdout)
        self.assertEqual(r["run"]["outcome"], "partial")
        self.assertEqual(r["run"]["errors"], 1)
        self.assertEqual([os.path.basename(s["path"]) for s in r["backup"]["skipped"]], ["f1.txt"])

    def test_a_second_run_of_the_same_job_is_refused(self):
        started, release = self.path("started"), self.path("release")
        # The first run waits in its before hook until the test lets it go (at most 30 s).
        self.add("nightly", "--before",
                 f"touch {started}; i=0; while [ ! -e {release} ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done")
        first = subprocess.Popen([KEEL, "job", "run", "nightly", "--json"], env=self.env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
        try:
            deadline = time.time() + 30
            while not os.path.exists(started) and time.time() < deadline:
                time.sleep(0.02)
            self.assertTrue(os.path.exists(started), "the first run never reached its hook")
            self.assertTrue(self.keel_json("job", "list")[0]["status"]["running"])
            p = self.keel("job", "run", "nightly", "--json", expect=LOCKED)
            refused = last_json(p.stdout)["run"]
            self.assertEqual(refused["outcome"], "refused")
            self.assertIn("still going", p.stderr.decode())
        finally:
            open(release, "w").close()
            out, err = first.communicate(timeout=120)
        self.assertEqual(first.returncode, 0, err.decode())
        self.assertEqual(last_json(out)["run"]["outcome"], "success")
        self.assertEqual(sorted(x["outcome"] for x in self.runs()), ["refused", "success"])
        self.assertEqual(len(self.snapshots()), 1)

    def test_metrics_file_after_a_run(self):
        self.add("nightly", "--rpo", "1h")
        metrics = self.path("metrics", "keel.prom")
        os.makedirs(os.path.dirname(metrics))
        self.keel("job", "run", "nightly", "--metrics-file", metrics)
        with open(metrics) as f:
            text = f.read()
        samples = parse_metrics(text)
        job = '{job="nightly"}'
        self.assertAlmostEqual(samples["keel_job_last_success_timestamp_seconds" + job], time.time(), delta=120)
        self.assertEqual(samples['keel_job_last_run_outcome{job="nightly",outcome="success"}'], 1)
        self.assertEqual(samples['keel_job_last_run_outcome{job="nightly",outcome="failed"}'], 0)
        self.assertGreater(samples["keel_job_last_run_bytes_added" + job], 0)
        self.assertGreaterEqual(samples["keel_job_last_run_duration_seconds" + job], 0)
        self.assertEqual(samples["keel_job_rpo_seconds" + job], 3600)
        self.assertEqual(samples["keel_job_rpo_met" + job], 1)
        self.assertEqual(samples["keel_job_running" + job], 0)
        self.assertIn("# TYPE keel_job_rpo_met gauge", text)
        self.assertEqual(os.listdir(os.path.dirname(metrics)), ["keel.prom"])  # no temporary left behind

    @unittest.skipIf(subprocess.run([KEEL, "forget", "--help"], capture_output=True).returncode != 0,
                     "keel forget is not in this build")
    def test_retention_policy_applies_to_the_jobs_snapshots_only(self):
        self.add("nightly", "--keep-last", "1")
        self.keel("backup", self.src)  # not the job's: untouched
        self.keel("job", "run", "nightly")
        with open(os.path.join(self.src, "f0.txt"), "a") as f:
            f.write("more\n")
        r = self.keel_json("job", "run", "nightly")
        self.assertEqual(r["snapshots_forgotten"], 1)
        snaps = self.snapshots()
        self.assertEqual(len(snaps), 2)
        self.assertEqual(sum("job:nightly" in s["tags"] for s in snaps), 1)


class Scheduler(JobTestCase):
    def test_once_runs_a_missed_job_once_and_then_nothing(self):
        self.add("nightly", "--rpo", "24h")
        self.add("later")  # added just now: its first fire is still ahead
        self.make_due("nightly")
        metrics = self.path("keel.prom")
        p = self.keel("scheduler", "--once", "--metrics-file", metrics)
        log = p.stderr.decode()
        self.assertIn("job nightly: started the run due at", log)
        self.assertIn("missed while the scheduler was down: caught up once", log)
        self.assertRegex(log, r"job nightly: success after .*, exit 0; next run .*; RPO met")
        self.assertNotIn("job later: started", log)
        self.assertEqual([x["outcome"] for x in self.runs("nightly")], ["success"])
        self.assertEqual(self.runs("later"), [])
        with open(metrics) as f:
            samples = parse_metrics(f.read())
        self.assertEqual(samples['keel_job_last_run_outcome{job="nightly",outcome="success"}'], 1)
        self.assertEqual(samples['keel_job_rpo_met{job="nightly"}'], 1)
        self.assertIn('keel_job_next_run_timestamp_seconds{job="later"}', samples)

        # Two days of missed fires were one run; now nothing is due.
        self.keel("scheduler", "--once")
        self.assertEqual(len(self.runs("nightly")), 1)

    def test_once_reports_a_failed_job(self):
        self.add("nightly", "--before", "exit 1")
        self.make_due()
        p = self.keel("scheduler", "--once", expect=FAILURE)
        self.assertRegex(p.stderr.decode(), r"job nightly: failed after .*, exit 1 \(before hook exited 1")

    def test_metrics_endpoint_and_a_single_scheduler(self):
        self.add("nightly", "--rpo", "24h")
        proc = subprocess.Popen([KEEL, "scheduler", "--metrics-listen", "127.0.0.1:0"], env=self.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            # Announced once the jobs' statuses are on the endpoint (after the banner and a line per job).
            seen = ""
            for _ in range(10):
                seen += proc.stderr.readline()
                m = re.search(r"metrics at (http://127\.0\.0\.1:\d+/metrics)", seen)
                if m:
                    break
            self.assertIsNotNone(m, seen)
            with urllib.request.urlopen(m.group(1), timeout=10) as r:
                self.assertEqual(r.status, 200)
                self.assertIn("version=0.0.4", r.headers["Content-Type"])
                samples = parse_metrics(r.read().decode())
            self.assertEqual(samples['keel_job_running{job="nightly"}'], 0)
            self.assertEqual(samples['keel_job_rpo_met{job="nightly"}'], 0)
            other = self.keel("scheduler", "--once", expect=LOCKED)
            self.assertIn("another keel scheduler", other.stderr.decode())
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, 0)

class SchedulerInterruption(JobTestCase):
    INIT_ARGS = ("--pack-size", "8")  # small packs: some are durable early in the backup

    def test_sigterm_mid_backup_exits_cleanly_and_the_next_run_completes(self):
        rnd = random.Random(5)
        for i in range(12):
            with open(os.path.join(self.src, f"big{i:02d}.bin"), "wb") as f:
                f.write(rnd.randbytes(8 << 20))
        total = 12 * (8 << 20)
        # Little data in flight, so the backup reads while it uploads and sees the cancel early.
        self.add("nightly", "--memory", "16")
        self.make_due()
        proc = subprocess.Popen([KEEL, "scheduler"], env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.time() + 120
            # Stop once the first pack is durable (a backup of this size writes a dozen).
            while time.time() < deadline and proc.poll() is None and not self.store.list("packs/"):
                time.sleep(0.005)
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        log = err.decode()
        self.assertEqual(proc.returncode, 0, log)
        self.assertIn("keel scheduler: stopped", log)
        outcomes = [x["outcome"] for x in self.runs()]
        if outcomes == ["success"]:
            self.skipTest("the backup finished before the scheduler could stop it")
        self.assertEqual(outcomes, ["interrupted"])
        self.assertIn("stopping: 1 running job(s) asked to stop", log)
        self.assertRegex(log, r"job nightly: interrupted after .*, exit 130")
        self.assertEqual(self.snapshots(), [])

        stored = sum(self.store.list("packs/").values())
        self.assertGreater(stored, 0)
        r = self.keel_json("job", "run", "nightly")
        self.assertEqual(r["run"]["outcome"], "success")
        # What the interrupted run uploaded is reused.
        self.assertLess(r["run"]["bytes_added"], total - stored + (1 << 20))
        self.assertEqual([x["outcome"] for x in self.runs()], ["interrupted", "success"])


class CopyJobs(JobTestCase):
    """A copy job: keel copy of the repository under test into a local one, on the schedule, with its own RPO."""

    def setUp(self):
        super().setUp()
        self.offsite = self.path("offsite")
        self.offsite_env = {"KEEL_REPO": self.offsite, "KEEL_PASSWORD": "offsite secret"}
        self.keel("init", env=self.offsite_env)
        self.offsite_password = self.path("offsite.pw")
        with open(self.offsite_password, "w") as f:
            f.write("offsite secret\n")

    def add_copy(self, name="offsite", *extra, **kw):
        return self.keel("job", "add", name, "--copy-to", self.offsite, "--copy-password-file", self.offsite_password,
                         "--schedule", "0 4 * * *", "--timezone", "UTC", *extra, **kw)

    def offsite_snapshots(self):
        return self.keel_json("snapshots", env=self.offsite_env)

    def test_copy_job_runs_keeps_the_destination_current_and_reports_its_rpo(self):
        first = self.keel_json("backup", self.src, "--host", "web1")
        self.keel("backup", self.src, "--host", "db1")  # not selected
        self.assertIn("copies of", self.add_copy("offsite", "--copy-host", "web1", "--rpo", "1h").stdout.decode())
        job = self.keel_json("job", "show", "offsite")
        self.assertEqual(job["job"]["copy_to"], self.offsite)
        self.assertEqual(job["job"]["copy_selection"]["hosts"], ["web1"])
        self.assertTrue(os.path.exists(job["job"]["copy_catalog"]))
        self.assertEqual(job["status"]["newest_copy"], "")
        self.assertFalse(job["status"]["rpo_met"])  # nothing at the destination yet

        p = self.keel("job", "run", "offsite", "--json")
        lines = json_lines(p.stdout)
        self.assertTrue(all(x.get("type") == "status" and x["command"] == "copy" for x in lines[:-1]), lines)
        self.assertGreaterEqual(len(lines), 2)
        r = lines[-1]
        self.assertEqual(r["run"]["outcome"], "success")
        self.assertIsNone(r["backup"])
        self.assertEqual(r["copy"]["snapshots_copied"], 1)
        self.assertEqual([s["source"] for s in r["copy"]["snapshots"]], [first["snapshot"]])
        copies = self.offsite_snapshots()
        self.assertEqual([s["id"] for s in copies], [r["run"]["snapshot"]])
        self.assertEqual(copies[0]["host"], "web1")
        out = self.path("out")
        self.keel("restore", copies[0]["id"], "--target", out, env=self.offsite_env)
        self.assertEqual(tree_state(out + self.src, with_times=False), tree_state(self.src, with_times=False))

        status = self.keel_json("job", "show", "offsite")["status"]
        self.assertTrue(status["rpo_met"])
        self.assertEqual(status["newest_copy"], copies[0]["time"])
        self.assertLess(status["rpo_age_seconds"], 600)
        self.assertRegex(self.keel("job", "show", "offsite").stdout.decode(), r"RPO\s+met: newest copy .* old")

        # A new backup: the next run copies it alone, and the metrics say when the newest copy was taken.
        with open(os.path.join(self.src, "f0.txt"), "a") as f:
            f.write("changed\n")
        second = self.keel_json("backup", self.src, "--host", "web1")
        self.make_due("offsite")
        metrics = self.path("keel.prom")
        log = self.keel("scheduler", "--once", "--metrics-file", metrics).stderr.decode()
        self.assertRegex(log, r"job offsite: success after .*RPO met: newest copy")
        self.assertEqual(len(self.offsite_snapshots()), 2)
        r = self.keel_json("job", "show", "offsite", "--runs", "1")["runs"][0]
        self.assertIn("copied 1 snapshots", r["message"])
        with open(metrics) as f:
            samples = parse_metrics(f.read())
        job = '{job="offsite"}'
        second_time = self.offsite_snapshots()[-1]["time"]
        self.assertEqual(second_time, self.keel_json("snapshots")[-1]["time"])
        self.assertAlmostEqual(samples["keel_job_copy_newest_snapshot_timestamp_seconds" + job],
                               iso_seconds(second_time), delta=0.002)
        self.assertEqual(samples["keel_job_rpo_met" + job], 1)
        self.assertEqual(samples['keel_job_last_run_outcome{job="offsite",outcome="success"}'], 1)
        self.assertNotIn('keel_job_copy_newest_snapshot_timestamp_seconds{job="nightly"}', samples)
        self.assertEqual(second["snapshot"], self.keel_json("snapshots")[-1]["id"])

    def test_copy_job_options_are_checked(self):
        def refused(*args):
            return self.keel("job", "add", "x", "--schedule", "@daily", *args, expect=USAGE).stderr.decode()
        self.assertIn("--paths is for backup jobs", refused("--copy-to", self.offsite, "--paths", self.src))
        self.assertIn("--keep-daily is for backup jobs", refused("--copy-to", self.offsite, "--keep-daily", "3"))
        self.assertIn("go with --copy-to", refused("--paths", self.src, "--copy-host", "web1"))
        self.assertIn("own repository", refused("--copy-to", self.repo))
        self.assertIn("KEEL_COPY_PASSWORD", refused("--copy-to", self.offsite))  # no password for it
        self.assertIn("password", self.keel("job", "add", "x", "--schedule", "@daily", "--copy-to", self.offsite,
                                            env={"KEEL_COPY_PASSWORD": "wrong"}, expect=5).stderr.decode())
        self.assertEqual(self.keel_json("job", "list"), [])

    def test_wrong_destination_password_fails_the_run(self):
        self.keel("backup", self.src)
        self.add_copy()
        with open(self.offsite_password, "w") as f:
            f.write("changed since\n")
        r = self.keel_json("job", "run", "offsite", expect=5)
        self.assertEqual(r["run"]["outcome"], "failed")
        self.assertEqual(self.offsite_snapshots(), [])


def iso_seconds(text):
    """Unix seconds of an ISO 8601 UTC time as --json writes it."""
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp()


def parse_metrics(text):
    """Prometheus text format: {'name{labels}': value} for every sample."""
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            samples[key] = float(value)
    return samples


if __name__ == "__main__":
    unittest.main()
