#include "jobs/job_store.h"


#include "catalog/sqlite.h"
#include "engine/repository.h"
#include "util/codec.h"
#include "util/error.h"
#include "util/fd.h"

namespace keel::jobs {
namespace {

using catalog::Statement;
using catalog::StatementScope;

// Another process may be writing (the scheduler noting a fire, `job add`).
constexpr int kBusyTimeoutMs = 10'000;

const std::vector<catalog::Migration> kMigrations = {
    // 1: job definitions. Lists are util/codec string lists.
    {
        "CREATE TABLE jobs(name TEXT PRIMARY KEY, repo TEXT NOT NULL, endpoint TEXT NOT NULL, region TEXT NOT NULL,"
        " aws_profile TEXT NOT NULL, ca_file TEXT NOT NULL, virtual_hosted INTEGER NOT NULL,"
        " password_file TEXT NOT NULL, catalog TEXT NOT NULL, paths BLOB NOT NULL, excludes BLOB NOT NULL,"
        " tags BLOB NOT NULL, schedule TEXT NOT NULL, time_zone TEXT NOT NULL, keep_last INTEGER NOT NULL,"
        " keep_hourly INTEGER NOT NULL, keep_daily INTEGER NOT NULL, keep_weekly INTEGER NOT NULL,"
        " keep_monthly INTEGER NOT NULL, keep_yearly INTEGER NOT NULL, keep_tags BLOB NOT NULL, rpo_seconds INTEGER,"
        " before_hook TEXT NOT NULL, after_hook TEXT NOT NULL, created_ns INTEGER NOT NULL, handled_until_ns INTEGER,"
        " memory_mib INTEGER NOT NULL)",
    },
    // 2: the RDMA data plane a job's S3 target is reached through.
    {"ALTER TABLE jobs ADD COLUMN rdma TEXT NOT NULL DEFAULT ''"},
    // 3: runs with append-only access (docs/immutable.md).
    {"ALTER TABLE jobs ADD COLUMN append_only INTEGER NOT NULL DEFAULT 0"},
    // 4: copy jobs (keel copy on a schedule). x'00': an empty string list.
    {
        "ALTER TABLE jobs ADD COLUMN copy_to TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE jobs ADD COLUMN copy_password_file TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE jobs ADD COLUMN copy_catalog TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE jobs ADD COLUMN copy_hosts BLOB NOT NULL DEFAULT x'00'",
        "ALTER TABLE jobs ADD COLUMN copy_tags BLOB NOT NULL DEFAULT x'00'",
        "ALTER TABLE jobs ADD COLUMN copy_paths BLOB NOT NULL DEFAULT x'00'",
        "ALTER TABLE jobs ADD COLUMN copy_newer_than_seconds INTEGER",
    },
    // 5: stream jobs (a command's output in place of paths).
    {
        "ALTER TABLE jobs ADD COLUMN stream_command TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE jobs ADD COLUMN stream_name TEXT NOT NULL DEFAULT ''",
    },
};

constexpr const char* kColumns =
    "name, repo, endpoint, region, aws_profile, ca_file, virtual_hosted, password_file, catalog, paths, excludes,"
    " tags, schedule, time_zone, keep_last, keep_hourly, keep_daily, keep_weekly, keep_monthly, keep_yearly,"
    " keep_tags, rpo_seconds, before_hook, after_hook, created_ns, handled_until_ns, memory_mib, rdma, append_only,"
    " copy_to, copy_password_file, copy_catalog, copy_hosts, copy_tags, copy_paths, copy_newer_than_seconds,"
    " stream_command, stream_name";

Job read_job(Statement& s) {
  Job j;
  j.name = s.column_text(0);
  const std::string what = "job " + j.name + " ";
  j.repo = s.column_text(1);
  j.endpoint = s.column_text(2);
  j.region = s.column_text(3);
  j.aws_profile = s.column_text(4);
  j.ca_file = s.column_text(5);
  j.virtual_hosted = s.column_int64(6) != 0;
  j.password_file = s.column_text(7);
  j.catalog = s.column_text(8);
  j.paths = decode_strings(s.column_blob(9), what + "paths");
  j.excludes = decode_strings(s.column_blob(10), what + "excludes");
  j.tags = decode_strings(s.column_blob(11), what + "tags");
  j.schedule = s.column_text(12);
  j.time_zone = s.column_text(13);
  j.retention.last = static_cast<uint32_t>(s.column_int64(14));
  j.retention.hourly = static_cast<uint32_t>(s.column_int64(15));
  j.retention.daily = static_cast<uint32_t>(s.column_int64(16));
  j.retention.weekly = static_cast<uint32_t>(s.column_int64(17));
  j.retention.monthly = static_cast<uint32_t>(s.column_int64(18));
  j.retention.yearly = static_cast<uint32_t>(s.column_int64(19));
  j.retention.keep_tags = decode_strings(s.column_blob(20), what + "keep tags");
  if (!s.column_is_null(21)) j.rpo = std::chrono::seconds(s.column_int64(21));
  j.before_hook = s.column_text(22);
  j.after_hook = s.column_text(23);
  j.created_ns = s.column_int64(24);
  if (!s.column_is_null(25)) j.handled_until_ns = s.column_int64(25);
  j.memory_mib = s.column_uint64(26);
  j.rdma = s.column_text(27);
  j.append_only = s.column_int64(28) != 0;
  j.copy_to = s.column_text(29);
  j.copy_password_file = s.column_text(30);
  j.copy_catalog = s.column_text(31);
  j.copy_selection.hosts = decode_strings(s.column_blob(32), what + "copy hosts");
  j.copy_selection.tags = decode_strings(s.column_blob(33), what + "copy tags");
  j.copy_selection.paths = decode_strings(s.column_blob(34), what + "copy paths");
  if (!s.column_is_null(35)) j.copy_newer_than = std::chrono::seconds(s.column_int64(35));
  j.stream_command = s.column_text(36);
  j.stream_name = s.column_text(37);
  return j;
}

}  // namespace

std::string JobStore::default_path() { return engine::default_data_dir() + "/jobs.db"; }

JobStore::JobStore(const std::string& path) : path_(path) {
  create_parent_dirs(path, "jobs " + path);
  db_ = std::make_unique<catalog::Database>(path);
  db_->exec("PRAGMA busy_timeout = " + std::to_string(kBusyTimeoutMs));
  db_->exec("PRAGMA journal_mode = WAL");
  // Losing the last commit to a power cut costs at most one repeated run.
  db_->exec("PRAGMA synchronous = NORMAL");
  catalog::migrate(*db_, kMigrations);
}

JobStore::~JobStore() = default;

void JobStore::add(const Job& j) {
  StatementScope s(db_->cached(std::string("INSERT INTO jobs(") + kColumns +
                               ") VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
                               " ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                               " ON CONFLICT(name) DO NOTHING RETURNING name"));
  s->bind_text(1, j.name);
  s->bind_text(2, j.repo);
  s->bind_text(3, j.endpoint);
  s->bind_text(4, j.region);
  s->bind_text(5, j.aws_profile);
  s->bind_text(6, j.ca_file);
  s->bind_int64(7, j.virtual_hosted);
  s->bind_text(8, j.password_file);
  s->bind_text(9, j.catalog);
  s->bind_blob(10, encode_strings(j.paths));
  s->bind_blob(11, encode_strings(j.excludes));
  s->bind_blob(12, encode_strings(j.tags));
  s->bind_text(13, j.schedule);
  s->bind_text(14, j.time_zone);
  s->bind_int64(15, j.retention.last);
  s->bind_int64(16, j.retention.hourly);
  s->bind_int64(17, j.retention.daily);
  s->bind_int64(18, j.retention.weekly);
  s->bind_int64(19, j.retention.monthly);
  s->bind_int64(20, j.retention.yearly);
  s->bind_blob(21, encode_strings(j.retention.keep_tags));
  if (j.rpo) {
    s->bind_int64(22, j.rpo->count());
  } else {
    s->bind_null(22);
  }
  s->bind_text(23, j.before_hook);
  s->bind_text(24, j.after_hook);
  s->bind_int64(25, j.created_ns);
  if (j.handled_until_ns) {
    s->bind_int64(26, *j.handled_until_ns);
  } else {
    s->bind_null(26);
  }
  s->bind_uint64(27, j.memory_mib);
  s->bind_text(28, j.rdma);
  s->bind_int64(29, j.append_only);
  s->bind_text(30, j.copy_to);
  s->bind_text(31, j.copy_password_file);
  s->bind_text(32, j.copy_catalog);
  s->bind_blob(33, encode_strings(j.copy_selection.hosts));
  s->bind_blob(34, encode_strings(j.copy_selection.tags));
  s->bind_blob(35, encode_strings(j.copy_selection.paths));
  if (j.copy_newer_than) {
    s->bind_int64(36, j.copy_newer_than->count());
  } else {
    s->bind_null(36);
  }
  s->bind_text(37, j.stream_command);
  s->bind_text(38, j.stream_name);
  if (!s->step()) {
    throw Error(ErrorKind::kUsage, "a job named " + j.name + " exists already (keel job remove " + j.name + " first)");
  }
}

std::optional<Job> JobStore::find(std::string_view name) {
  StatementScope s(db_->cached(std::string("SELECT ") + kColumns + " FROM jobs WHERE name = ?"));
  s->bind_text(1, name);
  if (!s->step()) return std::nullopt;
  return read_job(*s);
}

Job JobStore::get(std::string_view name) {
  std::optional<Job> job = find(name);
  if (!job) throw Error(ErrorKind::kNotFound, "no job named " + std::string(name) + " in " + path_ + " (see keel job list)");
  return std::move(*job);
}

std::vector<Job> JobStore::list() {
  StatementScope s(db_->cached(std::string("SELECT ") + kColumns + " FROM jobs ORDER BY name"));
  std::vector<Job> jobs;
  while (s->step()) jobs.push_back(read_job(*s));
  return jobs;
}

void JobStore::remove(std::string_view name) {
  StatementScope s(db_->cached("DELETE FROM jobs WHERE name = ? RETURNING name"));
  s->bind_text(1, name);
  if (!s->step()) throw Error(ErrorKind::kNotFound, "no job named " + std::string(name) + " in " + path_);
}

void JobStore::set_handled_until(std::string_view name, int64_t unix_ns) {
  StatementScope s(db_->cached("UPDATE jobs SET handled_until_ns = ? WHERE name = ?"));
  s->bind_int64(1, unix_ns);
  s->bind_text(2, name);
  s->run();
}

bool JobStore::changed() {
  StatementScope s(db_->cached("PRAGMA data_version"));
  s->step();
  int64_t version = s->column_int64(0);
  bool changed = data_version_ != version;
  data_version_ = version;
  return changed;
}

std::string JobStore::run_lock_path(std::string_view name) const { return path_ + ".locks/" + std::string(name) + ".lock"; }

std::string JobStore::scheduler_lock_path() const { return path_ + ".scheduler.lock"; }

}  // namespace keel::jobs
