// Helpers the gateway's unit tests share.
#pragma once

#include <functional>
#include <string>

#include "gateway/s3_error.h"

namespace keel::test {

// The S3 error code `fn` throws, or "" when it throws none.
inline std::string s3_error_code(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const gateway::S3Error& e) {
    return e.code();
  }
  return "";
}

}  // namespace keel::test
