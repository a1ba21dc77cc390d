#include "gateway/s3_api.h"

#include <chrono>
#include <filesystem>
#include <set>
#include <sstream>

#include "gateway/acl.h"
#include "gateway/aws_chunked.h"
#include "gateway/dedupe_storage.h"
#include "gateway/encryption.h"
#include "gateway/garbage_collection.h"
#include "gateway/payload_checks.h"
#include "gateway/raw_files.h"
#include "gateway/rdma_plane.h"
#include "gateway/s3_api_util.h"
#include "targets/rdma/s3_headers.h"
#include "util/error.h"
#include "util/text.h"
#include "util/xml.h"

namespace keel::gateway {

namespace {

constexpr size_t kMaxXmlBody = 1 << 20;
constexpr size_t kMaxDeleteKeys = 1000;

// The body pipeline: aws-chunked decoding when the client chose it, the
// payload checks, then the operation's consumer.
class CheckedBody final : public RequestBody {
 public:
  CheckedBody(const S3Request& request, const Authentication& auth, std::function<void(ByteView)> write,
              std::function<Response(const PayloadChecks&)> done)
      : checks_(request, auth,
                route(request) == Operation::kCompleteMultipartUpload ? ChecksumHeaders::kOfObject
                                                                       : ChecksumHeaders::kOfBody),
        write_(std::move(write)),
        done_(std::move(done)) {
    const std::string decoded_length = request.header("x-amz-decoded-content-length");
    const bool streaming = auth.payload == PayloadKind::kStreamingSigned ||
                           auth.payload == PayloadKind::kStreamingSignedTrailer ||
                           auth.payload == PayloadKind::kStreamingUnsignedTrailer;
    if (streaming) {
      std::optional<ChunkSigning> signing;
      if (auth.payload != PayloadKind::kStreamingUnsignedTrailer) signing = auth.signing;
      const bool trailer = auth.payload != PayloadKind::kStreamingSigned;
      decoder_.emplace(std::move(signing), trailer, [this](ByteView data) { pass(data); });
      if (!decoded_length.empty()) expected_size_ = parse_size(decoded_length, "x-amz-decoded-content-length");
    }
  }

  void write(ByteView data) override {
    if (decoder_) {
      decoder_->feed(data);
    } else {
      pass(data);
    }
  }

  Response finish() override {
    static const NameValues kNoTrailers;
    if (decoder_) decoder_->finish();
    if (expected_size_ && *expected_size_ != size_) {
      throw S3Error("IncompleteBody", "the body decoded to " + std::to_string(size_) +
                                          " bytes, not the x-amz-decoded-content-length " +
                                          std::to_string(*expected_size_));
    }
    checks_.verify(decoder_ ? decoder_->trailers() : kNoTrailers);
    return done_(checks_);
  }

 private:
  void pass(ByteView data) {
    checks_.update(data);
    size_ += data.size();
    write_(data);
  }

  PayloadChecks checks_;
  std::optional<AwsChunkedDecoder> decoder_;
  std::function<void(ByteView)> write_;
  std::function<Response(const PayloadChecks&)> done_;
  std::optional<uint64_t> expected_size_;
  uint64_t size_ = 0;
};

}  // namespace

S3Api::S3Api(GatewayConfig config, std::function<std::time_t()> clock)
    : config_(std::move(config)),
      state_lock_(lock_state(config_)),
      clock_(std::move(clock)),
      metadata_(config_.state_dir + "/gateway.db"),
      access_store_(config_.state_dir + "/access.db"),
      lifecycle_day_{std::chrono::duration_cast<std::chrono::nanoseconds>(config_.lifecycle_day).count()} {
  if (config_.api_bucket_repository) open_repository(*config_.api_bucket_repository, "[dedupe]");
  keys_ = GatewayKeys::load(config_);
  std::set<std::string> configured;
  for (const auto& b : config_.buckets) {
    const auto existing = metadata_.bucket(b.name);
    const bool dedupe = b.mode == BucketMode::kDedupe;
    if (dedupe) open_repository(b.repository, "bucket '" + b.name + "'");
    BucketRecord record{b.name, b.owner, existing ? existing->created_ns : now_ns(),
                        dedupe ? b.repository.location : b.path, true, existing ? existing->versioning : ""};
    record.mode = bucket_mode_name(b.mode);
    if (existing) record.lifecycle = existing->lifecycle;
    metadata_.put_bucket(record);
    add_bucket(record, b.grants, b.owner_only_unversioned_delete);
    configured.insert(b.name);
  }
  for (auto& record : metadata_.buckets()) {
    if (configured.contains(record.name)) continue;
    if (record.mode != bucket_mode_name(BucketMode::kRaw) && !repositories_.contains(record.path)) continue;
    if (record.configured) {  // dropped from the configuration: served as an API-created bucket of its owner
      record.configured = false;
      metadata_.put_bucket(record);
    }
    add_bucket(record, {});
  }
  for (const auto& [name, bucket] : buckets_) {
    const auto files = metadata_.referenced_files(name);
    bucket->storage->remove_orphans(std::set<std::string>(files.begin(), files.end()));
  }
}

S3Api::~S3Api() = default;

std::shared_ptr<S3Api::Bucket> S3Api::add_bucket(BucketRecord record, std::map<std::string, Access> grants,
                                                 bool owner_only_unversioned_delete) {
  std::shared_ptr<BucketStorage> storage;
  if (record.mode == bucket_mode_name(BucketMode::kDedupe)) {
    // Local repositories report their own filesystem's capacity; others the state directory's.
    const bool local = !record.path.starts_with("s3://");
    storage = std::make_shared<DedupeStorage>(repositories_.at(record.path), local ? record.path : config_.state_dir);
  } else {
    storage = std::make_shared<RawFiles>(record.path);
  }
  auto bucket = std::make_shared<Bucket>(
      Bucket{std::move(record), std::move(grants), std::move(storage), owner_only_unversioned_delete});
  bucket->rules = load_access_rules(bucket->record.name);
  if (!bucket->record.lifecycle.empty()) {
    bucket->lifecycle = std::make_shared<const LifecycleConfiguration>(LifecycleConfiguration::parse(bucket->record.lifecycle));
  }
  buckets_[bucket->record.name] = bucket;
  return bucket;
}

std::shared_ptr<engine::ChunkStore> S3Api::open_repository(const engine::RepositoryAccess& access,
                                                           const std::string& user) {
  auto& store = repositories_[access.location];
  if (!store) store = std::make_shared<engine::ChunkStore>(open_bucket_repository(access, user));
  return store;
}

std::vector<DedupeFigures> S3Api::dedupe_figures() const {
  std::vector<DedupeFigures> figures;
  for (const auto& [location, store] : repositories_) {
    figures.push_back({location, store->logical_bytes(), store->stored_bytes()});
  }
  return figures;
}

Access S3Api::access(const Bucket& bucket, const User& user) const {
  if (bucket.record.owner == user.name) return Access::kOwner;
  const auto grant = bucket.grants.find(user.name);
  return grant == bucket.grants.end() ? Access::kNone : grant->second;
}

std::string S3Api::append_only_user(const Call& call, const Bucket& bucket) const {
  return access(bucket, call.user) == Access::kAppend ? call.user.name : std::string();
}

void S3Api::refuse_overwrite(const Bucket& bucket, const std::string& key, const std::string& append_user) {
  if (append_user.empty()) return;
  const auto current = metadata_.object(bucket.record.name, key);
  if (current && !current->delete_marker) {
    throw S3Error("AccessDenied", "user '" + append_user + "' has the append grant in bucket '" + bucket.record.name +
                                      "': it may create objects but not overwrite '" + key + "', which exists");
  }
}

bool S3Api::may_remove_unversioned(const Call& call, const Bucket& bucket) const {
  return !bucket.owner_only_unversioned_delete || access(bucket, call.user) == Access::kOwner;
}

std::shared_ptr<S3Api::Bucket> S3Api::bucket_for(const Call& call, Access needed) {
  std::shared_ptr<Bucket> bucket;
  {
    std::lock_guard lock(mutex_);
    const auto it = buckets_.find(call.request.bucket);
    if (it != buckets_.end()) bucket = it->second;
  }
  if (!bucket) throw S3Error("NoSuchBucket", "the bucket '" + call.request.bucket + "' does not exist");
  authorize(call, *bucket, needed);
  // x-amz-expected-bucket-owner: a client's guard against writing into a bucket someone else
  // re-created under the name. The owner as ACLs name it (canonical id), or the user's name.
  const std::string expected = call.request.header("x-amz-expected-bucket-owner");
  if (!expected.empty() && expected != canonical_id(bucket->record.owner) && expected != bucket->record.owner) {
    throw S3Error("AccessDenied", "the bucket '" + bucket->record.name + "' is not owned by " + expected);
  }
  return bucket;
}

Exchange S3Api::begin(RequestHead head) {
  std::string resource = head.target.substr(0, head.target.find('?'));
  Exchange failed;
  NameValues cors;  // Access-Control-* headers for a request with Origin, errors included
  try {
    S3Request request = parse_request(head.method, head.target, std::move(head.headers), config_.domains);
    request.client_address = head.client_address;
    request.secure = head.secure;
    resource = request.resource();
    // A CORS preflight is not authenticated (browsers send no credentials with it).
    if (request.method == "OPTIONS") {
      failed.response = preflight(request);
      failed.response.headers.emplace_back("x-amz-request-id", head.request_id);
      return failed;
    }
    cors = cors_response_headers(request);
    const Authentication auth = authenticate(request, config_.users, clock_());
    Call call{request, *auth.user, auth};
    const Operation operation = route(request);
    failed.operation = operation_name(operation);
    if (auth.user == &anonymous_user() &&
        (operation == Operation::kListBuckets || operation == Operation::kCreateBucket)) {
      throw S3Error("AccessDenied", "anonymous requests cannot list or create buckets; sign the request");
    }
    admit(call, operation);
    const bool over_rdma = request.has_header(targets::rdma::kTokenHeader) && carries_rdma_payload(operation);
    if (over_rdma && !rdma_) {
      failed.response = rdma_declined("this gateway has no rdma_listen", resource, head.request_id);
      return failed;
    }
    Exchange exchange = dispatch(operation, call);
    if (call.requested_acl) exchange = apply_acl_after(std::move(exchange), call, operation, *call.requested_acl);
    exchange.operation = failed.operation;
    exchange.response.headers.emplace_back("x-amz-request-id", head.request_id);
    exchange.response.headers.insert(exchange.response.headers.end(), cors.begin(), cors.end());
    if (over_rdma) exchange = rdma_->attach(request, auth, operation, std::move(exchange), head.request_id);
    return exchange;
  } catch (const S3Error& e) {
    failed.response = error_response(e, resource, head.request_id);
  } catch (const Error& e) {
    failed.response = error_response(S3Error("InternalError", e.what()), resource, head.request_id);
  }
  failed.response.headers.insert(failed.response.headers.end(), cors.begin(), cors.end());
  return failed;
}

void S3Api::admit(Call& call, Operation operation) {
  const S3Request& request = call.request;
  call.policy_verdict = refuse_denied_early(call, operation);
  check_encryption_headers(request, operation, encrypted_at_rest(request.bucket) || keys_.master(), keys_.has_kms());
  call.requested_acl = requested_acl(call, operation);
}

Exchange S3Api::dispatch(Operation operation, const Call& call) {
  const auto respond = [](Response r) { return Exchange{std::move(r), nullptr}; };
  const auto read_body = [](std::unique_ptr<RequestBody> body) { return Exchange{{}, std::move(body)}; };
  switch (operation) {
    case Operation::kListBuckets: return respond(list_buckets(call));
    case Operation::kCreateBucket: return read_body(create_bucket(call));
    case Operation::kDeleteBucket: return respond(delete_bucket(call));
    case Operation::kHeadBucket: return respond(head_bucket(call));
    case Operation::kGetBucketLocation: return respond(bucket_location(call));
    case Operation::kListObjects: return respond(list_objects(call, false));
    case Operation::kListObjectsV2: return respond(list_objects(call, true));
    case Operation::kDeleteObjects: return read_body(delete_objects(call));
    case Operation::kListMultipartUploads: return respond(list_uploads(call));
    case Operation::kPutObject: return read_body(put_object(call));
    case Operation::kPostObject: return read_body(post_object(call));
    case Operation::kCopyObject: return respond(copy_object(call));
    case Operation::kGetObject: return respond(get_object(call, false));
    case Operation::kHeadObject: return respond(get_object(call, true));
    case Operation::kDeleteObject: return respond(delete_object(call));
    case Operation::kCreateMultipartUpload: return respond(create_upload(call));
    case Operation::kUploadPart: return read_body(upload_part(call));
    case Operation::kUploadPartCopy: return respond(upload_part_copy(call));
    case Operation::kCompleteMultipartUpload: return read_body(complete_upload(call));
    case Operation::kAbortMultipartUpload: return respond(abort_upload(call));
    case Operation::kListParts: return respond(list_parts(call));
    case Operation::kGetBucketVersioning: return respond(get_versioning(call));
    case Operation::kPutBucketVersioning: return read_body(put_versioning(call));
    case Operation::kListObjectVersions: return respond(list_versions(call));
    case Operation::kGetObjectLockConfiguration: return respond(get_lock_configuration(call));
    case Operation::kPutObjectLockConfiguration: return read_body(put_lock_configuration(call));
    case Operation::kGetObjectRetention: return respond(get_retention(call));
    case Operation::kPutObjectRetention: return read_body(put_retention(call));
    case Operation::kGetObjectLegalHold: return respond(get_legal_hold(call));
    case Operation::kGetObjectTorrent: return respond(get_object_torrent(call));
    case Operation::kPutObjectLegalHold: return read_body(put_legal_hold(call));
    case Operation::kGetObjectTagging: return respond(get_tagging(call));
    case Operation::kPutObjectTagging: return read_body(put_tagging(call));
    case Operation::kDeleteObjectTagging: return respond(delete_tagging(call));
    case Operation::kGetObjectAttributes: return respond(object_attributes(call));
    case Operation::kGetBucketTagging: return respond(get_bucket_tagging(call));
    case Operation::kPutBucketTagging: return read_body(put_bucket_tagging(call));
    case Operation::kDeleteBucketTagging: return respond(delete_bucket_tagging(call));
    case Operation::kGetBucketAcl: return respond(get_bucket_acl(call));
    case Operation::kPutBucketAcl: return read_body(put_bucket_acl(call));
    case Operation::kGetObjectAcl: return respond(get_object_acl(call));
    case Operation::kPutObjectAcl: return read_body(put_object_acl(call));
    case Operation::kGetBucketPolicy: return respond(get_bucket_policy(call));
    case Operation::kPutBucketPolicy: return read_body(put_bucket_policy(call));
    case Operation::kDeleteBucketPolicy: return respond(delete_bucket_setting(call, "policy"));
    case Operation::kGetBucketOwnershipControls: return respond(get_ownership_controls(call));
    case Operation::kPutBucketOwnershipControls: return read_body(put_ownership_controls(call));
    case Operation::kDeleteBucketOwnershipControls: return respond(delete_bucket_setting(call, "ownership"));
    case Operation::kGetPublicAccessBlock: return respond(get_public_access_block(call));
    case Operation::kPutPublicAccessBlock: return read_body(put_public_access_block(call));
    case Operation::kDeletePublicAccessBlock: return respond(delete_bucket_setting(call, "public_access_block"));
    case Operation::kGetBucketCors: return respond(get_bucket_cors(call));
    case Operation::kPutBucketCors: return read_body(put_bucket_cors(call));
    case Operation::kDeleteBucketCors: return respond(delete_bucket_setting(call, "cors"));
    case Operation::kGetBucketEncryption: return respond(get_bucket_encryption(call));
    case Operation::kPutBucketEncryption: return read_body(put_bucket_encryption(call));
    case Operation::kDeleteBucketEncryption: return respond(delete_bucket_setting(call, "encryption"));
    case Operation::kGetBucketLifecycle: return respond(get_bucket_lifecycle(call));
    case Operation::kPutBucketLifecycle: return read_body(put_bucket_lifecycle(call));
    case Operation::kDeleteBucketLifecycle: return respond(delete_bucket_lifecycle(call));
  }
  throw S3Error("NotImplemented", "operation not implemented");
}

std::unique_ptr<RequestBody> S3Api::body_reader(const Call& call, BodyWrite write, BodyDone done) {
  return std::make_unique<CheckedBody>(call.request, call.auth, std::move(write), std::move(done));
}

std::unique_ptr<RequestBody> S3Api::small_body(const Call& call, std::function<Response(const std::string&)> done) {
  auto text = std::make_shared<std::string>();
  return body_reader(
      call,
      [text](ByteView data) {
        if (text->size() + data.size() > kMaxXmlBody) {
          throw S3Error("MaxMessageLengthExceeded", "the request body is larger than 1 MiB");
        }
        text->append(as_chars(data));
      },
      [text, done = std::move(done)](const PayloadChecks&) { return done(*text); });
}

// --- Buckets -------------------------------------------------------------------

Response S3Api::list_buckets(const Call& call) {
  const S3Request& r = call.request;
  const std::string prefix = r.query_value("prefix").value_or("");
  // Without max-buckets every bucket is listed, as S3 does for clients that never page.
  constexpr size_t kMaxBuckets = 10000;
  const size_t max_buckets = r.has_query("max-buckets") ? parse_max(r, "max-buckets", kMaxBuckets) : SIZE_MAX;
  if (max_buckets == 0) throw S3Error("InvalidArgument", "max-buckets must be 1 to 10000");
  const auto token = r.query_value("continuation-token");
  const std::string after = token ? decode_continuation_token(*token) : "";
  XmlWriter xml;
  xml.open("ListAllMyBucketsResult", kS3Namespace);
  user_element(xml, "Owner", call.user.name);
  xml.open("Buckets");
  std::string last;
  bool truncated = false;
  {
    std::lock_guard lock(mutex_);
    size_t listed = 0;
    for (auto it = buckets_.upper_bound(after); it != buckets_.end(); ++it) {
      const auto& [name, bucket] = *it;
      if (!name.starts_with(prefix) || access(*bucket, call.user) == Access::kNone) continue;
      if (listed == max_buckets) {
        truncated = true;
        break;
      }
      ++listed;
      last = name;
      xml.open("Bucket")
          .element("Name", name)
          .element("CreationDate", iso8601(bucket->record.created_ns))
          .element("BucketRegion", config_.region)
          .close();
    }
  }
  xml.close();
  if (truncated) xml.element("ContinuationToken", encode_continuation_token(last));
  if (r.has_query("prefix")) xml.element("Prefix", prefix);
  return xml_response(xml.finish());
}

std::unique_ptr<RequestBody> S3Api::create_bucket(const Call& call) {
  const std::string lock_header = ascii_lower(call.request.header("x-amz-bucket-object-lock-enabled"));
  if (!lock_header.empty() && lock_header != "true" && lock_header != "false") {
    throw S3Error("InvalidArgument", "x-amz-bucket-object-lock-enabled must be true or false");
  }
  const bool object_lock = lock_header == "true";
  const std::string ownership = call.request.header("x-amz-object-ownership");
  if (!ownership.empty() && !is_object_ownership(ownership)) {
    throw S3Error("InvalidArgument", "x-amz-object-ownership must be " + std::string(kObjectOwnershipChoices) +
                                         ", not '" + ownership + "'");
  }
  // The ACL this request gives the bucket (none given: private), for a re-create of one the user owns.
  const Acl asked = call.requested_acl.value_or(canned_acl("private", call.user.name, call.user.name));
  return small_body(call, [this, name = call.request.bucket, user = call.user.name, object_lock, ownership,
                           asked](const std::string& body) {
    if (!body.empty()) {
      const auto tree = read_xml_body(body);
      const std::string location = xml_value(tree, "CreateBucketConfiguration.LocationConstraint");
      if (!location.empty() && location != config_.region) {
        throw S3Error("InvalidRequest", "this gateway serves region " + config_.region + ", not " + location);
      }
    }
    std::lock_guard lock(mutex_);
    if (const auto it = buckets_.find(name); it != buckets_.end()) {
      if (it->second->record.owner == user) {
        // As S3 in us-east-1 does (and Ceph RGW): re-creating your own bucket
        // succeeds, so a client that retries a create whose reply it lost
        // (minio-go, hence restic) does not fail. Unlike S3, which then resets
        // the bucket's ACL to the one asked for, a re-create that would change
        // it is refused, as RGW does: a retry never makes a bucket public or private.
        if (config_.region != "us-east-1") {
          throw S3Error("BucketAlreadyOwnedByYou", "you already own the bucket '" + name + "'");
        }
        const BucketAccessRules& rules = *it->second->rules;
        if (!rules.acls_disabled() && rules.acl.value_or(canned_acl("private", user, user)) != asked) {
          throw S3Error("BucketAlreadyExists", "you already own the bucket '" + name +
                                                   "' with another ACL: change it with PutBucketAcl");
        }
        return Response{};
      }
      throw S3Error("BucketAlreadyExists", "the bucket '" + name + "' exists and belongs to another user");
    }
    // Object Lock needs versions to protect: it turns versioning on for good.
    BucketRecord record{name, user, now_ns(), config_.bucket_root + "/" + name, false,
                        object_lock ? "Enabled" : "", object_lock};
    if (config_.api_bucket_repository) {
      record.path = config_.api_bucket_repository->location;
      record.mode = bucket_mode_name(BucketMode::kDedupe);
    }
    // The bucket's row first, then its settings: a bucket name whose row is missing has none.
    metadata_.put_bucket(record);
    if (!ownership.empty()) access_store_.set_setting(name, "ownership", ownership);
    add_bucket(record, {});
    Response r;
    r.headers.emplace_back("location", "/" + name);
    return r;
  });
}

Response S3Api::delete_bucket(const Call& call) {
  const auto bucket = bucket_for(call, Access::kOwner);
  if (bucket->record.configured) {
    throw S3Error("InvalidRequest", "the bucket '" + bucket->record.name +
                                        "' is defined in the gateway's configuration file; remove it there");
  }
  // Unfinished multipart uploads do not keep a bucket from being deleted (as on
  // S3 and RGW): they go with it.
  std::vector<std::string> part_files;
  {
    std::lock_guard lock(mutex_);
    if (metadata_.bucket_has_objects(bucket->record.name)) {
      throw S3Error("BucketNotEmpty", "the bucket '" + bucket->record.name + "' is not empty");
    }
    metadata_.transaction([&] { part_files = metadata_.delete_bucket(bucket->record.name); });
    access_store_.drop_bucket(bucket->record.name);
    buckets_.erase(bucket->record.name);
  }
  for (const auto& file : part_files) bucket->storage->remove(file);
  if (bucket->record.mode == bucket_mode_name(BucketMode::kRaw)) {
    std::error_code ec;
    std::filesystem::remove_all(bucket->record.path, ec);
  }
  Response r;
  r.status = 204;
  return r;
}

Response S3Api::head_bucket(const Call& call) {
  bucket_for(call, Access::kRead);
  Response r;
  r.headers.emplace_back("x-amz-bucket-region", config_.region);
  return r;
}

Response S3Api::bucket_location(const Call& call) {
  bucket_for(call, Access::kRead);
  XmlWriter xml;
  // us-east-1 is the empty location, as S3 has it.
  xml.element("LocationConstraint", config_.region == "us-east-1" ? std::string() : config_.region);
  std::string doc = xml.finish();
  const std::string open = "<LocationConstraint>";
  doc.replace(doc.find(open), open.size(), "<LocationConstraint xmlns=\"" + std::string(kS3Namespace) + "\">");
  return xml_response(std::move(doc));
}

Response S3Api::list_objects(const Call& call, bool v2) {
  const auto bucket = bucket_for(call, Access::kRead);
  const S3Request& r = call.request;
  const ListingRequest q = parse_listing_request(r);
  std::string after;
  if (v2) {
    if (auto token = r.query_value("continuation-token")) {
      after = decode_continuation_token(*token);
    } else {
      after = r.query_value("start-after").value_or("");
    }
  } else {
    after = r.query_value("marker").value_or("");
  }

  const ListingPage page = list_page(
      [&](const ListCursor& from, size_t limit) {
        std::lock_guard lock(mutex_);
        return metadata_.list_objects(bucket->record.name, q.prefix, from.key, limit);
      },
      q.prefix, q.delimiter, {after}, q.max_keys);

  XmlWriter xml;
  xml.open("ListBucketResult", kS3Namespace);
  // ListObjects v1 sends Prefix as given even under encoding-type=url: botocore,
  // which asks for url encoding on every v1 listing, decodes every other field
  // but not Prefix (S3 conformance tests expect a "\n" prefix back as "\n").
  xml.element("Name", bucket->record.name).element("Prefix", v2 ? q.encode(q.prefix) : q.prefix);
  if (v2) {
    if (auto token = r.query_value("continuation-token")) xml.element("ContinuationToken", *token);
    if (auto start = r.query_value("start-after")) xml.element("StartAfter", q.encode(*start));
    xml.element("KeyCount", static_cast<uint64_t>(page.objects.size() + page.common_prefixes.size()));
  } else {
    xml.element("Marker", q.encode(after));
  }
  xml.element("MaxKeys", static_cast<uint64_t>(q.max_keys));
  if (!q.delimiter.empty()) xml.element("Delimiter", q.encode(q.delimiter));
  if (q.url) xml.element("EncodingType", "url");
  xml.element("IsTruncated", page.truncated);
  if (page.truncated) {
    if (v2) {
      xml.element("NextContinuationToken", encode_continuation_token(page.last));
    } else {
      xml.element("NextMarker", q.encode(page.last));
    }
  }
  std::shared_ptr<const BucketAccessRules> rules;
  {
    std::lock_guard lock(mutex_);
    rules = bucket->rules;
  }
  for (const auto& o : page.objects) {
    xml.open("Contents")
        .element("Key", q.encode(o.key))
        .element("LastModified", iso8601(o.modified_ns))
        .element("ETag", quoted_etag(o.etag))
        .element("Size", o.size)
        .element("StorageClass", "STANDARD");
    if (!v2 || r.query_value("fetch-owner") == "true") {
      user_element(xml, "Owner", rules->shown_owner(o.owner, bucket->record.owner));
    }
    xml.close();
  }
  for (const auto& p : page.common_prefixes) xml.open("CommonPrefixes").element("Prefix", q.encode(p)).close();
  return xml_response(xml.finish());
}

std::unique_ptr<RequestBody> S3Api::delete_objects(const Call& call) {
  const auto bucket = bucket_for(call, Access::kWrite);
  const bool bypass = bypasses_governance(call, *bucket);
  const bool remove_unversioned = may_remove_unversioned(call, *bucket);
  const std::string marker_owner = owner_for_write(call, *bucket);
  return small_body(call, [this, bucket, bypass, remove_unversioned, marker_owner](const std::string& body) {
    const auto tree = read_xml_body(body);
    const auto root = tree.get_child_optional("Delete");
    if (!root) throw S3Error("MalformedXML", "the body is not a <Delete> document");
    const bool quiet = xml_value(*root, "Quiet", "false") == "true";
    struct Entry {
      std::string key, version_id;
      DeleteConditions conditions;
    };
    std::vector<Entry> keys;
    for (const auto& [name, child] : *root) {
      if (name != "Object") continue;
      const auto key = child.get_optional<std::string>("Key");
      if (!key || key->empty()) throw S3Error("MalformedXML", "an <Object> without a <Key>");
      keys.push_back({*key, xml_value(child, "VersionId"),
                      DeleteConditions::from_entry(xml_value(child, "ETag"), xml_value(child, "LastModifiedTime"),
                                                   xml_value(child, "Size"))});
    }
    if (keys.empty() || keys.size() > kMaxDeleteKeys) {
      throw S3Error("MalformedXML", "DeleteObjects takes 1 to 1000 keys, not " + std::to_string(keys.size()));
    }
    // All keys in one transaction (one fsync, not one per key); each in its
    // own savepoint, so that a key refused keeps none of its changes.
    struct Outcome {
      Deletion deletion;
      std::string code, message;  // an error's
    };
    std::vector<Outcome> outcomes(keys.size());
    std::vector<Segment> unused;
    group_commit_.run([&] {
      for (size_t i = 0; i < keys.size(); ++i) {
        try {
          std::vector<Segment> freed;
          metadata_.savepoint([&] {
            outcomes[i].deletion = delete_key(*bucket, keys[i].key, keys[i].version_id, bypass, remove_unversioned,
                                               marker_owner, freed, keys[i].conditions);
          });
          unused.insert(unused.end(), freed.begin(), freed.end());
        } catch (const S3Error& e) {
          outcomes[i].code = e.code();
          outcomes[i].message = e.what();
        } catch (const Error& e) {
          if (!metadata_.in_transaction()) throw;  // SQLite gave up the transaction: nothing of it is kept
          outcomes[i].code = "InternalError";
          outcomes[i].message = e.what();
        }
      }
    });
    removal_.add(bucket->storage, unused);
    XmlWriter xml;
    xml.open("DeleteResult", kS3Namespace);
    for (size_t i = 0; i < keys.size(); ++i) {
      const std::string& key = keys[i].key;
      const std::string& version_id = keys[i].version_id;
      const Outcome& outcome = outcomes[i];
      if (!outcome.code.empty()) {
        xml.open("Error").element("Key", key);
        if (!version_id.empty()) xml.element("VersionId", version_id);
        xml.element("Code", outcome.code).element("Message", outcome.message).close();
        continue;
      }
      if (quiet) continue;
      xml.open("Deleted").element("Key", key);
      if (!version_id.empty()) xml.element("VersionId", version_id);
      if (outcome.deletion.delete_marker) {
        xml.element("DeleteMarker", true).element("DeleteMarkerVersionId", outcome.deletion.version_id);
      }
      xml.close();
    }
    return xml_response(xml.finish());
  });
}

}  // namespace keel::gateway
