// Runs each job in a child process of its own (in production
// `keel job run NAME`), so a run that crashes cannot take the scheduler
// down. Children get their own process group: SIGTERM reaches them when the
// scheduler passes it on, not twice.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "jobs/child_process.h"
#include "jobs/job_store.h"
#include "jobs/scheduler.h"

namespace keel::jobs {

class ProcessLauncher final : public JobLauncher {
 public:
  // `command` gives the argv that runs a job (argv[0] a path). Runs started
  // elsewhere are seen through the store's run locks.
  ProcessLauncher(const JobStore& store, std::function<std::vector<std::string>(const Job&)> command);

  void start(const Job& job) override;
  std::vector<FinishedRun> reap() override;
  bool busy_elsewhere(const Job& job) override;
  void terminate_all() override;
  void kill_all() override;

 private:
  const JobStore& store_;
  std::function<std::vector<std::string>(const Job&)> command_;
  std::map<std::string, ChildProcess> children_;  // by job name
};

}  // namespace keel::jobs
