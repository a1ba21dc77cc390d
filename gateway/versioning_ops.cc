// The versioning operations of S3Api: the bucket's versioning status and the
// listing of all versions and delete markers.
#include "gateway/acl.h"
#include "gateway/s3_api.h"
#include "gateway/s3_api_util.h"
#include "util/xml.h"

namespace keel::gateway {

Response S3Api::get_versioning(const Call& call) {
  const auto bucket = bucket_for(call, Access::kRead);
  std::string status;
  {
    std::lock_guard lock(mutex_);
    status = bucket->record.versioning;
  }
  XmlWriter xml;
  xml.open("VersioningConfiguration", kS3Namespace);
  if (!status.empty()) xml.element("Status", status);  // never enabled: no Status, as S3 has it
  return xml_response(xml.finish());
}

std::unique_ptr<RequestBody> S3Api::put_versioning(const Call& call) {
  const auto bucket = bucket_for(call, Access::kOwner);
  return small_body(call, [this, bucket](const std::string& body) {
    const auto tree = read_xml_body(body);
    const auto root = tree.get_child_optional("VersioningConfiguration");
    if (!root) throw S3Error("MalformedXML", "the body is not a <VersioningConfiguration> document");
    const std::string status = xml_value(*root, "Status");
    if (status != "Enabled" && status != "Suspended") {
      throw S3Error("MalformedXML", "<Status> must be Enabled or Suspended, not '" + status + "'");
    }
    if (xml_value(*root, "MfaDelete", "Disabled") == "Enabled") {
      throw S3Error("NotImplemented", "the gateway does not implement MFA delete");
    }
    if (bucket->record.object_lock && status != "Enabled") {
      throw S3Error("InvalidBucketState", "versioning cannot be suspended on a bucket with Object Lock");
    }
    std::lock_guard lock(mutex_);
    metadata_.set_versioning(bucket->record.name, status);
    bucket->record.versioning = status;
    return Response{};
  });
}

Response S3Api::list_versions(const Call& call) {
  const auto bucket = bucket_for(call, Access::kRead);
  const S3Request& r = call.request;
  const ListingRequest q = parse_listing_request(r);
  const ListCursor after{r.query_value("key-marker").value_or(""), r.query_value("version-id-marker").value_or("")};
  if (!after.version_id.empty() && after.key.empty()) {
    throw S3Error("InvalidArgument", "version-id-marker needs a key-marker");
  }

  const ListingPage page = list_page(
      [&](const ListCursor& from, size_t limit) {
        std::lock_guard lock(mutex_);
        return metadata_.list_versions(bucket->record.name, q.prefix, from.key, from.version_id, limit);
      },
      q.prefix, q.delimiter, after, q.max_keys);

  XmlWriter xml;
  xml.open("ListVersionsResult", kS3Namespace);
  xml.element("Name", bucket->record.name)
      .element("Prefix", q.encode(q.prefix))
      .element("KeyMarker", q.encode(after.key))
      .element("VersionIdMarker", after.version_id)
      .element("MaxKeys", static_cast<uint64_t>(q.max_keys));
  if (!q.delimiter.empty()) xml.element("Delimiter", q.encode(q.delimiter));
  if (q.url) xml.element("EncodingType", "url");
  xml.element("IsTruncated", page.truncated);
  if (page.truncated) {
    xml.element("NextKeyMarker", q.encode(page.last));
    if (!page.last_version_id.empty()) xml.element("NextVersionIdMarker", page.last_version_id);
  }
  std::shared_ptr<const BucketAccessRules> rules;
  {
    std::lock_guard lock(mutex_);
    rules = bucket->rules;
  }
  for (const auto& o : page.objects) {
    xml.open(o.delete_marker ? "DeleteMarker" : "Version")
        .element("Key", q.encode(o.key))
        .element("VersionId", o.version_id)
        .element("IsLatest", o.latest)
        .element("LastModified", iso8601(o.modified_ns));
    if (!o.delete_marker) {
      xml.element("ETag", quoted_etag(o.etag)).element("Size", o.size).element("StorageClass", "STANDARD");
    }
    user_element(xml, "Owner", rules->shown_owner(o.owner, bucket->record.owner));
    xml.close();
  }
  for (const auto& p : page.common_prefixes) xml.open("CommonPrefixes").element("Prefix", q.encode(p)).close();
  return xml_response(xml.finish());
}

}  // namespace keel::gateway
