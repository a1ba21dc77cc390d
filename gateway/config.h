// The gateway's configuration file (INI): where it listens, TLS, users and
// their keys, buckets with their owner, grants and storage mode. The format
// is documented in docs/gateway.md; examples/gateway.conf is a full example.
#pragma once

#include <cstdint>
#include <istream>
#include <map>
#include <optional>
#include <string>
#include <vector>

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
};

// What a user may do in a bucket. Ordered: each level includes the ones before.
enum class Access { kNone, kRead, kWrite, kOwner };

enum class BucketMode { kRaw };

struct BucketConfig {
  std::string name;
  std::string owner;
  std::map<std::string, Access> grants;  // other users, by name
  BucketMode mode = BucketMode::kRaw;
  std::string path;  // raw: the directory holding the bucket's objects
};

struct GatewayConfig {
  std::vector<ListenAddress> listen;
  std::string tls_certificate;  // PEM chain; needed when any address is TLS
  std::string tls_key;
  std::string region = "us-east-1";
  // Virtual-hosted addressing: a Host of "<bucket>.<domain>" names the bucket.
  std::vector<std::string> domains;
  std::string state_dir;    // the metadata database lives here
  std::string bucket_root;  // buckets created through the API (raw mode); default <state_dir>/buckets
  unsigned threads = 4;
  // Prometheus metrics (GET /metrics, plain HTTP, no authentication).
  std::optional<ListenAddress> metrics_listen;
  // The RDMA data plane (docs/rdma.md): an address on the RDMA device's
  // netdev. Without it, requests carrying an RDMA token are declined (501).
  std::optional<ListenAddress> rdma_listen;
  std::vector<User> users;
  std::vector<BucketConfig> buckets;

  // Throws Error(kUsage) naming the file, section and key of what is wrong.
  static GatewayConfig load(const std::string& path);
  static GatewayConfig parse(std::istream& in, const std::string& origin);

  const User* user_by_access_key(const std::string& access_key) const;
};

// "host:port", "[v6]:port"; throws Error(kUsage).
ListenAddress parse_listen_address(const std::string& text, bool tls);
// "read", "write" or "owner"; throws Error(kUsage).
Access parse_access(const std::string& text);

}  // namespace keel::gateway
