#include "targets/retention.h"

#include <cctype>
#include <ctime>
#include <string>

namespace keel::targets {

const char* lock_mode_name(LockMode mode) { return mode == LockMode::kCompliance ? "COMPLIANCE" : "GOVERNANCE"; }

std::optional<LockMode> parse_lock_mode(std::string_view text) {
  std::string upper(text);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper == "GOVERNANCE") return LockMode::kGovernance;
  if (upper == "COMPLIANCE") return LockMode::kCompliance;
  return std::nullopt;
}

std::string iso8601_utc(int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  char text[32] = {};
  if (!gmtime_r(&t, &tm) || std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
    return std::to_string(unix_seconds);
  }
  return text;
}

std::optional<int64_t> parse_iso8601_utc(std::string_view text) {
  const std::string copy(text);
  std::tm tm{};
  const char* rest = strptime(copy.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!rest) return std::nullopt;
  bool fraction = false;
  if (*rest == '.') {
    for (++rest; *rest >= '0' && *rest <= '9'; ++rest) fraction |= *rest != '0';
  }
  const std::string_view zone(rest);
  if (zone != "Z" && zone != "+00:00") return std::nullopt;
  return static_cast<int64_t>(timegm(&tm)) + (fraction ? 1 : 0);
}

std::optional<Retention> WriteRetention::for_key(std::string_view key, int64_t now_unix) const {
  for (const std::string& prefix : unlocked_prefixes) {
    if (key.starts_with(prefix)) return std::nullopt;
  }
  return Retention{mode, now_unix + period.count()};
}

int64_t unix_now() { return static_cast<int64_t>(std::time(nullptr)); }

}  // namespace keel::targets

#include "util/error.h"

namespace keel::targets {

void throw_locked(const std::string& object, const Retention& retention) {
  throw Error(ErrorKind::kLocked, object + " is under Object Lock " + lock_mode_name(retention.mode) +
                                      " retention until " + iso8601_utc(retention.until_unix) +
                                      ": keel deletes nothing that is locked");
}

}  // namespace keel::targets
