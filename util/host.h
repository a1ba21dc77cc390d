// Facts about this machine that records carry: the host name.
#pragma once

#include <string>

namespace keel {

// This machine's host name; empty if it cannot be had.
std::string local_hostname();

}  // namespace keel
