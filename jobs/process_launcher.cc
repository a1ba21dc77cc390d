#include "jobs/process_launcher.h"

#include <unistd.h>

#include <csignal>

#include "util/error.h"
#include "util/file_lock.h"

namespace keel::jobs {

ProcessLauncher::ProcessLauncher(const JobStore& store, std::function<std::vector<std::string>(const Job&)> command)
    : store_(store), command_(std::move(command)) {}

void ProcessLauncher::start(const Job& job) {
  if (children_.count(job.name)) throw Error(ErrorKind::kLocked, "job " + job.name + " is running already");
  // Its output joins the scheduler's log on stderr.
  children_.emplace(job.name, ChildProcess::spawn(command_(job), {}, STDERR_FILENO));
}

std::vector<FinishedRun> ProcessLauncher::reap() {
  std::vector<FinishedRun> finished;
  for (auto it = children_.begin(); it != children_.end();) {
    if (std::optional<int> code = it->second.poll()) {
      finished.push_back({it->first, *code});
      it = children_.erase(it);
    } else {
      ++it;
    }
  }
  return finished;
}

bool ProcessLauncher::busy_elsewhere(const Job& job) {
  return !children_.count(job.name) && FileLock::held_elsewhere(store_.run_lock_path(job.name));
}

void ProcessLauncher::terminate_all() {
  for (const auto& [name, child] : children_) child.signal(SIGTERM);
}

void ProcessLauncher::kill_all() {
  for (const auto& [name, child] : children_) child.signal(SIGKILL);
}

}  // namespace keel::jobs
