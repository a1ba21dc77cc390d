// The multipart upload operations of S3Api.
#include <algorithm>
#include <cstdio>
#include <map>

#include "gateway/acl.h"
#include "gateway/conditional.h"
#include "gateway/encryption.h"
#include "gateway/object_cipher.h"
#include "gateway/object_lock.h"
#include "gateway/payload_checks.h"
#include "gateway/s3_api.h"
#include "gateway/s3_api_util.h"
#include "gateway/tagging.h"
#include "util/crc.h"
#include "util/digest.h"
#include "util/error.h"
#include "util/id.h"
#include "util/xml.h"

namespace keel::gateway {

namespace {

constexpr uint64_t kMaxPartSize = 5ull << 30;
constexpr uint64_t kMinPartSize = 5ull << 20;  // every part but the last
constexpr int kMaxPartNumber = 10000;
// How long a completed upload's answer is kept for a completion sent again.
constexpr int64_t kCompletionMemoryNs = 24ll * 3600 * 1'000'000'000;

int part_number(const S3Request& request) {
  const std::string text = request.query_value("partNumber").value_or("");
  const uint64_t n = parse_size(text, "partNumber");
  if (n < 1 || n > kMaxPartNumber) throw S3Error("InvalidArgument", "partNumber must be 1 to 10000");
  return static_cast<int>(n);
}

// "CRC64NVME" for "crc64nvme": how ChecksumAlgorithm names it.
std::string algorithm_name(const std::string& algorithm) { return checksum_element(algorithm).substr(8); }

// The checksum a part keeps: the upload's algorithm's, which the part must carry, as AWS.
std::string part_checksum(const UploadRecord& upload, const std::optional<ObjectChecksum>& sent) {
  if (upload.checksum_algorithm.empty()) return {};
  if (!sent || sent->algorithm != upload.checksum_algorithm) {
    throw S3Error("InvalidRequest", "the upload was created with the " + algorithm_name(upload.checksum_algorithm) +
                                        " checksum algorithm; each part must carry that checksum");
  }
  return sent->value;
}

std::string unquote(std::string etag) {
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') etag = etag.substr(1, etag.size() - 2);
  return etag;
}

}  // namespace

UploadRecord S3Api::upload_for(const Call& call, const Bucket& bucket) {
  const std::string id = call.request.query_value("uploadId").value_or("");
  std::optional<UploadRecord> upload;
  {
    std::lock_guard lock(mutex_);
    upload = metadata_.upload(id);
  }
  if (!upload || upload->bucket != bucket.record.name || upload->key != call.request.key) {
    throw S3Error("NoSuchUpload", "the upload '" + id + "' does not exist; it may have been completed or aborted");
  }
  return *upload;
}

void S3Api::store_part(const Bucket& bucket, const std::string& upload_id, const PartRecord& part) {
  std::optional<std::string> replaced;
  bool upload_exists = false;
  group_commit_.run([&] {
    upload_exists = metadata_.upload(upload_id).has_value();
    if (upload_exists) replaced = metadata_.put_part(upload_id, part);
  });
  if (!upload_exists) {
    bucket.storage->remove(part.file);
    throw S3Error("NoSuchUpload", "the upload '" + upload_id + "' was completed or aborted meanwhile");
  }
  if (replaced) bucket.storage->remove(*replaced);
}

namespace {

// An upload's id: its initiation time (16 hex digits), then 64 random bits.
// Ids sort as their uploads began, so that ListMultipartUploads pages through
// a key's uploads by id in the order S3 lists them (by initiation).
std::string new_upload_id(int64_t initiated_ns) {
  char time_hex[17];
  std::snprintf(time_hex, sizeof time_hex, "%016llx", static_cast<unsigned long long>(initiated_ns));
  return time_hex + Id::random().hex().substr(0, 16);
}

// Headers of CreateMultipartUpload that act when the upload completes: kept
// with the upload's headers, never stored as the object's metadata.
constexpr std::string_view kOnCompletion[] = {"x-amz-object-lock-mode", "x-amz-object-lock-retain-until-date",
                                              "x-amz-object-lock-legal-hold", "x-amz-tagging", "x-amz-checksum-type"};

bool acts_on_completion(std::string_view name) {
  return std::find(std::begin(kOnCompletion), std::end(kOnCompletion), name) != std::end(kOnCompletion);
}

std::optional<CrcAlgorithm> crc_algorithm(const std::string& name) {
  if (name == "crc32") return CrcAlgorithm::kCrc32;
  if (name == "crc32c") return CrcAlgorithm::kCrc32c;
  if (name == "crc64nvme") return CrcAlgorithm::kCrc64Nvme;
  return std::nullopt;
}

// COMPOSITE (a checksum of the parts' checksums, "-N") or FULL_OBJECT (a CRC
// of the whole object, combined from the parts'), as the upload was created.
std::string upload_checksum_type(const UploadRecord& upload) {
  for (const auto& [name, value] : upload.headers) {
    if (name == "x-amz-checksum-type") return value;
  }
  return upload.checksum_algorithm == "crc64nvme" ? "FULL_OBJECT" : "COMPOSITE";
}

// The whole object's CRC from its parts' (base64, big-endian) and sizes.
std::string full_object_crc(CrcAlgorithm algorithm, const std::vector<std::pair<std::string, uint64_t>>& parts) {
  uint64_t combined = 0;
  size_t bytes = 4;
  for (const auto& [checksum, size] : parts) {
    const Bytes raw = from_base64(checksum);
    bytes = raw.size();
    uint64_t value = 0;
    for (const uint8_t b : raw) value = value << 8 | b;
    combined = crc_combine(algorithm, combined, value, size);
  }
  Bytes out(bytes);
  for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<uint8_t>(combined >> (8 * (bytes - 1 - i)));
  return to_base64(out);
}

}  // namespace

Response S3Api::create_upload(const Call& call) {
  const auto bucket = bucket_for(call, Access::kAppend);
  // Checked now, as AWS does; applied to the version the upload completes into.
  new_version_lock(call, *bucket, /*uploads_body=*/false);
  parse_tagging_header(call.request.header("x-amz-tagging"));
  NameValues headers = stored_headers(call.request);
  for (const auto& [name, value] : call.request.headers) {
    if (acts_on_completion(name)) headers.emplace_back(name, value);
  }
  const ObjectEncryption encryption = write_encryption(call.request, *bucket);
  const int64_t initiated_ns = now_ns();
  UploadRecord upload{new_upload_id(initiated_ns), bucket->record.name, call.request.key, call.user.name,
                      initiated_ns, std::move(headers), call.request.header("x-amz-checksum-algorithm"),
                      encode_encryption(encryption.stored)};
  for (char& c : upload.checksum_algorithm) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!upload.checksum_algorithm.empty()) checksummer_for(upload.checksum_algorithm);
  const std::string type = call.request.header("x-amz-checksum-type");
  if (!type.empty()) {
    // As AWS: FULL_OBJECT takes a CRC; CRC-64/NVME is FULL_OBJECT only.
    const bool crc = crc_algorithm(upload.checksum_algorithm).has_value();
    if (upload.checksum_algorithm.empty() || (type != "COMPOSITE" && type != "FULL_OBJECT") ||
        (type == "FULL_OBJECT" && !crc) || (type == "COMPOSITE" && upload.checksum_algorithm == "crc64nvme")) {
      throw S3Error("InvalidRequest", "x-amz-checksum-type " + type + " does not go with the checksum algorithm '" +
                                          upload.checksum_algorithm + "'");
    }
  }
  {
    std::lock_guard lock(mutex_);
    refuse_overwrite(*bucket, upload.key, append_only_user(call, *bucket));  // before any part is sent
    metadata_.create_upload(upload);
  }
  XmlWriter xml;
  xml.open("InitiateMultipartUploadResult", kS3Namespace)
      .element("Bucket", upload.bucket)
      .element("Key", upload.key)
      .element("UploadId", upload.upload_id);
  Response r = xml_response(xml.finish());
  if (!upload.checksum_algorithm.empty()) {
    r.headers.emplace_back("x-amz-checksum-algorithm", algorithm_name(upload.checksum_algorithm));
    r.headers.emplace_back("x-amz-checksum-type", upload_checksum_type(upload));
  }
  add_abort_headers(r, *bucket, upload);
  encryption.add_headers(r, bucket->encrypted_at_rest());
  return r;
}

std::unique_ptr<RequestBody> S3Api::upload_part(const Call& call) {
  const auto bucket = bucket_for(call, Access::kAppend);
  const UploadRecord upload = upload_for(call, *bucket);
  const int number = part_number(call.request);
  // Every part is sealed with the key the upload was created with, as AWS.
  const ObjectEncryption encryption = encryption_for_read(call.request, upload.encryption, false, keys_);
  std::shared_ptr<BucketStorage::Writer> writer = create_object_writer(*bucket->storage, encryption.data_key);
  return body_reader(
      call,
      [writer](ByteView data) {
        if (writer->size() + data.size() > kMaxPartSize) throw S3Error("EntityTooLarge", "a part is at most 5 GiB");
        writer->write(data);
      },
      [this, bucket, writer, upload, number, encryption](const PayloadChecks& checks) {
        const std::string checksum = part_checksum(upload, checks.checksum());
        PartRecord part{number, writer->size(), encryption.etag(checks.md5_hex()), now_ns(), writer->commit(),
                        checksum};
        store_part(*bucket, upload.upload_id, part);
        Response r;
        r.headers.emplace_back("etag", quoted_etag(part.etag));
        if (checks.checksum()) {
          r.headers.emplace_back("x-amz-checksum-" + checks.checksum()->algorithm, checks.checksum()->value);
        }
        encryption.add_headers(r, bucket->encrypted_at_rest());
        return r;
      });
}

Response S3Api::upload_part_copy(const Call& call) {
  const auto bucket = bucket_for(call, Access::kAppend);
  const UploadRecord upload = upload_for(call, *bucket);
  const int number = part_number(call.request);
  const ObjectEncryption encryption = encryption_for_read(call.request, upload.encryption, false, keys_);
  const CopySource source = parse_copy_source(call.request.header("x-amz-copy-source"));
  S3Request source_request = call.request;
  source_request.bucket = source.bucket;
  source_request.key = source.key;
  const auto from = bucket_for(Call{source_request, call.user, call.auth}, Access::kRead);
  std::optional<ObjectRecord> object;
  std::unique_ptr<BodyProducer> source_bytes;
  ByteRange range;
  {
    std::lock_guard lock(mutex_);
    object = metadata_.object(from->record.name, source_request.key, source.version_id);
    if (!object || object->delete_marker) {
      throw S3Error("NoSuchKey", "the copy source '" + source_request.key + "' does not exist");
    }
    const ObjectEncryption source_encryption =
        encryption_for_read(call.request, object->encryption, true, keys_);
    check_copy_source_conditions(call.request, object->etag, object->modified_ns);
    range = {0, object->size};
    if (call.request.has_header("x-amz-copy-source-range")) {
      range = parse_copy_source_range(call.request.header("x-amz-copy-source-range"), object->size);
    }
    if (range.length > kMaxPartSize) throw S3Error("EntityTooLarge", "a part is at most 5 GiB");
    source_bytes = read_object(*from->storage, object->segments, range.first, range.length, source_encryption.data_key);
  }
  Digest md5(DigestAlgorithm::kMd5);
  std::optional<Checksummer> checksum;
  if (!upload.checksum_algorithm.empty()) checksum = checksummer_for(upload.checksum_algorithm);
  const auto writer = create_object_writer(*bucket->storage, encryption.data_key);
  std::string file = copy_bytes(*source_bytes, range.length, *writer, [&](ByteView data) {
    md5.update(data);
    if (checksum) checksum->update(data);
  });
  PartRecord part{number, range.length, encryption.etag(to_hex(md5.finish())), now_ns(), std::move(file),
                  checksum ? checksum->base64() : std::string()};
  store_part(*bucket, upload.upload_id, part);
  XmlWriter xml;
  xml.open("CopyPartResult", kS3Namespace).element("LastModified", iso8601(part.modified_ns)).element("ETag", quoted_etag(part.etag));
  if (checksum) xml.element(checksum_element(checksum->name()), part.checksum);
  Response r = xml_response(xml.finish());
  if (!source.version_id.empty()) r.headers.emplace_back("x-amz-copy-source-version-id", source.version_id);
  encryption.add_headers(r, bucket->encrypted_at_rest());
  return r;
}

namespace {

struct RequestedPart {
  int number = 0;
  std::string etag;
  std::string checksum;  // the part's <ChecksumXXX> when the client listed it
};

std::vector<RequestedPart> requested_parts(const std::string& body, const std::string& algorithm) {
  const auto tree = read_xml_body(body);
  const auto root = tree.get_child_optional("CompleteMultipartUpload");
  if (!root) throw S3Error("MalformedXML", "the body is not a <CompleteMultipartUpload> document");
  std::vector<RequestedPart> requested;
  for (const auto& [name, child] : *root) {
    if (name != "Part") continue;
    const auto number = child.get_optional<int>("PartNumber");
    if (!number || !child.get_child_optional("ETag")) {
      throw S3Error("MalformedXML", "a <Part> needs <PartNumber> and <ETag>");
    }
    // A number may repeat (see named_parts), never go back.
    if (!requested.empty() && *number < requested.back().number) {
      throw S3Error("InvalidPartOrder", "the parts must be listed in ascending order of part number");
    }
    requested.push_back({*number, unquote(xml_value(child, "ETag")),
                         algorithm.empty() ? std::string() : xml_value(child, checksum_element(algorithm))});
  }
  if (requested.empty()) throw S3Error("MalformedXML", "the upload must name at least one part");
  return requested;
}

// The stored parts a completion names, in order, taken out of `stored` (what stays there
// is not used). A part number listed more than once (a part sent again while its first
// upload was still running, and both answers noted) stands for the part as stored, the
// upload that finished last, when one of its entries has that part's ETag: never two
// copies of one part.
std::vector<PartRecord> named_parts(const std::vector<RequestedPart>& requested, std::map<int, PartRecord>& stored,
                                    const std::string& algorithm) {
  std::vector<PartRecord> named;
  for (auto first = requested.begin(); first != requested.end();) {
    const auto last =
        std::find_if(first, requested.end(), [&](const RequestedPart& p) { return p.number != first->number; });
    const auto part = stored.find(first->number);
    const auto entry = part == stored.end() ? last : std::find_if(first, last, [&](const RequestedPart& p) {
      return p.etag == part->second.etag;
    });
    if (entry == last) {
      throw S3Error("InvalidPart", "part " + std::to_string(first->number) +
                                       " was not uploaded or its ETag does not match");
    }
    if (!entry->checksum.empty() && entry->checksum != part->second.checksum) {
      throw S3Error("InvalidPart", "the " + checksum_element(algorithm) + " of part " + std::to_string(entry->number) +
                                       " is not the uploaded part's");
    }
    named.push_back(std::move(part->second));
    stored.erase(part);
    first = last;
  }
  return named;
}

NameValues completion_list(const std::vector<RequestedPart>& requested) {
  NameValues list;
  for (const auto& part : requested) list.emplace_back(std::to_string(part.number), part.etag);
  return list;
}

// The encryption headers of a CompleteMultipartUpload's answer for `object`.
void add_completion_encryption(Response& r, const ObjectRecord& object, const S3Request& request,
                               bool repository_encrypts) {
  ObjectEncryption encryption;
  encryption.stored = decode_encryption(object.encryption);
  if (encryption.stored.kind == StoredEncryption::Kind::kCustomerKey) {
    // The key need not come with the completion; its MD5 is echoed when it does.
    encryption.customer = customer_key(request, false);
    if (!encryption.customer) r.headers.emplace_back("x-amz-server-side-encryption-customer-algorithm", "AES256");
  }
  encryption.add_headers(r, repository_encrypts);
}

Response completion_response(const ObjectRecord& object, bool versioned) {
  XmlWriter xml;
  xml.open("CompleteMultipartUploadResult", kS3Namespace)
      .element("Location", "/" + object.bucket + "/" + object.key)
      .element("Bucket", object.bucket)
      .element("Key", object.key)
      .element("ETag", quoted_etag(object.etag));
  if (!object.checksum_algorithm.empty()) {
    xml.element(checksum_element(object.checksum_algorithm), object.checksum)
        .element("ChecksumType", checksum_type(object));
  }
  Response r = xml_response(xml.finish());
  add_version_header(r, versioned, object.version_id);
  return r;
}

}  // namespace

std::unique_ptr<RequestBody> S3Api::complete_upload(const Call& call) {
  const auto bucket = bucket_for(call, Access::kAppend);
  const std::string upload_id = call.request.query_value("uploadId").value_or("");
  std::optional<CompletedUpload> completed;
  {
    std::lock_guard lock(mutex_);
    if (!metadata_.upload(upload_id)) completed = metadata_.completed_upload(upload_id);
  }
  if (completed && completed->bucket == bucket->record.name && completed->key == call.request.key) {
    // A completion sent again (its response was lost): the same answer, when it lists the same parts.
    return small_body(call, [this, bucket, completed = *completed, request = call.request](const std::string& body) {
      if (completion_list(requested_parts(body, "")) != completed.parts) {
        throw S3Error("NoSuchUpload", "the upload '" + completed.upload_id + "' was completed with other parts");
      }
      std::optional<ObjectRecord> object;
      bool versioned;
      {
        std::lock_guard lock(mutex_);
        versioned = bucket->record.versioning == "Enabled";
        object = metadata_.object(completed.bucket, completed.key, completed.version_id);
      }
      if (!object || object->etag != completed.etag) {
        ObjectRecord remembered;
        remembered.bucket = completed.bucket;
        remembered.key = completed.key;
        remembered.etag = completed.etag;
        remembered.version_id = completed.version_id;
        object = remembered;
      }
      Response r = completion_response(*object, versioned);
      add_completion_encryption(r, *object, request, bucket->encrypted_at_rest());
      return r;
    });
  }
  const UploadRecord upload = upload_for(call, *bucket);
  if (has_write_conditions(call.request)) {
    std::lock_guard lock(mutex_);
    check_write_conditions(call.request, metadata_.object(bucket->record.name, upload.key));
  }
  return small_body(call, [this, bucket, upload, request = call.request,
                           append_user = append_only_user(call, *bucket)](const std::string& body) {
    const std::vector<RequestedPart> requested = requested_parts(body, upload.checksum_algorithm);
    ObjectRecord object;
    bool versioned;
    std::vector<std::string> unused;
    {
      std::lock_guard lock(mutex_);
      if (!metadata_.upload(upload.upload_id)) {
        throw S3Error("NoSuchUpload", "the upload '" + upload.upload_id + "' was completed or aborted meanwhile");
      }
      refuse_overwrite(*bucket, upload.key, append_user);
      if (has_write_conditions(request)) {
        // Checked when the request came; failing now means another write got in between.
        check_write_conditions(request, metadata_.object(bucket->record.name, upload.key),
                               "ConditionalRequestConflict");
      }
      std::map<int, PartRecord> parts;
      for (auto& part : metadata_.parts(upload.upload_id, 0, kMaxPartNumber)) parts[part.part_number] = part;
      const std::vector<PartRecord> named = named_parts(requested, parts, upload.checksum_algorithm);
      std::string md5s, checksums;
      std::vector<std::pair<std::string, uint64_t>> part_crcs;
      bool all_checksummed = !upload.checksum_algorithm.empty();
      for (size_t i = 0; i < named.size(); ++i) {
        const PartRecord& part = named[i];
        if (i + 1 < named.size() && part.size < kMinPartSize) {
          throw S3Error("EntityTooSmall", "part " + std::to_string(part.part_number) +
                                              " is smaller than the 5 MiB minimum for all but the last part");
        }
        const Bytes binary = from_hex(part.etag);
        md5s.append(as_chars(binary));
        all_checksummed = all_checksummed && !part.checksum.empty();
        if (!part.checksum.empty()) {
          const Bytes raw = from_base64(part.checksum);
          checksums.append(as_chars(raw));
          part_crcs.emplace_back(part.checksum, part.size);
          object.part_checksums.emplace_back(std::to_string(part.part_number), part.checksum);
        }
        object.segments.push_back({part.file, part.size});
        object.size += part.size;
      }
      for (const auto& [number, part] : parts) unused.push_back(part.file);
      object.bucket = upload.bucket;
      object.key = upload.key;
      object.encryption = upload.encryption;
      const std::string count = "-" + std::to_string(named.size());
      object.etag = to_hex(md5(as_bytes(md5s))) + count;
      if (all_checksummed && upload_checksum_type(upload) == "FULL_OBJECT") {
        object.checksum_algorithm = upload.checksum_algorithm;
        object.checksum = full_object_crc(*crc_algorithm(upload.checksum_algorithm), part_crcs);
        const std::string claimed = request.header("x-amz-checksum-" + upload.checksum_algorithm);
        if (!claimed.empty() && claimed != object.checksum) {
          throw S3Error("BadDigest", "the x-amz-checksum-" + upload.checksum_algorithm + " you specified (" + claimed +
                                         ") is not the parts' combined " + object.checksum);
        }
      } else if (all_checksummed) {
        // S3's composite checksum: the algorithm over the parts' binary checksums, then "-N".
        Checksummer composite = checksummer_for(upload.checksum_algorithm);
        composite.update(as_bytes(checksums));
        object.checksum_algorithm = upload.checksum_algorithm;
        object.checksum = composite.base64() + count;
      } else {
        object.part_checksums.clear();
      }
      object.modified_ns = now_ns();
      S3Request initiated;  // the lock and tagging headers CreateMultipartUpload carried
      for (const auto& header : upload.headers) {
        (acts_on_completion(header.first) ? initiated.headers : object.headers).push_back(header);
      }
      versioned = bucket->record.versioning == "Enabled";
      object.lock = lock_for_new_version(initiated, bucket->record, object.modified_ns, false);
      object.tags = parse_tagging_header(initiated.header("x-amz-tagging"));
      object.owner = bucket->rules->owner_for_write(upload.initiator, "", bucket->record.owner);
      object.version_id = version_id_for(bucket->record.versioning);
      std::vector<Segment> replaced;
      metadata_.transaction([&] {
        replaced = metadata_.put_object(object);
        metadata_.delete_upload(upload.upload_id);
        metadata_.record_completion({upload.upload_id, object.bucket, object.key, object.version_id, object.etag,
                                     completion_list(requested), object.modified_ns},
                                    object.modified_ns - kCompletionMemoryNs);
      });
      for (const auto& segment : replaced) unused.push_back(segment.file);
    }
    for (const auto& file : unused) bucket->storage->remove(file);
    Response r = completion_response(object, versioned);
    add_expiration_header(r, *bucket, object);
    add_completion_encryption(r, object, request, bucket->encrypted_at_rest());
    return r;
  });
}

Response S3Api::abort_upload(const Call& call) {
  const auto bucket = bucket_for(call, Access::kAppend);
  const UploadRecord upload = upload_for(call, *bucket);
  std::vector<std::string> files;
  {
    std::lock_guard lock(mutex_);
    metadata_.transaction([&] { files = metadata_.delete_upload(upload.upload_id); });
  }
  for (const auto& file : files) bucket->storage->remove(file);
  Response r;
  r.status = 204;
  return r;
}

Response S3Api::list_parts(const Call& call) {
  const auto bucket = bucket_for(call, Access::kRead);
  const UploadRecord upload = upload_for(call, *bucket);
  // AWS asks for an SSE-C upload's key only when it was created with a checksum algorithm
  // (the parts' checksums are of the plaintext); a key sent anyway must be the upload's.
  if (!upload.checksum_algorithm.empty() || customer_key(call.request, false)) {
    encryption_for_read(call.request, upload.encryption, false, keys_);
  }
  const size_t max_parts = parse_max(call.request, "max-parts", 1000);
  const int marker = static_cast<int>(
      std::min<uint64_t>(parse_size(call.request.query_value("part-number-marker").value_or("0"), "part-number-marker"),
                         kMaxPartNumber));
  std::vector<PartRecord> parts;
  bool owner_enforced = false;
  {
    std::lock_guard lock(mutex_);
    parts = metadata_.parts(upload.upload_id, marker, max_parts + 1);
    owner_enforced = bucket->rules->acls_disabled();
  }
  const bool truncated = parts.size() > max_parts;
  if (truncated) parts.resize(max_parts);
  XmlWriter xml;
  xml.open("ListPartsResult", kS3Namespace)
      .element("Bucket", upload.bucket)
      .element("Key", upload.key)
      .element("UploadId", upload.upload_id);
  user_element(xml, "Initiator", upload.initiator);
  user_element(xml, "Owner", owner_enforced ? bucket->record.owner : upload.initiator);
  if (!upload.checksum_algorithm.empty()) {
    xml.element("ChecksumAlgorithm", algorithm_name(upload.checksum_algorithm))
        .element("ChecksumType", upload_checksum_type(upload));
  }
  xml.element("StorageClass", "STANDARD")
      .element("PartNumberMarker", static_cast<uint64_t>(marker))
      .element("NextPartNumberMarker", static_cast<uint64_t>(parts.empty() ? marker : parts.back().part_number))
      .element("MaxParts", static_cast<uint64_t>(max_parts))
      .element("IsTruncated", truncated);
  for (const auto& part : parts) {
    xml.open("Part")
        .element("PartNumber", static_cast<uint64_t>(part.part_number))
        .element("LastModified", iso8601(part.modified_ns))
        .element("ETag", quoted_etag(part.etag))
        .element("Size", part.size);
    if (!part.checksum.empty()) xml.element(checksum_element(upload.checksum_algorithm), part.checksum);
    xml.close();
  }
  return xml_response(xml.finish());
}

Response S3Api::list_uploads(const Call& call) {
  const auto bucket = bucket_for(call, Access::kRead);
  const S3Request& r = call.request;
  const size_t max_uploads = parse_max(r, "max-uploads", 1000);
  const ListingRequest q{r.query_value("prefix").value_or(""), r.query_value("delimiter").value_or(""),
                         parse_encoding_type(r), max_uploads};
  // S3 ignores an upload-id-marker without a key-marker.
  const std::string key_marker = r.query_value("key-marker").value_or("");
  const ListCursor after{key_marker, key_marker.empty() ? "" : r.query_value("upload-id-marker").value_or("")};
  const UploadListingPage page = list_page(
      [&](const ListCursor& from, size_t limit) {
        std::lock_guard lock(mutex_);
        return metadata_.list_uploads(bucket->record.name, q.prefix, from.key, from.version_id, limit);
      },
      q.prefix, q.delimiter, after, q.max_keys);
  bool owner_enforced = false;
  {
    std::lock_guard lock(mutex_);
    owner_enforced = bucket->rules->acls_disabled();
  }
  XmlWriter xml;
  xml.open("ListMultipartUploadsResult", kS3Namespace)
      .element("Bucket", bucket->record.name)
      .element("KeyMarker", q.encode(after.key))
      .element("UploadIdMarker", after.version_id)
      .element("NextKeyMarker", q.encode(page.last.empty() ? after.key : page.last))
      .element("NextUploadIdMarker", page.last.empty() ? after.version_id : page.last_version_id)
      .element("Prefix", q.encode(q.prefix));
  if (!q.delimiter.empty()) xml.element("Delimiter", q.encode(q.delimiter));
  xml.element("MaxUploads", static_cast<uint64_t>(max_uploads)).element("IsTruncated", page.truncated);
  if (q.url) xml.element("EncodingType", "url");
  for (const auto& upload : page.objects) {
    xml.open("Upload").element("Key", q.encode(upload.key)).element("UploadId", upload.upload_id);
    user_element(xml, "Initiator", upload.initiator);
    user_element(xml, "Owner", owner_enforced ? bucket->record.owner : upload.initiator);
    xml.element("StorageClass", "STANDARD").element("Initiated", iso8601(upload.initiated_ns));
    if (!upload.checksum_algorithm.empty()) {
      xml.element("ChecksumAlgorithm", algorithm_name(upload.checksum_algorithm))
        .element("ChecksumType", upload_checksum_type(upload));
    }
    xml.close();
  }
  for (const auto& p : page.common_prefixes) xml.open("CommonPrefixes").element("Prefix", q.encode(p)).close();
  return xml_response(xml.finish());
}

}  // namespace keel::gateway
