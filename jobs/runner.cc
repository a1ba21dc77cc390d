#include "jobs/runner.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <memory>
#include <optional>
#include <thread>

#include "agents/fs/fs_source.h"
#include "agents/stdin/stdin_source.h"
#include "engine/forget.h"
#include "engine/repository.h"
#include "jobs/child_process.h"
#include "jobs/command_output.h"
#include "util/error.h"
#include "util/file_lock.h"

namespace keel::jobs {
namespace {

using catalog::JobOutcome;

// A before hook that ignores SIGTERM this long after a cancel is killed.
constexpr std::chrono::seconds kHookKillGrace{10};
// Runs of a job still marked running when it next runs are looked for among
// its newest runs; older ones were cleaned up by earlier runs.
constexpr size_t kStaleRunWindow = 16;

int64_t now_ns() { return to_unix_ns(std::chrono::system_clock::now()); }

std::string joined_paths(const std::vector<std::string>& paths) {
  std::string out;
  for (const auto& p : paths) out += (out.empty() ? "" : "\n") + p;
  return out;
}

// Runs `command` under /bin/sh -c and returns its exit code. With `cancel`,
// a cancel sends its process group SIGTERM (SIGKILL after the grace) and
// throws Error(kInterrupted) once it ended.
int run_hook(const std::string& phase, const std::string& command, const Environment& env,
             const std::atomic<bool>* cancel) {
  ChildProcess child = ChildProcess::spawn({"/bin/sh", "-c", command}, env, STDERR_FILENO);
  auto pause = std::chrono::milliseconds(1);
  std::optional<std::chrono::steady_clock::time_point> kill_at;
  while (true) {
    if (std::optional<int> code = child.poll()) {
      if (kill_at) throw Error(ErrorKind::kInterrupted, phase + " hook interrupted");
      return *code;
    }
    if (cancel && cancel->load() && !kill_at) {
      child.signal(SIGTERM);
      kill_at = std::chrono::steady_clock::now() + kHookKillGrace;
    }
    if (kill_at && std::chrono::steady_clock::now() >= *kill_at) child.signal(SIGKILL);
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));  // short hooks return fast
  }
}

class JobRun {
 public:
  JobRun(const Job& job, const RunOptions& options) : job_(job), options_(options) {}

  RunResult run() {
    result_.record.job = job_.name;
    result_.record.started_ns = now_ns();
    std::optional<FileLock> lock = FileLock::try_lock(options_.lock_path);
    auto history = catalog::Catalog::open(job_.catalog);
    if (!lock) {
      result_.record.outcome = JobOutcome::kRefused;
      result_.record.ended_ns = result_.record.started_ns;
      result_.record.message = "another run of job " + job_.name + " is still going (it holds " + options_.lock_path + ")";
      result_.record.id = history->add_job_run(result_.record);
      result_.exit_code = static_cast<int>(ErrorKind::kLocked);
      return result_;
    }
    close_stale_runs(*history);
    result_.record.id = history->add_job_run(result_.record);

    bool before_hook_passed = false;
    try {
      if (!job_.before_hook.empty()) {
        int code = run_hook("before", job_.before_hook, hook_env("before"), options_.cancel);
        if (code != 0) {
          throw Error(ErrorKind::kFailure, "before hook exited " + std::to_string(code) + ": nothing was backed up");
        }
      }
      before_hook_passed = true;
      if (job_.is_copy()) {
        copy();
      } else {
        back_up();
      }
    } catch (const Error& e) {
      fail(e.kind() == ErrorKind::kInterrupted ? JobOutcome::kInterrupted : JobOutcome::kFailed, e.what(), e.exit_code());
    } catch (const std::exception& e) {
      fail(JobOutcome::kFailed, std::string("internal error: ") + e.what(), static_cast<int>(ErrorKind::kFailure));
    }
    if (before_hook_passed && !job_.after_hook.empty()) run_after_hook();

    result_.record.ended_ns = now_ns();
    history->finish_job_run(result_.record);
    return result_;
  }

 private:
  std::unique_ptr<engine::Repository> open(const std::string& location, const std::string& catalog,
                                           const std::function<std::string()>& password) const {
    engine::OpenOptions open;
    open.password = password ? password() : "";
    open.catalog_path = catalog;
    return engine::Repository::open(targets::open_target(location, job_.target_options()), open);
  }

  void back_up() {
    auto repo = open(job_.repo, job_.catalog, options_.password);
    std::optional<CommandOutput> command;  // outlives the source that reads its pipe
    std::unique_ptr<engine::Source> source;
    if (!job_.stream_command.empty()) {
      command.emplace(std::vector<std::string>{"/bin/sh", "-c", job_.stream_command});
      source = agents::stdin_stream::make_stream_source(command->read_fd(), job_.stream_name,
                                                        [&] { command->check_exit(); });
    } else {
      source = agents::fs::make_fs_source(job_.paths, agents::fs::FsOptions{.excludes = job_.excludes});
    }

    engine::BackupOptions backup;
    backup.tags = {job_.tag()};
    backup.tags.insert(backup.tags.end(), job_.tags.begin(), job_.tags.end());
    backup.cancel = options_.cancel;
    backup.memory_budget = job_.memory_mib << 20;
    backup.append_only = job_.append_only;
    engine::BackupProgress own_progress;
    engine::BackupProgress& progress = options_.progress ? *options_.progress : own_progress;
    result_.backup = engine::run_backup(*repo, *source, backup, progress, [&](const engine::SkippedItem& item) {
      warn("keel: skipped " + item.path + ": " + item.reason);
    });

    catalog::JobRunRecord& r = result_.record;
    const catalog::SnapshotRecord& snapshot = result_.backup->snapshot;
    r.snapshot = snapshot.id;
    r.files = snapshot.stats.files;
    r.bytes_read = snapshot.stats.bytes_read;
    r.bytes_added = snapshot.stats.bytes_added;
    r.errors = snapshot.stats.errors;
    if (result_.backup->skipped.empty()) {
      r.outcome = JobOutcome::kSuccess;
    } else {
      r.outcome = JobOutcome::kPartial;
      r.message = std::to_string(result_.backup->skipped.size()) + " items could not be backed up";
      result_.exit_code = static_cast<int>(ErrorKind::kPartial);
    }

    if (job_.retention.empty()) return;
    try {
      auto decisions = engine::forget(*repo, engine::SnapshotSelection{.tags = {job_.tag()}}, job_.retention,
                                      engine::GroupBy::kHostAndPaths, false);
      result_.snapshots_forgotten =
          static_cast<size_t>(std::count_if(decisions.begin(), decisions.end(), [](const auto& d) { return !d.keep; }));
    } catch (const Error& e) {
      throw Error(e.kind(), "snapshot " + snapshot.id.short_hex() + " saved, but the retention policy failed: " + e.what());
    }
  }

  void copy() {
    auto from = open(job_.repo, job_.catalog, options_.password);
    auto to = open(job_.copy_to, job_.copy_catalog, options_.copy_password);
    from->sync_catalog();  // every snapshot of the source, as keel copy sees them
    engine::CopyOptions copy;
    copy.selection = job_.copy_selection;
    if (job_.copy_newer_than) copy.selection.since_ns = now_ns() - std::chrono::nanoseconds(*job_.copy_newer_than).count();
    copy.cancel = options_.cancel;
    engine::CopyProgress own_progress;
    result_.copy = engine::copy_snapshots(*from, *to, copy, options_.copy_progress ? *options_.copy_progress : own_progress);

    catalog::JobRunRecord& r = result_.record;
    size_t copied = 0;
    for (const engine::CopiedSnapshot& s : result_.copy->snapshots) {
      copied += !s.existed;
      r.snapshot = s.copy;  // the newest selected, in the destination
    }
    r.bytes_read = result_.copy->bytes_read;
    r.bytes_added = result_.copy->bytes_sent;
    r.outcome = JobOutcome::kSuccess;
    r.message = "copied " + std::to_string(copied) + " snapshots to " + job_.copy_to + " (" +
                std::to_string(result_.copy->snapshots.size() - copied) + " selected were there already)";
  }

  void run_after_hook() {
    Environment env = hook_env("after");
    env.emplace_back("KEEL_JOB_OUTCOME", std::string(catalog::job_outcome_name(result_.record.outcome)));
    if (result_.record.snapshot) env.emplace_back("KEEL_SNAPSHOT", result_.record.snapshot->hex());
    int code = 0;
    try {
      code = run_hook("after", job_.after_hook, env, nullptr);
    } catch (const Error& e) {
      code = -1;
      warn(std::string("keel: after hook: ") + e.what());
    }
    if (code == 0) return;
    std::string why = "after hook exited " + std::to_string(code);
    warn("keel: job " + job_.name + ": " + why);
    catalog::JobRunRecord& r = result_.record;
    if (r.outcome == JobOutcome::kSuccess || r.outcome == JobOutcome::kPartial) {
      fail(JobOutcome::kFailed, r.message.empty() ? why : r.message + "; " + why, static_cast<int>(ErrorKind::kFailure));
    } else {
      r.message += "; " + why;
    }
  }

  Environment hook_env(const std::string& phase) const {
    Environment env{{"KEEL_JOB", job_.name},
                    {"KEEL_REPO", job_.repo},
                    {"KEEL_JOB_PATHS", joined_paths(job_.paths)},
                    {"KEEL_JOB_RUN", std::to_string(result_.record.id)},
                    {"KEEL_JOB_PHASE", phase}};
    if (job_.is_copy()) env.emplace_back("KEEL_COPY_TO", job_.copy_to);
    return env;
  }

  // Runs still marked running while we hold the lock had their process die
  // before it could say how they ended.
  void close_stale_runs(catalog::Catalog& history) {
    for (catalog::JobRunRecord& stale : history.list_job_runs(job_.name, kStaleRunWindow)) {
      if (stale.outcome != JobOutcome::kRunning) continue;
      stale.outcome = JobOutcome::kInterrupted;
      stale.ended_ns = result_.record.started_ns;
      stale.message = "the run's process ended without recording an outcome (killed?)";
      history.finish_job_run(stale);
    }
  }

  void fail(JobOutcome outcome, const std::string& message, int exit_code) {
    result_.record.outcome = outcome;
    result_.record.message = message;
    result_.exit_code = exit_code;
  }

  void warn(const std::string& line) const {
    if (options_.warn) options_.warn(line);
  }

  const Job& job_;
  const RunOptions& options_;
  RunResult result_;
};

}  // namespace

RunResult run_job(const Job& job, const RunOptions& options) { return JobRun(job, options).run(); }

catalog::JobOutcome outcome_of_exit_code(int exit_code) {
  switch (exit_code) {
    case 0: return JobOutcome::kSuccess;
    case static_cast<int>(ErrorKind::kPartial): return JobOutcome::kPartial;
    case static_cast<int>(ErrorKind::kLocked): return JobOutcome::kRefused;
    case static_cast<int>(ErrorKind::kInterrupted): return JobOutcome::kInterrupted;
    default: return JobOutcome::kFailed;
  }
}

}  // namespace keel::jobs
