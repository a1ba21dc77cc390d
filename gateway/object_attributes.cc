// GetObjectAttributes: what S3 tells of a version without its bytes (ETag,
// checksum, parts, storage class, size), as x-amz-object-attributes asks.
#include <algorithm>
#include <set>

#include "gateway/encryption.h"
#include "gateway/payload_checks.h"
#include "gateway/s3_api.h"
#include "gateway/s3_api_util.h"
#include "util/text.h"
#include "util/xml.h"

namespace keel::gateway {

namespace {

constexpr std::string_view kAttributes[] = {"ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize"};

std::set<std::string> requested_attributes(const S3Request& request) {
  std::set<std::string> out;
  const std::string header = request.header("x-amz-object-attributes");
  std::string_view rest = header;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string name(trim_blanks(rest.substr(0, comma)));
    if (!name.empty()) {
      if (std::find(std::begin(kAttributes), std::end(kAttributes), name) == std::end(kAttributes)) {
        throw S3Error("InvalidArgument", "x-amz-object-attributes: unknown attribute '" + name + "'");
      }
      out.insert(name);
    }
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  if (out.empty()) throw S3Error("InvalidArgument", "x-amz-object-attributes names no attribute");
  return out;
}

}  // namespace

Response S3Api::object_attributes(const Call& call) {
  const auto bucket = bucket_for(call, Access::kRead);
  const std::set<std::string> wanted = requested_attributes(call.request);
  const std::string version_id = call.request.query_value("versionId").value_or("");
  std::optional<ObjectRecord> object;
  bool versioned;
  {
    std::lock_guard lock(mutex_);
    versioned = !bucket->record.versioning.empty();
    object = metadata_.object(bucket->record.name, call.request.key, version_id);
  }
  check_readable(object, call.request.key, version_id);
  // An SSE-C object's attributes need its key, as its GET and HEAD do (AWS): the same check, same errors.
  encryption_for_read(call.request, object->encryption, false, keys_);
  XmlWriter xml;
  xml.open("GetObjectAttributesResponse", kS3Namespace);
  if (wanted.contains("ETag")) xml.element("ETag", object->etag);  // unquoted, as S3 sends it here
  if (wanted.contains("Checksum") && !object->checksum_algorithm.empty()) {
    xml.open("Checksum")
        .element(checksum_element(object->checksum_algorithm), object->checksum)
        .element("ChecksumType", checksum_type(*object))
        .close();
  }
  const size_t parts = multipart_parts(*object);
  if (wanted.contains("ObjectParts") && parts > 0) {
    const size_t max_parts = parse_max_header(call.request, "x-amz-max-parts", 1000);
    const uint64_t marker = call.request.has_header("x-amz-part-number-marker")
                                ? parse_size(call.request.header("x-amz-part-number-marker"), "x-amz-part-number-marker")
                                : 0;
    const size_t first = static_cast<size_t>(std::min<uint64_t>(marker, parts));
    const size_t end = std::min(parts, first + max_parts);
    xml.open("ObjectParts")
        .element("PartsCount", static_cast<uint64_t>(parts))
        .element("PartNumberMarker", marker)
        .element("NextPartNumberMarker", static_cast<uint64_t>(end))
        .element("MaxParts", static_cast<uint64_t>(max_parts))
        .element("IsTruncated", end < parts);
    for (size_t i = first; i < end; ++i) {
      xml.open("Part").element("PartNumber", static_cast<uint64_t>(i + 1)).element("Size", object->segments[i].length);
      for (const auto& [number, checksum] : object->part_checksums) {
        if (number == std::to_string(i + 1)) xml.element(checksum_element(object->checksum_algorithm), checksum);
      }
      xml.close();
    }
    xml.close();
  }
  if (wanted.contains("StorageClass")) xml.element("StorageClass", "STANDARD");
  if (wanted.contains("ObjectSize")) xml.element("ObjectSize", object->size);
  Response r = xml_response(xml.finish());
  r.headers.emplace_back("last-modified", http_date(object->modified_ns / 1'000'000'000));
  add_version_header(r, versioned, object->version_id);
  return r;
}

}  // namespace keel::gateway
