// The gateway's configuration file (INI): where it listens, TLS, users and
// their keys, buckets with their owner, grants and storage mode. The format
// is documented in docs/gateway.md; examples/gateway.conf is a full example.
#pragma once

#include <cstdint>
#include <istream>
#include <map>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "engine/repository_access.h"

namespace keel::gateway {

struct ListenAddress {
  std::string host;  // an address or name; "::1" without brackets
  uint16_t port = 0;  // 0: any free port (the gateway prints the one it got)
  bool tls = false;
};

struct User {
  std::string name;
  std::string access_key;
  std::string secret_key;
  bool signature_v2 = false;  // may sign with AWS Signature Version 2 (older products)
  std::string email;  // optional; ACL grants by e-mail address (AmazonCustomerByEmail) name the user by it
};

// What a user may do in a bucket. Ordered: each level includes the ones before.
// kAppend: read, list and create objects, but never delete or overwrite one
// (backup hosts whose credentials may be stolen; docs/immutable.md).
enum class Access { kNone, kRead, kAppend, kWrite, kOwner };

// raw: objects as plain files; dedupe: chunked, deduplicated, compressed and
// encrypted into a keel repository.
enum class BucketMode { kRaw, kDedupe };

// "raw" or "dedupe", as the configuration and the metadata database spell it.
std::string bucket_mode_name(BucketMode mode);

struct BucketConfig {
  std::string name;
  std::string owner;
  std::map<std::string, Access> grants;  // other users, by name
  // delete_unversioned = owner: only the owner may delete an object written
  // without versioning (a `null` version), which no version keeps.
  bool owner_only_unversioned_delete = false;
  BucketMode mode = BucketMode::kRaw;
  std::string path;  // raw: the directory holding the bucket's objects
  // dedupe: the repository (location as keel --repo takes it, target
  // options, password source, catalog).
  engine::RepositoryAccess repository;
};

// What one client, and all of them together, may hold of the server, so slow
// or flooding clients cannot starve the others (docs/gateway.md).
struct ConnectionLimits {
  unsigned max_connections = 1024;           // open at once, all clients together
  unsigned max_connections_per_client = 128;  // open at once from one IP address
  // A request head, and the next request on a kept-alive connection, must
  // arrive within this.
  std::chrono::seconds idle_timeout{60};
  // A request body must bring at least this many bytes per second, averaged
  // over each window; 0: any rate.
  uint64_t min_body_rate = 4096;
  std::chrono::seconds body_rate_window{10};
};

struct GatewayConfig {
  std::vector<ListenAddress> listen;
  ConnectionLimits limits;
  std::string tls_certificate;  // PEM chain; needed when any address is TLS
  std::string tls_key;
  std::string region = "us-east-1";
  // Virtual-hosted addressing: a Host of "<bucket>.<domain>" names the bucket.
  std::vector<std::string> domains;
  std::string state_dir;    // the metadata database lives here
  std::string bucket_root;  // buckets created through the API (raw mode); default <state_dir>/buckets
  // SSE-S3 in raw buckets: the master key's file (gateway_keys.h's load_key_file); empty: raw buckets refuse AES256.
  std::string sse_master_key;
  // [kms]: SSE-KMS's local key ring, key id -> the file of its 32-byte key
  // (gateway_keys.h), and the id aws:kms gets when a request and its bucket
  // name none (default_key; empty: such a request is refused).
  std::map<std::string, std::string> kms_keys;
  std::string kms_default_key;
  // [dedupe]: when set, buckets created through the API are dedupe buckets in this repository.
  std::optional<engine::RepositoryAccess> api_bucket_repository;
  unsigned threads = 4;
  // Prometheus metrics (GET /metrics, plain HTTP, no authentication).
  std::optional<ListenAddress> metrics_listen;
  // The RDMA data plane (docs/rdma.md): an address on the RDMA device's
  // netdev. Without it, requests carrying an RDMA token are declined (501).
  std::optional<ListenAddress> rdma_listen;
  // Lifecycle rules (docs/gateway.md, "Lifecycle"): the sweep that carries
  // them out runs this often, and counts days of this length (S3's 86400 s;
  // tests shorten it, as RGW's rgw_lc_debug_interval).
  std::chrono::seconds lifecycle_interval{600};
  std::chrono::seconds lifecycle_day{86400};
  std::vector<User> users;
  std::vector<BucketConfig> buckets;

  // Throws Error(kUsage) naming the file, section and key of what is wrong.
  static GatewayConfig load(const std::string& path);
  static GatewayConfig parse(std::istream& in, const std::string& origin);

  const User* user_by_access_key(const std::string& access_key) const;
};

// "host:port", "[v6]:port"; throws Error(kUsage).
ListenAddress parse_listen_address(const std::string& text, bool tls);
// "read", "append", "write" or "owner"; throws Error(kUsage).
Access parse_access(const std::string& text);

}  // namespace keel::gateway
