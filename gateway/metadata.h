// The gateway's metadata database (SQLite, WAL, synchronous=FULL so that an
// acknowledged write survives a crash): buckets, objects with their headers,
// ETag and the files holding their bytes, and multipart uploads with parts.
// Not thread-safe: the caller serialises access.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/request.h"
#include "util/bytes.h"

namespace keel::gateway {

// A bucket's Object Lock default: new versions are retained in this mode for
// days or years (one of them set) unless their upload says otherwise.
struct DefaultRetention {
  std::string mode;  // "" (none), "GOVERNANCE" or "COMPLIANCE"
  int days = 0;
  int years = 0;
};

// A version's legal hold. kNone (never set) and kOff both let it be deleted, but
// GetObjectLegalHold answers them differently (404 NoSuchObjectLockConfiguration
// and Status OFF), as AWS. The values are those of the objects.legal_hold column.
enum class LegalHold : int64_t { kNone = 0, kOn = 1, kOff = 2 };

// One version's Object Lock state.
struct ObjectLock {
  std::string mode;  // "" (no retention), "GOVERNANCE" or "COMPLIANCE"
  int64_t retain_until_ns = 0;
  LegalHold legal_hold = LegalHold::kNone;
};

struct BucketRecord {
  std::string name;
  std::string owner;
  int64_t created_ns = 0;
  std::string path;  // raw mode: the directory holding its files; dedupe mode: the repository location
  bool configured = false;  // from the configuration file (not deletable through the API)
  std::string versioning;   // "" (never enabled), "Enabled" or "Suspended"
  bool object_lock = false;  // created with Object Lock (versioning then stays Enabled)
  DefaultRetention default_retention;
  std::string mode = "raw";  // "raw" or "dedupe" (config.h's bucket_mode_name)
  std::string lifecycle;     // the lifecycle configuration's XML as GetBucketLifecycle shows it; "" when none
};

// The version id of objects written while versioning was off or suspended.
inline constexpr std::string_view kNullVersion = "null";

// A stretch of an object's bytes by its reference in the bucket's storage
// (bucket_storage.h): raw mode, a file name in the bucket's directory; dedupe
// mode, the list of its chunks.
struct Segment {
  std::string file;
  uint64_t length = 0;
};

// One version of an object: its bytes, or a delete marker.
struct ObjectRecord {
  std::string bucket;
  std::string key;
  std::string version_id{kNullVersion};
  bool delete_marker = false;
  bool latest = false;  // set by reads: the key's newest version
  uint64_t size = 0;
  std::string etag;  // without quotes: hex MD5, or hex MD5-of-MD5s + "-N"
  int64_t modified_ns = 0;
  NameValues headers;  // content-type, x-amz-meta-*, ... as given at upload
  std::string checksum_algorithm;  // empty when none was sent
  std::string checksum;            // base64
  std::vector<Segment> segments;
  ObjectLock lock;
  NameValues tags;  // object tagging: (key, value), in the order given
  // A multipart object's parts' checksums of checksum_algorithm: (part number, base64).
  NameValues part_checksums;
  // The user who owns it (its writer, or the bucket's owner: S3Api::owner_for_write);
  // empty for versions written before owners were kept, which the bucket's owner owns.
  std::string owner;
  // How its bytes are encrypted (encryption.h's encode_encryption); empty: as sent.
  Bytes encryption;
};

struct UploadRecord {
  std::string upload_id;
  std::string bucket;
  std::string key;
  std::string initiator;
  int64_t initiated_ns = 0;
  NameValues headers;
  std::string checksum_algorithm;
  Bytes encryption;  // as ObjectRecord's: the completed object's, which every part is written with
};

struct PartRecord {
  int part_number = 0;
  uint64_t size = 0;
  std::string etag;  // hex MD5
  int64_t modified_ns = 0;
  std::string file;
  std::string checksum;  // base64 of the upload's checksum algorithm; empty when none
};

// A completed multipart upload, remembered for a while so that a completion
// re-sent after a lost response gets the same answer.
struct CompletedUpload {
  std::string upload_id;
  std::string bucket;
  std::string key;
  std::string version_id;
  std::string etag;
  NameValues parts;  // the completion's list: (part number, ETag)
  int64_t completed_ns = 0;
};

class MetadataStore {
 public:
  explicit MetadataStore(const std::string& path);
  ~MetadataStore();
  MetadataStore(const MetadataStore&) = delete;
  MetadataStore& operator=(const MetadataStore&) = delete;

  // Runs `fn` in one IMMEDIATE transaction; rolls back if it throws.
  void transaction(const std::function<void()>& fn);
  // Inside a transaction: runs `fn` as a savepoint, rolling back only what it
  // changed if it throws (catalog::savepoint).
  void savepoint(const std::function<void()>& fn);
  // False when no transaction is open (SQLite ends one itself on some errors).
  bool in_transaction() const;

  // Buckets.
  void put_bucket(const BucketRecord& bucket);  // insert, or update owner/path/configured
  std::optional<BucketRecord> bucket(const std::string& name);
  std::vector<BucketRecord> buckets();
  // Removes the bucket with its unfinished uploads; returns their parts' files.
  std::vector<std::string> delete_bucket(const std::string& name);
  bool bucket_has_objects(const std::string& name);
  void set_versioning(const std::string& bucket, const std::string& status);
  void set_default_retention(const std::string& bucket, const DefaultRetention& retention);
  void set_object_lock(const std::string& bucket);  // turns Object Lock on for good
  void set_bucket_tags(const std::string& bucket, const NameValues& tags);  // empty: none
  void set_lifecycle(const std::string& bucket, const std::string& xml);     // empty: none
  NameValues bucket_tags(const std::string& bucket);

  // Object versions. The newest version of a key (the last one put) is its
  // current one. put_object adds the version, replacing the one with the
  // same version id, and returns the files that one used (for the caller to
  // remove once committed).
  std::vector<Segment> put_object(const ObjectRecord& object);
  // A version, or the current one when version_id is empty; it may be a delete marker.
  std::optional<ObjectRecord> object(const std::string& bucket, const std::string& key,
                                     const std::string& version_id = "");
  // How many versions and delete markers `key` has.
  uint64_t version_count(const std::string& bucket, const std::string& key);
  // Removes one version; returns it with its segments (nullopt when there was none).
  std::optional<ObjectRecord> delete_version(const std::string& bucket, const std::string& key,
                                             const std::string& version_id);
  // Sets a version's retention and legal hold; false when there is no such version.
  bool set_lock(const std::string& bucket, const std::string& key, const std::string& version_id,
                const ObjectLock& lock);
  // Replaces a version's tags; false when there is no such version.
  bool set_tags(const std::string& bucket, const std::string& key, const std::string& version_id,
                const NameValues& tags);
  // Current versions that are not delete markers, keys > after (and starting
  // with prefix) in byte order, at most `limit`, without segments.
  std::vector<ObjectRecord> list_objects(const std::string& bucket, const std::string& prefix,
                                         const std::string& after, size_t limit);
  // All versions and delete markers under the prefix, by key, newest first,
  // after (after_key, after_version) (an empty or unknown after_version: keys
  // > after_key), at most `limit`, without segments.
  std::vector<ObjectRecord> list_versions(const std::string& bucket, const std::string& prefix,
                                          const std::string& after_key, const std::string& after_version,
                                          size_t limit);

  // Multipart uploads.
  void create_upload(const UploadRecord& upload);
  std::optional<UploadRecord> upload(const std::string& upload_id);
  // Uploads in (key, upload id) order after the marker (a key, and an upload id of that key or ""), at most `limit`.
  std::vector<UploadRecord> list_uploads(const std::string& bucket, const std::string& prefix,
                                         const std::string& key_marker, const std::string& upload_id_marker,
                                         size_t limit);
  // Replaces a part; returns the file of the part it replaced.
  std::optional<std::string> put_part(const std::string& upload_id, const PartRecord& part);
  std::vector<PartRecord> parts(const std::string& upload_id, int after_part, size_t limit);
  // Removes the upload and its parts; returns their files.
  std::vector<std::string> delete_upload(const std::string& upload_id);
  // Remembers a completion and forgets those completed before forget_before_ns.
  void record_completion(const CompletedUpload& completion, int64_t forget_before_ns);
  std::optional<CompletedUpload> completed_upload(const std::string& upload_id);

  // The bytes all versions in `bucket` hold.
  uint64_t bucket_bytes(const std::string& bucket);
  // Every segment reference the objects and parts of `bucket` use.
  std::vector<std::string> referenced_files(const std::string& bucket);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace keel::gateway
