// The keys the gateway itself holds to wrap per-object data keys (encryption.h):
// SSE-S3's master key (sse_master_key, raw buckets) and SSE-KMS's local key
// ring ([kms]: key id -> key file), in the part of S3 that AWS KMS plays. Each
// is 32 random bytes in a file only its owner may read. Objects keep their data
// key sealed under one of these and, for SSE-KMS, the id that names it: losing
// a key file loses every object written under it.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "engine/crypto.h"
#include "gateway/config.h"

namespace keel::gateway {

// The 32-byte key in the file at `path` (`setting`: the configuration key that
// names it, for messages), created (0600, fsync'd) when missing. Throws
// Error(kUsage) for a file that is not 32 bytes, or that others may read.
engine::Key256 load_key_file(const std::string& path, const std::string& setting);

class GatewayKeys {
 public:
  // The master key and key ring `config` names (load_key_file each).
  static GatewayKeys load(const GatewayConfig& config);

  void set_master(const engine::Key256& key) { master_ = key; }
  void add_kms_key(const std::string& id, const engine::Key256& key) { kms_[id] = key; }
  void set_default_kms_key(const std::string& id) { default_kms_ = id; }

  // sse_master_key's key, when the configuration names one.
  const engine::Key256* master() const { return master_ ? &*master_ : nullptr; }
  bool has_kms() const { return !kms_.empty(); }
  // The key ring's key `id`; nullptr when it has none.
  const engine::Key256* kms_key(const std::string& id) const;
  // The id a request or bucket default with aws:kms and no key id gets; empty when none is configured.
  const std::string& default_kms_key() const { return default_kms_; }

 private:
  std::optional<engine::Key256> master_;
  std::map<std::string, engine::Key256> kms_;
  std::string default_kms_;
};

}  // namespace keel::gateway
