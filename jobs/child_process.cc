#include "jobs/child_process.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <map>

#include "util/error.h"

extern char** environ;

namespace keel::jobs {
namespace {

// posix_spawn's attributes and file actions, owned.
struct SpawnSetup {
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t actions;
  SpawnSetup() {
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_init(&actions);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
};

int exit_code_of(int status) { return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status); }

}  // namespace

ChildProcess ChildProcess::spawn(const std::vector<std::string>& argv, const Environment& extra, int stdout_fd) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [name, value] : extra) env[name] = value;
  std::vector<std::string> env_entries;
  for (const auto& [name, value] : env) env_entries.push_back(name + "=" + value);
  std::vector<char*> envp, args;
  for (auto& e : env_entries) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);

  SpawnSetup setup;
  // keel ignores SIGPIPE and catches SIGINT/SIGTERM; the child starts with
  // the defaults and no blocked signals.
  sigset_t defaults, none;
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP}) sigaddset(&defaults, sig);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&setup.attr, &defaults);
  posix_spawnattr_setsigmask(&setup.attr, &none);
  posix_spawnattr_setpgroup(&setup.attr, 0);
  posix_spawnattr_setflags(&setup.attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  if (stdout_fd != kInheritStdout) posix_spawn_file_actions_adddup2(&setup.actions, stdout_fd, STDOUT_FILENO);

  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, argv[0].c_str(), &setup.actions, &setup.attr, args.data(), envp.data());
  if (rc != 0) throw Error(ErrorKind::kFailure, "cannot start " + argv[0] + ": " + std::strerror(rc));
  return ChildProcess(pid);
}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    kill_and_reap();
    pid_ = std::exchange(other.pid_, -1);
    exit_code_ = std::exchange(other.exit_code_, std::nullopt);
  }
  return *this;
}

ChildProcess::~ChildProcess() { kill_and_reap(); }

void ChildProcess::kill_and_reap() noexcept {
  if (pid_ < 0 || exit_code_) return;
  ::kill(-pid_, SIGKILL);
  reap();
}

void ChildProcess::reap() noexcept {
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  exit_code_ = exit_code_of(status);
}

int ChildProcess::wait() {
  if (pid_ < 0) throw Error(ErrorKind::kFailure, "wait for a process that was moved away");
  if (!exit_code_) reap();
  return *exit_code_;
}

std::optional<int> ChildProcess::poll() {
  if (exit_code_ || pid_ < 0) return exit_code_;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return std::nullopt;
  if (r < 0) throw_errno("wait for process " + std::to_string(pid_), errno);
  exit_code_ = exit_code_of(status);
  return exit_code_;
}

void ChildProcess::signal(int sig) const {
  if (pid_ > 0 && !exit_code_) ::kill(-pid_, sig);
}

}  // namespace keel::jobs
