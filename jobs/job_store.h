// Where job definitions live: a small SQLite database, by default
// <data dir>/jobs.db (beside the catalogs; see engine::default_data_dir).
// The CLI edits it; the scheduler reads it and notes the fires it handled.
// Any number of processes may open it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "jobs/job.h"

namespace keel::catalog {
class Database;
}

namespace keel::jobs {

class JobStore {
 public:
  static std::string default_path();

  // Opens or creates the database (and its directory). Throws
  // Error(kTargetIo) if it cannot.
  explicit JobStore(const std::string& path);
  ~JobStore();
  JobStore(const JobStore&) = delete;
  JobStore& operator=(const JobStore&) = delete;

  const std::string& path() const { return path_; }

  // Throws Error(kUsage) if a job of that name exists.
  void add(const Job& job);
  std::optional<Job> find(std::string_view name);
  // Throws Error(kNotFound) if there is no such job.
  Job get(std::string_view name);
  std::vector<Job> list();  // by name
  // Throws Error(kNotFound) if there is no such job.
  void remove(std::string_view name);
  // Notes that every fire of the job up to `unix_ns` is handled.
  void set_handled_until(std::string_view name, int64_t unix_ns);

  // Whether another process changed the jobs since the last call (the
  // first call says true).
  bool changed();

  // Held while a run of the job goes on (util/file_lock.h): <path>.locks/NAME.lock.
  std::string run_lock_path(std::string_view name) const;
  // Held by the one scheduler serving this store.
  std::string scheduler_lock_path() const;

 private:
  std::string path_;
  std::unique_ptr<catalog::Database> db_;
  std::optional<int64_t> data_version_;
};

}  // namespace keel::jobs
