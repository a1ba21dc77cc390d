// The gateway unit tests' way to look at a refusal: the S3 error code a call throws.
#pragma once

#include <functional>
#include <string>

#include "gateway/s3_error.h"

namespace keel::test {

// The code of the S3Error fn() throws; "" when it throws none.
inline std::string error_code(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const gateway::S3Error& e) {
    return e.code();
  }
  return "";
}

}  // namespace keel::test
