// Errors that reach the user: a kind the CLI maps to an exit code, and a
// message that names the object and what went wrong.
#pragma once

#include <stdexcept>
#include <string>

namespace keel {

// Each kind maps to one documented exit code (docs/exit-codes.md).
enum class ErrorKind {
  kFailure = 1,         // anything not covered below
  kUsage = 2,           // bad flags or arguments
  kPartial = 3,         // finished, but some items failed (reported)
  kRepository = 4,      // no repository there, or one already exists
  kWrongPassword = 5,   // no key slot opens with this password
  kIntegrity = 6,       // corrupt data: checksum or authentication failure
  kTargetIo = 7,        // the target or local disk failed an operation
  kLocked = 8,          // another process holds the repository
  kNotFound = 9,        // no such snapshot, path or object
  kObjectivesMissed = 10,  // a drill missed its RTO or RPO
  kInterrupted = 130,   // SIGINT/SIGTERM
};

// Whether the same operation may succeed when tried again: a target that
// throttled, timed out or dropped the connection fails kTransient; a missing
// object, a refused request or corrupt data fails kPermanent. Decorators
// (targets/retrying_target.h) retry on this alone, whatever the target.
enum class Persistence { kPermanent, kTransient };

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message, Persistence persistence = Persistence::kPermanent)
      : std::runtime_error(message), kind_(kind), persistence_(persistence) {}
  ErrorKind kind() const { return kind_; }
  int exit_code() const { return static_cast<int>(kind_); }
  bool transient() const { return persistence_ == Persistence::kTransient; }

 private:
  ErrorKind kind_;
  Persistence persistence_;
};

// Throws Error(kTargetIo) with "<context>: <strerror(errno_value)>".
[[noreturn]] void throw_errno(const std::string& context, int errno_value);

}  // namespace keel
