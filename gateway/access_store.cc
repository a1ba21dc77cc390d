#include "gateway/access_store.h"

#include "catalog/sqlite.h"

namespace keel::gateway {

using catalog::StatementScope;

struct AccessStore::Impl {
  explicit Impl(const std::string& path) : db(path) {}
  catalog::Database db;
};

AccessStore::AccessStore(const std::string& path) : impl_(std::make_unique<Impl>(path)) {
  auto& db = impl_->db;
  db.exec("PRAGMA busy_timeout = 10000");
  db.exec("PRAGMA journal_mode = WAL");
  db.exec("PRAGMA synchronous = FULL");
  db.exec(
      "CREATE TABLE IF NOT EXISTS bucket_settings(bucket TEXT NOT NULL, name TEXT NOT NULL, value TEXT NOT NULL,"
      " PRIMARY KEY(bucket, name));"
      "CREATE TABLE IF NOT EXISTS object_acls(bucket TEXT NOT NULL, key BLOB NOT NULL, version_id TEXT NOT NULL,"
      " modified_ns INTEGER NOT NULL, acl TEXT NOT NULL, PRIMARY KEY(bucket, key, version_id));");
}

AccessStore::~AccessStore() = default;

std::string AccessStore::setting(const std::string& bucket, const std::string& name) {
  StatementScope s(impl_->db.cached("SELECT value FROM bucket_settings WHERE bucket = ? AND name = ?"));
  s->bind_text(1, bucket);
  s->bind_text(2, name);
  return s->step() ? s->column_text(0) : "";
}

void AccessStore::set_setting(const std::string& bucket, const std::string& name, const std::string& value) {
  if (value.empty()) {
    StatementScope s(impl_->db.cached("DELETE FROM bucket_settings WHERE bucket = ? AND name = ?"));
    s->bind_text(1, bucket);
    s->bind_text(2, name);
    s->run();
    return;
  }
  StatementScope s(impl_->db.cached(
      "INSERT INTO bucket_settings(bucket, name, value) VALUES(?, ?, ?)"
      " ON CONFLICT(bucket, name) DO UPDATE SET value = excluded.value"));
  s->bind_text(1, bucket);
  s->bind_text(2, name);
  s->bind_text(3, value);
  s->run();
}

void AccessStore::drop_bucket(const std::string& bucket) {
  for (const char* sql : {"DELETE FROM bucket_settings WHERE bucket = ?", "DELETE FROM object_acls WHERE bucket = ?"}) {
    StatementScope s(impl_->db.cached(sql));
    s->bind_text(1, bucket);
    s->run();
  }
}

std::optional<std::string> AccessStore::object_acl(const std::string& bucket, const std::string& key,
                                                   const std::string& version_id, int64_t modified_ns) {
  StatementScope s(impl_->db.cached(
      "SELECT acl FROM object_acls WHERE bucket = ? AND key = ? AND version_id = ? AND modified_ns = ?"));
  s->bind_text(1, bucket);
  s->bind_blob(2, as_bytes(key));
  s->bind_text(3, version_id);
  s->bind_int64(4, modified_ns);
  if (!s->step()) return std::nullopt;
  return s->column_text(0);
}

void AccessStore::set_object_acl(const std::string& bucket, const std::string& key, const std::string& version_id,
                                 int64_t modified_ns, const std::string& acl) {
  StatementScope s(impl_->db.cached(
      "INSERT INTO object_acls(bucket, key, version_id, modified_ns, acl) VALUES(?, ?, ?, ?, ?)"
      " ON CONFLICT(bucket, key, version_id) DO UPDATE SET modified_ns = excluded.modified_ns, acl = excluded.acl"));
  s->bind_text(1, bucket);
  s->bind_blob(2, as_bytes(key));
  s->bind_text(3, version_id);
  s->bind_int64(4, modified_ns);
  s->bind_text(5, acl);
  s->run();
}

}  // namespace keel::gateway
