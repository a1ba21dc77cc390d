// A command whose standard output is read through a pipe, for backing up
// what it prints (`keel backup --stdin-from-command`, a job's stream command).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "jobs/child_process.h"
#include "util/fd.h"

namespace keel::jobs {

class CommandOutput {
 public:
  // Starts argv (argv[0] looked up in PATH). Throws Error(kFailure) if it cannot.
  explicit CommandOutput(const std::vector<std::string>& argv);

  // The pipe's read end: EOF once the command and its children close their stdout.
  int read_fd() const { return read_end_.get(); }
  // Waits for the command; throws Error(kFailure) unless it exited 0, since
  // what it printed may then be cut short.
  void check_exit();

 private:
  std::string name_;
  UniqueFd read_end_;
  std::optional<ChildProcess> child_;  // killed with its group if still running when this goes
};

}  // namespace keel::jobs
