#include "catalog/catalog.h"

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <system_error>
#include <type_traits>
#include <utility>

#include "catalog/sqlite.h"
#include "util/codec.h"
#include "util/error.h"
#include "util/fd.h"

namespace keel::catalog {

namespace {

// Two keel processes may share a catalog; one waits this long for the
// other's write transaction before giving up with "database is locked".
constexpr int kBusyTimeoutMs = 10'000;
// Page cache per connection, in KiB. The blob index takes random-key inserts;
// against SQLite's 2 MiB default this makes add_pack about 1.6x faster once
// the index outgrows the default cache.
constexpr int kCacheKiB = 64 * 1024;

// See catalog/sqlite.h: append, never edit.
const std::vector<Migration> kMigrations = {
    // 1: the index of the target.
    {
        "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
        // Blobs refer to their pack by this small number, not its 32-byte id.
        "CREATE TABLE packs(pack_no INTEGER PRIMARY KEY, id BLOB NOT NULL UNIQUE, size INTEGER NOT NULL,"
        " xxh3 BLOB NOT NULL, created INTEGER NOT NULL)",
        // Many millions of rows: clustered on the id, no rowid to store.
        "CREATE TABLE blobs(id BLOB PRIMARY KEY, pack_no INTEGER NOT NULL REFERENCES packs(pack_no),"
        " type INTEGER NOT NULL, offset INTEGER NOT NULL, stored_length INTEGER NOT NULL,"
        " raw_length INTEGER NOT NULL, xxh3 INTEGER NOT NULL) WITHOUT ROWID",
        "CREATE INDEX blobs_by_pack ON blobs(pack_no)",
        // Tree bodies run to kilobytes, too large for a WITHOUT ROWID table
        // (whose interior pages would hold whole rows), so the id is indexed
        // and the bodies stay in the rowid b-tree's leaves.
        "CREATE TABLE trees(tree_no INTEGER PRIMARY KEY, id BLOB NOT NULL UNIQUE, body BLOB NOT NULL)",
        // paths and tags are Encoder lists (varint count, then strings), as
        // paths may hold any byte but NUL.
        "CREATE TABLE snapshots(id BLOB PRIMARY KEY, time_ns INTEGER NOT NULL, host TEXT NOT NULL,"
        " username TEXT NOT NULL, paths BLOB NOT NULL, tags BLOB NOT NULL, parent BLOB, root BLOB NOT NULL,"
        " files INTEGER NOT NULL, dirs INTEGER NOT NULL, bytes INTEGER NOT NULL, bytes_read INTEGER NOT NULL,"
        " bytes_added INTEGER NOT NULL, chunks_added INTEGER NOT NULL, errors INTEGER NOT NULL,"
        " duration_ms INTEGER NOT NULL) WITHOUT ROWID",
    },
    // 2: restore drill history (not part of the index: clear_index keeps it).
    {
        "CREATE TABLE drills(id INTEGER PRIMARY KEY, started_ns INTEGER NOT NULL, snapshot BLOB NOT NULL,"
        " seconds REAL NOT NULL, first_file_seconds REAL NOT NULL, files INTEGER NOT NULL, bytes INTEGER NOT NULL,"
        " errors INTEGER NOT NULL, rto_seconds REAL, rpo_seconds REAL, rto_met INTEGER NOT NULL,"
        " rpo_met INTEGER NOT NULL, rpo_seen_seconds REAL NOT NULL, verify_only INTEGER NOT NULL,"
        " sample REAL NOT NULL, seed INTEGER NOT NULL, report_json TEXT NOT NULL)",
    },
    // 3: job run history (keel job run, keel scheduler); clear_index keeps it.
    {
        "CREATE TABLE job_runs(id INTEGER PRIMARY KEY, job TEXT NOT NULL, started_ns INTEGER NOT NULL,"
        " ended_ns INTEGER NOT NULL, outcome TEXT NOT NULL, snapshot BLOB, files INTEGER NOT NULL,"
        " bytes_read INTEGER NOT NULL, bytes_added INTEGER NOT NULL, errors INTEGER NOT NULL, message TEXT NOT NULL)",
        "CREATE INDEX job_runs_by_job ON job_runs(job, id)",
    },
    // 4: prune's two phases: when a pack was condemned (NULL while in use).
    {
        "ALTER TABLE packs ADD COLUMN condemned INTEGER",
    },
    // 5: every location of a blob (concurrent writers and repacks store
    // some blobs twice; each copy stays indexed until its pack is deleted).
    {
        "CREATE TABLE blob_locations(id BLOB NOT NULL, pack_no INTEGER NOT NULL REFERENCES packs(pack_no),"
        " type INTEGER NOT NULL, offset INTEGER NOT NULL, stored_length INTEGER NOT NULL,"
        " raw_length INTEGER NOT NULL, xxh3 INTEGER NOT NULL, PRIMARY KEY(id, pack_no)) WITHOUT ROWID",
        "INSERT INTO blob_locations SELECT id, pack_no, type, offset, stored_length, raw_length, xxh3 FROM blobs",
        "DROP TABLE blobs",
        "ALTER TABLE blob_locations RENAME TO blobs",
        "CREATE INDEX blobs_by_pack ON blobs(pack_no)",
    },
    // 6: Object Lock: until when each pack is known to be locked (NULL: not known).
    {
        "ALTER TABLE packs ADD COLUMN retain_until INTEGER",
    },
    // 7: packs this catalog's writers committed and no change-log entry
    // names yet (PackIndex::mark_unlogged); by id, as they outlive a rebuild.
    {
        "CREATE TABLE unlogged_packs(id BLOB PRIMARY KEY) WITHOUT ROWID",
    },
    // 8: whether a full key found the pack vouched for: 1 vouched, 0 not,
    // 2 not judged (PackRecord::vouched, judged). Packs indexed before stay
    // trusted as they were.
    {
        "ALTER TABLE packs ADD COLUMN vouched INTEGER NOT NULL DEFAULT 1",
    },
};

constexpr std::pair<JobOutcome, std::string_view> kJobOutcomeNames[] = {
    {JobOutcome::kRunning, "running"}, {JobOutcome::kSuccess, "success"}, {JobOutcome::kPartial, "partial"},
    {JobOutcome::kFailed, "failed"},   {JobOutcome::kRefused, "refused"}, {JobOutcome::kInterrupted, "interrupted"},
};

Id column_id(Statement& s, int column) { return Id::from_bytes(s.column_blob(column)); }

constexpr const char* kPackColumns = "id, size, xxh3, created, condemned, retain_until, vouched";
// packs.vouched
constexpr int64_t kNotVouched = 0, kVouched = 1, kNotJudged = 2;

// kPackColumns
PackRecord read_pack(Statement& s) {
  PackRecord p;
  p.id = column_id(s, 0);
  p.size = s.column_uint64(1);
  ByteView hash = s.column_blob(2);
  p.xxh3_128.assign(hash.begin(), hash.end());
  p.created_unix = s.column_int64(3);
  if (!s.column_is_null(4)) p.condemned_unix = s.column_int64(4);
  if (!s.column_is_null(5)) p.retain_until_unix = s.column_int64(5);
  p.vouched = s.column_int64(6) == kVouched;
  p.judged = s.column_int64(6) != kNotJudged;
  return p;
}

constexpr const char* kSnapshotColumns =
    "id, time_ns, host, username, paths, tags, parent, root,"
    " files, dirs, bytes, bytes_read, bytes_added, chunks_added, errors, duration_ms";

SnapshotRecord read_snapshot(Statement& s) {
  SnapshotRecord r;
  r.id = column_id(s, 0);
  r.time_ns = s.column_int64(1);
  r.host = s.column_text(2);
  r.username = s.column_text(3);
  r.paths = decode_strings(s.column_blob(4), "catalog snapshot " + r.id.hex() + " paths");
  r.tags = decode_strings(s.column_blob(5), "catalog snapshot " + r.id.hex() + " tags");
  if (!s.column_is_null(6)) r.parent = column_id(s, 6);
  r.root = column_id(s, 7);
  r.stats.files = s.column_uint64(8);
  r.stats.dirs = s.column_uint64(9);
  r.stats.bytes = s.column_uint64(10);
  r.stats.bytes_read = s.column_uint64(11);
  r.stats.bytes_added = s.column_uint64(12);
  r.stats.chunks_added = s.column_uint64(13);
  r.stats.errors = s.column_uint64(14);
  r.stats.duration_ms = s.column_int64(15);
  return r;
}

constexpr const char* kDrillColumns =
    "started_ns, snapshot, seconds, first_file_seconds, files, bytes, errors, rto_seconds, rpo_seconds,"
    " rto_met, rpo_met, rpo_seen_seconds, verify_only, sample, seed, report_json";

template <typename T>
void bind_optional(Statement& s, int index, const std::optional<T>& value) {
  if (!value) {
    s.bind_null(index);
  } else if constexpr (std::is_floating_point_v<T>) {
    s.bind_double(index, *value);
  } else {
    s.bind_int64(index, *value);
  }
}

std::optional<double> column_optional(Statement& s, int column) {
  if (s.column_is_null(column)) return std::nullopt;
  return s.column_double(column);
}

// Columns: id, then kDrillColumns.
DrillRecord read_drill(Statement& s) {
  DrillRecord r;
  r.id = s.column_int64(0);
  r.started_ns = s.column_int64(1);
  r.snapshot = column_id(s, 2);
  r.seconds = s.column_double(3);
  r.first_file_seconds = s.column_double(4);
  r.files = s.column_uint64(5);
  r.bytes = s.column_uint64(6);
  r.errors = s.column_uint64(7);
  r.rto_seconds = column_optional(s, 8);
  r.rpo_seconds = column_optional(s, 9);
  r.rto_met = s.column_int64(10) != 0;
  r.rpo_met = s.column_int64(11) != 0;
  r.rpo_seen_seconds = s.column_double(12);
  r.verify_only = s.column_int64(13) != 0;
  r.sample = s.column_double(14);
  r.seed = s.column_uint64(15);
  r.report_json = s.column_text(16);
  return r;
}

constexpr const char* kJobRunColumns =
    "job, started_ns, ended_ns, outcome, snapshot, files, bytes_read, bytes_added, errors, message";

// Tables of history, which no target holds: import_history merges them
// from a catalog copy, matching records by `same_record` (m: ours, c: the copy's).
struct HistoryTable {
  std::string_view name;
  std::string_view columns;
  std::string_view same_record;
};
const HistoryTable kHistoryTables[] = {
    {"drills", kDrillColumns, "m.started_ns = c.started_ns AND m.snapshot = c.snapshot"},
    {"job_runs", kJobRunColumns, "m.job = c.job AND m.started_ns = c.started_ns"},
};

// Binds kJobRunColumns from parameter 1.
void bind_job_run(Statement& s, const JobRunRecord& r) {
  s.bind_text(1, r.job);
  s.bind_int64(2, r.started_ns);
  s.bind_int64(3, r.ended_ns);
  s.bind_text(4, job_outcome_name(r.outcome));
  if (r.snapshot) {
    s.bind_blob(5, r.snapshot->view());
  } else {
    s.bind_null(5);
  }
  s.bind_uint64(6, r.files);
  s.bind_uint64(7, r.bytes_read);
  s.bind_uint64(8, r.bytes_added);
  s.bind_uint64(9, r.errors);
  s.bind_text(10, r.message);
}

// Columns: id, then kJobRunColumns.
JobRunRecord read_job_run(Statement& s) {
  JobRunRecord r;
  r.id = s.column_int64(0);
  r.job = s.column_text(1);
  r.started_ns = s.column_int64(2);
  r.ended_ns = s.column_int64(3);
  r.outcome = parse_job_outcome(s.column_text(4));
  if (!s.column_is_null(5)) r.snapshot = column_id(s, 5);
  r.files = s.column_uint64(6);
  r.bytes_read = s.column_uint64(7);
  r.bytes_added = s.column_uint64(8);
  r.errors = s.column_uint64(9);
  r.message = s.column_text(10);
  return r;
}

// Columns: id, type, offset, stored_length, raw_length, xxh3.
BlobRecord read_blob(Statement& s, int first) {
  BlobRecord b;
  b.id = column_id(s, first);
  b.type = static_cast<BlobType>(s.column_int64(first + 1));
  b.offset = s.column_uint64(first + 2);
  b.stored_length = static_cast<uint32_t>(s.column_int64(first + 3));
  b.raw_length = static_cast<uint32_t>(s.column_int64(first + 4));
  b.xxh3 = s.column_uint64(first + 5);
  return b;
}

class SqliteCatalog final : public Catalog {
 public:
  explicit SqliteCatalog(const std::string& path) : db_(path) {
    db_.exec("PRAGMA busy_timeout = " + std::to_string(kBusyTimeoutMs));
    db_.exec("PRAGMA journal_mode = WAL");
    // In WAL mode NORMAL loses at most the last commits on power loss, never
    // consistency; everything but history can be rebuilt from the target.
    db_.exec("PRAGMA synchronous = NORMAL");
    db_.exec("PRAGMA foreign_keys = ON");
    db_.exec("PRAGMA cache_size = -" + std::to_string(kCacheKiB));  // negative: KiB, not pages
    migrate(db_, kMigrations);
  }

  int schema_version() override {
    std::lock_guard lock(mutex_);
    return catalog::schema_version(db_);
  }

  void verify() override {
    std::lock_guard lock(mutex_);
    Statement s = db_.prepare("PRAGMA quick_check");
    std::string verdict = s.step() ? s.column_text(0) : "no answer";
    if (verdict != "ok") throw CorruptDatabase("catalog " + db_.path() + " is damaged (SQLite quick_check: " + verdict + ")");
  }

  std::optional<std::string> get_meta(std::string_view key) override {
    std::lock_guard lock(mutex_);
    StatementScope s(db_.cached("SELECT value FROM meta WHERE key = ?"));
    s->bind_text(1, key);
    if (!s->step()) return std::nullopt;
    return s->column_text(0);
  }

  void set_meta(std::string_view key, std::string_view value) override {
    std::lock_guard lock(mutex_);
    StatementScope s(db_.cached(
        "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value"));
    s->bind_text(1, key);
    s->bind_text(2, value);
    s->run();
  }

  void add_pack(const PackRecord& pack, std::span<const BlobRecord> blobs) override {
    in_transaction([&] {
      int64_t pack_no;
      {
        // Adding a pack again (a rebuild) refreshes it and keeps its number.
        StatementScope s(db_.cached(
            "INSERT INTO packs(id, size, xxh3, created, condemned, retain_until, vouched) VALUES(?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT(id) DO UPDATE SET size = excluded.size, xxh3 = excluded.xxh3, created = excluded.created,"
            " condemned = excluded.condemned, vouched = excluded.vouched, retain_until = CASE WHEN packs.retain_until IS NULL OR"
            " excluded.retain_until > packs.retain_until THEN excluded.retain_until ELSE packs.retain_until END"
            " RETURNING pack_no"));
        s->bind_blob(1, pack.id.view());
        s->bind_uint64(2, pack.size);
        s->bind_blob(3, pack.xxh3_128);
        s->bind_int64(4, pack.created_unix);
        bind_optional(*s, 5, pack.condemned_unix);
        bind_optional(*s, 6, pack.retain_until_unix);
        s->bind_int64(7, pack.vouched ? kVouched : pack.judged ? kNotVouched : kNotJudged);
        s->step();
        pack_no = s->column_int64(0);
      }
      // Every copy is kept: find_blob chooses among them.
      Statement& insert = db_.cached(
          "INSERT INTO blobs(id, pack_no, type, offset, stored_length, raw_length, xxh3)"
          " VALUES(?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id, pack_no) DO UPDATE SET type = excluded.type,"
          " offset = excluded.offset, stored_length = excluded.stored_length, raw_length = excluded.raw_length,"
          " xxh3 = excluded.xxh3");
      for (const BlobRecord& blob : blobs) {
        StatementScope s(insert);
        s->bind_blob(1, blob.id.view());
        s->bind_int64(2, pack_no);
        s->bind_int64(3, static_cast<int64_t>(blob.type));
        s->bind_uint64(4, blob.offset);
        s->bind_int64(5, blob.stored_length);
        s->bind_int64(6, blob.raw_length);
        s->bind_uint64(7, blob.xxh3);
        s->run();
      }
    });
  }

  bool has_pack(const Id& pack) override {
    std::lock_guard lock(mutex_);
    StatementScope s(db_.cached("SELECT 1 FROM packs WHERE id = ?"));
    s->bind_blob(1, pack.view());
    return s->step();
  }

  std::optional<PackRecord> find_pack(const Id& pack) override {
    std::lock_guard lock(mutex_);
    StatementScope s(db_.cached(std::string("SELECT ") + kPackColumns + " FROM packs WHERE id = ?"));
    s->bind_blob(1, pack.view());
    if (!s->step()) return std::nullopt;
    return read_pack(*s);
  }

  std::vector<PackRecord> list_packs() override {
    std::lock_guard lock(mutex_);
    StatementScope s(db_.cached(std::string("SELECT ") + kPackColumns + " FROM packs ORDER BY pack_no"));
    std::vector<PackRecord> packs;
    while (s->step()) packs.push_back(read_pack(*s));
    return packs;
  }

  void set_retain_until(const Id& pack, int64_t until_unix) override {
    std::lock_guard lock(mutex_);
    StatementScope s(db_.cached(
        "UPDATE packs SET retain_until = ?1 WHERE id = ?2 AND (retain_until IS NULL OR retain_until < ?1)"));
    s->bind_int64(1, until_unix);
    s->bind_blob(2, pack.view());
    s->run();
  }

  uint64_t packs_locked_less_than(int64_t until_unix) override {
    std::lock_guard lock(mutex_);
    StatementScope s(db_.cached(
        "SELECT count(*) FROM packs WHERE condemned IS NULL AND (retain_until IS NULL OR retain_until < ?)"));
    s->bind_int64(1, until_unix);
    s->step();
    return s->column_uint64(0);
  }

  void set_condemned(const Id& pack, std::optional<int64_t> since_unix) override {
    std::lock_guard lock(mutex_);
    StatementScope s(db_.cached("UPDATE packs SET condemned = ? WHERE id = ?"));
    bind_optional(*s, 1, since_unix);
    s->bind_blob(2, pack.view());
    s->run();
  }

  std::optional<BlobLocation> find_blob(const Id& blob) override {
    std::lock_guard lock(mutex_);
    return find_blob_locked(blob);
  }

  std::vector<std::optional<BlobLocation>> find_blobs(std::span<const Id> blobs) override {
    std::lock_guard lock(mutex_);
    // A read transaction (deferred BEGIN) does not hold writers up; inside
    // a caller's transaction the lookups simply join it.
    const bool own = depth_ == 0;
    if (own) db_.exec("BEGIN");
    std::vector<std::optional<BlobLocation>> found;
    try {
      found.reserve(blobs.size());
      for (const Id& blob : blobs) found.push_back(find_blob_locked(blob));
      if (own) db_.exec("COMMIT");
    } catch (...) {
      if (own) roll_back(/*outermost=*/true);
      throw;
    }
    return found;
  }

  std::vector<BlobLocation> find_blob_copies(const Id& blob) override {
    std::lock_guard lock(mutex_);
    return copies_locked(blob, -1);  // SQLite: a negative LIMIT is none
  }

  std::vector<BlobRecord> blobs_in_pack(const Id& pack) override {
    std::lock_guard lock(mutex_);
    StatementScope s(db_.cached(
        "SELECT id, type, offset, stored_length, raw_length, xxh3 FROM blobs"
        " WHERE pack_no = (SELECT pack_no FROM packs WHERE id = ?) ORDER BY offset"));
    s->bind_blob(1, pack.view());
    std::vector<BlobRecord> blobs;
    while (s->step()) blobs.push_back(read_blob(*s, 0));
    return blobs;
  }

  void for_each_usable_blob(const std::function<void(const Id&, BlobType)>& fn, bool vouched_only) override {
    std::lock_guard lock(mutex_);
    // Not cached: `fn` may call back into this catalog.
    Statement s = db_.prepare(std::string("SELECT id, type FROM blobs WHERE pack_no NOT IN (SELECT pack_no FROM packs"
                                          " WHERE condemned IS NOT NULL") +
                              (vouched_only ? " OR vouched != " + std::to_string(kVouched) + ")" : ")"));
    while (s.step()) fn(column_id(s, 0), static_cast<BlobType>(s.column_int64(1)));
  }

  void for_each_blob_location(const std::function<void(const BlobLocation&)>& fn) override {
    std::lock_guard lock(mutex_);
    // The blobs table is clustered on (id, pack_no), so this order costs no sort.
    Statement s = db_.prepare(
        "SELECT p.id, b.id, b.type, b.offset, b.stored_length, b.raw_length, b.xxh3"
        " FROM blobs b JOIN packs p ON p.pack_no = b.pack_no ORDER BY b.id, b.pack_no");
    BlobLocation location;
    while (s.step()) {
      location.pack = column_id(s, 0);
      location.blob = read_blob(s, 1);
      fn(location);
    }
  }

  uint64_t blob_count() override {
    std::lock_guard lock(mutex_);
    StatementScope s(db_.cached("SELECT count(*) FROM blobs"));
    s->step();
    return s->column_uint64(0);
  }

  uint64_t blobs_stored_more_than_once() override {
    std::lock_guard lock(mutex_);
    // The primary key orders copies of one blob together: one pass, no sort.
    StatementScope s(db_.cached("SELECT count(*) FROM (SELECT id FROM blobs GROUP BY id HAVING count(*) > 1)"));
    s->step();
    return s->column_uint64(0);
  }

  void mark_unlogged(const Id& pack) override {
    std::lock_guard lock(mutex_);
    StatementScope s(db_.cached("INSERT INTO unlogged_packs(id) VALUES(?) ON CONFLICT(id) DO NOTHING"));
    s->bind_blob(1, pack.view());
    s->run();
  }

  std::vector<PackRecord> unlogged_packs() override {
    std::lock_guard lock(mutex_);
    StatementScope s(db_.cached(
        "SELECT p.id, p.size, p.xxh3, p.created, p.condemned, p.retain_until, p.vouched FROM unlogged_packs u"
        " JOIN packs p ON p.id = u.id ORDER BY p.pack_no"));
    std::vector<PackRecord> packs;
    while (s->step()) packs.push_back(read_pack(*s));
    return packs;
  }

  void mark_logged(std::span<const Id> packs) override {
    if (packs.empty()) return;
    in_transaction([&] {
      Statement& remove = db_.cached("DELETE FROM unlogged_packs WHERE id = ?");
      for (const Id& pack : packs) {
        StatementScope s(remove);
        s->bind_blob(1, pack.view());
        s->run();
      }
    });
  }

  void remove_pack(const Id& pack) override {
    in_transaction([&] {
      {
        StatementScope s(db_.cached(
            "DELETE FROM trees WHERE id IN (SELECT b.id FROM blobs b WHERE b.type = ?1 AND"
            " b.pack_no = (SELECT pack_no FROM packs WHERE id = ?2) AND NOT EXISTS (SELECT 1 FROM blobs o WHERE"
            " o.id = b.id AND o.pack_no != b.pack_no))"));
        s->bind_int64(1, static_cast<int64_t>(BlobType::kTree));
        s->bind_blob(2, pack.view());
        s->run();
      }
      {
        StatementScope s(db_.cached("DELETE FROM blobs WHERE pack_no = (SELECT pack_no FROM packs WHERE id = ?)"));
        s->bind_blob(1, pack.view());
        s->run();
      }
      for (const char* sql : {"DELETE FROM unlogged_packs WHERE id = ?", "DELETE FROM packs WHERE id = ?"}) {
        StatementScope s(db_.cached(sql));
        s->bind_blob(1, pack.view());
        s->run();
      }
    });
  }

  void put_tree(const Id& id, ByteView body) override {
    std::lock_guard lock(mutex_);
    // A tree id is the hash of its body, so a stored one never changes.
    StatementScope s(db_.cached("INSERT INTO trees(id, body) VALUES(?, ?) ON CONFLICT(id) DO NOTHING"));
    s->bind_blob(1, id.view());
    s->bind_blob(2, body);
    s->run();
  }

  std::optional<Bytes> get_tree(const Id& id) override {
    std::lock_guard lock(mutex_);
    StatementScope s(db_.cached("SELECT body FROM trees WHERE id = ?"));
    s->bind_blob(1, id.view());
    if (!s->step()) return std::nullopt;
    ByteView body = s->column_blob(0);
    return Bytes(body.begin(), body.end());
  }

  void add_snapshot(const SnapshotRecord& r) override {
    std::lock_guard lock(mutex_);
    StatementScope s(db_.cached(std::string("INSERT OR REPLACE INTO snapshots(") + kSnapshotColumns +
                                ") VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
    s->bind_blob(1, r.id.view());
    s->bind_int64(2, r.time_ns);
    s->bind_text(3, r.host);
    s->bind_text(4, r.username);
    s->bind_blob(5, encode_strings(r.paths));
    s->bind_blob(6, encode_strings(r.tags));
    if (r.parent) {
      s->bind_blob(7, r.parent->view());
    } else {
      s->bind_null(7);
    }
    s->bind_blob(8, r.root.view());
    s->bind_uint64(9, r.stats.files);
    s->bind_uint64(10, r.stats.dirs);
    s->bind_uint64(11, r.stats.bytes);
    s->bind_uint64(12, r.stats.bytes_read);
    s->bind_uint64(13, r.stats.bytes_added);
    s->bind_uint64(14, r.stats.chunks_added);
    s->bind_uint64(15, r.stats.errors);
    s->bind_int64(16, r.stats.duration_ms);
    s->run();
  }

  std::optional<SnapshotRecord> get_snapshot(const Id& id) override {
    std::lock_guard lock(mutex_);
    StatementScope s(db_.cached(std::string("SELECT ") + kSnapshotColumns + " FROM snapshots WHERE id = ?"));
    s->bind_blob(1, id.view());
    if (!s->step()) return std::nullopt;
    return read_snapshot(*s);
  }

  std::vector<SnapshotRecord> list_snapshots() override {
    std::lock_guard lock(mutex_);
    StatementScope s(db_.cached(std::string("SELECT ") + kSnapshotColumns + " FROM snapshots ORDER BY time_ns, id"));
    std::vector<SnapshotRecord> snapshots;
    while (s->step()) snapshots.push_back(read_snapshot(*s));
    return snapshots;
  }

  void remove_snapshot(const Id& id) override {
    std::lock_guard lock(mutex_);
    StatementScope s(db_.cached("DELETE FROM snapshots WHERE id = ?"));
    s->bind_blob(1, id.view());
    s->run();
  }

  void clear_index() override {
    // Blobs before packs: they reference them.
    in_transaction([&] { db_.exec("DELETE FROM blobs; DELETE FROM packs; DELETE FROM trees; DELETE FROM snapshots"); });
  }

  int64_t add_drill(const DrillRecord& r) override {
    std::lock_guard lock(mutex_);
    StatementScope s(db_.cached(std::string("INSERT INTO drills(") + kDrillColumns +
                                ") VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"));
    s->bind_int64(1, r.started_ns);
    s->bind_blob(2, r.snapshot.view());
    s->bind_double(3, r.seconds);
    s->bind_double(4, r.first_file_seconds);
    s->bind_uint64(5, r.files);
    s->bind_uint64(6, r.bytes);
    s->bind_uint64(7, r.errors);
    bind_optional(*s, 8, r.rto_seconds);
    bind_optional(*s, 9, r.rpo_seconds);
    s->bind_int64(10, r.rto_met);
    s->bind_int64(11, r.rpo_met);
    s->bind_double(12, r.rpo_seen_seconds);
    s->bind_int64(13, r.verify_only);
    s->bind_double(14, r.sample);
    s->bind_uint64(15, r.seed);
    s->bind_text(16, r.report_json);
    s->step();
    return s->column_int64(0);
  }

  std::vector<DrillRecord> list_drills() override {
    std::lock_guard lock(mutex_);
    StatementScope s(db_.cached(std::string("SELECT id, ") + kDrillColumns + " FROM drills ORDER BY started_ns, id"));
    std::vector<DrillRecord> drills;
    while (s->step()) drills.push_back(read_drill(*s));
    return drills;
  }

  void limit_cache(uint64_t bytes) override {
    std::lock_guard lock(mutex_);
    db_.exec("PRAGMA cache_size = -" + std::to_string(std::max<uint64_t>(bytes >> 10, 1)));
  }

  int64_t add_job_run(const JobRunRecord& r) override {
    std::lock_guard lock(mutex_);
    StatementScope s(db_.cached(std::string("INSERT INTO job_runs(") + kJobRunColumns +
                                ") VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"));
    bind_job_run(*s, r);
    s->step();
    return s->column_int64(0);
  }

  void finish_job_run(const JobRunRecord& r) override {
    std::lock_guard lock(mutex_);
    StatementScope s(db_.cached(
        "UPDATE job_runs SET job = ?1, started_ns = ?2, ended_ns = ?3, outcome = ?4, snapshot = ?5, files = ?6,"
        " bytes_read = ?7, bytes_added = ?8, errors = ?9, message = ?10 WHERE id = ?11 RETURNING id"));
    bind_job_run(*s, r);
    s->bind_int64(11, r.id);
    if (!s->step()) {
      throw Error(ErrorKind::kNotFound, "catalog " + db_.path() + ": no job run " + std::to_string(r.id));
    }
  }

  std::vector<JobRunRecord> list_job_runs(std::string_view job, size_t newest) override {
    std::lock_guard lock(mutex_);
    // Newest first under the limit (-1: none), then turned around.
    StatementScope s(db_.cached(std::string("SELECT id, ") + kJobRunColumns +
                                " FROM job_runs WHERE job = ? ORDER BY id DESC LIMIT ?"));
    s->bind_text(1, job);
    s->bind_int64(2, newest == 0 ? -1 : static_cast<int64_t>(newest));
    std::vector<JobRunRecord> runs;
    while (s->step()) runs.push_back(read_job_run(*s));
    std::reverse(runs.begin(), runs.end());
    return runs;
  }

  void transaction(const std::function<void()>& fn) override { in_transaction(fn); }

  void export_to(const std::string& path) override {
    std::lock_guard lock(mutex_);
    StatementScope s(db_.cached("VACUUM INTO ?"));
    s->bind_text(1, path);
    s->run();
  }

  size_t import_history(const std::string& path) override {
    std::lock_guard lock(mutex_);
    {
      StatementScope attach(db_.cached("ATTACH DATABASE ? AS copy"));
      attach->bind_text(1, path);
      attach->run();
    }
    size_t added = 0;
    try {
      StatementScope version(db_.cached("PRAGMA copy.user_version"));
      version->step();
      if (version->column_int64(0) > static_cast<int64_t>(kMigrations.size())) {
        throw Error(ErrorKind::kTargetIo, "catalog copy " + path + " is of a newer schema than this keel supports");
      }
      in_transaction([&] {
        for (const HistoryTable& table : kHistoryTables) {
          if (!attached_table_exists(table.name)) continue;  // the copy predates it
          std::string name(table.name), columns(table.columns);
          db_.exec("INSERT INTO main." + name + "(" + columns + ") SELECT " + columns + " FROM copy." + name +
                   " AS c WHERE NOT EXISTS (SELECT 1 FROM main." + name + " AS m WHERE " +
                   std::string(table.same_record) + ")");
          added += db_.changes();
        }
      });
    } catch (...) {
      db_.exec("DETACH DATABASE copy");
      throw;
    }
    db_.exec("DETACH DATABASE copy");
    return added;
  }

 private:
  // Depth 0 opens a real transaction (IMMEDIATE: take the write lock now,
  // so a concurrent writer makes us wait instead of failing on upgrade).
  // Deeper calls join it through a savepoint, so a failed inner call
  // undoes only its own part if the caller catches the error.
  template <typename Fn>
  void in_transaction(const Fn& fn) {
    std::lock_guard lock(mutex_);
    const bool outermost = depth_ == 0;
    db_.exec(outermost ? "BEGIN IMMEDIATE" : "SAVEPOINT nested");
    ++depth_;
    try {
      fn();
      db_.exec(outermost ? "COMMIT" : "RELEASE nested");
    } catch (...) {
      --depth_;
      roll_back(outermost);
      throw;
    }
    --depth_;
  }

  // Best effort while an error is already on its way up: a failure here
  // would only hide it, and SQLite may have rolled back by itself.
  void roll_back(bool outermost) noexcept {
    if (db_.autocommit()) return;
    try {
      db_.exec(outermost ? "ROLLBACK" : "ROLLBACK TO nested; RELEASE nested");
    } catch (...) {
    }
  }

  // The blob's copies in the order reads prefer them (find_blob): in use
  // before condemned, then as indexed; at most `limit`.
  std::vector<BlobLocation> copies_locked(const Id& blob, int64_t limit) {
    StatementScope s(db_.cached(
        "SELECT p.id, b.id, b.type, b.offset, b.stored_length, b.raw_length, b.xxh3"
        " FROM blobs b JOIN packs p ON p.pack_no = b.pack_no WHERE b.id = ?"
        " ORDER BY p.condemned IS NOT NULL, b.pack_no LIMIT ?"));
    s->bind_blob(1, blob.view());
    s->bind_int64(2, limit);
    std::vector<BlobLocation> copies;
    while (s->step()) copies.push_back(BlobLocation{column_id(*s, 0), read_blob(*s, 1)});
    return copies;
  }

  std::optional<BlobLocation> find_blob_locked(const Id& blob) {
    std::vector<BlobLocation> first = copies_locked(blob, 1);
    if (first.empty()) return std::nullopt;
    return std::move(first.front());
  }

  bool attached_table_exists(std::string_view table) {
    StatementScope s(db_.cached("SELECT 1 FROM copy.sqlite_master WHERE type = 'table' AND name = ?"));
    s->bind_text(1, table);
    return s->step();
  }

  std::recursive_mutex mutex_;
  Database db_;
  int depth_ = 0;  // nesting of in_transaction calls
};

}  // namespace

std::string_view job_outcome_name(JobOutcome outcome) {
  for (const auto& [value, name] : kJobOutcomeNames) {
    if (value == outcome) return name;
  }
  return "unknown";
}

JobOutcome parse_job_outcome(std::string_view name) {
  for (const auto& [value, known] : kJobOutcomeNames) {
    if (known == name) return value;
  }
  throw Error(ErrorKind::kIntegrity, "unknown job outcome '" + std::string(name) + "'");
}

std::unique_ptr<Catalog> Catalog::open(const std::string& path) {
  create_parent_dirs(path, "catalog " + path);
  return std::make_unique<SqliteCatalog>(path);
}

std::string Catalog::move_aside(const std::string& path) {
  const std::string aside = path + ".corrupt-" + std::to_string(std::time(nullptr));
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::error_code ec;
    std::filesystem::rename(path + suffix, aside + suffix, ec);
    if (ec && ec != std::errc::no_such_file_or_directory) {
      throw Error(ErrorKind::kTargetIo, "cannot move damaged catalog " + path + suffix + " aside to " + aside + suffix +
                                            ": " + ec.message());
    }
  }
  return aside;
}

std::unique_ptr<Catalog> Catalog::open_in_memory() { return std::make_unique<SqliteCatalog>(":memory:"); }

}  // namespace keel::catalog
