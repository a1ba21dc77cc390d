#include "gateway/config.h"

#include <boost/property_tree/ini_parser.hpp>
#include <boost/property_tree/ptree.hpp>
#include <fstream>
#include <set>
#include <sstream>

#include "gateway/request.h"
#include "util/error.h"

namespace keel::gateway {

namespace {

namespace pt = boost::property_tree;

std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string word; in >> word;) {
    if (word.back() == ',') word.pop_back();
    if (!word.empty()) out.push_back(word);
  }
  return out;
}

class Section {
 public:
  Section(const pt::ptree& tree, std::string where, std::set<std::string> allowed)
      : tree_(tree), where_(std::move(where)) {
    for (const auto& [key, value] : tree_) {
      if (!value.empty()) fail(key, "nested sections are not supported");
      if (!allowed.contains(key)) fail(key, "unknown key");
    }
  }

  std::optional<std::string> get(const std::string& key) const {
    for (const auto& [name, value] : tree_) {
      if (name == key) return value.data();
    }
    return std::nullopt;
  }

  std::string require(const std::string& key) const {
    auto value = get(key);
    if (!value || value->empty()) fail(key, "missing");
    return *value;
  }

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    throw Error(ErrorKind::kUsage, where_ + " key '" + key + "': " + problem);
  }

 private:
  const pt::ptree& tree_;
  std::string where_;
};

void parse_server(const Section& s, GatewayConfig& config) {
  for (const auto& address : words(s.get("listen").value_or(""))) config.listen.push_back(parse_listen_address(address, false));
  for (const auto& address : words(s.get("tls_listen").value_or(""))) config.listen.push_back(parse_listen_address(address, true));
  if (config.listen.empty()) s.fail("listen", "no address to listen on (listen or tls_listen)");
  config.tls_certificate = s.get("tls_certificate").value_or("");
  config.tls_key = s.get("tls_key").value_or("");
  const bool any_tls = std::any_of(config.listen.begin(), config.listen.end(), [](const auto& l) { return l.tls; });
  if (any_tls && (config.tls_certificate.empty() || config.tls_key.empty())) {
    s.fail("tls_listen", "TLS addresses need tls_certificate and tls_key");
  }
  if (auto region = s.get("region")) config.region = *region;
  config.domains = words(s.get("domain").value_or(""));
  if (auto metrics = s.get("metrics_listen")) config.metrics_listen = parse_listen_address(*metrics, false);
  if (auto rdma = s.get("rdma_listen")) {
    config.rdma_listen = parse_listen_address(*rdma, false);
    if (config.rdma_listen->port == 0) s.fail("rdma_listen", "needs a fixed port: clients are told it with --rdma");
  }
  config.state_dir = s.require("state_dir");
  config.bucket_root = s.get("bucket_root").value_or(config.state_dir + "/buckets");
  if (auto threads = s.get("threads")) {
    try {
      const int n = std::stoi(*threads);
      if (n < 1 || n > 256) throw std::out_of_range("threads");
      config.threads = static_cast<unsigned>(n);
    } catch (const std::exception&) {
      s.fail("threads", "must be a number from 1 to 256");
    }
  }
}

}  // namespace

ListenAddress parse_listen_address(const std::string& text, bool tls) {
  ListenAddress out;
  out.tls = tls;
  std::string port;
  if (!text.empty() && text[0] == '[') {
    const auto close = text.find("]:");
    if (close == std::string::npos) throw Error(ErrorKind::kUsage, "listen address '" + text + "': expected [v6]:port");
    out.host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos || text.find(':') != colon) {
      throw Error(ErrorKind::kUsage, "listen address '" + text + "': expected host:port or [v6]:port");
    }
    out.host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (out.host.empty() || port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(port) > 65535) {
    throw Error(ErrorKind::kUsage, "listen address '" + text + "': bad host or port");
  }
  out.port = static_cast<uint16_t>(std::stoul(port));
  return out;
}

Access parse_access(const std::string& text) {
  if (text == "read") return Access::kRead;
  if (text == "write") return Access::kWrite;
  if (text == "owner") return Access::kOwner;
  throw Error(ErrorKind::kUsage, "access '" + text + "': expected read, write or owner");
}

GatewayConfig GatewayConfig::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(ErrorKind::kUsage, "gateway configuration " + path + ": cannot be read");
  return parse(in, path);
}

GatewayConfig GatewayConfig::parse(std::istream& in, const std::string& origin) {
  pt::ptree tree;
  try {
    pt::read_ini(in, tree);
  } catch (const pt::ini_parser_error& e) {
    throw Error(ErrorKind::kUsage, "gateway configuration " + origin + " line " + std::to_string(e.line()) + ": " +
                                       e.message());
  }
  GatewayConfig config;
  bool have_server = false;
  std::set<std::string> user_names, access_keys, bucket_names;
  for (const auto& [section_name, section] : tree) {
    const std::string where = origin + " [" + section_name + "]";
    if (section.empty() && !section.data().empty()) {
      throw Error(ErrorKind::kUsage, origin + ": key '" + section_name + "' outside a section");
    }
    if (section_name == "server") {
      parse_server(Section(section, where,
                           {"listen", "tls_listen", "tls_certificate", "tls_key", "region", "domain", "state_dir",
                            "bucket_root", "threads", "metrics_listen", "rdma_listen"}),
                   config);
      have_server = true;
    } else if (section_name.starts_with("user:")) {
      const Section s(section, where, {"access_key", "secret_key"});
      User user{section_name.substr(5), s.require("access_key"), s.require("secret_key")};
      if (user.name.empty() || !user_names.insert(user.name).second) s.fail("user", "empty or repeated user name");
      // The access key is part of the credential scope, split on '/'.
      if (user.access_key.find_first_of("/, \t") != std::string::npos) s.fail("access_key", "has '/', ',' or blanks");
      if (!access_keys.insert(user.access_key).second) s.fail("access_key", "another user has the same key");
      config.users.push_back(std::move(user));
    } else if (section_name.starts_with("bucket:")) {
      const Section s(section, where, {"owner", "grants", "mode", "path"});
      BucketConfig bucket;
      bucket.name = section_name.substr(7);
      if (!is_valid_bucket_name(bucket.name)) s.fail("bucket", "'" + bucket.name + "' is not a valid S3 bucket name");
      if (!bucket_names.insert(bucket.name).second) s.fail("bucket", "defined twice");
      bucket.owner = s.require("owner");
      for (const auto& grant : words(s.get("grants").value_or(""))) {
        const auto colon = grant.find(':');
        if (colon == std::string::npos) s.fail("grants", "'" + grant + "' is not user:access");
        bucket.grants[grant.substr(0, colon)] = parse_access(grant.substr(colon + 1));
      }
      const std::string mode = s.get("mode").value_or("raw");
      if (mode != "raw") s.fail("mode", "'" + mode + "': only raw is supported so far (see docs/gateway.md)");
      bucket.path = s.require("path");
      config.buckets.push_back(std::move(bucket));
    } else {
      throw Error(ErrorKind::kUsage, where + ": unknown section (expected server, user:NAME or bucket:NAME)");
    }
  }
  if (!have_server) throw Error(ErrorKind::kUsage, "gateway configuration " + origin + ": no [server] section");
  for (const auto& bucket : config.buckets) {
    for (const auto& name : [&] {
           std::vector<std::string> names{bucket.owner};
           for (const auto& grant : bucket.grants) names.push_back(grant.first);
           return names;
         }()) {
      if (!user_names.contains(name)) {
        throw Error(ErrorKind::kUsage, origin + " [bucket:" + bucket.name + "]: no user '" + name + "'");
      }
    }
  }
  return config;
}

const User* GatewayConfig::user_by_access_key(const std::string& access_key) const {
  for (const auto& user : users) {
    if (user.access_key == access_key) return &user;
  }
  return nullptr;
}

}  // namespace keel::gateway
