// Facts about this machine that records carry: the host name, and whether a
// process a record names still runs here.
#pragma once

#include <cstdint>
#include <string>

namespace keel {

// This machine's host name; empty if it cannot be had.
std::string local_hostname();

// False only when no process `pid` exists on this machine (kill(pid, 0)
// says ESRCH): a process of another user counts as running, and so does a
// pid that was reused, so a live holder is never taken for dead.
bool process_running_here(int64_t pid);

}  // namespace keel
