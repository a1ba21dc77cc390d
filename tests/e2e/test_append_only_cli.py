"""The global --append-only (KEEL_APPEND_ONLY=1, docs/immutable.md): backups run as
`backup --append-only`; forget, prune, tag, key remove, unlock, repair and a job
with --keep-* rules refuse with exit 2 before touching the repository (nothing on
the target changes; a repository that does not exist is not even looked for).
Dry runs, which delete nothing, still run."""
import os
import unittest

from keelcli import KeelTestCase, ON_S3


@unittest.skipIf(ON_S3, "the refusal happens before any target is touched: one target is enough")
class AppendOnlyHost(KeelTestCase):
    def repository_state(self):
        state = {}
        for dirpath, _, files in os.walk(self.repo):
            for name in files:
                path = os.path.join(dirpath, name)
                with open(path, "rb") as f:
                    state[os.path.relpath(path, self.repo)] = f.read()
        return state

    def test_deleting_commands_refuse_before_touching_the_repository(self):
        self.init()
        source = self.path("src")
        os.makedirs(source)
        with open(os.path.join(source, "a"), "wb") as f:
            f.write(os.urandom(50_000))
        self.keel("backup", "--append-only", source)  # the global option, after the command
        snapshot = self.keel_json("backup", source, env={"KEEL_APPEND_ONLY": "1"})["snapshot"]
        slot = self.keel_json("key", "list")[0]["id"]
        self.keel("job", "add", "nightly", "--paths", source, "--schedule", "@daily", "--keep-last", "1",
                  env={"KEEL_JOBS": self.path("jobs.db")})
        before = self.repository_state()

        refused = [("forget", "--keep-last", "1"), ("forget", "--keep-last", "1", "--prune"), ("forget", snapshot),
                   ("prune",), ("tag", "--add", "x", snapshot), ("key", "remove", slot), ("unlock", "--yes"),
                   ("repair",), ("repair", "--undelete", "--apply"), ("job", "run", "nightly"),
                   ("migrate", "--format", "2")]
        for args in refused:
            for how in ({"args": ["--append-only"], "env": {}}, {"args": [], "env": {"KEEL_APPEND_ONLY": "1"}}):
                env = dict(how["env"], KEEL_JOBS=self.path("jobs.db"))
                p = self.keel(*args, *how["args"], expect=2, env=env)
                self.assertIn("refused under --append-only", p.stderr.decode(), args)
                # Nothing is looked at: a repository that is not there is not noticed either.
                p = self.keel(*args, *how["args"], "--repo", self.path("nowhere"), expect=2, env=env)
                self.assertIn("refused under --append-only", p.stderr.decode(), args)
        self.assertFalse(os.path.exists(self.path("nowhere")))
        self.assertEqual(self.repository_state(), before)

        # Dry runs delete nothing and still run; without the flag the same commands work.
        self.keel("forget", "--keep-last", "1", "--dry-run", "--append-only")
        self.keel("prune", "--dry-run", "--append-only")
        self.assertEqual(self.repository_state(), before)
        self.keel("forget", snapshot, env={"KEEL_APPEND_ONLY": "0"})
        p = self.keel("backup", source, env={"KEEL_APPEND_ONLY": "maybe"}, expect=2)
        self.assertIn("KEEL_APPEND_ONLY", p.stderr.decode())


if __name__ == "__main__":
    unittest.main()
