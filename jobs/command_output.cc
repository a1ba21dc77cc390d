#include "jobs/command_output.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "util/error.h"

namespace keel::jobs {

CommandOutput::CommandOutput(const std::vector<std::string>& argv) : name_(argv.at(0)) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw_errno("pipe for " + name_, errno);
  read_end_ = UniqueFd(fds[0]);
  UniqueFd write_end(fds[1]);
  child_.emplace(ChildProcess::spawn(argv, {}, write_end.get()));
}  // our copy of the write end closes here, so EOF comes when the command's copies close

void CommandOutput::check_exit() {
  const int code = child_->wait();
  if (code != 0) {
    throw Error(ErrorKind::kFailure, "command " + name_ + " exited with status " + std::to_string(code) +
                                         (code > 128 ? " (signal " + std::to_string(code - 128) + ")" : "") +
                                         ", so its output may be incomplete");
  }
}

}  // namespace keel::jobs
