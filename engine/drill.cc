#include "engine/drill.h"

#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <filesystem>
#include <limits>
#include <mutex>
#include <random>
#include <stop_token>
#include <system_error>
#include <thread>

#include "util/error.h"

namespace keel::engine {
namespace {

constexpr std::chrono::milliseconds kSampleInterval{100};
// Past this many samples every other one is dropped and the interval
// doubles, so a drill of hours keeps a small, evenly spread timeline.
constexpr size_t kMaxSamples = 4096;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int64_t unix_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Samples a restore's progress on its own thread until finished.
class TimelineSampler {
 public:
  // The first sample is taken here, not on the thread, which a busy machine
  // may not schedule before a short restore ends.
  explicit TimelineSampler(const RestoreProgress& progress)
      : progress_(progress), samples_{sample_now()}, thread_([this](std::stop_token stop) { run(stop); }) {}

  // Stops sampling; returns the timeline, ending with a sample taken now.
  std::vector<ThroughputSample> finish() {
    thread_.request_stop();
    thread_.join();
    samples_.push_back(sample_now());
    return std::move(samples_);
  }

 private:
  ThroughputSample sample_now() const { return {seconds_since(progress_.started), progress_.bytes_done.load()}; }

  void run(std::stop_token stop) {
    std::chrono::steady_clock::duration interval = kSampleInterval;
    std::mutex mu;
    std::condition_variable_any wake;  // woken by the stop request
    std::unique_lock lock(mu);
    while (true) {
      wake.wait_for(lock, stop, interval, [] { return false; });
      if (stop.stop_requested()) return;
      samples_.push_back(sample_now());
      if (samples_.size() >= kMaxSamples) {
        size_t kept = 0;
        for (size_t i = 0; i < samples_.size(); i += 2) samples_[kept++] = samples_[i];
        samples_.resize(kept);
        interval *= 2;
      }
    }
  }

  const RestoreProgress& progress_;
  std::vector<ThroughputSample> samples_;  // the thread's own until finish() joins it
  std::jthread thread_;                    // last: starts after, and is joined before, what it uses
};

// Removes a restored tree. Restored directories carry the snapshot's modes,
// perhaps read-only, so each is made writable before its entries go.
std::string remove_tree(const std::filesystem::path& root) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::permissions(root, fs::perms::owner_all, fs::perm_options::add, ec);
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code entry_ec;
    if (it->symlink_status(entry_ec).type() == fs::file_type::directory) {
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, entry_ec);
    }
  }
  ec.clear();
  fs::remove_all(root, ec);
  return ec ? "remove " + root.string() + ": " + ec.message() : "";
}

// The drill's own directory in the scratch directory: removed when the
// drill ends, however it ends, unless kept.
class ScratchDir {
 public:
  ScratchDir(const std::string& parent, bool keep) : keep_(keep) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec) throw Error(ErrorKind::kTargetIo, "scratch directory " + parent + ": " + ec.message());
    std::string name = (std::filesystem::path(parent) / "keel-drill-XXXXXX").string();
    if (::mkdtemp(name.data()) == nullptr) throw_errno("create a drill directory in " + parent, errno);
    path_ = std::move(name);
  }
  ~ScratchDir() {
    if (closed_) return;
    try {
      close();
    } catch (...) {  // best effort while an error is on its way up
    }
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }

  // Removes the directory unless kept; returns why it could not, or "".
  std::string close() {
    closed_ = true;
    return keep_ ? "" : remove_tree(path_);
  }

 private:
  std::string path_;
  bool keep_;
  bool closed_ = false;
};

// Restore reports paths on disk; the drill names them as in the snapshot,
// since the scratch directory is gone by the time anyone reads the report.
std::string snapshot_path(const std::string& disk_path, const std::string& restored_into) {
  if (!restored_into.empty() && disk_path.starts_with(restored_into)) {
    std::string rest = disk_path.substr(restored_into.size());
    return rest.empty() ? "/" : rest;
  }
  return disk_path.starts_with('/') ? disk_path : "/" + disk_path;  // verify-only: relative to ""
}

// How old, at `now_ns`, the newest snapshot without errors is: the data a
// recovery would lose. Infinite if there is no such snapshot.
double newest_complete_age(Repository& repo, int64_t now_ns) {
  std::optional<int64_t> newest;
  for (const catalog::SnapshotRecord& s : repo.catalog().list_snapshots()) {
    if (s.stats.errors == 0 && (!newest || s.time_ns > *newest)) newest = s.time_ns;
  }
  if (!newest) return std::numeric_limits<double>::infinity();
  return std::max<double>(0, static_cast<double>(now_ns - *newest) / 1e9);
}

// Non-zero, and 32 bits: short enough to type back in to repeat a sample.
uint64_t random_seed() {
  std::random_device device;
  uint64_t seed = 0;
  while (seed == 0) seed = device();
  return seed;
}

}  // namespace

DrillReport run_drill(Repository& repo, const DrillOptions& options) {
  if (!(options.sample > 0 && options.sample <= 1)) {
    throw Error(ErrorKind::kUsage, "drill sample must be a fraction in (0, 1], not " + std::to_string(options.sample));
  }
  if (!options.verify_only && options.scratch_dir.empty()) {
    throw Error(ErrorKind::kUsage, "a drill that restores needs a scratch directory (or verify-only)");
  }
  catalog::SnapshotRecord snapshot = repo.find_snapshot(options.snapshot);

  DrillReport report;
  report.snapshot = snapshot.id;
  report.snapshot_time_ns = snapshot.time_ns;
  report.verify_only = options.verify_only;
  report.sample = options.sample;
  report.seed = options.seed != 0 ? options.seed : random_seed();
  if (options.rto) report.rto_seconds = static_cast<double>(options.rto->count());
  if (options.rpo) report.rpo_seconds = static_cast<double>(options.rpo->count());

  std::optional<ScratchDir> scratch;
  if (!options.verify_only) {
    scratch.emplace(options.scratch_dir, options.keep_scratch);
    report.scratch = scratch->path();
  }
  RestoreOptions restore;
  restore.target_dir = report.scratch;
  restore.verify_only = options.verify_only;
  restore.sample = options.sample;
  restore.sample_seed = report.seed;
  restore.readers = options.readers;
  restore.cancel = options.cancel;

  report.started_unix_ns = unix_now_ns();
  RestoreProgress own_progress;
  RestoreProgress& progress = options.progress ? *options.progress : own_progress;
  progress.started = std::chrono::steady_clock::now();
  RestoreResult result;
  {
    TimelineSampler sampler(progress);
    result = run_restore(repo, snapshot, restore, progress);
    report.timeline = sampler.finish();
  }
  report.seconds = report.timeline.back().t_seconds;
  int64_t first_file_ns = progress.first_file_ns.load();
  if (first_file_ns > 0) report.first_file_seconds = static_cast<double>(first_file_ns) / 1e9;
  report.files = result.files;
  report.bytes = result.bytes;
  report.errors = result.failures.size();
  report.throughput_bps = report.seconds > 0 ? static_cast<double>(report.bytes) / report.seconds : 0;
  for (RestoreFailure& f : result.failures) {
    report.failures.push_back({snapshot_path(f.path, report.scratch), std::move(f.reason)});
  }

  report.rpo_seen_seconds = newest_complete_age(repo, report.started_unix_ns);
  if (report.rto_seconds) report.rto_met = report.errors == 0 && report.seconds <= *report.rto_seconds;
  if (report.rpo_seconds) report.rpo_met = report.rpo_seen_seconds <= *report.rpo_seconds;

  if (scratch) {
    report.scratch_error = scratch->close();
    report.scratch_kept = options.keep_scratch;
  }
  return report;
}

}  // namespace keel::engine
