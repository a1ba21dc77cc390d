#include "gateway/metadata.h"

#include <sqlite3.h>

#include "catalog/sqlite.h"
#include "util/codec.h"
#include "util/error.h"

namespace keel::gateway {

namespace {

using catalog::Statement;
using catalog::StatementScope;

constexpr int kBusyTimeoutMs = 10'000;

const std::vector<catalog::Migration> kMigrations = {
    // 1: buckets, objects and their files, multipart uploads.
    {
        "CREATE TABLE buckets(name TEXT PRIMARY KEY, owner TEXT NOT NULL, created_ns INTEGER NOT NULL,"
        " path TEXT NOT NULL, configured INTEGER NOT NULL) WITHOUT ROWID",
        // headers: an Encoder list of (name, value) pairs.
        "CREATE TABLE objects(object_no INTEGER PRIMARY KEY, bucket TEXT NOT NULL, key TEXT NOT NULL,"
        " size INTEGER NOT NULL, etag TEXT NOT NULL, modified_ns INTEGER NOT NULL, headers BLOB NOT NULL,"
        " checksum_algorithm TEXT NOT NULL, checksum TEXT NOT NULL, UNIQUE(bucket, key))",
        "CREATE TABLE segments(object_no INTEGER NOT NULL REFERENCES objects(object_no) ON DELETE CASCADE,"
        " seq INTEGER NOT NULL, file TEXT NOT NULL, length INTEGER NOT NULL, PRIMARY KEY(object_no, seq))"
        " WITHOUT ROWID",
        "CREATE TABLE uploads(upload_id TEXT PRIMARY KEY, bucket TEXT NOT NULL, key TEXT NOT NULL,"
        " initiator TEXT NOT NULL, initiated_ns INTEGER NOT NULL, headers BLOB NOT NULL,"
        " checksum_algorithm TEXT NOT NULL) WITHOUT ROWID",
        "CREATE INDEX uploads_by_key ON uploads(bucket, key, initiated_ns, upload_id)",
        "CREATE TABLE parts(upload_id TEXT NOT NULL REFERENCES uploads(upload_id) ON DELETE CASCADE,"
        " part_no INTEGER NOT NULL, size INTEGER NOT NULL, etag TEXT NOT NULL, modified_ns INTEGER NOT NULL,"
        " file TEXT NOT NULL, PRIMARY KEY(upload_id, part_no)) WITHOUT ROWID",
    },
    // 2: versioning. A key holds versions and delete markers, so objects is
    // rebuilt without UNIQUE(bucket, key); existing objects become null versions.
    // The newest version of a key (highest object_no) is its current one.
    {
        "ALTER TABLE buckets ADD COLUMN versioning TEXT NOT NULL DEFAULT ''",
        "CREATE TABLE versions(object_no INTEGER PRIMARY KEY, bucket TEXT NOT NULL, key TEXT NOT NULL,"
        " size INTEGER NOT NULL, etag TEXT NOT NULL, modified_ns INTEGER NOT NULL, headers BLOB NOT NULL,"
        " checksum_algorithm TEXT NOT NULL, checksum TEXT NOT NULL, version_id TEXT NOT NULL,"
        " delete_marker INTEGER NOT NULL, UNIQUE(bucket, key, version_id))",
        "INSERT INTO versions SELECT object_no, bucket, key, size, etag, modified_ns, headers, checksum_algorithm,"
        " checksum, 'null', 0 FROM objects",
        "CREATE TABLE version_segments(object_no INTEGER NOT NULL REFERENCES versions(object_no) ON DELETE CASCADE,"
        " seq INTEGER NOT NULL, file TEXT NOT NULL, length INTEGER NOT NULL, PRIMARY KEY(object_no, seq))"
        " WITHOUT ROWID",
        "INSERT INTO version_segments SELECT object_no, seq, file, length FROM segments",
        // Children first, so that dropping objects cascades nowhere.
        "DROP TABLE segments",
        "DROP TABLE objects",
        "ALTER TABLE versions RENAME TO objects",  // also renames version_segments' reference
        "ALTER TABLE version_segments RENAME TO segments",
        "CREATE INDEX objects_by_key ON objects(bucket, key, object_no)",
    },
    // 3: Object Lock: the bucket's switch and default retention, each version's
    // retention and legal hold.
    {
        "ALTER TABLE buckets ADD COLUMN object_lock INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE buckets ADD COLUMN default_retention_mode TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE buckets ADD COLUMN default_retention_days INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE buckets ADD COLUMN default_retention_years INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE objects ADD COLUMN retention_mode TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE objects ADD COLUMN retain_until_ns INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE objects ADD COLUMN legal_hold INTEGER NOT NULL DEFAULT 0",
    },
    // 4: object tags, an Encoder list of (key, value) pairs like headers (x'00': none).
    {
        "ALTER TABLE objects ADD COLUMN tags BLOB NOT NULL DEFAULT x'00'",
    },
    // 5: the bucket's storage mode; a dedupe bucket's path is its repository's location.
    {
        "ALTER TABLE buckets ADD COLUMN mode TEXT NOT NULL DEFAULT 'raw'",
    },
    // 6: completed uploads remembered for retried completions; each part's
    // checksum and, per multipart object, its parts' checksums; bucket tags.
    {
        "CREATE TABLE completed_uploads(upload_id TEXT PRIMARY KEY, bucket TEXT NOT NULL, key TEXT NOT NULL,"
        " version_id TEXT NOT NULL, etag TEXT NOT NULL, parts BLOB NOT NULL, completed_ns INTEGER NOT NULL)"
        " WITHOUT ROWID",
        "CREATE INDEX completed_uploads_by_age ON completed_uploads(completed_ns)",
        "ALTER TABLE parts ADD COLUMN checksum TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE objects ADD COLUMN part_checksums BLOB NOT NULL DEFAULT x'00'",
        "ALTER TABLE buckets ADD COLUMN tags BLOB NOT NULL DEFAULT x'00'",
    },
    // 7: who wrote each version ('': written before owners were kept, the bucket's owner).
    {
        "ALTER TABLE objects ADD COLUMN owner TEXT NOT NULL DEFAULT ''",
    },
    // 8: the bucket's lifecycle configuration (XML; '': none), beside the
    // objects it expires, so that one database holds both.
    {
        "ALTER TABLE buckets ADD COLUMN lifecycle TEXT NOT NULL DEFAULT ''",
    },
    // 9: server-side encryption of a version's or an upload's bytes (encryption.h's
    // encode_encryption; x'': stored as sent).
    {
        "ALTER TABLE objects ADD COLUMN encryption BLOB NOT NULL DEFAULT x''",
        "ALTER TABLE uploads ADD COLUMN encryption BLOB NOT NULL DEFAULT x''",
    },
    // 10: a key's uploads listed and paged by upload id, which begins with the
    // initiation time (multipart_ops.cc); paging by id in initiation order
    // skipped or repeated uploads of a key that had several.
    {
        "DROP INDEX IF EXISTS uploads_by_key",
        "CREATE INDEX uploads_by_key ON uploads(bucket, key, upload_id)",
    },
};

Bytes encode_headers(const NameValues& headers) {
  Encoder e;
  e.varint(headers.size());
  for (const auto& [name, value] : headers) {
    e.str(name);
    e.str(value);
  }
  return e.take();
}

NameValues decode_headers(ByteView data) {
  Decoder d(data, "gateway object headers");
  const uint64_t count = d.varint();
  if (count > d.remaining()) d.fail("header count " + std::to_string(count) + " exceeds the bytes left");
  NameValues out;
  for (uint64_t i = 0; i < count; ++i) {
    std::string name = d.str();
    out.emplace_back(std::move(name), d.str());
  }
  d.expect_done();
  return out;
}

// "prefix" as a range: keys >= prefix and < the prefix's successor.
std::optional<std::string> prefix_end(std::string prefix) {
  while (!prefix.empty()) {
    if (static_cast<unsigned char>(prefix.back()) != 0xff) {
      prefix.back() = static_cast<char>(prefix.back() + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::nullopt;
}

}  // namespace

struct MetadataStore::Impl {
  explicit Impl(const std::string& path) : db(path) {}
  catalog::Database db;
};

MetadataStore::MetadataStore(const std::string& path) : impl_(std::make_unique<Impl>(path)) {
  auto& db = impl_->db;
  db.exec("PRAGMA busy_timeout = " + std::to_string(kBusyTimeoutMs));
  db.exec("PRAGMA journal_mode = WAL");
  // FULL: a commit is on disk before the client hears of it.
  db.exec("PRAGMA synchronous = FULL");
  db.exec("PRAGMA foreign_keys = ON");
  catalog::migrate(db, kMigrations);
}

MetadataStore::~MetadataStore() = default;

void MetadataStore::transaction(const std::function<void()>& fn) { catalog::immediate_transaction(impl_->db, fn); }

void MetadataStore::savepoint(const std::function<void()>& fn) { catalog::savepoint(impl_->db, fn); }

bool MetadataStore::in_transaction() const { return !impl_->db.autocommit(); }

void MetadataStore::put_bucket(const BucketRecord& b) {
  StatementScope s(impl_->db.cached(
      "INSERT INTO buckets(name, owner, created_ns, path, configured, versioning, object_lock, mode)"
      " VALUES(?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO"
      " UPDATE SET owner = excluded.owner, path = excluded.path, configured = excluded.configured,"
      " mode = excluded.mode"));
  s->bind_text(1, b.name);
  s->bind_text(2, b.owner);
  s->bind_int64(3, b.created_ns);
  s->bind_text(4, b.path);
  s->bind_int64(5, b.configured ? 1 : 0);
  s->bind_text(6, b.versioning);
  s->bind_int64(7, b.object_lock ? 1 : 0);
  s->bind_text(8, b.mode);
  s->run();
}

namespace {
constexpr const char* kBucketColumns =
    "name, owner, created_ns, path, configured, versioning, object_lock, default_retention_mode,"
    " default_retention_days, default_retention_years, mode, lifecycle";
BucketRecord read_bucket(Statement& s) {
  return {s.column_text(0),
          s.column_text(1),
          s.column_int64(2),
          s.column_text(3),
          s.column_int64(4) != 0,
          s.column_text(5),
          s.column_int64(6) != 0,
          {s.column_text(7), static_cast<int>(s.column_int64(8)), static_cast<int>(s.column_int64(9))},
          s.column_text(10),
          s.column_text(11)};
}
}  // namespace

std::optional<BucketRecord> MetadataStore::bucket(const std::string& name) {
  StatementScope s(impl_->db.cached(std::string("SELECT ") + kBucketColumns + " FROM buckets WHERE name = ?"));
  s->bind_text(1, name);
  if (!s->step()) return std::nullopt;
  return read_bucket(*s);
}

std::vector<BucketRecord> MetadataStore::buckets() {
  StatementScope s(impl_->db.cached(std::string("SELECT ") + kBucketColumns + " FROM buckets ORDER BY name"));
  std::vector<BucketRecord> out;
  while (s->step()) out.push_back(read_bucket(*s));
  return out;
}

std::vector<std::string> MetadataStore::delete_bucket(const std::string& name) {
  auto& db = impl_->db;
  std::vector<std::string> files;
  {
    StatementScope s(db.cached("SELECT file FROM parts JOIN uploads USING(upload_id) WHERE bucket = ?"));
    s->bind_text(1, name);
    while (s->step()) files.push_back(s->column_text(0));
  }
  for (const char* sql : {"DELETE FROM uploads WHERE bucket = ?", "DELETE FROM completed_uploads WHERE bucket = ?",
                          "DELETE FROM buckets WHERE name = ?"}) {
    StatementScope s(db.cached(sql));
    s->bind_text(1, name);
    s->run();
  }
  return files;
}

bool MetadataStore::bucket_has_objects(const std::string& name) {
  StatementScope s(impl_->db.cached("SELECT EXISTS(SELECT 1 FROM objects WHERE bucket = ?1)"));
  s->bind_text(1, name);
  s->step();
  return s->column_int64(0) != 0;
}

void MetadataStore::set_versioning(const std::string& bucket, const std::string& status) {
  StatementScope s(impl_->db.cached("UPDATE buckets SET versioning = ? WHERE name = ?"));
  s->bind_text(1, status);
  s->bind_text(2, bucket);
  s->run();
}

void MetadataStore::set_object_lock(const std::string& bucket) {
  StatementScope s(impl_->db.cached("UPDATE buckets SET object_lock = 1 WHERE name = ?"));
  s->bind_text(1, bucket);
  s->run();
}

void MetadataStore::set_bucket_tags(const std::string& bucket, const NameValues& tags) {
  StatementScope s(impl_->db.cached("UPDATE buckets SET tags = ? WHERE name = ?"));
  s->bind_blob(1, encode_headers(tags));
  s->bind_text(2, bucket);
  s->run();
}

void MetadataStore::set_lifecycle(const std::string& bucket, const std::string& xml) {
  StatementScope s(impl_->db.cached("UPDATE buckets SET lifecycle = ? WHERE name = ?"));
  s->bind_text(1, xml);
  s->bind_text(2, bucket);
  s->run();
}

NameValues MetadataStore::bucket_tags(const std::string& bucket) {
  StatementScope s(impl_->db.cached("SELECT tags FROM buckets WHERE name = ?"));
  s->bind_text(1, bucket);
  if (!s->step()) return {};
  return decode_headers(s->column_blob(0));
}

void MetadataStore::set_default_retention(const std::string& bucket, const DefaultRetention& retention) {
  StatementScope s(impl_->db.cached(
      "UPDATE buckets SET default_retention_mode = ?, default_retention_days = ?, default_retention_years = ?"
      " WHERE name = ?"));
  s->bind_text(1, retention.mode);
  s->bind_int64(2, retention.days);
  s->bind_int64(3, retention.years);
  s->bind_text(4, bucket);
  s->run();
}

namespace {

std::vector<Segment> segments_of(catalog::Database& db, int64_t object_no) {
  StatementScope s(db.cached("SELECT file, length FROM segments WHERE object_no = ? ORDER BY seq"));
  s->bind_int64(1, object_no);
  std::vector<Segment> out;
  while (s->step()) out.push_back({s->column_text(0), s->column_uint64(1)});
  return out;
}

std::optional<int64_t> version_no(catalog::Database& db, const std::string& bucket, const std::string& key,
                                  const std::string& version_id) {
  StatementScope s(db.cached("SELECT object_no FROM objects WHERE bucket = ? AND key = ? AND version_id = ?"));
  s->bind_text(1, bucket);
  s->bind_text(2, key);
  s->bind_text(3, version_id);
  if (!s->step()) return std::nullopt;
  return s->column_int64(0);
}

// Columns of objects aliased "o"; the last says whether the row is its key's newest.
constexpr const char* kObjectColumns =
    "o.object_no, o.bucket, o.key, o.size, o.etag, o.modified_ns, o.headers, o.checksum_algorithm, o.checksum,"
    " o.version_id, o.delete_marker,"
    " o.object_no = (SELECT max(n.object_no) FROM objects n WHERE n.bucket = o.bucket AND n.key = o.key),"
    " o.retention_mode, o.retain_until_ns, o.legal_hold, o.tags, o.part_checksums, o.owner,"
    " o.encryption";

ObjectRecord read_object(Statement& s) {
  ObjectRecord o;
  o.bucket = s.column_text(1);
  o.key = s.column_text(2);
  o.size = s.column_uint64(3);
  o.etag = s.column_text(4);
  o.modified_ns = s.column_int64(5);
  o.headers = decode_headers(s.column_blob(6));
  o.checksum_algorithm = s.column_text(7);
  o.checksum = s.column_text(8);
  o.version_id = s.column_text(9);
  o.delete_marker = s.column_int64(10) != 0;
  o.latest = s.column_int64(11) != 0;
  o.lock = {s.column_text(12), s.column_int64(13), static_cast<LegalHold>(s.column_int64(14))};
  o.tags = decode_headers(s.column_blob(15));
  o.part_checksums = decode_headers(s.column_blob(16));
  o.owner = s.column_text(17);
  const ByteView encryption = s.column_blob(18);
  o.encryption.assign(encryption.begin(), encryption.end());
  return o;
}

}  // namespace

std::vector<Segment> MetadataStore::put_object(const ObjectRecord& o) {
  auto& db = impl_->db;
  std::vector<Segment> replaced;
  if (auto old = version_no(db, o.bucket, o.key, o.version_id)) {
    replaced = segments_of(db, *old);
    StatementScope s(db.cached("DELETE FROM objects WHERE object_no = ?"));
    s->bind_int64(1, *old);
    s->run();
  }
  int64_t number;
  {
    StatementScope s(db.cached(
        "INSERT INTO objects(bucket, key, size, etag, modified_ns, headers, checksum_algorithm, checksum,"
        " version_id, delete_marker, retention_mode, retain_until_ns, legal_hold, tags, part_checksums, owner,"
        " encryption) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING object_no"));
    s->bind_text(1, o.bucket);
    s->bind_text(2, o.key);
    s->bind_uint64(3, o.size);
    s->bind_text(4, o.etag);
    s->bind_int64(5, o.modified_ns);
    s->bind_blob(6, encode_headers(o.headers));
    s->bind_text(7, o.checksum_algorithm);
    s->bind_text(8, o.checksum);
    s->bind_text(9, o.version_id);
    s->bind_int64(10, o.delete_marker ? 1 : 0);
    s->bind_text(11, o.lock.mode);
    s->bind_int64(12, o.lock.retain_until_ns);
    s->bind_int64(13, static_cast<int64_t>(o.lock.legal_hold));
    s->bind_blob(14, encode_headers(o.tags));
    s->bind_blob(15, encode_headers(o.part_checksums));
    s->bind_text(16, o.owner);
    s->bind_blob(17, o.encryption);
    s->step();
    number = s->column_int64(0);
  }
  StatementScope s(db.cached("INSERT INTO segments(object_no, seq, file, length) VALUES(?, ?, ?, ?)"));
  for (size_t i = 0; i < o.segments.size(); ++i) {
    s->bind_int64(1, number);
    s->bind_int64(2, static_cast<int64_t>(i));
    s->bind_text(3, o.segments[i].file);
    s->bind_uint64(4, o.segments[i].length);
    s->run();
    s->reset();
  }
  return replaced;
}

std::optional<ObjectRecord> MetadataStore::object(const std::string& bucket, const std::string& key,
                                                  const std::string& version_id) {
  auto& db = impl_->db;
  int64_t number;
  ObjectRecord o;
  {
    StatementScope s(db.cached(std::string("SELECT ") + kObjectColumns +
                               " FROM objects o WHERE bucket = ?1 AND key = ?2 AND (?3 = '' OR version_id = ?3)"
                               " ORDER BY object_no DESC LIMIT 1"));
    s->bind_text(1, bucket);
    s->bind_text(2, key);
    s->bind_text(3, version_id);
    if (!s->step()) return std::nullopt;
    number = s->column_int64(0);
    o = read_object(*s);
  }
  o.segments = segments_of(db, number);
  return o;
}

uint64_t MetadataStore::version_count(const std::string& bucket, const std::string& key) {
  StatementScope s(impl_->db.cached("SELECT count(*) FROM objects WHERE bucket = ? AND key = ?"));
  s->bind_text(1, bucket);
  s->bind_text(2, key);
  s->step();
  return s->column_uint64(0);
}

std::optional<ObjectRecord> MetadataStore::delete_version(const std::string& bucket, const std::string& key,
                                                          const std::string& version_id) {
  auto removed = object(bucket, key, version_id);
  if (!removed) return std::nullopt;
  StatementScope s(impl_->db.cached("DELETE FROM objects WHERE bucket = ? AND key = ? AND version_id = ?"));
  s->bind_text(1, bucket);
  s->bind_text(2, key);
  s->bind_text(3, version_id);
  s->run();
  return removed;
}

bool MetadataStore::set_lock(const std::string& bucket, const std::string& key, const std::string& version_id,
                             const ObjectLock& lock) {
  StatementScope s(impl_->db.cached(
      "UPDATE objects SET retention_mode = ?, retain_until_ns = ?, legal_hold = ?"
      " WHERE bucket = ? AND key = ? AND version_id = ? AND NOT delete_marker"));
  s->bind_text(1, lock.mode);
  s->bind_int64(2, lock.retain_until_ns);
  s->bind_int64(3, static_cast<int64_t>(lock.legal_hold));
  s->bind_text(4, bucket);
  s->bind_text(5, key);
  s->bind_text(6, version_id);
  s->run();
  return sqlite3_changes(impl_->db.handle()) > 0;
}

bool MetadataStore::set_tags(const std::string& bucket, const std::string& key, const std::string& version_id,
                             const NameValues& tags) {
  StatementScope s(impl_->db.cached(
      "UPDATE objects SET tags = ? WHERE bucket = ? AND key = ? AND version_id = ? AND NOT delete_marker"));
  s->bind_blob(1, encode_headers(tags));
  s->bind_text(2, bucket);
  s->bind_text(3, key);
  s->bind_text(4, version_id);
  s->run();
  return sqlite3_changes(impl_->db.handle()) > 0;
}

std::vector<ObjectRecord> MetadataStore::list_objects(const std::string& bucket, const std::string& prefix,
                                                      const std::string& after, size_t limit) {
  auto& db = impl_->db;
  const std::string from = std::max(after, prefix);
  const auto end = prefix_end(prefix);
  // key > from, or key >= prefix when nothing comes after it: "> from" misses
  // the key equal to the prefix itself, so start there when after < prefix.
  StatementScope s(db.cached(std::string("SELECT ") + kObjectColumns +
                             " FROM objects o WHERE bucket = ?1 AND (key > ?2 OR (?3 AND key = ?2))"
                             " AND (?4 IS NULL OR key < ?4) AND NOT delete_marker AND object_no ="
                             " (SELECT max(n.object_no) FROM objects n WHERE n.bucket = o.bucket AND n.key = o.key)"
                             " ORDER BY key LIMIT ?5"));
  s->bind_text(1, bucket);
  s->bind_text(2, from);
  s->bind_int64(3, after < prefix ? 1 : 0);
  if (end) {
    s->bind_text(4, *end);
  } else {
    s->bind_null(4);
  }
  s->bind_int64(5, static_cast<int64_t>(limit));
  std::vector<ObjectRecord> out;
  while (s->step()) out.push_back(read_object(*s));
  return out;
}

std::vector<ObjectRecord> MetadataStore::list_versions(const std::string& bucket, const std::string& prefix,
                                                       const std::string& after_key, const std::string& after_version,
                                                       size_t limit) {
  const auto end = prefix_end(prefix);
  // The versions of after_key older than after_version, then later keys. A
  // version-id-marker that is gone (a client deleting each page it listed, as
  // every bucket-emptying loop does) lists all of after_key's remaining
  // versions: seeing one twice is better than skipping the rest.
  StatementScope s(impl_->db.cached(
      std::string("SELECT ") + kObjectColumns +
      " FROM objects o WHERE bucket = ?1 AND key >= ?2 AND (?3 IS NULL OR key < ?3) AND (key > ?4 OR (key = ?4 AND"
      " object_no < COALESCE((SELECT v.object_no FROM objects v WHERE v.bucket = ?1 AND v.key = ?4 AND"
      " v.version_id = ?5), CASE WHEN ?5 = '' THEN -1 ELSE 9223372036854775807 END)))"
      " ORDER BY key, object_no DESC LIMIT ?6"));
  s->bind_text(1, bucket);
  s->bind_text(2, prefix);
  if (end) {
    s->bind_text(3, *end);
  } else {
    s->bind_null(3);
  }
  s->bind_text(4, after_key);
  s->bind_text(5, after_version);
  s->bind_int64(6, static_cast<int64_t>(limit));
  std::vector<ObjectRecord> out;
  while (s->step()) out.push_back(read_object(*s));
  return out;
}

void MetadataStore::create_upload(const UploadRecord& u) {
  StatementScope s(impl_->db.cached(
      "INSERT INTO uploads(upload_id, bucket, key, initiator, initiated_ns, headers, checksum_algorithm,"
      " encryption) VALUES(?, ?, ?, ?, ?, ?, ?, ?)"));
  s->bind_text(1, u.upload_id);
  s->bind_text(2, u.bucket);
  s->bind_text(3, u.key);
  s->bind_text(4, u.initiator);
  s->bind_int64(5, u.initiated_ns);
  s->bind_blob(6, encode_headers(u.headers));
  s->bind_text(7, u.checksum_algorithm);
  s->bind_blob(8, u.encryption);
  s->run();
}

namespace {
constexpr const char* kUploadColumns =
    "upload_id, bucket, key, initiator, initiated_ns, headers, checksum_algorithm, encryption";
UploadRecord read_upload(Statement& s) {
  const ByteView encryption = s.column_blob(7);
  return {s.column_text(0),  s.column_text(1),
          s.column_text(2),  s.column_text(3),
          s.column_int64(4), decode_headers(s.column_blob(5)),
          s.column_text(6),  Bytes(encryption.begin(), encryption.end())};
}
}  // namespace

std::optional<UploadRecord> MetadataStore::upload(const std::string& upload_id) {
  StatementScope s(impl_->db.cached(std::string("SELECT ") + kUploadColumns + " FROM uploads WHERE upload_id = ?"));
  s->bind_text(1, upload_id);
  if (!s->step()) return std::nullopt;
  return read_upload(*s);
}

std::vector<UploadRecord> MetadataStore::list_uploads(const std::string& bucket, const std::string& prefix,
                                                      const std::string& key_marker,
                                                      const std::string& upload_id_marker, size_t limit) {
  // S3: with an upload-id-marker, uploads of key_marker after that id; without
  // one, keys after key_marker.
  StatementScope s(impl_->db.cached(
      std::string("SELECT ") + kUploadColumns +
      " FROM uploads WHERE bucket = ?1 AND substr(key, 1, length(?2)) = ?2"
      " AND (key > ?3 OR (?4 != '' AND key = ?3 AND upload_id > ?4))"
      " ORDER BY key, upload_id LIMIT ?5"));
  s->bind_text(1, bucket);
  s->bind_text(2, prefix);
  s->bind_text(3, key_marker);
  s->bind_text(4, upload_id_marker);
  s->bind_int64(5, static_cast<int64_t>(limit));
  std::vector<UploadRecord> out;
  while (s->step()) out.push_back(read_upload(*s));
  return out;
}

std::optional<std::string> MetadataStore::put_part(const std::string& upload_id, const PartRecord& p) {
  auto& db = impl_->db;
  std::optional<std::string> replaced;
  {
    StatementScope s(db.cached("SELECT file FROM parts WHERE upload_id = ? AND part_no = ?"));
    s->bind_text(1, upload_id);
    s->bind_int64(2, p.part_number);
    if (s->step()) replaced = s->column_text(0);
  }
  StatementScope s(db.cached(
      "INSERT OR REPLACE INTO parts(upload_id, part_no, size, etag, modified_ns, file, checksum)"
      " VALUES(?, ?, ?, ?, ?, ?, ?)"));
  s->bind_text(1, upload_id);
  s->bind_int64(2, p.part_number);
  s->bind_uint64(3, p.size);
  s->bind_text(4, p.etag);
  s->bind_int64(5, p.modified_ns);
  s->bind_text(6, p.file);
  s->bind_text(7, p.checksum);
  s->run();
  return replaced;
}

std::vector<PartRecord> MetadataStore::parts(const std::string& upload_id, int after_part, size_t limit) {
  StatementScope s(impl_->db.cached(
      "SELECT part_no, size, etag, modified_ns, file, checksum FROM parts WHERE upload_id = ? AND part_no > ?"
      " ORDER BY part_no LIMIT ?"));
  s->bind_text(1, upload_id);
  s->bind_int64(2, after_part);
  s->bind_int64(3, static_cast<int64_t>(limit));
  std::vector<PartRecord> out;
  while (s->step()) {
    out.push_back({static_cast<int>(s->column_int64(0)), s->column_uint64(1), s->column_text(2), s->column_int64(3),
                   s->column_text(4), s->column_text(5)});
  }
  return out;
}

std::vector<std::string> MetadataStore::delete_upload(const std::string& upload_id) {
  auto& db = impl_->db;
  std::vector<std::string> files;
  {
    StatementScope s(db.cached("SELECT file FROM parts WHERE upload_id = ?"));
    s->bind_text(1, upload_id);
    while (s->step()) files.push_back(s->column_text(0));
  }
  StatementScope s(db.cached("DELETE FROM uploads WHERE upload_id = ?"));
  s->bind_text(1, upload_id);
  s->run();
  return files;
}

void MetadataStore::record_completion(const CompletedUpload& c, int64_t forget_before_ns) {
  {
    StatementScope s(impl_->db.cached("DELETE FROM completed_uploads WHERE completed_ns < ?"));
    s->bind_int64(1, forget_before_ns);
    s->run();
  }
  StatementScope s(impl_->db.cached(
      "INSERT OR REPLACE INTO completed_uploads(upload_id, bucket, key, version_id, etag, parts, completed_ns)"
      " VALUES(?, ?, ?, ?, ?, ?, ?)"));
  s->bind_text(1, c.upload_id);
  s->bind_text(2, c.bucket);
  s->bind_text(3, c.key);
  s->bind_text(4, c.version_id);
  s->bind_text(5, c.etag);
  s->bind_blob(6, encode_headers(c.parts));
  s->bind_int64(7, c.completed_ns);
  s->run();
}

std::optional<CompletedUpload> MetadataStore::completed_upload(const std::string& upload_id) {
  StatementScope s(impl_->db.cached(
      "SELECT upload_id, bucket, key, version_id, etag, parts, completed_ns FROM completed_uploads WHERE upload_id = ?"));
  s->bind_text(1, upload_id);
  if (!s->step()) return std::nullopt;
  return CompletedUpload{s->column_text(0), s->column_text(1), s->column_text(2), s->column_text(3),
                         s->column_text(4), decode_headers(s->column_blob(5)), s->column_int64(6)};
}

uint64_t MetadataStore::bucket_bytes(const std::string& bucket) {
  StatementScope s(impl_->db.cached("SELECT COALESCE(sum(size), 0) FROM objects WHERE bucket = ?"));
  s->bind_text(1, bucket);
  s->step();
  return s->column_uint64(0);
}

std::vector<std::string> MetadataStore::referenced_files(const std::string& bucket) {
  StatementScope s(impl_->db.cached(
      "SELECT file FROM segments JOIN objects USING(object_no) WHERE bucket = ?1"
      " UNION SELECT file FROM parts JOIN uploads USING(upload_id) WHERE bucket = ?1"));
  s->bind_text(1, bucket);
  std::vector<std::string> out;
  while (s->step()) out.push_back(s->column_text(0));
  return out;
}

}  // namespace keel::gateway
