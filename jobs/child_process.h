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
  // Starts argv[0] (a path, or a name looked up in PATH) with this process's
  // environment plus `extra` (which wins). Its stdout is `stdout_fd` unless
  // that is kInheritStdout (our stderr where our stdout carries --json
  // output; a pipe's write end to read what it prints). Throws
  // Error(kFailure) if it cannot.
  static constexpr int kInheritStdout = -1;
  static ChildProcess spawn(const std::vector<std::string>& argv, const Environment& extra, int stdout_fd);

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
  // Waits for it to end; its exit code as poll() gives it.
  int wait();
  // Sends `sig` to its process group (hooks may have children of their own).
  void signal(int sig) const;

 private:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}
  void kill_and_reap() noexcept;
  void reap() noexcept;  // blocks until it ends

  pid_t pid_ = -1;  // -1: moved from
  std::optional<int> exit_code_;  // set once reaped
};

}  // namespace keel::jobs
