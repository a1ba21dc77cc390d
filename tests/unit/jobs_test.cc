#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <string>
#include <thread>

#include "catalog/sqlite.h"
#include "jobs/child_process.h"
#include "jobs/job_status.h"
#include "jobs/job_store.h"
#include "jobs/metrics.h"
#include "util/prometheus_server.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/file_lock.h"
#include "test_support.h"

using namespace keel;
using namespace keel::jobs;
using namespace std::chrono_literals;

namespace {

using test::TempDir;

Job full_job() {
  Job j;
  j.name = "db-nightly.1";
  j.repo = "s3://bucket/prefix";
  j.endpoint = "https://s3.example:9000";
  j.region = "eu-central-1";
  j.aws_profile = "backup";
  j.ca_file = "/etc/ssl/ca.pem";
  j.virtual_hosted = true;
  j.rdma = "192.0.2.7:7471";
  j.append_only = true;
  j.password_file = "/etc/keel/password";
  j.catalog = "/var/lib/keel/abc/catalog.db";
  j.paths = {"/srv/db dump", "/etc/odd\nname"};
  j.excludes = {"*.tmp"};
  j.tags = {"db", "prod"};
  j.memory_mib = 64;
  j.schedule = "0 2 * * *";
  j.time_zone = "Europe/Berlin";
  j.retention.last = 3;
  j.retention.hourly = 24;
  j.retention.daily = 7;
  j.retention.weekly = 4;
  j.retention.monthly = 12;
  j.retention.yearly = 2;
  j.retention.keep_tags = {"pinned"};
  j.rpo = std::chrono::hours(24);
  j.before_hook = "pg_dump > /srv/db\\ dump/db.sql";
  j.after_hook = "rm -f '/srv/db dump/db.sql'";
  j.created_ns = 1'700'000'000'123'456'789;
  return j;
}

void check_same(const Job& a, const Job& b) {
  CHECK(a.name == b.name);
  CHECK(a.repo == b.repo);
  CHECK(a.endpoint == b.endpoint);
  CHECK(a.region == b.region);
  CHECK(a.aws_profile == b.aws_profile);
  CHECK(a.ca_file == b.ca_file);
  CHECK(a.virtual_hosted == b.virtual_hosted);
  CHECK(a.rdma == b.rdma);
  CHECK(a.append_only == b.append_only);
  CHECK(a.password_file == b.password_file);
  CHECK(a.catalog == b.catalog);
  CHECK(a.paths == b.paths);
  CHECK(a.excludes == b.excludes);
  CHECK(a.stream_command == b.stream_command);
  CHECK(a.stream_name == b.stream_name);
  CHECK(a.tags == b.tags);
  CHECK(a.memory_mib == b.memory_mib);
  CHECK(a.schedule == b.schedule);
  CHECK(a.time_zone == b.time_zone);
  CHECK(a.retention.last == b.retention.last);
  CHECK(a.retention.hourly == b.retention.hourly);
  CHECK(a.retention.daily == b.retention.daily);
  CHECK(a.retention.weekly == b.retention.weekly);
  CHECK(a.retention.monthly == b.retention.monthly);
  CHECK(a.retention.yearly == b.retention.yearly);
  CHECK(a.retention.keep_tags == b.retention.keep_tags);
  CHECK(a.rpo == b.rpo);
  CHECK(a.before_hook == b.before_hook);
  CHECK(a.after_hook == b.after_hook);
  CHECK(a.created_ns == b.created_ns);
  CHECK(a.handled_until_ns == b.handled_until_ns);
}

catalog::JobRunRecord run_at(int64_t started_s, catalog::JobOutcome outcome) {
  catalog::JobRunRecord r;
  r.job = "nightly";
  r.started_ns = started_s * 1'000'000'000;
  r.ended_ns = r.started_ns + 90'500'000'000;  // 90.5 s
  r.outcome = outcome;
  r.bytes_added = 4096;
  return r;
}

// One HTTP/1.0 exchange with the server on loopback; the whole response.
std::string http_get(const std::string& address, const std::string& request) {
  size_t colon = address.rfind(':');
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  REQUIRE(::inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr) == 1);
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
  REQUIRE(::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  write_all(fd.get(), as_bytes(request), "request");
  std::string response;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd.get(), buf, sizeof buf)) > 0) response.append(buf, static_cast<size_t>(n));
  return response;
}

}  // namespace

TEST_CASE("job store: a store from before jobs had --rdma opens with HTTP for its jobs", "[jobs]") {
  TempDir dir;
  const std::string path = dir.file("jobs.db");
  Job job = full_job();
  JobStore(path).add(job);
  {
    // Schema version 1: the same table without the rdma, append_only and copy columns.
    catalog::Database db(path);
    db.exec("ALTER TABLE jobs DROP COLUMN rdma");
    db.exec("ALTER TABLE jobs DROP COLUMN append_only");
    db.exec("ALTER TABLE jobs DROP COLUMN copy_to");
    db.exec("ALTER TABLE jobs DROP COLUMN copy_password_file");
    db.exec("ALTER TABLE jobs DROP COLUMN copy_catalog");
    db.exec("ALTER TABLE jobs DROP COLUMN copy_hosts");
    db.exec("ALTER TABLE jobs DROP COLUMN copy_tags");
    db.exec("ALTER TABLE jobs DROP COLUMN copy_paths");
    db.exec("ALTER TABLE jobs DROP COLUMN copy_newer_than_seconds");
    db.exec("ALTER TABLE jobs DROP COLUMN stream_command");
    db.exec("ALTER TABLE jobs DROP COLUMN stream_name");
    db.exec("PRAGMA user_version = 1");
  }
  JobStore store(path);
  job.rdma.clear();
  job.append_only = false;  // jobs from before --append-only delete as they always did
  check_same(store.get(job.name), job);
  catalog::Database db(path);
  CHECK(catalog::schema_version(db) == 5);
}

TEST_CASE("job store keeps every field of a job and refuses duplicates", "[jobs]") {
  TempDir dir;
  JobStore store(dir.file("nested/jobs.db"));
  Job job = full_job();
  store.add(job);
  check_same(store.get(job.name), job);
  // A run reaches the target as the job was added: endpoint, TLS and RDMA settings.
  const targets::TargetOptions target = store.get(job.name).target_options();
  CHECK(target.endpoint == job.endpoint);
  CHECK(target.virtual_hosted);
  CHECK(target.rdma == "192.0.2.7:7471");
  CHECK_THROWS_AS(store.add(job), Error);
  try {
    store.get("missing");
    FAIL("found a job that does not exist");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kNotFound);
  }
  CHECK_FALSE(store.find("missing").has_value());

  Job stream = full_job();  // a stream job: a command in place of paths
  stream.name = "db-dump";
  stream.paths.clear();
  stream.excludes.clear();
  stream.stream_command = "pg_dump 'app db' | gzip -1";
  stream.stream_name = "app.sql.gz";
  store.add(stream);
  check_same(store.get(stream.name), stream);
  store.remove(stream.name);

  Job other = full_job();
  other.name = "a-first";
  other.rpo.reset();
  other.retention = {};
  store.add(other);
  auto all = store.list();
  REQUIRE(all.size() == 2);
  CHECK(all[0].name == "a-first");  // by name
  CHECK_FALSE(all[0].rpo.has_value());
  CHECK(all[0].retention.empty());

  store.set_handled_until(job.name, 42);
  CHECK(store.get(job.name).handled_until_ns == 42);
  store.remove(job.name);
  CHECK_FALSE(store.find(job.name).has_value());
  CHECK_THROWS_AS(store.remove(job.name), Error);

  CHECK(store.run_lock_path("x") == dir.file("nested/jobs.db") + ".locks/x.lock");
}

TEST_CASE("job store notices changes made by another connection", "[jobs]") {
  TempDir dir;
  JobStore scheduler(dir.file("jobs.db"));
  JobStore cli(dir.file("jobs.db"));
  CHECK(scheduler.changed());  // the first call
  CHECK_FALSE(scheduler.changed());
  cli.add(full_job());
  CHECK(scheduler.changed());
  CHECK_FALSE(scheduler.changed());
  scheduler.set_handled_until(full_job().name, 7);  // its own writes are not news
  CHECK_FALSE(scheduler.changed());
}

TEST_CASE("job names and next fires", "[jobs]") {
  for (const char* good : {"nightly", "db-1", "a.b_c", "X"}) CHECK_NOTHROW(validate_job_name(good));
  for (const char* bad : {"", "-x", ".hidden", "a/b", "a b", "ä", "x;rm"}) {
    INFO(bad);
    CHECK_THROWS_AS(validate_job_name(bad), Error);
  }
  CHECK_THROWS_AS(validate_job_name(std::string(65, 'a')), Error);

  Job job = full_job();
  job.time_zone = "UTC";
  job.created_ns = to_unix_ns(TimePoint(std::chrono::sys_days(std::chrono::year(2024) / 1 / 1) + 3h));
  CHECK(job.next_fire() == TimePoint(std::chrono::sys_days(std::chrono::year(2024) / 1 / 2) + 2h));
  job.handled_until_ns = to_unix_ns(TimePoint(std::chrono::sys_days(std::chrono::year(2024) / 1 / 5) + 2h));
  CHECK(job.next_fire() == TimePoint(std::chrono::sys_days(std::chrono::year(2024) / 1 / 6) + 2h));
}

TEST_CASE("job status: RPO age counts from the start of the newest successful run", "[jobs]") {
  JobStatus s;
  s.name = "nightly";
  const TimePoint now = from_unix_ns(int64_t{100'000} * 1'000'000'000);
  CHECK_FALSE(s.rpo_met(now).has_value());  // no objective
  s.rpo = 1h;
  CHECK(s.rpo_met(now) == false);  // no success yet
  s.last_success = run_at(100'000 - 3600, catalog::JobOutcome::kSuccess);
  CHECK(s.rpo_age(now) == 3600s);
  CHECK(s.rpo_met(now) == true);
  CHECK(s.rpo_met(now + 1s) == false);
}

TEST_CASE("metrics: Prometheus text with every series per job", "[jobs]") {
  const TimePoint now = from_unix_ns(int64_t{2'000'000} * 1'000'000'000);
  JobStatus a;
  a.name = "db \"main\"";
  a.rpo = 24h;
  a.running = true;
  a.next_fire = from_unix_ns(int64_t{2'003'600} * 1'000'000'000);
  a.last_run = run_at(1'990'000, catalog::JobOutcome::kPartial);
  a.last_success = run_at(1'900'000, catalog::JobOutcome::kSuccess);
  JobStatus b;
  b.name = "new";
  std::string text = render_metrics({a, b}, now);
  const std::string la = "{job=\"db \\\"main\\\"\"}";
  CHECK_THAT(text, Catch::Contains("# TYPE keel_job_last_success_timestamp_seconds gauge\n"));
  CHECK_THAT(text, Catch::Contains("keel_job_last_success_timestamp_seconds" + la + " 1900000\n"));
  CHECK_THAT(text, Catch::Contains("keel_job_last_success_timestamp_seconds{job=\"new\"} 0\n"));
  CHECK_THAT(text, Catch::Contains("keel_job_last_run_duration_seconds" + la + " 90.5\n"));
  CHECK_THAT(text, Catch::Contains("keel_job_last_run_bytes_added" + la + " 4096\n"));
  CHECK_THAT(text, Catch::Contains("keel_job_last_run_outcome{job=\"db \\\"main\\\"\",outcome=\"partial\"} 1\n"));
  CHECK_THAT(text, Catch::Contains("keel_job_last_run_outcome{job=\"db \\\"main\\\"\",outcome=\"success\"} 0\n"));
  CHECK_THAT(text, Catch::Contains("keel_job_rpo_seconds" + la + " 86400\n"));
  CHECK_THAT(text, Catch::Contains("keel_job_rpo_met" + la + " 0\n"));  // 100000 s > 24 h
  CHECK_THAT(text, Catch::Contains("keel_job_running" + la + " 1\n"));
  CHECK_THAT(text, Catch::Contains("keel_job_running{job=\"new\"} 0\n"));
  CHECK_THAT(text, Catch::Contains("keel_job_next_run_timestamp_seconds" + la + " 2003600\n"));
  // A job without runs or an RPO has no such samples.
  CHECK_THAT(text, !Catch::Contains("keel_job_rpo_met{job=\"new\"}"));
  CHECK_THAT(text, !Catch::Contains("keel_job_last_run_duration_seconds{job=\"new\"}"));
}

TEST_CASE("metrics server answers GET /metrics on loopback", "[jobs]") {
  int renders = 0;
  PrometheusServer server("127.0.0.1:0", [&] {
    ++renders;
    return std::string("keel_job_running{job=\"x\"} 1\n");
  });
  std::string address = server.address();
  CHECK_THAT(address, Catch::StartsWith("127.0.0.1:"));
  std::string ok = http_get(address, "GET /metrics HTTP/1.0\r\n\r\n");
  CHECK_THAT(ok, Catch::StartsWith("HTTP/1.0 200 OK"));
  CHECK_THAT(ok, Catch::Contains("text/plain; version=0.0.4"));
  CHECK_THAT(ok, Catch::EndsWith("\r\n\r\nkeel_job_running{job=\"x\"} 1\n"));
  CHECK_THAT(http_get(address, "GET / HTTP/1.0\r\n\r\n"), Catch::StartsWith("HTTP/1.0 404"));
  CHECK_THAT(http_get(address, "POST /metrics HTTP/1.0\r\n\r\n"), Catch::StartsWith("HTTP/1.0 405"));
  CHECK(renders == 1);

  CHECK_THROWS_AS(PrometheusServer("9464", [] { return std::string(); }), Error);
  CHECK_THROWS_AS(PrometheusServer("no.such.host.invalid:9464", [] { return std::string(); }), Error);
  try {
    PrometheusServer taken(address, [] { return std::string(); });
    FAIL("listened on a port in use");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kTargetIo);
  }
}

TEST_CASE("file locks exclude a second holder until released", "[jobs]") {
  TempDir dir;
  std::string path = dir.file("locks/job.lock");
  {
    auto first = FileLock::try_lock(path);
    REQUIRE(first.has_value());
    CHECK_FALSE(FileLock::try_lock(path).has_value());
    CHECK(FileLock::held_elsewhere(path));
  }
  CHECK_FALSE(FileLock::held_elsewhere(path));
  CHECK(FileLock::try_lock(path).has_value());
}

TEST_CASE("child processes: exit codes, signals to the group, environment", "[jobs]") {
  TempDir dir;
  auto wait = [](ChildProcess& child) {
    for (int i = 0; i < 1000; ++i) {
      if (auto code = child.poll()) return *code;
      std::this_thread::sleep_for(5ms);
    }
    FAIL("child did not end");
    return -1;
  };
  ChildProcess exits = ChildProcess::spawn({"/bin/sh", "-c", "exit 3"}, {}, ChildProcess::kInheritStdout);
  CHECK(wait(exits) == 3);
  CHECK(exits.poll() == 3);  // stays known

  std::string out = dir.file("env");
  ChildProcess env = ChildProcess::spawn({"/bin/sh", "-c", "echo \"$KEEL_JOB\" > " + out}, {{"KEEL_JOB", "a b"}}, STDERR_FILENO);
  CHECK(wait(env) == 0);
  CHECK(std::string(as_chars(read_file(out))) == "a b\n");

  // SIGTERM reaches the shell's own children too (its process group).
  ChildProcess sleeper = ChildProcess::spawn({"/bin/sh", "-c", "sleep 30 & wait"}, {}, ChildProcess::kInheritStdout);
  std::this_thread::sleep_for(50ms);
  CHECK_FALSE(sleeper.poll().has_value());
  sleeper.signal(SIGTERM);
  CHECK(wait(sleeper) == 128 + SIGTERM);

  CHECK_THROWS_AS(ChildProcess::spawn({"/no/such/program"}, {}, ChildProcess::kInheritStdout), Error);
  CHECK_THROWS_AS(ChildProcess::spawn({"no-such-program-in-path"}, {}, ChildProcess::kInheritStdout), Error);

  // A name is looked up in PATH; its stdout can be a pipe; wait() blocks until it ends.
  int pipe_fds[2];
  REQUIRE(::pipe2(pipe_fds, O_CLOEXEC) == 0);
  UniqueFd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
  ChildProcess printer = ChildProcess::spawn({"sh", "-c", "printf piped; exit 4"}, {}, write_end.get());
  write_end.reset();
  char buf[16] = {};
  CHECK(read_full(read_end.get(), std::span(reinterpret_cast<uint8_t*>(buf), sizeof buf), "pipe") == 5);
  CHECK(std::string(buf) == "piped");
  CHECK(printer.wait() == 4);
  CHECK(printer.wait() == 4);
}
