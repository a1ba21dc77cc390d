// Pieces the S3 operations share: response documents, query parameters,
// listing pages with delimiters, byte ranges and the headers kept with an
// object.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gateway/exchange.h"
#include "gateway/metadata.h"
#include "gateway/request.h"
#include "gateway/xml_reader.h"

namespace keel::gateway {

inline constexpr std::string_view kS3Namespace = "http://s3.amazonaws.com/doc/2006-03-01/";

int64_t now_ns();  // the wall clock, for modification times

// The version id a write gets in a bucket with this versioning status: a new
// unique one when "Enabled", else the null version.
std::string version_id_for(const std::string& versioning);
// x-amz-version-id, when the bucket is versioned.
void add_version_header(Response& response, bool versioned, const std::string& version_id);

Response xml_response(std::string document, int status = 200);
// "\"etag\"". Not `quoted`: for a non-const std::string argument, argument-dependent
// lookup prefers std::quoted wherever <iomanip> happens to be included.
std::string quoted_etag(const std::string& etag);

// A decimal size header or parameter; throws S3Error InvalidArgument.
uint64_t parse_size(const std::string& text, const std::string& what);
// max-keys and the like: default when absent, capped at the default (S3's 1000).
size_t parse_max(const S3Request& request, const std::string& name, size_t default_and_cap);
// The same for a header (x-amz-max-parts).
size_t parse_max_header(const S3Request& request, const std::string& name, size_t default_and_cap);
// True for encoding-type=url; throws S3Error InvalidArgument for other values.
bool parse_encoding_type(const S3Request& request);

// The parameters ListObjects (v1, v2) and ListObjectVersions share.
// A key, prefix or marker as a listing with encoding-type=url carries it: every byte but
// ASCII letters, digits and "-_.*/" percent-encoded, as S3 does (a blank is %20).
std::string listing_url_encode(std::string_view text);

struct ListingRequest {
  std::string prefix;
  std::string delimiter;
  bool url = false;  // encoding-type=url
  size_t max_keys = 1000;
  // A key or prefix as the response carries it: URL-encoded with encoding-type=url.
  std::string encode(const std::string& text) const;
};
// Throws S3Error InvalidArgument (encoding-type, max-keys).
ListingRequest parse_listing_request(const S3Request& request);

// ListObjectsV2 continuation tokens: the last key or prefix returned, opaque to clients.
std::string encode_continuation_token(const std::string& last);
std::string decode_continuation_token(const std::string& token);

// A position in a listing: after this key, or (listing versions) after this
// version of it when version_id is not empty.
struct ListCursor {
  std::string key;
  std::string version_id;
};

// Records are objects, versions (the cursor's second part a version id) or
// multipart uploads (an upload id).
template <class Record>
struct ListingPageOf {
  std::vector<Record> objects;
  std::vector<std::string> common_prefixes;
  bool truncated = false;
  std::string last;  // the last key or common prefix on the page
  std::string last_version_id;  // the last entry's version or upload id ("" for a common prefix)
};
using ListingPage = ListingPageOf<ObjectRecord>;
using UploadListingPage = ListingPageOf<UploadRecord>;
// fetch(after, limit): records under the prefix after the cursor, in order.
using FetchObjects = std::function<std::vector<ObjectRecord>(const ListCursor& after, size_t limit)>;
using FetchUploads = std::function<std::vector<UploadRecord>(const ListCursor& after, size_t limit)>;
// One page of a listing: records and common prefixes (rolled up at the first
// delimiter after the prefix) after `after`, max_keys entries in all.
ListingPage list_page(const FetchObjects& fetch, const std::string& prefix, const std::string& delimiter,
                      const ListCursor& after, size_t max_keys);
UploadListingPage list_page(const FetchUploads& fetch, const std::string& prefix, const std::string& delimiter,
                            const ListCursor& after, size_t max_uploads);

struct ByteRange {
  uint64_t first = 0;
  uint64_t length = 0;
};
// A Range header ("bytes=a-b", "bytes=a-", "bytes=-n") against an object of
// `size` bytes. nullopt: serve the whole object (no header, or one S3
// ignores, such as several ranges). Throws S3Error InvalidRange (416) when
// the range starts past the end.
std::optional<ByteRange> parse_range(const std::string& header, uint64_t size);

// x-amz-copy-source-range: "bytes=first-last" within an object of `size`
// bytes. Throws S3Error InvalidArgument otherwise (a range past the end too, as AWS).
ByteRange parse_copy_source_range(const std::string& header, uint64_t size);

// A multipart object's part count (its ETag's "-N", each part one segment), 0 for others.
size_t multipart_parts(const ObjectRecord& object);
// The bytes of part `number` (a partNumber parameter) of the object; nullopt:
// the whole object (part 1 of an object not uploaded in parts). Throws
// S3Error InvalidArgument, InvalidPartNumber (416) past the last part.
std::optional<ByteRange> part_range(const ObjectRecord& object, const std::string& number);
// "COMPOSITE" for a multipart object's checksum of checksums ("...-N"), else "FULL_OBJECT".
std::string checksum_type(const ObjectRecord& object);

// A GET, HEAD or GetObjectAttributes of `object` (the version asked for, or
// the current one): throws S3Error NoSuchVersion, NoSuchKey (a missing key or
// a current delete marker) or MethodNotAllowed (a delete marker by id), with
// the delete marker headers.
void check_readable(const std::optional<ObjectRecord>& object, const std::string& key, const std::string& version_id);

struct CopySource {
  std::string bucket;
  std::string key;
  std::string version_id;  // empty: the current version
};
// x-amz-copy-source: "[/]bucket/key", URL-encoded, optionally "?versionId=ID".
// Throws S3Error InvalidArgument.
CopySource parse_copy_source(const std::string& header);

// The headers an object keeps from its upload: Content-Type and the other
// representation headers, x-amz-meta-*, storage class. Content-Encoding
// loses its aws-chunked token. Throws S3Error MetadataTooLarge past 2 KiB
// of user metadata.
NameValues stored_headers(const S3Request& request);

}  // namespace keel::gateway
