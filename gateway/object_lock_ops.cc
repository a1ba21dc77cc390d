// The Object Lock operations of S3Api: the bucket's lock configuration, and
// each version's retention and legal hold.
#include "gateway/object_lock.h"
#include "gateway/s3_api.h"
#include "gateway/s3_api_util.h"
#include "util/text.h"
#include "util/xml.h"

namespace keel::gateway {

namespace {

void require_object_lock(const BucketRecord& bucket) {
  if (!bucket.object_lock) {
    throw S3Error("InvalidRequest", "bucket '" + bucket.name + "' was not created with Object Lock enabled");
  }
}

}  // namespace

bool S3Api::bypasses_governance(const Call& call, const Bucket& bucket) const {
  return ascii_lower(call.request.header("x-amz-bypass-governance-retention")) == "true" &&
         access(bucket, call.user) == Access::kOwner;
}

Response S3Api::get_lock_configuration(const Call& call) {
  const auto bucket = bucket_for(call, Access::kRead);
  if (!bucket->record.object_lock) {
    throw S3Error("ObjectLockConfigurationNotFoundError", "bucket '" + bucket->record.name + "' has no Object Lock");
  }
  DefaultRetention retention;
  {
    std::lock_guard lock(mutex_);
    retention = bucket->record.default_retention;
  }
  XmlWriter xml;
  xml.open("ObjectLockConfiguration", kS3Namespace).element("ObjectLockEnabled", "Enabled");
  if (!retention.mode.empty()) {
    xml.open("Rule").open("DefaultRetention").element("Mode", retention.mode);
    if (retention.days > 0) {
      xml.element("Days", static_cast<uint64_t>(retention.days));
    } else {
      xml.element("Years", static_cast<uint64_t>(retention.years));
    }
    xml.close().close();
  }
  return xml_response(xml.finish());
}

std::unique_ptr<RequestBody> S3Api::put_lock_configuration(const Call& call) {
  const auto bucket = bucket_for(call, Access::kOwner);
  return small_body(call, [this, bucket](const std::string& body) {
    const auto tree = read_xml_body(body);
    const auto root = tree.get_child_optional("ObjectLockConfiguration");
    if (!root || xml_value(*root, "ObjectLockEnabled") != "Enabled") {
      throw S3Error("MalformedXML", "the body must be an <ObjectLockConfiguration> with ObjectLockEnabled Enabled");
    }
    DefaultRetention retention;
    if (const auto rule = root->get_child_optional("Rule.DefaultRetention")) {
      const auto period = [&](const char* name) -> std::optional<int> {
        if (const auto value = rule->get_optional<int>(name)) return *value;
        return std::nullopt;
      };
      retention = make_default_retention(xml_value(*rule, "Mode"), period("Days"), period("Years"));
    }
    std::lock_guard lock(mutex_);
    if (!bucket->record.object_lock) {
      // As AWS: Object Lock can be turned on for an existing bucket whose versioning is Enabled.
      if (bucket->record.versioning != "Enabled") {
        throw S3Error("InvalidBucketState", "versioning must be Enabled on bucket '" + bucket->record.name +
                                                "' to apply an Object Lock configuration");
      }
      metadata_.transaction([&] {
        metadata_.set_object_lock(bucket->record.name);
        metadata_.set_default_retention(bucket->record.name, retention);
      });
      bucket->record.object_lock = true;
    } else {
      metadata_.set_default_retention(bucket->record.name, retention);
    }
    bucket->record.default_retention = retention;
    return Response{};
  });
}

Response S3Api::get_retention(const Call& call) {
  const auto bucket = bucket_for(call, Access::kRead);
  require_object_lock(bucket->record);
  const ObjectRecord object = target_version(call, *bucket);
  if (object.lock.mode.empty()) {
    throw S3Error("NoSuchObjectLockConfiguration", "the version has no retention");
  }
  XmlWriter xml;
  xml.open("Retention", kS3Namespace)
      .element("Mode", object.lock.mode)
      .element("RetainUntilDate", iso8601(object.lock.retain_until_ns));
  return xml_response(xml.finish());
}

std::unique_ptr<RequestBody> S3Api::put_retention(const Call& call) {
  // Append users may lock and extend locks: the rules refuse shortening without the owner's bypass.
  const auto bucket = bucket_for(call, Access::kAppend);
  const bool bypass = bypasses_governance(call, *bucket);
  require_object_lock(bucket->record);
  const ObjectRecord object = target_version(call, *bucket);
  return small_body(call, [this, bucket, bypass, object](const std::string& body) {
    const auto tree = read_xml_body(body);
    const auto root = tree.get_child_optional("Retention");
    if (!root) throw S3Error("MalformedXML", "the body is not a <Retention> document");
    const std::string mode = xml_value(*root, "Mode");
    const std::string until = xml_value(*root, "RetainUntilDate");
    const int64_t now = now_ns();
    ObjectLock requested;
    if (!mode.empty() || !until.empty()) {
      check_retention_mode(mode, "MalformedXML");
      const auto until_ns = parse_iso8601(until);
      if (!until_ns) throw S3Error("MalformedXML", "<RetainUntilDate> '" + until + "' is not ISO 8601");
      if (*until_ns <= now) throw S3Error("InvalidArgument", "the retain-until date must be in the future");
      requested = {mode, *until_ns, LegalHold::kNone};
    }
    std::lock_guard lock(mutex_);
    metadata_.transaction([&] {
      // Re-read under the write lock: the check and the update must see the same state.
      const auto current = metadata_.object(bucket->record.name, object.key, object.version_id);
      if (!current) throw S3Error("NoSuchVersion", "the version was deleted meanwhile");
      check_retention_change(current->lock, requested, bypass, now);
      requested.legal_hold = current->lock.legal_hold;
      metadata_.set_lock(bucket->record.name, object.key, object.version_id, requested);
    });
    return Response{};
  });
}

Response S3Api::get_legal_hold(const Call& call) {
  const auto bucket = bucket_for(call, Access::kRead);
  require_object_lock(bucket->record);
  const ObjectRecord object = target_version(call, *bucket);
  if (object.lock.legal_hold == LegalHold::kNone) {
    throw S3Error("NoSuchObjectLockConfiguration", "the version has never had a legal hold");
  }
  XmlWriter xml;
  xml.open("LegalHold", kS3Namespace).element("Status", object.lock.legal_hold == LegalHold::kOn ? "ON" : "OFF");
  return xml_response(xml.finish());
}

std::unique_ptr<RequestBody> S3Api::put_legal_hold(const Call& call) {
  const auto bucket = bucket_for(call, Access::kWrite);
  require_object_lock(bucket->record);
  const ObjectRecord object = target_version(call, *bucket);
  return small_body(call, [this, bucket, object](const std::string& body) {
    const auto tree = read_xml_body(body);
    const std::string status = xml_value(tree, "LegalHold.Status");
    if (status != "ON" && status != "OFF") throw S3Error("MalformedXML", "<LegalHold><Status> must be ON or OFF");
    std::lock_guard lock(mutex_);
    metadata_.transaction([&] {
      const auto current = metadata_.object(bucket->record.name, object.key, object.version_id);
      if (!current) throw S3Error("NoSuchVersion", "the version was deleted meanwhile");
      ObjectLock updated = current->lock;
      updated.legal_hold = status == "ON" ? LegalHold::kOn : LegalHold::kOff;
      metadata_.set_lock(bucket->record.name, object.key, object.version_id, updated);
    });
    return Response{};
  });
}

}  // namespace keel::gateway
