// A decorator that makes the target misbehave on chosen calls, for tests and
// the torture driver: errors (transient or permanent), responses lost after
// the operation happened, truncated or corrupted reads, and delays that
// reorder concurrent calls. A rule picks its calls by operation, key prefix,
// call number and probability (util/fault_schedule.h); the random choices
// come from a seeded generator, so a run can be replayed.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "targets/target.h"
#include "util/error.h"
#include "util/fault_schedule.h"

namespace keel::targets {

enum class TargetOp { kPut, kGetRange, kHead, kList, kRemove, kStartUpload, kWritePart, kCommit, kRemoveStaleUploads };
const char* target_op_name(TargetOp op);  // "put", "get_range", ...

enum class FaultKind {
  kError,          // the call fails without reaching the inner target
  kLostResponse,   // the inner target does it, then the caller sees a failure
  kTruncatedRead,  // get_range hands back only part of what it read
  kCorruptRead,    // get_range hands back what it read with one byte flipped
  kDelay,          // the call waits up to `delay` (random) first, then goes on
};
const char* fault_kind_name(FaultKind kind);

struct FaultRule {
  FaultKind kind = FaultKind::kError;
  // Which calls: the subject is the key (a listing's prefix, "" for
  // remove_stale_uploads).
  FaultSelection<TargetOp> when;
  // The error the caller sees (kError, kLostResponse).
  ErrorKind error = ErrorKind::kTargetIo;
  Persistence persistence = Persistence::kTransient;
  std::chrono::milliseconds delay{5};  // kDelay
};

// Shared by the test and the decorator: the test sets rules (set_rules(rules,
// seed)) between steps and reads calls(), hits() and log().
using FaultInjector = FaultSchedule<FaultRule, TargetOp>;

std::unique_ptr<Target> make_fault_injecting_target(std::unique_ptr<Target> inner,
                                                    std::shared_ptr<FaultInjector> injector);

}  // namespace keel::targets
