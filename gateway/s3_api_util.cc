#include "gateway/s3_api_util.h"

#include <algorithm>
#include <chrono>
#include <sstream>

#include "gateway/rfc2047.h"
#include "gateway/s3_error.h"
#include "util/error.h"
#include "util/id.h"
#include "util/text.h"

namespace keel::gateway {

namespace {

constexpr size_t kMaxUserMetadata = 2048;

}  // namespace

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string version_id_for(const std::string& versioning) {
  return versioning == "Enabled" ? Id::random().hex().substr(0, 32) : std::string(kNullVersion);
}

void add_version_header(Response& response, bool versioned, const std::string& version_id) {
  if (versioned) response.headers.emplace_back("x-amz-version-id", version_id);
}

Response xml_response(std::string document, int status) {
  Response r;
  r.status = status;
  r.headers.emplace_back("content-type", "application/xml");
  r.body = std::move(document);
  return r;
}

std::string quoted_etag(const std::string& etag) { return "\"" + etag + "\""; }

uint64_t parse_size(const std::string& text, const std::string& what) {
  if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos) {
    throw S3Error("InvalidArgument", what + " '" + text.substr(0, 40) + "' is not a non-negative integer");
  }
  return std::stoull(text);
}

size_t parse_max(const S3Request& request, const std::string& name, size_t default_and_cap) {
  const auto value = request.query_value(name);
  if (!value) return default_and_cap;
  return static_cast<size_t>(std::min<uint64_t>(parse_size(*value, name), default_and_cap));
}

size_t parse_max_header(const S3Request& request, const std::string& name, size_t default_and_cap) {
  if (!request.has_header(name)) return default_and_cap;
  return static_cast<size_t>(std::min<uint64_t>(parse_size(request.header(name), name), default_and_cap));
}

bool parse_encoding_type(const S3Request& request) {
  const auto value = request.query_value("encoding-type");
  if (!value) return false;
  if (*value != "url") throw S3Error("InvalidArgument", "encoding-type must be 'url', not '" + *value + "'");
  return true;
}

std::string encode_continuation_token(const std::string& last) { return to_base64(as_bytes(last)); }

std::string decode_continuation_token(const std::string& token) {
  try {
    const Bytes bytes = from_base64(token);
    return std::string(as_chars(bytes));
  } catch (const Error&) {
    throw S3Error("InvalidArgument", "the continuation token is not one this gateway issued");
  }
}

ListingRequest parse_listing_request(const S3Request& request) {
  return {request.query_value("prefix").value_or(""), request.query_value("delimiter").value_or(""),
          parse_encoding_type(request), parse_max(request, "max-keys", 1000)};
}

std::string listing_url_encode(std::string_view text) {
  // Java's URLEncoder set with %20 for a blank and '/' kept: unlike SigV4's, '*' stays and '~' is escaped.
  return percent_encode(text, "-_.*/");
}

std::string ListingRequest::encode(const std::string& text) const { return url ? listing_url_encode(text) : text; }

namespace {

ListCursor cursor_at(const ObjectRecord& object) { return {object.key, object.version_id}; }
ListCursor cursor_at(const UploadRecord& upload) { return {upload.key, upload.upload_id}; }

template <class Record>
ListingPageOf<Record> list_page_of(
    const std::function<std::vector<Record>(const ListCursor& after, size_t limit)>& fetch,
    const std::string& prefix, const std::string& delimiter, const ListCursor& after, size_t max_keys) {
  constexpr size_t kBatch = 1000;
  ListingPageOf<Record> page;
  if (max_keys == 0) return page;  // as S3: nothing listed, and not truncated
  size_t entries = 0;
  ListCursor cursor = after;
  while (true) {
    const auto batch = fetch(cursor, kBatch);
    bool skipped_ahead = false;
    for (const auto& record : batch) {
      cursor = cursor_at(record);
      std::optional<std::string> rolled_up;
      if (!delimiter.empty()) {
        const size_t at = record.key.find(delimiter, prefix.size());
        if (at != std::string::npos) rolled_up = record.key.substr(0, at + delimiter.size());
      }
      // A common prefix that the marker is in (or is) went out on an earlier page.
      const bool already_listed = rolled_up && after.key.starts_with(*rolled_up);
      if (!already_listed) {
        if (entries == max_keys) {
          page.truncated = true;
          return page;
        }
        ++entries;
        if (rolled_up) {
          page.common_prefixes.push_back(*rolled_up);
          page.last = *rolled_up;
          page.last_version_id.clear();
        } else {
          page.objects.push_back(record);
          page.last = cursor.key;
          page.last_version_id = cursor.version_id;
        }
      }
      if (rolled_up) {
        // Keys are UTF-8, which never holds the byte 0xff: this skips the
        // rest of the common prefix in one step.
        cursor = {*rolled_up + "\xff", ""};
        skipped_ahead = true;
        break;
      }
    }
    if (!skipped_ahead && batch.size() < kBatch) return page;
  }
}

}  // namespace

ListingPage list_page(const FetchObjects& fetch, const std::string& prefix, const std::string& delimiter,
                      const ListCursor& after, size_t max_keys) {
  return list_page_of(fetch, prefix, delimiter, after, max_keys);
}

UploadListingPage list_page(const FetchUploads& fetch, const std::string& prefix, const std::string& delimiter,
                            const ListCursor& after, size_t max_uploads) {
  return list_page_of(fetch, prefix, delimiter, after, max_uploads);
}

std::optional<ByteRange> parse_range(const std::string& header, uint64_t size) {
  const std::string text = std::string(trim_blanks(header));
  if (!text.starts_with("bytes=") || text.find(',') != std::string::npos) return std::nullopt;
  const std::string spec = text.substr(6);
  const size_t dash = spec.find('-');
  if (dash == std::string::npos) return std::nullopt;
  const std::string first_text = std::string(trim_blanks(spec.substr(0, dash))), last_text = std::string(trim_blanks(spec.substr(dash + 1)));
  const auto number = [](const std::string& s) -> std::optional<uint64_t> {
    if (s.empty() || s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    return std::stoull(s);
  };
  const auto unsatisfiable = [&] {
    return S3Error("InvalidRange", "the requested range is not satisfiable for an object of " +
                                       std::to_string(size) + " bytes");
  };
  if (first_text.empty()) {  // suffix: the last n bytes
    const auto n = number(last_text);
    if (!n) return std::nullopt;
    if (*n == 0 || size == 0) throw unsatisfiable();
    const uint64_t length = std::min(*n, size);
    return ByteRange{size - length, length};
  }
  const auto first = number(first_text);
  if (!first) return std::nullopt;
  std::optional<uint64_t> last;
  if (!last_text.empty()) {
    last = number(last_text);
    if (!last || *last < *first) return std::nullopt;
  }
  if (*first >= size) throw unsatisfiable();
  const uint64_t end = last ? std::min(*last, size - 1) : size - 1;
  return ByteRange{*first, end - *first + 1};
}

ByteRange parse_copy_source_range(const std::string& header, uint64_t size) {
  const auto invalid = [&] {
    return S3Error("InvalidArgument", "x-amz-copy-source-range '" + header.substr(0, 80) +
                                          "' is not bytes=first-last within the source object of size " +
                                          std::to_string(size));
  };
  if (!header.starts_with("bytes=")) throw invalid();
  const std::string spec = header.substr(6);
  const size_t dash = spec.find('-');
  const auto number = [&](const std::string& s) {
    if (s.empty() || s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos) throw invalid();
    return std::stoull(s);
  };
  if (dash == std::string::npos) throw invalid();
  const uint64_t first = number(spec.substr(0, dash)), last = number(spec.substr(dash + 1));
  if (last < first) throw invalid();
  if (last >= size) {
    // Well formed but past the source's end: S3's InvalidRange.
    throw S3Error("InvalidRange", "x-amz-copy-source-range '" + header.substr(0, 80) +
                                      "' goes past the end of the source object of size " + std::to_string(size));
  }
  return {first, last - first + 1};
}

size_t multipart_parts(const ObjectRecord& object) {
  const size_t dash = object.etag.rfind('-');
  if (dash == std::string::npos) return 0;
  const std::string count = object.etag.substr(dash + 1);
  if (count.empty() || count.size() > 5 || count.find_first_not_of("0123456789") != std::string::npos) return 0;
  const size_t n = std::stoul(count);
  return n == object.segments.size() ? n : 0;
}

std::optional<ByteRange> part_range(const ObjectRecord& object, const std::string& number) {
  const uint64_t n = parse_size(number, "partNumber");
  if (n < 1 || n > 10000) throw S3Error("InvalidArgument", "partNumber must be 1 to 10000");
  const size_t count = multipart_parts(object);
  if (n > std::max<size_t>(count, 1)) {
    throw S3Error("InvalidPartNumber", "the object has " + std::to_string(std::max<size_t>(count, 1)) +
                                           " part(s), not part " + number);
  }
  if (count == 0) return std::nullopt;
  uint64_t offset = 0;
  for (size_t i = 0; i + 1 < n; ++i) offset += object.segments[i].length;
  return ByteRange{offset, object.segments[n - 1].length};
}

std::string checksum_type(const ObjectRecord& object) {
  const size_t dash = object.checksum.rfind('-');
  return dash != std::string::npos && dash + 1 < object.checksum.size() &&
                 object.checksum.find_first_not_of("0123456789", dash + 1) == std::string::npos
             ? "COMPOSITE"
             : "FULL_OBJECT";
}

void check_readable(const std::optional<ObjectRecord>& object, const std::string& key, const std::string& version_id) {
  if (!object && !version_id.empty()) {
    throw S3Error("NoSuchVersion", "the key '" + key + "' has no version '" + version_id + "'");
  }
  if (!object) {
    // As RGW, which conformance suites check: the 404 says that no delete marker hides the key.
    S3Error error("NoSuchKey", "the key '" + key + "' does not exist");
    error.headers = {{"x-amz-delete-marker", "false"}};
    throw error;
  }
  if (object->delete_marker) {
    // The current version is a delete marker (404), or a marker was asked for by id (405).
    S3Error error = version_id.empty() ? S3Error("NoSuchKey", "the key '" + key + "' is deleted")
                                       : S3Error("MethodNotAllowed", "version '" + version_id + "' is a delete marker");
    error.headers = {{"x-amz-delete-marker", "true"}, {"x-amz-version-id", object->version_id}};
    throw error;
  }
}

CopySource parse_copy_source(const std::string& header) {
  // The query is split off before decoding: a key may hold "?" (sent as %3F).
  const size_t q = header.find('?');
  std::string text = percent_decode(std::string_view(header).substr(0, q));
  std::string version_id;
  if (q != std::string::npos) {
    const std::string query = header.substr(q + 1);
    if (!query.starts_with("versionId=")) {
      throw S3Error("InvalidArgument", "x-amz-copy-source '" + header + "' takes only a versionId parameter");
    }
    version_id = percent_decode(std::string_view(query).substr(10));
    if (version_id.empty()) throw S3Error("InvalidArgument", "x-amz-copy-source has an empty versionId");
  }
  if (text.starts_with("/")) text.erase(0, 1);
  const size_t slash = text.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == text.size()) {
    throw S3Error("InvalidArgument", "x-amz-copy-source '" + header + "' is not bucket/key");
  }
  return {text.substr(0, slash), text.substr(slash + 1), version_id};
}

NameValues stored_headers(const S3Request& request) {
  static constexpr std::string_view kKept[] = {"content-type",  "content-disposition", "content-language",
                                               "cache-control", "expires",             "x-amz-storage-class",
                                               "x-amz-website-redirect-location"};
  NameValues out;
  size_t user_bytes = 0;
  for (const auto& [name, value] : request.headers) {
    if (name.starts_with("x-amz-meta-")) {
      std::string decoded = decode_metadata_value(value);
      user_bytes += name.size() - 11 + decoded.size();
      out.emplace_back(name, std::move(decoded));
    } else if (std::find(std::begin(kKept), std::end(kKept), name) != std::end(kKept)) {
      out.emplace_back(name, value);
    } else if (name == "content-encoding") {
      // Kept as sent, less the aws-chunked token that only framed the upload.
      if (ascii_lower(value).find("aws-chunked") == std::string::npos) {
        out.emplace_back(name, value);
        continue;
      }
      std::string kept;
      std::string_view rest = value;
      while (!rest.empty()) {
        const size_t comma = rest.find(',');
        const std::string token = std::string(trim_blanks(rest.substr(0, comma)));
        if (!token.empty() && token != "aws-chunked") kept += (kept.empty() ? "" : ",") + token;
        if (comma == std::string_view::npos) break;
        rest = rest.substr(comma + 1);
      }
      if (!kept.empty()) out.emplace_back(name, kept);
    }
  }
  if (user_bytes > kMaxUserMetadata) {
    throw S3Error("MetadataTooLarge", "user metadata is " + std::to_string(user_bytes) + " bytes, over 2 KiB");
  }
  return out;
}

}  // namespace keel::gateway
