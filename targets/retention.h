// S3 Object Lock as keel uses it (docs/immutable.md): the retention an object
// carries, and the rule that gives every object written into an Object Lock
// repository its retention. Times are Unix seconds.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace keel::targets {

enum class LockMode : uint8_t { kGovernance = 1, kCompliance = 2 };

// "GOVERNANCE" or "COMPLIANCE", as S3 spells them.
const char* lock_mode_name(LockMode mode);
// Either spelling, any case; nullopt for anything else.
std::optional<LockMode> parse_lock_mode(std::string_view text);

struct Retention {
  LockMode mode = LockMode::kGovernance;
  int64_t until_unix = 0;
  bool locked_at(int64_t now_unix) const { return until_unix > now_unix; }
};

// "2026-12-26T10:00:00Z".
std::string iso8601_utc(int64_t unix_seconds);
// The same, optionally with fractional seconds (rounded up: a lock is never
// taken for shorter than it is) and "Z" or "+00:00"; nullopt when malformed.
std::optional<int64_t> parse_iso8601_utc(std::string_view text);

// What an Object Lock repository's writes carry: objects whose key starts
// with none of `unlocked_prefixes` get `mode` until now + `period`.
struct WriteRetention {
  LockMode mode = LockMode::kGovernance;
  std::chrono::seconds period{0};
  std::vector<std::string> unlocked_prefixes;
  std::optional<Retention> for_key(std::string_view key, int64_t now_unix) const;
};

int64_t unix_now();

}  // namespace keel::targets

namespace keel::targets {

// Throws Error(kLocked): `object` ("s3://b/p/snapshots/ab12...") is under
// `retention` until its date.
[[noreturn]] void throw_locked(const std::string& object, const Retention& retention);

}  // namespace keel::targets
