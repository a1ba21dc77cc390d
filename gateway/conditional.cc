#include "gateway/conditional.h"

#include <ctime>

#include "gateway/http_date.h"
#include "gateway/object_lock.h"
#include "gateway/s3_api_util.h"
#include "gateway/s3_error.h"
#include "util/text.h"

namespace keel::gateway {

namespace {

// A date S3 would act on; a malformed one is ignored, as S3 ignores it.
std::optional<int64_t> condition_date(const std::string& text) {
  const std::time_t seconds = parse_http_date(text);
  if (seconds < 0) return std::nullopt;
  return static_cast<int64_t>(seconds);
}

// An ETag list ("\"a\", \"b\"", W/ prefixes, or "*") against the object's ETag.
bool etag_matches(const std::string& list, const std::string& etag) {
  std::string_view rest = list;
  while (true) {
    const size_t comma = rest.find(',');
    std::string_view item = trim_blanks(rest.substr(0, comma));
    if (item.starts_with("W/")) item.remove_prefix(2);
    if (item.size() >= 2 && item.front() == '"' && item.back() == '"') item = item.substr(1, item.size() - 2);
    if (item == "*" || item == etag) return true;
    if (comma == std::string_view::npos) return false;
    rest = rest.substr(comma + 1);
  }
}

// The four conditions of one header family, read once.
struct Conditions {
  std::optional<std::string> match, none_match;
  std::optional<int64_t> modified_since, unmodified_since;  // seconds

  Conditions(const S3Request& request, const std::string& prefix) {
    const auto get = [&](const std::string& name) -> std::optional<std::string> {
      if (!request.has_header(prefix + name)) return std::nullopt;
      return request.header(prefix + name);
    };
    match = get("if-match");
    none_match = get("if-none-match");
    if (const auto date = get("if-modified-since")) modified_since = condition_date(*date);
    if (const auto date = get("if-unmodified-since")) unmodified_since = condition_date(*date);
  }
};

S3Error precondition_failed(const std::string& what) {
  return S3Error("PreconditionFailed", "at least one of the preconditions you specified did not hold (" + what + ")");
}

// A delete condition's date: an HTTP date (headers) or ISO 8601 (DeleteObjects entries).
int64_t delete_condition_date(const std::string& text, const std::string& what) {
  if (const std::time_t seconds = parse_http_date(text); seconds >= 0) return seconds;
  if (const auto ns = parse_iso8601(text)) return *ns / 1'000'000'000;
  throw S3Error("InvalidArgument", what + " '" + text + "' is not a date");
}

}  // namespace

bool read_conditions_allow(const S3Request& request, const std::string& etag, int64_t modified_ns) {
  const Conditions c(request, "");
  const int64_t modified = modified_ns / 1'000'000'000;
  // As S3: If-Match decides over If-Unmodified-Since, If-None-Match over If-Modified-Since.
  if (c.match) {
    if (!etag_matches(*c.match, etag)) throw precondition_failed("If-Match");
  } else if (c.unmodified_since && modified > *c.unmodified_since) {
    throw precondition_failed("If-Unmodified-Since");
  }
  if (c.none_match) return !etag_matches(*c.none_match, etag);
  return !(c.modified_since && modified <= *c.modified_since);
}

void check_copy_source_conditions(const S3Request& request, const std::string& etag, int64_t modified_ns) {
  const Conditions c(request, "x-amz-copy-source-");
  const int64_t modified = modified_ns / 1'000'000'000;
  if (c.match) {
    if (!etag_matches(*c.match, etag)) throw precondition_failed("x-amz-copy-source-if-match");
  } else if (c.unmodified_since && modified > *c.unmodified_since) {
    throw precondition_failed("x-amz-copy-source-if-unmodified-since");
  }
  if (c.none_match) {
    if (etag_matches(*c.none_match, etag)) throw precondition_failed("x-amz-copy-source-if-none-match");
  } else if (c.modified_since && modified <= *c.modified_since) {
    throw precondition_failed("x-amz-copy-source-if-modified-since");
  }
}

bool has_write_conditions(const S3Request& request) {
  return request.has_header("if-none-match") || request.has_header("if-match");
}

void check_write_conditions(const S3Request& request, const std::optional<ObjectRecord>& current,
                            std::string_view failure) {
  const bool exists = current && !current->delete_marker;
  const auto fail = [&](const std::string& what) {
    return S3Error(failure, "the conditional write failed: " + what);
  };
  if (request.has_header("if-none-match")) {
    // "*": the key must have no current version (S3's form); ETags (RFC 9110, as
    // RGW; AWS answers 501): its current version must have none of them.
    const std::string none_match(trim_blanks(request.header("if-none-match")));
    if (none_match == "*") {
      if (exists) throw fail("the key '" + request.key + "' exists (If-None-Match: *)");
    } else if (exists && etag_matches(none_match, current->etag)) {
      throw fail("the ETag of '" + request.key + "' is one in If-None-Match");
    }
  }
  if (request.has_header("if-match")) {
    // As AWS: If-Match, "*" included, on a key with no current version (missing, or a delete marker) is 404.
    if (!exists) throw S3Error("NoSuchKey", "the key '" + request.key + "' does not exist (If-Match)");
    if (!etag_matches(request.header("if-match"), current->etag)) {
      throw fail("the ETag of '" + request.key + "' is not the one in If-Match");
    }
  }
}

DeleteConditions DeleteConditions::from_headers(const S3Request& request) {
  DeleteConditions c;
  if (request.has_header("if-match")) c.etag = request.header("if-match");
  if (request.has_header("x-amz-if-match-last-modified-time")) {
    c.modified_s = delete_condition_date(request.header("x-amz-if-match-last-modified-time"),
                                         "x-amz-if-match-last-modified-time");
  }
  if (request.has_header("x-amz-if-match-size")) {
    c.size = parse_size(request.header("x-amz-if-match-size"), "x-amz-if-match-size");
  }
  return c;
}

DeleteConditions DeleteConditions::from_entry(const std::string& etag, const std::string& modified,
                                              const std::string& size) {
  DeleteConditions c;
  if (!etag.empty()) c.etag = etag;
  if (!modified.empty()) c.modified_s = delete_condition_date(modified, "LastModifiedTime");
  if (!size.empty()) c.size = parse_size(size, "Size");
  return c;
}

void check_delete_conditions(const DeleteConditions& c, const std::optional<ObjectRecord>& target) {
  if (!target) return;
  const std::string etag = target->delete_marker ? "" : target->etag;
  const uint64_t size = target->delete_marker ? 0 : target->size;
  if (c.etag && !etag_matches(*c.etag, etag)) throw precondition_failed("If-Match");
  if (c.modified_s && target->modified_ns / 1'000'000'000 != *c.modified_s) {
    throw precondition_failed("x-amz-if-match-last-modified-time");
  }
  if (c.size && size != *c.size) throw precondition_failed("x-amz-if-match-size");
}

}  // namespace keel::gateway
