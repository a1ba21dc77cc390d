// The multipart upload operations of S3Api.
#include <algorithm>
#include <map>

#include "gateway/object_lock.h"
#include "gateway/payload_checks.h"
#include "gateway/s3_api.h"
#include "gateway/s3_api_util.h"
#include "gateway/tagging.h"
#include "util/digest.h"
#include "util/error.h"
#include "util/id.h"
#include "util/xml.h"

namespace keel::gateway {

namespace {

constexpr uint64_t kMaxPartSize = 5ull << 30;
constexpr uint64_t kMinPartSize = 5ull << 20;  // every part but the last
constexpr int kMaxPartNumber = 10000;

int part_number(const S3Request& request) {
  const std::string text = request.query_value("partNumber").value_or("");
  const uint64_t n = parse_size(text, "partNumber");
  if (n < 1 || n > kMaxPartNumber) throw S3Error("InvalidArgument", "partNumber must be 1 to 10000");
  return static_cast<int>(n);
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

namespace {

// Headers of CreateMultipartUpload that act when the upload completes: kept
// with the upload's headers, never stored as the object's metadata.
constexpr std::string_view kOnCompletion[] = {"x-amz-object-lock-mode", "x-amz-object-lock-retain-until-date",
                                              "x-amz-object-lock-legal-hold", "x-amz-tagging"};

bool acts_on_completion(std::string_view name) {
  return std::find(std::begin(kOnCompletion), std::end(kOnCompletion), name) != std::end(kOnCompletion);
}

}  // namespace

Response S3Api::create_upload(const Call& call) {
  const auto bucket = bucket_for(call, Access::kWrite);
  // Checked now, as AWS does; applied to the version the upload completes into.
  new_version_lock(call, *bucket, /*uploads_body=*/false);
  parse_tagging_header(call.request.header("x-amz-tagging"));
  NameValues headers = stored_headers(call.request);
  for (const auto& [name, value] : call.request.headers) {
    if (acts_on_completion(name)) headers.emplace_back(name, value);
  }
  UploadRecord upload{Id::random().hex().substr(0, 32), bucket->record.name, call.request.key, call.user.name,
                      now_ns(), std::move(headers), call.request.header("x-amz-checksum-algorithm")};
  for (char& c : upload.checksum_algorithm) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  {
    std::lock_guard lock(mutex_);
    metadata_.create_upload(upload);
  }
  XmlWriter xml;
  xml.open("InitiateMultipartUploadResult", kS3Namespace)
      .element("Bucket", upload.bucket)
      .element("Key", upload.key)
      .element("UploadId", upload.upload_id);
  return xml_response(xml.finish());
}

std::unique_ptr<RequestBody> S3Api::upload_part(const Call& call) {
  const auto bucket = bucket_for(call, Access::kWrite);
  const UploadRecord upload = upload_for(call, *bucket);
  const int number = part_number(call.request);
  std::shared_ptr<BucketStorage::Writer> writer = bucket->storage->create();
  return body_reader(
      call,
      [writer](ByteView data) {
        if (writer->size() + data.size() > kMaxPartSize) throw S3Error("EntityTooLarge", "a part is at most 5 GiB");
        writer->write(data);
      },
      [this, bucket, writer, upload, number](const PayloadChecks& checks) {
        PartRecord part{number, writer->size(), checks.md5_hex(), now_ns(), writer->commit()};
        std::optional<std::string> replaced;
        bool upload_exists = false;
        {
          std::lock_guard lock(mutex_);
          metadata_.transaction([&] {
            upload_exists = metadata_.upload(upload.upload_id).has_value();
            if (upload_exists) replaced = metadata_.put_part(upload.upload_id, part);
          });
        }
        if (!upload_exists) {
          bucket->storage->remove(part.file);
          throw S3Error("NoSuchUpload", "the upload '" + upload.upload_id + "' was completed or aborted meanwhile");
        }
        if (replaced) bucket->storage->remove(*replaced);
        Response r;
        r.headers.emplace_back("etag", quoted(part.etag));
        if (checks.checksum()) {
          r.headers.emplace_back("x-amz-checksum-" + checks.checksum()->algorithm, checks.checksum()->value);
        }
        return r;
      });
}

Response S3Api::upload_part_copy(const Call& call) {
  const auto bucket = bucket_for(call, Access::kWrite);
  const UploadRecord upload = upload_for(call, *bucket);
  const int number = part_number(call.request);
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
    range = {0, object->size};
    if (call.request.has_header("x-amz-copy-source-range")) {
      auto parsed = parse_range(call.request.header("x-amz-copy-source-range"), object->size);
      if (!parsed) throw S3Error("InvalidArgument", "x-amz-copy-source-range must be bytes=first-last");
      range = *parsed;
    }
    if (range.length > kMaxPartSize) throw S3Error("EntityTooLarge", "a part is at most 5 GiB");
    source_bytes = from->storage->read(object->segments, range.first, range.length);
  }
  Digest md5(DigestAlgorithm::kMd5);
  std::string file = copy_bytes(*source_bytes, range.length, *bucket->storage, [&](ByteView data) { md5.update(data); });
  PartRecord part{number, range.length, to_hex(md5.finish()), now_ns(), std::move(file)};
  std::optional<std::string> replaced;
  {
    std::lock_guard lock(mutex_);
    replaced = metadata_.put_part(upload.upload_id, part);
  }
  if (replaced) bucket->storage->remove(*replaced);
  XmlWriter xml;
  xml.open("CopyPartResult", kS3Namespace).element("LastModified", iso8601(part.modified_ns)).element("ETag", quoted(part.etag));
  return xml_response(xml.finish());
}

std::unique_ptr<RequestBody> S3Api::complete_upload(const Call& call) {
  const auto bucket = bucket_for(call, Access::kWrite);
  const UploadRecord upload = upload_for(call, *bucket);
  return small_body(call, [this, bucket, upload](const std::string& body) {
    const auto tree = parse_xml(body);
    const auto root = tree.get_child_optional("CompleteMultipartUpload");
    if (!root) throw S3Error("MalformedXML", "the body is not a <CompleteMultipartUpload> document");
    std::vector<std::pair<int, std::string>> requested;
    for (const auto& [name, child] : *root) {
      if (name != "Part") continue;
      const auto number = child.get_optional<int>("PartNumber");
      const auto etag = child.get_optional<std::string>("ETag");
      if (!number || !etag) throw S3Error("MalformedXML", "a <Part> needs <PartNumber> and <ETag>");
      if (!requested.empty() && *number <= requested.back().first) {
        throw S3Error("InvalidPartOrder", "the parts must be listed in ascending order of part number");
      }
      requested.emplace_back(*number, unquote(*etag));
    }
    if (requested.empty()) throw S3Error("MalformedXML", "the upload must name at least one part");

    ObjectRecord object;
    bool versioned;
    std::vector<std::string> unused;
    {
      std::lock_guard lock(mutex_);
      std::map<int, PartRecord> parts;
      for (auto& part : metadata_.parts(upload.upload_id, 0, kMaxPartNumber)) parts[part.part_number] = part;
      std::string md5s;
      for (size_t i = 0; i < requested.size(); ++i) {
        const auto it = parts.find(requested[i].first);
        if (it == parts.end() || it->second.etag != requested[i].second) {
          throw S3Error("InvalidPart", "part " + std::to_string(requested[i].first) +
                                           " was not uploaded or its ETag does not match");
        }
        if (i + 1 < requested.size() && it->second.size < kMinPartSize) {
          throw S3Error("EntityTooSmall", "part " + std::to_string(requested[i].first) +
                                              " is smaller than the 5 MiB minimum for all but the last part");
        }
        const Bytes binary = from_hex(it->second.etag);
        md5s.append(as_chars(binary));
        object.segments.push_back({it->second.file, it->second.size});
        object.size += it->second.size;
        parts.erase(it);
      }
      for (const auto& [number, part] : parts) unused.push_back(part.file);
      object.bucket = upload.bucket;
      object.key = upload.key;
      object.etag = to_hex(md5(as_bytes(md5s))) + "-" + std::to_string(requested.size());
      object.modified_ns = now_ns();
      S3Request initiated;  // the lock and tagging headers CreateMultipartUpload carried
      for (const auto& header : upload.headers) {
        (acts_on_completion(header.first) ? initiated.headers : object.headers).push_back(header);
      }
      versioned = !bucket->record.versioning.empty();
      object.lock = lock_for_new_version(initiated, bucket->record, object.modified_ns, false);
      object.tags = parse_tagging_header(initiated.header("x-amz-tagging"));
      object.version_id = version_id_for(bucket->record.versioning);
      std::vector<Segment> replaced;
      metadata_.transaction([&] {
        replaced = metadata_.put_object(object);
        metadata_.delete_upload(upload.upload_id);
      });
      for (const auto& segment : replaced) unused.push_back(segment.file);
    }
    for (const auto& file : unused) bucket->storage->remove(file);
    XmlWriter xml;
    xml.open("CompleteMultipartUploadResult", kS3Namespace)
        .element("Location", "/" + object.bucket + "/" + object.key)
        .element("Bucket", object.bucket)
        .element("Key", object.key)
        .element("ETag", quoted(object.etag));
    Response r = xml_response(xml.finish());
    add_version_header(r, versioned, object.version_id);
    return r;
  });
}

Response S3Api::abort_upload(const Call& call) {
  const auto bucket = bucket_for(call, Access::kWrite);
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
  const size_t max_parts = parse_max(call.request, "max-parts", 1000);
  const int marker = static_cast<int>(
      std::min<uint64_t>(parse_size(call.request.query_value("part-number-marker").value_or("0"), "part-number-marker"),
                         kMaxPartNumber));
  std::vector<PartRecord> parts;
  {
    std::lock_guard lock(mutex_);
    parts = metadata_.parts(upload.upload_id, marker, max_parts + 1);
  }
  const bool truncated = parts.size() > max_parts;
  if (truncated) parts.resize(max_parts);
  XmlWriter xml;
  xml.open("ListPartsResult", kS3Namespace)
      .element("Bucket", upload.bucket)
      .element("Key", upload.key)
      .element("UploadId", upload.upload_id);
  xml.open("Initiator").element("ID", upload.initiator).element("DisplayName", upload.initiator).close();
  xml.open("Owner").element("ID", bucket->record.owner).element("DisplayName", bucket->record.owner).close();
  xml.element("StorageClass", "STANDARD")
      .element("PartNumberMarker", static_cast<uint64_t>(marker))
      .element("NextPartNumberMarker", static_cast<uint64_t>(parts.empty() ? marker : parts.back().part_number))
      .element("MaxParts", static_cast<uint64_t>(max_parts))
      .element("IsTruncated", truncated);
  for (const auto& part : parts) {
    xml.open("Part")
        .element("PartNumber", static_cast<uint64_t>(part.part_number))
        .element("LastModified", iso8601(part.modified_ns))
        .element("ETag", quoted(part.etag))
        .element("Size", part.size)
        .close();
  }
  return xml_response(xml.finish());
}

Response S3Api::list_uploads(const Call& call) {
  const auto bucket = bucket_for(call, Access::kRead);
  const S3Request& r = call.request;
  const size_t max_uploads = parse_max(r, "max-uploads", 1000);
  const std::string prefix = r.query_value("prefix").value_or("");
  const std::string key_marker = r.query_value("key-marker").value_or("");
  const std::string id_marker = r.query_value("upload-id-marker").value_or("");
  std::vector<UploadRecord> uploads;
  {
    std::lock_guard lock(mutex_);
    uploads = metadata_.list_uploads(bucket->record.name, prefix, key_marker, id_marker, max_uploads + 1);
  }
  const bool truncated = uploads.size() > max_uploads;
  if (truncated) uploads.resize(max_uploads);
  XmlWriter xml;
  xml.open("ListMultipartUploadsResult", kS3Namespace)
      .element("Bucket", bucket->record.name)
      .element("KeyMarker", key_marker)
      .element("UploadIdMarker", id_marker)
      .element("NextKeyMarker", uploads.empty() ? key_marker : uploads.back().key)
      .element("NextUploadIdMarker", uploads.empty() ? id_marker : uploads.back().upload_id)
      .element("Prefix", prefix)
      .element("MaxUploads", static_cast<uint64_t>(max_uploads))
      .element("IsTruncated", truncated);
  for (const auto& upload : uploads) {
    xml.open("Upload").element("Key", upload.key).element("UploadId", upload.upload_id);
    xml.open("Initiator").element("ID", upload.initiator).element("DisplayName", upload.initiator).close();
    xml.open("Owner").element("ID", bucket->record.owner).element("DisplayName", bucket->record.owner).close();
    xml.element("StorageClass", "STANDARD").element("Initiated", iso8601(upload.initiated_ns)).close();
  }
  return xml_response(xml.finish());
}

}  // namespace keel::gateway
