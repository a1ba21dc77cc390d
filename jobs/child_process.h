// A child process: started with posix_spawn in a process group of its own
// (so a terminal's Ctrl-C or a signal meant for keel reaches it only when
// keel passes it on), with default signal handling, and reaped or killed
// when the object goes away.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace keel::jobs {

using Environment = std::vector<std::pair<std::string, std::string>>;

class ChildProcess {
 public:
  // Starts argv[0] (a path) with this process's environment plus `extra`
  // (which wins). With `stdout_to_stderr`, its stdout is our stderr: our
  // stdout may carry --json output. Throws Error(kFailure) if it cannot.
  static ChildProcess spawn(const std::vector<std::string>& argv, const Environment& extra, bool stdout_to_stderr);

  ChildProcess(ChildProcess&& other) noexcept
      : pid_(std::exchange(other.pid_, -1)), exit_code_(std::exchange(other.exit_code_, std::nullopt)) {}
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  // A child still running is killed (SIGKILL, its whole group) and reaped.
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  // Its exit code once it ended (128 + N if signal N ended it); nullopt
  // while it runs. Does not block.
  std::optional<int> poll();
  bool running() { return !poll().has_value(); }
  // Sends `sig` to its process group (hooks may have children of their own).
  void signal(int sig) const;

 private:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}
  void kill_and_reap() noexcept;

  pid_t pid_ = -1;  // -1: moved from
  std::optional<int> exit_code_;  // set once reaped
};

}  // namespace keel::jobs
