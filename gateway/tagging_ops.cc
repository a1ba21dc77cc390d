// The tagging operations of S3Api: object tags (the current version or one
// named by versionId) and bucket tags.
#include "gateway/s3_api.h"
#include "gateway/s3_api_util.h"
#include "gateway/tagging.h"

namespace keel::gateway {

Response S3Api::store_tags(const Bucket& bucket, const ObjectRecord& version, const NameValues& tags, int status) {
  bool versioned;
  {
    std::lock_guard lock(mutex_);
    versioned = !bucket.record.versioning.empty();
    if (!metadata_.set_tags(bucket.record.name, version.key, version.version_id, tags)) {
      throw S3Error("NoSuchVersion", "the version was deleted meanwhile");
    }
  }
  Response r;
  r.status = status;
  add_version_header(r, versioned, version.version_id);
  return r;
}

Response S3Api::get_tagging(const Call& call) {
  const auto bucket = bucket_for(call, Access::kRead);
  const ObjectRecord version = target_version(call, *bucket);
  Response r = xml_response(tagging_document(version.tags));
  std::lock_guard lock(mutex_);
  add_version_header(r, !bucket->record.versioning.empty(), version.version_id);
  return r;
}

std::unique_ptr<RequestBody> S3Api::put_tagging(const Call& call) {
  const auto bucket = bucket_for(call, Access::kWrite);
  const ObjectRecord version = target_version(call, *bucket);
  return small_body(call, [this, bucket, version](const std::string& body) {
    return store_tags(*bucket, version, parse_tagging_document(read_xml_body(body)), 200);
  });
}

Response S3Api::delete_tagging(const Call& call) {
  const auto bucket = bucket_for(call, Access::kWrite);
  return store_tags(*bucket, target_version(call, *bucket), {}, 204);
}

Response S3Api::get_bucket_tagging(const Call& call) {
  const auto bucket = bucket_for(call, Access::kRead);
  NameValues tags;
  {
    std::lock_guard lock(mutex_);
    tags = metadata_.bucket_tags(bucket->record.name);
  }
  if (tags.empty()) throw S3Error("NoSuchTagSet", "the bucket '" + bucket->record.name + "' has no tags");
  return xml_response(tagging_document(tags));
}

std::unique_ptr<RequestBody> S3Api::put_bucket_tagging(const Call& call) {
  const auto bucket = bucket_for(call, Access::kOwner);
  return small_body(call, [this, bucket](const std::string& body) {
    const NameValues tags = parse_tagging_document(read_xml_body(body), kMaxBucketTags);
    std::lock_guard lock(mutex_);
    metadata_.set_bucket_tags(bucket->record.name, tags);
    Response r;
    r.status = 204;
    return r;
  });
}

Response S3Api::delete_bucket_tagging(const Call& call) {
  const auto bucket = bucket_for(call, Access::kOwner);
  {
    std::lock_guard lock(mutex_);
    metadata_.set_bucket_tags(bucket->record.name, {});
  }
  Response r;
  r.status = 204;
  return r;
}

}  // namespace keel::gateway
