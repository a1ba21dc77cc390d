// Thin RAII wrappers over the SQLite C API for the catalog: a connection
// that owns sqlite3* and a statement that owns sqlite3_stmt*. Every failure
// throws Error(kTargetIo) "catalog <path>: <sqlite message> in <sql or operation>".
// Neither class is thread-safe; the catalog serializes access.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "util/bytes.h"

struct sqlite3;
struct sqlite3_stmt;

namespace keel::catalog {

class Database;

class Statement {
 public:
  Statement(Database& db, std::string_view sql);
  ~Statement();
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Parameters are numbered from 1, as in SQLite. Text and blobs are copied.
  void bind_int64(int index, int64_t value);
  // Stored as the int64 with the same bits, so every uint64 round-trips.
  void bind_uint64(int index, uint64_t value) { bind_int64(index, static_cast<int64_t>(value)); }
  void bind_double(int index, double value);
  void bind_text(int index, std::string_view value);
  void bind_blob(int index, ByteView value);
  void bind_null(int index);

  // Returns true when a row is ready, false when the statement is done.
  bool step();
  // Steps a statement that returns no rows.
  void run();

  // Columns are numbered from 0. A blob view lives until the next step or reset.
  int64_t column_int64(int column);
  uint64_t column_uint64(int column) { return static_cast<uint64_t>(column_int64(column)); }
  double column_double(int column);
  std::string column_text(int column);
  ByteView column_blob(int column);
  bool column_is_null(int column);

  // Makes the statement ready to run again and clears its bindings. A
  // statement left mid-step would hold its read transaction open.
  void reset() noexcept;

 private:
  [[noreturn]] void fail(std::string_view operation) const;

  Database* db_;
  sqlite3_stmt* stmt_;
};

// Resets a (cached) statement when the scope using it ends, however it ends.
class StatementScope {
 public:
  explicit StatementScope(Statement& statement) : statement_(statement) {}
  ~StatementScope() { statement_.reset(); }
  StatementScope(const StatementScope&) = delete;
  StatementScope& operator=(const StatementScope&) = delete;

  Statement& operator*() { return statement_; }
  Statement* operator->() { return &statement_; }

 private:
  Statement& statement_;
};

class Database {
 public:
  // Opens (creating if needed) the database file at `path`.
  explicit Database(const std::string& path);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Runs one or more statements, discarding any rows.
  void exec(std::string_view sql);
  Statement prepare(std::string_view sql) { return Statement(*this, sql); }
  // The statement for `sql`, prepared on first use and kept for the life of
  // the connection. Wrap each use in a StatementScope; not for statements
  // that may be in use already further up the call stack.
  Statement& cached(std::string_view sql);

  // False while a transaction is open (SQLite may end one itself on errors).
  bool autocommit() const;
  int64_t changes() const;  // rows changed by the last INSERT, UPDATE or DELETE
  const std::string& path() const { return path_; }
  sqlite3* handle() const { return db_; }
  [[noreturn]] void fail(std::string_view operation) const;

 private:
  struct SqlHash {
    using is_transparent = void;
    size_t operator()(std::string_view sql) const { return std::hash<std::string_view>{}(sql); }
  };

  std::string path_;
  sqlite3* db_ = nullptr;
  // Node-based, so references handed out stay valid as it grows.
  std::unordered_map<std::string, Statement, SqlHash, std::equal_to<>> cache_;
};

// Runs `fn` in a BEGIN IMMEDIATE transaction (the write lock taken at once)
// and commits; rolls back and rethrows if `fn` or the commit throws.
void immediate_transaction(Database& db, const std::function<void()>& fn);

// Runs `fn` inside the open transaction as a savepoint: if it throws, what it
// changed is rolled back and the rest of the transaction kept (unless SQLite
// ended the whole transaction on the error: then autocommit() is true).
// Rethrows.
void savepoint(Database& db, const std::function<void()>& fn);

// Numbered schema migrations: migration N (1-based) is migrations[N - 1],
// statements applied in one transaction, after which PRAGMA user_version is
// N. Append, never edit.
using Migration = std::vector<std::string_view>;

// PRAGMA user_version: the number of migrations applied.
int schema_version(Database& db);

// Brings `db` to the latest version, each migration under the write lock so
// two processes opening a new database do not both apply it. Throws
// Error(kTargetIo) if the database is newer than `migrations` knows.
void migrate(Database& db, std::span<const Migration> migrations);

}  // namespace keel::catalog
