#include "catalog/sqlite.h"

#include <sqlite3.h>

#include <climits>
#include <utility>

#include "catalog/corrupt_database.h"
#include "util/error.h"

namespace keel::catalog {

namespace {

[[noreturn]] void throw_sqlite(const std::string& path, std::string_view message, std::string_view operation) {
  throw Error(ErrorKind::kTargetIo,
              "catalog " + path + ": " + std::string(message) + " in " + std::string(operation));
}

// A damaged file is told apart from other failures: it can be rebuilt.
[[noreturn]] void throw_sqlite(sqlite3* db, const std::string& path, std::string_view operation) {
  int code = sqlite3_extended_errcode(db) & 0xff;
  if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB) {
    throw CorruptDatabase("catalog " + path + " is damaged (SQLite: " + sqlite3_errmsg(db) + " in " +
                          std::string(operation) + "); keel catalog rebuild rebuilds it from the target");
  }
  throw_sqlite(path, sqlite3_errmsg(db), operation);
}

// SQLite takes lengths as int; larger values cannot be bound.
int checked_length(size_t size, const Database& db, std::string_view operation) {
  if (size > static_cast<size_t>(INT_MAX)) throw_sqlite(db.path(), "value of " + std::to_string(size) + " bytes is too large", operation);
  return static_cast<int>(size);
}

}  // namespace

// --- Statement ---------------------------------------------------------------

Statement::Statement(Database& db, std::string_view sql) : db_(&db), stmt_(nullptr) {
  int rc = sqlite3_prepare_v2(db.handle(), sql.data(), checked_length(sql.size(), db, sql), &stmt_, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt_);
    db.fail(sql);
  }
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement::Statement(Statement&& other) noexcept
    : db_(other.db_), stmt_(std::exchange(other.stmt_, nullptr)) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    sqlite3_finalize(stmt_);
    db_ = other.db_;
    stmt_ = std::exchange(other.stmt_, nullptr);
  }
  return *this;
}

void Statement::fail(std::string_view operation) const {
  throw_sqlite(db_->handle(), db_->path(), std::string(operation) + " of " + sqlite3_sql(stmt_));
}

void Statement::bind_int64(int index, int64_t value) {
  if (sqlite3_bind_int64(stmt_, index, value) != SQLITE_OK) fail("bind");
}

void Statement::bind_double(int index, double value) {
  if (sqlite3_bind_double(stmt_, index, value) != SQLITE_OK) fail("bind");
}

void Statement::bind_text(int index, std::string_view value) {
  if (sqlite3_bind_text(stmt_, index, value.data(), checked_length(value.size(), *db_, "bind"),
                        SQLITE_TRANSIENT) != SQLITE_OK) {
    fail("bind");
  }
}

void Statement::bind_blob(int index, ByteView value) {
  // A null pointer would bind NULL; an empty blob must stay an empty blob.
  static const uint8_t kEmpty = 0;
  const void* data = value.empty() ? &kEmpty : value.data();
  if (sqlite3_bind_blob(stmt_, index, data, checked_length(value.size(), *db_, "bind"), SQLITE_TRANSIENT) !=
      SQLITE_OK) {
    fail("bind");
  }
}

void Statement::bind_null(int index) {
  if (sqlite3_bind_null(stmt_, index) != SQLITE_OK) fail("bind");
}

bool Statement::step() {
  switch (sqlite3_step(stmt_)) {
    case SQLITE_ROW:
      return true;
    case SQLITE_DONE:
      return false;
    default:
      fail("step");
  }
}

void Statement::run() {
  while (step()) {
  }
}

int64_t Statement::column_int64(int column) { return sqlite3_column_int64(stmt_, column); }

double Statement::column_double(int column) { return sqlite3_column_double(stmt_, column); }

std::string Statement::column_text(int column) {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  return {reinterpret_cast<const char*>(text), static_cast<size_t>(sqlite3_column_bytes(stmt_, column))};
}

ByteView Statement::column_blob(int column) {
  // The pointer first, then the length: the SQLite docs require this order.
  const auto* data = static_cast<const uint8_t*>(sqlite3_column_blob(stmt_, column));
  return {data, static_cast<size_t>(sqlite3_column_bytes(stmt_, column))};
}

bool Statement::column_is_null(int column) { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }

void Statement::reset() noexcept {
  // sqlite3_reset repeats the last step's error, which step() already threw.
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

// --- Database ----------------------------------------------------------------

Database::Database(const std::string& path) : path_(path) {
  int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    throw_sqlite(path, message, "open");
  }
}

Database::~Database() {
  cache_.clear();  // statements must be finalized before the connection closes
  sqlite3_close(db_);
}

void Database::fail(std::string_view operation) const { throw_sqlite(db_, path_, operation); }

void Database::exec(std::string_view sql) {
  // sqlite3_exec needs a NUL-terminated string.
  std::string text(sql);
  if (sqlite3_exec(db_, text.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) fail(sql);
}

Statement& Database::cached(std::string_view sql) {
  auto it = cache_.find(sql);
  if (it == cache_.end()) it = cache_.try_emplace(std::string(sql), *this, sql).first;
  return it->second;
}

bool Database::autocommit() const { return sqlite3_get_autocommit(db_) != 0; }

int64_t Database::changes() const { return sqlite3_changes64(db_); }

// --- Migrations --------------------------------------------------------------

int schema_version(Database& db) {
  StatementScope s(db.cached("PRAGMA user_version"));
  s->step();
  return static_cast<int>(s->column_int64(0));
}

void immediate_transaction(Database& db, const std::function<void()>& fn) {
  db.exec("BEGIN IMMEDIATE");
  try {
    fn();
    db.exec("COMMIT");
  } catch (...) {
    if (!db.autocommit()) {
      try {
        db.exec("ROLLBACK");
      } catch (...) {  // the first error is the one to report
      }
    }
    throw;
  }
}

void savepoint(Database& db, const std::function<void()>& fn) {
  db.exec("SAVEPOINT change");
  try {
    fn();
  } catch (...) {
    if (!db.autocommit()) {
      try {
        db.exec("ROLLBACK TO change");
        db.exec("RELEASE change");
      } catch (...) {  // the first error is the one to report
      }
    }
    throw;
  }
  db.exec("RELEASE change");
}

void migrate(Database& db, std::span<const Migration> migrations) {
  const int latest = static_cast<int>(migrations.size());
  int version = schema_version(db);
  while (version < latest) {
    // IMMEDIATE: take the write lock now, then re-read under it, as another
    // process may have migrated meanwhile.
    immediate_transaction(db, [&] {
      version = schema_version(db);
      if (version >= latest) return;
      for (std::string_view sql : migrations[static_cast<size_t>(version)]) db.exec(sql);
      db.exec("PRAGMA user_version = " + std::to_string(version + 1));
    });
    version = schema_version(db);
  }
  if (version > latest) {
    throw Error(ErrorKind::kTargetIo, db.path() + ": schema version " + std::to_string(version) +
                                          " is newer than this keel supports (" + std::to_string(latest) +
                                          "); upgrade keel");
  }
}

}  // namespace keel::catalog
