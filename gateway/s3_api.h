// The S3 API: authentication and authorisation of each request, then the
// bucket, object, listing and multipart operations, with metadata in the
// gateway's SQLite database and bytes in each bucket's storage (raw files or
// a keel repository, bucket_storage.h), one code path for both modes.
// Thread-safe: the server calls it from all of its threads.
#pragma once

#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "engine/chunk_store.h"
#include "gateway/access_rules.h"
#include "gateway/access_store.h"
#include "gateway/bucket_storage.h"
#include "gateway/conditional.h"
#include "gateway/config.h"
#include "gateway/deferred_removal.h"
#include "gateway/encryption.h"
#include "gateway/gateway_keys.h"
#include "gateway/exchange.h"
#include "gateway/group_commit.h"
#include "gateway/lifecycle.h"
#include "gateway/metadata.h"
#include "gateway/metrics.h"
#include "gateway/sigv4_verify.h"
#include "gateway/sosapi.h"
#include "util/file_lock.h"

namespace keel::gateway {

class PayloadChecks;
class RdmaPlane;

class S3Api final : public RequestHandler {
 public:
  // Opens <state_dir>/gateway.db and the repositories of dedupe buckets,
  // registers the configured buckets and removes files that a crash left
  // without a committed record. A dedupe bucket no longer in the
  // configuration is not served: its repository's access is named there.
  // `clock` gives the time requests are checked against.
  explicit S3Api(GatewayConfig config, std::function<std::time_t()> clock = [] { return std::time(nullptr); });
  ~S3Api() override;

  Exchange begin(RequestHead head) override;

  const GatewayConfig& config() const { return config_; }
  // Payloads of requests with an RDMA token go through `plane` (which must
  // outlive this); without one such requests are declined. Call before serving.
  void serve_rdma(RdmaPlane& plane) { rdma_ = &plane; }

  // Per repository of dedupe buckets: bytes written and stored since start.
  std::vector<DedupeFigures> dedupe_figures() const;

  // What one lifecycle sweep did, and the versions it kept because Object
  // Lock protects them (one line each, for the log).
  struct LifecycleSweep {
    uint64_t examined = 0;  // versions and uploads looked at
    uint64_t expired = 0;   // current versions expired (a delete marker added, or the object removed)
    uint64_t delete_markers_removed = 0;
    uint64_t noncurrent_removed = 0;
    uint64_t uploads_aborted = 0;
    std::vector<std::string> kept;
    bool finished = false;  // every bucket's rules were swept to the end
  };
  // Carries out the lifecycle rules of every bucket as of now_ns, looking at
  // no more than `budget` versions and uploads; the next call goes on where
  // this one stopped (in memory: a restart starts over). Only the key ranges
  // the rules' prefixes name are listed, a page at a time with the lock
  // released in between; each page's changes are rechecked and committed in
  // one transaction. A version under retention or legal hold is never removed.
  LifecycleSweep sweep_lifecycle(int64_t now_ns, uint64_t budget);

 private:
  struct Bucket {
    BucketRecord record;
    std::map<std::string, Access> grants;
    std::shared_ptr<BucketStorage> storage;
    bool owner_only_unversioned_delete = false;  // the configuration's delete_unversioned = owner
    std::shared_ptr<const BucketAccessRules> rules = std::make_shared<const BucketAccessRules>();  // guarded by mutex_
    std::shared_ptr<const LifecycleConfiguration> lifecycle;  // guarded by mutex_; null: none
    // A dedupe bucket: its repository encrypts every object (what SSE-S3 promises).
    bool encrypted_at_rest() const { return record.mode == bucket_mode_name(BucketMode::kDedupe); }
  };
  // The bucket policy's verdict on a request, under the rules it was evaluated with.
  struct PolicyVerdict {
    std::shared_ptr<const BucketAccessRules> rules;
    PolicyEffect effect = PolicyEffect::kNone;
  };
  struct Call {
    const S3Request& request;
    const User& user;
    const Authentication& auth;
    // What admit() found, kept for the handler: the ACL the request asks for (x-amz-acl,
    // x-amz-grant-*), and the policy's verdict, which authorize() then does not evaluate again.
    std::optional<Acl> requested_acl = std::nullopt;
    std::optional<PolicyVerdict> policy_verdict = std::nullopt;
  };
  // What an operation does with the body once it has been read and checked.
  using BodyDone = std::function<Response(const PayloadChecks& checks)>;
  using BodyWrite = std::function<void(ByteView)>;

  Exchange dispatch(Operation operation, const Call& call);
  std::unique_ptr<RequestBody> body_reader(const Call& call, BodyWrite write, BodyDone done);
  // Buffers a small XML body (at most 1 MiB) for `done`.
  std::unique_ptr<RequestBody> small_body(const Call& call, std::function<Response(const std::string&)> done);

  Access access(const Bucket& bucket, const User& user) const;
  // The bucket, if it exists and the request is authorised (authorize()).
  std::shared_ptr<Bucket> bucket_for(const Call& call, Access needed);
  std::shared_ptr<Bucket> add_bucket(BucketRecord record, std::map<std::string, Access> grants,
                                     bool owner_only_unversioned_delete = false);
  // The user of the call when their grant is `append`, else empty.
  std::string append_only_user(const Call& call, const Bucket& bucket) const;
  // An append-only user may create keys but not replace them: S3Error
  // AccessDenied when `key` has a current object. Call with mutex_ held.
  void refuse_overwrite(const Bucket& bucket, const std::string& key, const std::string& append_user);
  // Whether the user may remove an object no version keeps (delete_unversioned).
  bool may_remove_unversioned(const Call& call, const Bucket& bucket) const;
  // The chunk store of a dedupe repository, opened once per location;
  // `user` names the configuration section for errors.
  std::shared_ptr<engine::ChunkStore> open_repository(const engine::RepositoryAccess& access, const std::string& user);

  // Buckets.
  Response list_buckets(const Call& call);
  std::unique_ptr<RequestBody> create_bucket(const Call& call);
  Response delete_bucket(const Call& call);
  Response head_bucket(const Call& call);
  Response bucket_location(const Call& call);
  Response list_objects(const Call& call, bool v2);
  std::unique_ptr<RequestBody> delete_objects(const Call& call);

  // Versioning.
  Response get_versioning(const Call& call);
  std::unique_ptr<RequestBody> put_versioning(const Call& call);
  Response list_versions(const Call& call);

  // Object Lock.
  Response get_lock_configuration(const Call& call);
  std::unique_ptr<RequestBody> put_lock_configuration(const Call& call);
  Response get_retention(const Call& call);
  std::unique_ptr<RequestBody> put_retention(const Call& call);
  Response get_legal_hold(const Call& call);
  Response get_object_torrent(const Call& call);
  std::unique_ptr<RequestBody> put_legal_hold(const Call& call);
  // Access control (access_ops.cc). authorize() lets a request through when
  // the configuration gives the user `needed` access or the bucket policy
  // allows it, unless the policy denies it; failing those, by the bucket's or
  // the object's ACL. Throws S3Error AccessDenied.
  void authorize(const Call& call, const Bucket& bucket, Access needed);
  // What the bucket policy says of the operation on `key` (empty: the bucket) for a user with
  // `level` access; kNone where RestrictPublicBuckets takes a public policy's Allow away.
  PolicyEffect policy_effect(const Call& call, const Bucket& bucket, const BucketAccessRules& rules,
                             Operation operation, const std::string& key, Access level);
  // Throws AccessDenied for a policy's Deny, but not for its owner's policy operations.
  static void refuse_policy_deny(const Bucket& bucket, Operation operation, PolicyEffect effect, Access level);
  // A policy's Deny answers before the request's headers are judged, as on AWS (a denied
  // PutObject with aws:kms is 403 AccessDenied, whether or not the KMS key is usable).
  // Returns the verdict when the bucket has a policy.
  std::optional<PolicyVerdict> refuse_denied_early(const Call& call, Operation operation);
  // A bucket policy condition key's value for this request (a header, a tag
  // it sets, a tag of the object it names); nullopt when absent.
  std::optional<std::string> condition_value(const Call& call, const Bucket& bucket, const std::string& key);
  std::shared_ptr<const BucketAccessRules> load_access_rules(const std::string& bucket);
  void store_access_setting(Bucket& bucket, const std::string& name, const std::string& value);
  Acl object_acl(const Bucket& bucket, const ObjectRecord& object);
  // The ACL a PutBucketAcl or PutObjectAcl sets; `owner` owns the bucket or the object.
  Acl acl_to_put(const S3Request& request, const Bucket& bucket, const std::string& owner, const std::string& body);
  // Who owns what this request writes into `bucket` (BucketAccessRules::owner_for_write).
  std::string owner_for_write(const Call& call, const Bucket& bucket);
  // Who S3 shows as the owner of a version (BucketAccessRules::shown_owner).
  std::string owner_of(const Bucket& bucket, const ObjectRecord& object);
  // The ACL that x-amz-acl / x-amz-grant-* ask a write to give what it
  // creates (checked now: refused ACLs fail the request before it writes).
  std::optional<Acl> requested_acl(const Call& call, Operation operation);
  // What every request passes before its handler runs (a form upload as the
  // PutObject it becomes): a policy's Deny, its encryption headers checked, and the ACL
  // it asks for; fills in the call's requested_acl and policy_verdict.
  void admit(Call& call, Operation operation);
  // Gives `acl` to what the operation created once it has succeeded.
  Exchange apply_acl_after(Exchange exchange, const Call& call, Operation operation, Acl acl);
  Response get_bucket_acl(const Call& call);
  std::unique_ptr<RequestBody> put_bucket_acl(const Call& call);
  Response get_object_acl(const Call& call);
  std::unique_ptr<RequestBody> put_object_acl(const Call& call);
  Response get_bucket_policy(const Call& call);
  std::unique_ptr<RequestBody> put_bucket_policy(const Call& call);
  Response get_ownership_controls(const Call& call);
  std::unique_ptr<RequestBody> put_ownership_controls(const Call& call);
  Response get_public_access_block(const Call& call);
  std::unique_ptr<RequestBody> put_public_access_block(const Call& call);
  Response get_bucket_cors(const Call& call);
  std::unique_ptr<RequestBody> put_bucket_cors(const Call& call);
  // SSE-S3 on dedupe buckets (gateway/encryption.h).
  Response get_bucket_encryption(const Call& call);
  std::unique_ptr<RequestBody> put_bucket_encryption(const Call& call);
  bool encrypted_at_rest(const std::string& bucket);
  // Lifecycle (lifecycle_ops.cc).
  Response get_bucket_lifecycle(const Call& call);
  std::unique_ptr<RequestBody> put_bucket_lifecycle(const Call& call);
  Response delete_bucket_lifecycle(const Call& call);
  // Stores a bucket's lifecycle configuration (null: none) in gateway.db and in memory.
  void set_lifecycle(Bucket& bucket, std::shared_ptr<const LifecycleConfiguration> lifecycle);
  // x-amz-expiration on a response about `object` when it is current and a rule will expire it.
  void add_expiration_header(Response& r, const Bucket& bucket, const ObjectRecord& object);
  // x-amz-abort-date and x-amz-abort-rule-id for an upload a rule will abort.
  void add_abort_headers(Response& r, const Bucket& bucket, const UploadRecord& upload);
  // Where sweep_lifecycle stopped in one bucket.
  struct SweepCursor {
    std::shared_ptr<const LifecycleConfiguration> config;  // the rules it was sweeping; others start over
    size_t prefix = 0;     // index into config->prefixes(uploads)
    bool uploads = false;  // the versions are done: now the uploads
    std::string after_key, after_version;  // versions: the last one seen; uploads: key and upload id
    // The key being walked: when its next newer version was written, and
    // how many noncurrent versions it had before this one.
    std::string key;
    int64_t newer_modified_ns = 0;
    int noncurrent_seen = 0;
  };
  // One page of a bucket's sweep; false when the bucket is swept to the end.
  bool sweep_page(Bucket& bucket, SweepCursor& cursor, int64_t now_ns, uint64_t limit, LifecycleSweep& report);
  // The encryption of what a request writes into `bucket` (encryption.h): SSE-C
  // as it asks, SSE-KMS and SSE-S3 (in a raw bucket) as it or the bucket's default asks.
  ObjectEncryption write_encryption(const S3Request& request, const Bucket& bucket);
  // Delete{BucketPolicy,BucketOwnershipControls,PublicAccessBlock,BucketCors,BucketEncryption}.
  Response delete_bucket_setting(const Call& call, const std::string& name);
  // CORS (gateway/cors.h): the answer to a preflight (OPTIONS), and the
  // Access-Control-* headers of another request that carries Origin.
  Response preflight(const S3Request& request);
  NameValues cors_response_headers(const S3Request& request);
  std::shared_ptr<const BucketAccessRules> rules_of(const std::string& bucket);

  // Object tagging.
  Response get_tagging(const Call& call);
  std::unique_ptr<RequestBody> put_tagging(const Call& call);
  Response delete_tagging(const Call& call);
  // Bucket tagging.
  Response get_bucket_tagging(const Call& call);
  std::unique_ptr<RequestBody> put_bucket_tagging(const Call& call);
  Response delete_bucket_tagging(const Call& call);

  // The version a retention, legal-hold or tagging request names (versionId,
  // or the current one); S3Error NoSuchKey, NoSuchVersion.
  ObjectRecord target_version(const Call& call, const Bucket& bucket);
  // Replaces the tags of `version`; x-amz-version-id in the response.
  Response store_tags(const Bucket& bucket, const ObjectRecord& version, const NameValues& tags, int status);
  // x-amz-bypass-governance-retention: true from the bucket's owner.
  bool bypasses_governance(const Call& call, const Bucket& bucket) const;

  // Objects.
  std::unique_ptr<RequestBody> put_object(const Call& call);
  // POST Object: a browser's HTML form upload, a PutObject once its fields are read (post_object.cc).
  std::unique_ptr<RequestBody> post_object(const Call& call);
  Response get_object(const Call& call, bool head);
  Response delete_object(const Call& call);
  Response copy_object(const Call& call);
  Response object_attributes(const Call& call);  // GetObjectAttributes
  // Veeam SOSAPI's system.xml and capacity.xml, generated for the bucket.
  Response sosapi_object(const Bucket& bucket, SosapiDocument document, bool head);

  // Multipart uploads.
  Response create_upload(const Call& call);
  std::unique_ptr<RequestBody> upload_part(const Call& call);
  Response upload_part_copy(const Call& call);
  std::unique_ptr<RequestBody> complete_upload(const Call& call);
  Response abort_upload(const Call& call);
  Response list_parts(const Call& call);
  Response list_uploads(const Call& call);

  // Commits an object whose files are written, as a new version or the null
  // one as the bucket's versioning has it (sets object.version_id); removes
  // what it replaced. True when the bucket is versioned (then responses name
  // the version).
  // `conditions`: a conditional write's request, checked again at commit
  // (S3Error ConditionalRequestConflict).
  // `append_user`: not empty, the write must not replace a current object (refuse_overwrite).
  bool commit_object(Bucket& bucket, ObjectRecord& object, const S3Request* conditions = nullptr,
                     const std::string& append_user = {});
  // The lock a version written by this request gets (its headers, or the bucket's default).
  ObjectLock new_version_lock(const Call& call, const Bucket& bucket, bool uploads_body);
  struct Deletion {
    bool versioned = false;  // the bucket has versioning enabled or suspended
    std::string version_id;  // the version removed, or the delete marker added
    bool delete_marker = false;  // a delete marker was added or removed
  };
  // DeleteObject of a key (version_id empty) or of one version, which its
  // lock may forbid (S3Error AccessDenied). A change for group_commit_ (mutex_
  // held, in a transaction): appends the segments the deletion frees to
  // `unused`, for the caller to remove once committed.
  // `may_remove_unversioned` false: refuses (AccessDenied) to remove or replace the null version.
  // A delete marker it adds is `marker_owner`'s. `conditions` are checked
  // against the version removed or hidden (S3Error PreconditionFailed).
  Deletion delete_key(Bucket& bucket, const std::string& key, const std::string& version_id, bool bypass_governance,
                      bool may_remove_unversioned, const std::string& marker_owner,
                      std::vector<Segment>& unused, const DeleteConditions& conditions = {});
  UploadRecord upload_for(const Call& call, const Bucket& bucket);
  // Records an uploaded part (its file written), replacing the part of that number: when one
  // part is sent twice at once, the upload that finishes last is kept. A part of an upload
  // completed or aborted meanwhile is removed (NoSuchUpload).
  void store_part(const Bucket& bucket, const std::string& upload_id, const PartRecord& part);

  GatewayConfig config_;
  FileLock state_lock_;  // keeps keel gateway gc (and a second gateway) off this state directory
  std::function<std::time_t()> clock_;
  std::mutex mutex_;  // guards metadata_ and buckets_
  MetadataStore metadata_;
  GroupCommit group_commit_{mutex_, metadata_};  // writes of objects and parts, deletes
  DeferredRemoval removal_;  // files of deleted and replaced objects
  AccessStore access_store_;  // guarded by mutex_
  std::map<std::string, std::shared_ptr<Bucket>> buckets_;
  std::map<std::string, std::shared_ptr<engine::ChunkStore>> repositories_;  // by location; set up at start
  RdmaPlane* rdma_ = nullptr;
  LifecycleDay lifecycle_day_;
  std::mutex sweep_mutex_;  // one sweep at a time; guards sweep_cursors_
  std::map<std::string, SweepCursor> sweep_cursors_;  // by bucket
  GatewayKeys keys_;  // sse_master_key (SSE-S3 in raw buckets) and the [kms] key ring
};

}  // namespace keel::gateway
