// The object operations of S3Api: put, get (ranges), head, delete, copy.
#include <algorithm>
#include <chrono>

#include "gateway/conditional.h"
#include "gateway/encryption.h"
#include "gateway/object_cipher.h"
#include "gateway/object_lock.h"
#include "gateway/payload_checks.h"
#include "gateway/rfc2047.h"
#include "gateway/s3_api.h"
#include "gateway/s3_api_util.h"
#include "gateway/tagging.h"
#include "util/digest.h"
#include "util/error.h"
#include "util/xml.h"

namespace keel::gateway {

namespace {

constexpr uint64_t kMaxPutSize = 5ull << 30;  // S3's limit for one PutObject or part

// A header value as HTTP carries it: user metadata outside ASCII goes out
// RFC 2047-encoded, as S3 sends it.
std::string header_value(const std::string& name, const std::string& value) {
  return name.starts_with("x-amz-meta-") ? encode_metadata_value(value) : value;
}

// The response-* parameters of a GET or HEAD override these headers.
constexpr std::string_view kOverridable[] = {"content-type",        "content-language", "expires", "cache-control",
                                             "content-disposition", "content-encoding"};

void apply_response_overrides(Response& r, const S3Request& request) {
  for (const std::string_view name : kOverridable) {
    const auto value = request.query_value("response-" + std::string(name));
    if (!value) continue;
    std::erase_if(r.headers, [&](const auto& h) { return h.first == name; });
    r.headers.emplace_back(std::string(name), *value);
  }
}

// `ranged`: the response carries part of the object, which the stored
// whole-object checksum does not describe (S3 leaves it out too).
void add_object_headers(Response& r, const ObjectRecord& o, const S3Request& request, bool ranged) {
  bool has_type = false;
  for (const auto& [name, value] : o.headers) {
    has_type = has_type || name == "content-type";
    r.headers.emplace_back(name, header_value(name, value));
  }
  if (!has_type) r.headers.emplace_back("content-type", "binary/octet-stream");
  r.headers.emplace_back("etag", quoted_etag(o.etag));
  r.headers.emplace_back("last-modified", http_date(o.modified_ns / 1'000'000'000));
  r.headers.emplace_back("accept-ranges", "bytes");
  if (!ranged && !o.checksum_algorithm.empty() && request.header("x-amz-checksum-mode") == "ENABLED") {
    r.headers.emplace_back("x-amz-checksum-" + o.checksum_algorithm, o.checksum);
    r.headers.emplace_back("x-amz-checksum-type", checksum_type(o));
  }
  if (!o.lock.mode.empty()) {
    r.headers.emplace_back("x-amz-object-lock-mode", o.lock.mode);
    r.headers.emplace_back("x-amz-object-lock-retain-until-date", iso8601(o.lock.retain_until_ns));
  }
  if (o.lock.legal_hold != LegalHold::kNone) {
    r.headers.emplace_back("x-amz-object-lock-legal-hold", o.lock.legal_hold == LegalHold::kOn ? "ON" : "OFF");
  }
  if (!o.tags.empty()) r.headers.emplace_back("x-amz-tagging-count", std::to_string(o.tags.size()));
}

void add_checksum_header(Response& r, const PayloadChecks& checks) {
  if (checks.checksum()) r.headers.emplace_back("x-amz-checksum-" + checks.checksum()->algorithm, checks.checksum()->value);
}

}  // namespace

bool S3Api::commit_object(Bucket& bucket, ObjectRecord& object, const S3Request* conditions,
                          const std::string& append_user) {
  std::vector<Segment> replaced;
  bool versioned;
  group_commit_.run([&] {
    refuse_overwrite(bucket, object.key, append_user);  // again: another write may have created the key meanwhile
    if (conditions && has_write_conditions(*conditions)) {
      // Checked when the request came; failing now means another write got in between.
      check_write_conditions(*conditions, metadata_.object(bucket.record.name, object.key),
                             "ConditionalRequestConflict");
    }
    // As S3: only an Enabled bucket names the version a write made (Suspended writes the null one, unnamed).
    versioned = bucket.record.versioning == "Enabled";
    object.version_id = version_id_for(bucket.record.versioning);
    replaced = metadata_.put_object(object);
  });
  removal_.add(bucket.storage, replaced);
  return versioned;
}

ObjectLock S3Api::new_version_lock(const Call& call, const Bucket& bucket, bool uploads_body) {
  std::lock_guard lock(mutex_);
  return lock_for_new_version(call.request, bucket.record, now_ns(), uploads_body);
}

S3Api::Deletion S3Api::delete_key(Bucket& bucket, const std::string& key, const std::string& version_id,
                                  bool bypass_governance, bool may_remove_unversioned, const std::string& marker_owner,
                                  std::vector<Segment>& unused, const DeleteConditions& conditions) {
  Deletion deletion;
  const std::string& versioning = bucket.record.versioning;
  deletion.versioned = !versioning.empty();
  // The version named, or the current one (an unversioned bucket's null version).
  if (conditions.any()) check_delete_conditions(conditions, metadata_.object(bucket.record.name, key, version_id));
  // Removing the null version (directly, or by the null marker of a suspended bucket) loses its bytes for good.
  if (!may_remove_unversioned && (version_id.empty() ? versioning != "Enabled" : version_id == kNullVersion)) {
    const auto unversioned = metadata_.object(bucket.record.name, key, std::string(kNullVersion));
    if (unversioned && !unversioned->delete_marker) {
      throw S3Error("AccessDenied", "bucket '" + bucket.record.name + "' lets only its owner delete '" + key +
                                        "', an object no version keeps (delete_unversioned = owner)");
    }
  }
  if (!version_id.empty() || versioning.empty()) {
    const std::string& target = version_id.empty() ? std::string(kNullVersion) : version_id;
    if (const auto existing = metadata_.object(bucket.record.name, key, target)) {
      check_deletable(existing->lock, bypass_governance, now_ns());
    }
    const auto removed = metadata_.delete_version(bucket.record.name, key, target);
    deletion.version_id = version_id;
    if (removed) {
      deletion.delete_marker = removed->delete_marker;
      unused.insert(unused.end(), removed->segments.begin(), removed->segments.end());
    }
    return deletion;
  }
  // A versioned bucket keeps the versions and marks the key deleted; the
  // marker of a suspended bucket is the null version, replacing it.
  ObjectRecord marker;
  marker.bucket = bucket.record.name;
  marker.key = key;
  marker.delete_marker = true;
  marker.owner = marker_owner;
  marker.modified_ns = now_ns();
  marker.version_id = version_id_for(versioning);
  const auto replaced = metadata_.put_object(marker);
  unused.insert(unused.end(), replaced.begin(), replaced.end());
  deletion.version_id = marker.version_id;
  deletion.delete_marker = true;
  return deletion;
}

std::unique_ptr<RequestBody> S3Api::put_object(const Call& call) {
  const auto bucket = bucket_for(call, Access::kAppend);
  const std::string append_user = append_only_user(call, *bucket);
  {
    std::lock_guard lock(mutex_);
    refuse_overwrite(*bucket, call.request.key, append_user);  // before the body comes
  }
  const ObjectEncryption encryption = write_encryption(call.request, *bucket);
  std::shared_ptr<BucketStorage::Writer> writer = create_object_writer(*bucket->storage, encryption.data_key);
  ObjectRecord object;
  object.encryption = encode_encryption(encryption.stored);
  object.bucket = bucket->record.name;
  object.key = call.request.key;
  object.headers = stored_headers(call.request);
  object.lock = new_version_lock(call, *bucket, true);
  object.tags = parse_tagging_header(call.request.header("x-amz-tagging"));
  object.owner = owner_for_write(call, *bucket);
  if (has_write_conditions(call.request)) {
    std::lock_guard lock(mutex_);
    check_write_conditions(call.request, metadata_.object(bucket->record.name, object.key));
  }
  return body_reader(
      call,
      [writer](ByteView data) {
        if (writer->size() + data.size() > kMaxPutSize) {
          throw S3Error("EntityTooLarge", "a single PUT takes at most 5 GiB; use a multipart upload");
        }
        writer->write(data);
      },
      [this, bucket, writer, object, append_user, encryption,
       request = call.request](const PayloadChecks& checks) mutable {
        object.size = writer->size();
        object.etag = encryption.etag(checks.md5_hex());
        if (checks.checksum()) {
          object.checksum_algorithm = checks.checksum()->algorithm;
          object.checksum = checks.checksum()->value;
        }
        object.modified_ns = now_ns();
        object.segments = {{writer->commit(), object.size}};
        bool versioned;
        try {
          versioned = commit_object(*bucket, object, &request, append_user);
        } catch (const S3Error&) {
          bucket->storage->remove(object.segments.front().file);
          throw;
        }
        Response r;
        r.headers.emplace_back("etag", quoted_etag(object.etag));
        add_version_header(r, versioned, object.version_id);
        add_checksum_header(r, checks);
        add_expiration_header(r, *bucket, object);
        encryption.add_headers(r, bucket->encrypted_at_rest());
        return r;
      });
}

Response S3Api::sosapi_object(const Bucket& bucket, SosapiDocument document, bool head) {
  Response r;
  if (document == SosapiDocument::kSystem) {
    r.body = sosapi_system_xml();
  } else {
    uint64_t used;
    {
      std::lock_guard lock(mutex_);
      used = metadata_.bucket_bytes(bucket.record.name);
    }
    r.body = sosapi_capacity_xml(bucket.storage->capacity_path(), used);
  }
  const int64_t now = now_ns();
  r.headers = {{"content-type", "application/xml"},
               {"etag", quoted_etag(to_hex(md5(as_bytes(r.body))))},
               {"last-modified", http_date(now / 1'000'000'000)}};
  if (head) {
    r.head_length = r.body.size();
    r.body.clear();
  }
  return r;
}

Response S3Api::get_object(const Call& call, bool head) {
  const auto bucket = bucket_for(call, Access::kRead);
  if (const auto document = sosapi_document(call.request.key)) return sosapi_object(*bucket, *document, head);
  const std::string version_id = call.request.query_value("versionId").value_or("");
  std::optional<ObjectRecord> object;
  bool versioned;
  int part_number = 0;  // a part was asked for (partNumber) of a multipart object
  ObjectEncryption encryption;
  Response r;
  {
    std::lock_guard lock(mutex_);
    // A version asked for by id is named in the answer, "null" in a bucket never versioned too (as AWS).
    versioned = !bucket->record.versioning.empty() || !version_id.empty();
    object = metadata_.object(bucket->record.name, call.request.key, version_id);
    check_readable(object, call.request.key, version_id);
    encryption = encryption_for_read(call.request, object->encryption, false, keys_);
    if (!read_conditions_allow(call.request, object->etag, object->modified_ns)) {
      r.status = 304;
      r.headers.emplace_back("etag", quoted_etag(object->etag));
      r.headers.emplace_back("last-modified", http_date(object->modified_ns / 1'000'000'000));
      return r;
    }
    std::optional<ByteRange> range;
    if (const auto part = call.request.query_value("partNumber")) {
      if (call.request.has_header("range")) {
        throw S3Error("InvalidRequest", "a GET or HEAD takes a Range header or a partNumber, not both");
      }
      range = part_range(*object, *part);
      if (range) {
        part_number = std::stoi(*part);
        r.headers.emplace_back("x-amz-mp-parts-count", std::to_string(multipart_parts(*object)));
      }
    } else if (call.request.has_header("range")) {
      range = parse_range(call.request.header("range"), object->size);
    }
    const ByteRange whole{0, object->size};
    if (range) {
      r.status = 206;
      r.headers.emplace_back("content-range", "bytes " + std::to_string(range->first) + "-" +
                                                  std::to_string(range->first + range->length - 1) + "/" +
                                                  std::to_string(object->size));
    }
    const ByteRange served = range.value_or(whole);
    if (head) {
      r.head_length = served.length;
    } else {
      r.stream = read_object(*bucket->storage, object->segments, served.first, served.length, encryption.data_key);
      r.stream_length = served.length;
    }
  }
  add_object_headers(r, *object, call.request, r.status == 206);
  if (part_number > 0 && call.request.header("x-amz-checksum-mode") == "ENABLED") {
    for (const auto& [number, checksum] : object->part_checksums) {
      if (number == std::to_string(part_number)) {
        r.headers.emplace_back("x-amz-checksum-" + object->checksum_algorithm, checksum);
      }
    }
  }
  apply_response_overrides(r, call.request);
  add_version_header(r, versioned, object->version_id);
  if (object->latest) add_expiration_header(r, *bucket, *object);
  encryption.add_headers(r, bucket->encrypted_at_rest());
  return r;
}

Response S3Api::delete_object(const Call& call) {
  const auto bucket = bucket_for(call, Access::kWrite);
  const std::string version_id = call.request.query_value("versionId").value_or("");
  const bool bypass = bypasses_governance(call, *bucket);
  const bool remove_unversioned = may_remove_unversioned(call, *bucket);
  const std::string owner = owner_for_write(call, *bucket);
  const DeleteConditions conditions = DeleteConditions::from_headers(call.request);
  Deletion deletion;
  std::vector<Segment> unused;
  group_commit_.run([&] {
    deletion = delete_key(*bucket, call.request.key, version_id, bypass, remove_unversioned, owner, unused, conditions);
  });
  removal_.add(bucket->storage, unused);
  Response r;
  r.status = 204;
  if (deletion.delete_marker) r.headers.emplace_back("x-amz-delete-marker", "true");
  add_version_header(r, deletion.versioned && !deletion.version_id.empty(), deletion.version_id);
  return r;
}

ObjectRecord S3Api::target_version(const Call& call, const Bucket& bucket) {
  const std::string version_id = call.request.query_value("versionId").value_or("");
  std::optional<ObjectRecord> object;
  {
    std::lock_guard lock(mutex_);
    object = metadata_.object(bucket.record.name, call.request.key, version_id);
  }
  if (!object && !version_id.empty()) throw S3Error("NoSuchVersion", "there is no version '" + version_id + "'");
  if (!object || object->delete_marker) throw S3Error("NoSuchKey", "the key '" + call.request.key + "' does not exist");
  return *object;
}

Response S3Api::get_object_torrent(const Call& call) {
  const auto bucket = bucket_for(call, Access::kRead);
  const ObjectRecord object = target_version(call, *bucket);
  // The torrent is the missing resource: Ceph RGW answers so unless it is set up to keep torrents,
  // and AWS has not made them since 2021.
  throw S3Error("NoSuchKey", "no torrent is kept for '" + object.key + "': the gateway makes no torrent files");
}

Response S3Api::copy_object(const Call& call) {
  const CopySource source = parse_copy_source(call.request.header("x-amz-copy-source"));
  const S3Request source_request = [&] {
    S3Request r = call.request;
    r.bucket = source.bucket;
    r.key = source.key;
    return r;
  }();
  const Call source_call{source_request, call.user, call.auth};
  const auto from = bucket_for(source_call, Access::kRead);
  const auto to = bucket_for(call, Access::kAppend);
  std::optional<ObjectRecord> object;
  std::unique_ptr<BodyProducer> source_bytes;
  {
    std::lock_guard lock(mutex_);
    object = metadata_.object(from->record.name, source.key, source.version_id);
    if (object && !object->delete_marker) {
      const ObjectEncryption source_encryption =
          encryption_for_read(call.request, object->encryption, true, keys_);
      check_copy_source_conditions(call.request, object->etag, object->modified_ns);
      source_bytes = read_object(*from->storage, object->segments, 0, object->size, source_encryption.data_key);
    }
  }
  if (!source_bytes) {
    throw S3Error("NoSuchKey", "the copy source '" + source.key + "' does not exist");
  }
  const std::string directive = call.request.header("x-amz-metadata-directive");
  const bool replace = directive == "REPLACE";
  if (!directive.empty() && directive != "COPY" && !replace) {
    throw S3Error("InvalidArgument", "x-amz-metadata-directive must be COPY or REPLACE");
  }
  const ObjectEncryption encryption = write_encryption(call.request, *to);
  // As S3: a copy onto itself that changes the encryption (or its KMS key) is no no-op.
  const StoredEncryption source_stored = decode_encryption(object->encryption);
  if (!replace && from == to && source.key == call.request.key && !encryption.customer &&
      encryption.stored.kind == source_stored.kind && encryption.stored.kms_key_id == source_stored.kms_key_id) {
    throw S3Error("InvalidRequest", "this copy request is illegal because it is trying to copy an object to itself "
                                    "without changing the object's metadata");
  }
  ObjectRecord copy = *object;
  copy.bucket = to->record.name;
  copy.key = call.request.key;
  if (replace) copy.headers = stored_headers(call.request);
  copy.lock = new_version_lock(call, *to, false);
  const std::string tagging_directive = call.request.header("x-amz-tagging-directive");
  if (tagging_directive == "REPLACE") {
    copy.tags = parse_tagging_header(call.request.header("x-amz-tagging"));
  } else if (!tagging_directive.empty() && tagging_directive != "COPY") {
    throw S3Error("InvalidArgument", "x-amz-tagging-directive must be COPY or REPLACE");
  }
  copy.modified_ns = now_ns();
  copy.owner = owner_for_write(call, *to);
  copy.part_checksums.clear();  // the copy is one segment: no longer in parts
  if (multipart_parts(*object) > 0) {
    // As S3: a copy is a new single-part object, its ETag the MD5 of its bytes.
    copy.checksum_algorithm.clear();
    copy.checksum.clear();
  }
  Digest copy_md5(DigestAlgorithm::kMd5);
  const auto writer = create_object_writer(*to->storage, encryption.data_key);
  copy.segments = {{copy_bytes(*source_bytes, object->size, *writer, [&](ByteView data) { copy_md5.update(data); }),
                    object->size}};
  copy.etag = encryption.etag(to_hex(copy_md5.finish()));
  copy.encryption = encode_encryption(encryption.stored);
  const bool versioned = commit_object(*to, copy, nullptr, append_only_user(call, *to));
  XmlWriter xml;
  xml.open("CopyObjectResult", kS3Namespace)
      .element("LastModified", iso8601(copy.modified_ns))
      .element("ETag", quoted_etag(copy.etag));
  Response r = xml_response(xml.finish());
  add_version_header(r, versioned, copy.version_id);
  add_expiration_header(r, *to, copy);
  if (!source.version_id.empty()) r.headers.emplace_back("x-amz-copy-source-version-id", source.version_id);
  encryption.add_headers(r, to->encrypted_at_rest());
  return r;
}

}  // namespace keel::gateway
