#include "targets/s3/s3_target.h"

#include <map>
#include <mutex>

#include "util/error.h"

namespace keel::targets::s3 {
namespace {

constexpr uint64_t kMinPartSize = 5ull << 20;

class S3Upload : public Upload {
 public:
  S3Upload(S3Client& client, std::string bucket, std::string key, std::string upload_id,
           std::optional<Retention> retention)
      : client_(client),
        bucket_(std::move(bucket)),
        key_(std::move(key)),
        upload_id_(std::move(upload_id)),
        retention_(retention) {}
  ~S3Upload() override {
    if (!done_) abort();
  }

  void write_part(uint32_t part_number, uint64_t, ByteView data) override {
    std::string etag = client_.upload_part(bucket_, key_, upload_id_, part_number, data, retention_.has_value());
    std::lock_guard lock(mu_);
    etags_[part_number] = etag;
  }

  void commit() override {
    std::vector<std::pair<uint32_t, std::string>> parts;
    {
      std::lock_guard lock(mu_);
      parts.assign(etags_.begin(), etags_.end());
    }
    for (size_t i = 0; i < parts.size(); ++i) {
      if (parts[i].first != i + 1) {
        throw Error(ErrorKind::kFailure, client_.describe(bucket_) + "/" + key_ + ": part " + std::to_string(i + 1) +
                                             " missing at commit");
      }
    }
    if (parts.empty()) {
      // S3 refuses a multipart upload without parts: an empty object is a plain put.
      abort();
      client_.put_object(bucket_, key_, {}, retention_);
    } else {
      client_.complete_multipart_upload(bucket_, key_, upload_id_, parts);
      // Ceph RGW (16.2) ignores the lock headers of CreateMultipartUpload: set the lock on the result.
      if (retention_) client_.put_object_retention(bucket_, key_, *retention_);
    }
    done_ = true;
  }

  std::optional<Retention> retention() const override { return retention_; }

  void abort() noexcept override {
    if (done_) return;
    done_ = true;
    try {
      client_.abort_multipart_upload(bucket_, key_, upload_id_);
    } catch (...) {
      // Left for remove_stale_uploads to collect.
    }
  }

 private:
  S3Client& client_;
  std::string bucket_, key_, upload_id_;
  std::optional<Retention> retention_;
  std::mutex mu_;
  std::map<uint32_t, std::string> etags_;
  bool done_ = false;
};

class S3Target : public Target {
 public:
  S3Target(std::string bucket, std::string prefix, S3ClientOptions options, Credentials credentials)
      : bucket_(std::move(bucket)), prefix_(std::move(prefix)), client_(std::move(options), std::move(credentials)) {}

  std::string describe() const override { return "s3://" + bucket_ + "/" + prefix_; }
  uint64_t min_part_size() const override { return kMinPartSize; }
  size_t read_concurrency() const override { return 32; }

  std::vector<std::pair<std::string, uint64_t>> transfer_stats() const override {
    const S3Stats& s = client_.stats();
    std::vector<std::pair<std::string, uint64_t>> out{{"requests", s.requests},
                                                      {"http_bytes_sent", s.bytes_sent},
                                                      {"http_bytes_received", s.bytes_received}};
    const auto payload = [&](const std::string& name, const PayloadStats& p) {
      out.emplace_back(name + "_requests", p.requests);
      out.emplace_back(name + "_bytes", p.bytes);
      out.emplace_back(name + "_microseconds", p.microseconds);
    };
    payload("http_put", s.http_put);
    payload("http_get", s.http_get);
    payload("rdma_put", s.rdma_put);
    payload("rdma_get", s.rdma_get);
    out.emplace_back("rdma_fallbacks", s.rdma_fallbacks);
    out.emplace_back("rdma_reconnects", client_.rdma_reconnects());
    return out;
  }

  std::unique_ptr<Upload> start_upload(const std::string& key) override {
    std::string full = prefix_ + key;
    const std::optional<Retention> retention = retention_for(key);
    return std::make_unique<S3Upload>(client_, bucket_, full, client_.create_multipart_upload(bucket_, full, retention),
                                      retention);
  }

  void put(const std::string& key, ByteView data) override {
    client_.put_object(bucket_, prefix_ + key, data, retention_for(key));
  }

  bool object_lock_enabled() override { return client_.object_lock_enabled(bucket_); }

  void set_write_retention(const std::optional<WriteRetention>& rule) override {
    std::lock_guard lock(rule_mu_);
    write_retention_ = rule;
  }

  void extend_retention(const std::string& key, const Retention& retention) override {
    client_.put_object_retention(bucket_, prefix_ + key, retention);
  }

  size_t get_range(const std::string& key, uint64_t offset, std::span<uint8_t> out) override {
    return client_.get_range(bucket_, prefix_ + key, offset, out);
  }

  std::optional<ObjectInfo> head(const std::string& key) override {
    auto h = client_.head_object(bucket_, prefix_ + key);
    if (!h) return std::nullopt;
    return ObjectInfo{key, h->size, h->retention};
  }

  void list(const std::string& prefix, const std::function<void(const ObjectInfo&)>& fn) override {
    client_.list_objects(bucket_, prefix_ + prefix, [&](const std::string& key, uint64_t size, int64_t modified) {
      fn(ObjectInfo{.key = key.substr(prefix_.size()), .size = size, .modified_unix = modified});
    });
  }

  void remove(const std::string& key) override { client_.delete_object(bucket_, prefix_ + key); }

  size_t remove_stale_uploads(std::chrono::seconds min_age) override {
    size_t removed = 0;
    auto now = std::chrono::system_clock::now();
    for (const MultipartUploadInfo& u : client_.list_multipart_uploads(bucket_, prefix_)) {
      std::tm tm{};
      if (!strptime(u.initiated.c_str(), "%Y-%m-%dT%H:%M:%S", &tm)) continue;
      auto started = std::chrono::system_clock::from_time_t(timegm(&tm));
      if (now - started < min_age) continue;
      client_.abort_multipart_upload(bucket_, u.key, u.upload_id);
      ++removed;
    }
    return removed;
  }

  S3Client& client() { return client_; }
  const std::string& bucket() const { return bucket_; }

 private:
  std::optional<Retention> retention_for(const std::string& key) const {
    std::lock_guard lock(rule_mu_);
    if (!write_retention_) return std::nullopt;
    return write_retention_->for_key(key, unix_now());
  }

  std::string bucket_, prefix_;
  S3Client client_;
  mutable std::mutex rule_mu_;
  std::optional<WriteRetention> write_retention_;
};

class S3Versions : public VersionedStore {
 public:
  S3Versions(std::string bucket, std::string prefix, S3ClientOptions options, Credentials credentials)
      : bucket_(std::move(bucket)), prefix_(std::move(prefix)), client_(std::move(options), std::move(credentials)) {}

  std::string describe() const override { return "s3://" + bucket_ + "/" + prefix_; }

  void list_versions(const std::string& prefix, const std::function<void(const ObjectVersion&)>& fn) override {
    client_.list_object_versions(bucket_, prefix_ + prefix, [&](ObjectVersion v) {
      v.key.erase(0, prefix_.size());
      fn(v);
    });
  }

  size_t get_version_range(const std::string& key, const std::string& version_id, uint64_t offset,
                           std::span<uint8_t> out) override {
    return client_.get_version_range(bucket_, prefix_ + key, version_id, offset, out);
  }

  void remove_version(const std::string& key, const std::string& version_id, bool bypass_governance) override {
    client_.delete_object_version(bucket_, prefix_ + key, version_id, bypass_governance);
  }

 private:
  std::string bucket_, prefix_;
  S3Client client_;
};

}  // namespace

std::pair<std::string, std::string> parse_s3_url(const std::string& url) {
  if (url.rfind("s3://", 0) != 0) throw Error(ErrorKind::kUsage, url + ": not an s3:// location");
  std::string rest = url.substr(5);
  std::string bucket = rest.substr(0, rest.find('/'));
  std::string prefix = bucket.size() < rest.size() ? rest.substr(bucket.size() + 1) : "";
  while (!prefix.empty() && prefix.front() == '/') prefix.erase(0, 1);
  if (!prefix.empty() && prefix.back() != '/') prefix += '/';
  if (bucket.size() < 3 || bucket.size() > 63 || bucket.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789.-") != std::string::npos) {
    throw Error(ErrorKind::kUsage, url + ": '" + bucket + "' is not a valid bucket name");
  }
  return {bucket, prefix};
}

std::unique_ptr<Target> open_s3_target(const std::string& url, S3ClientOptions options, Credentials credentials,
                                       bool create) {
  auto [bucket, prefix] = parse_s3_url(url);
  auto target = std::make_unique<S3Target>(bucket, prefix, std::move(options), std::move(credentials));
  if (create) target->client().create_bucket(bucket);
  return target;
}

std::unique_ptr<VersionedStore> open_s3_versions(const std::string& url, S3ClientOptions options,
                                                 Credentials credentials) {
  auto [bucket, prefix] = parse_s3_url(url);
  return std::make_unique<S3Versions>(bucket, prefix, std::move(options), std::move(credentials));
}

}  // namespace keel::targets::s3
