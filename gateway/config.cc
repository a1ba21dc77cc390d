#include "gateway/config.h"

#include <boost/property_tree/ini_parser.hpp>
#include <boost/property_tree/ptree.hpp>
#include <charconv>
#include <fstream>
#include <set>
#include <sstream>

#include "gateway/request.h"
#include "util/error.h"
#include "util/host_port.h"
#include "util/text.h"

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

  // A whole number from `min` to `max`, when the key is there.
  std::optional<uint64_t> number(const std::string& key, uint64_t min, uint64_t max) const {
    const std::optional<std::string> text = get(key);
    if (!text) return std::nullopt;
    const std::string range = "must be a whole number from " + std::to_string(min) + " to " + std::to_string(max);
    uint64_t value = 0;
    const char* end = text->data() + text->size();
    const auto [after, ec] = std::from_chars(text->data(), end, value);
    if (ec != std::errc() || after != end || value < min || value > max) fail(key, range);
    return value;
  }

  // "true" or "false" (default false).
  bool flag(const std::string& key) const {
    const std::string value = get(key).value_or("false");
    if (value != "true" && value != "false") fail(key, "must be true or false");
    return value == "true";
  }

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    throw Error(ErrorKind::kUsage, where_ + " key '" + key + "': " + problem);
  }

 private:
  const pt::ptree& tree_;
  std::string where_;
};

// The keys naming a dedupe repository and how to open it.
const std::vector<std::string> kRepositoryKeys = {"repository", "password_file", "password_env", "catalog",
                                                  "endpoint",   "region",        "aws_profile",  "ca_file",
                                                  "insecure_tls", "virtual_hosted"};

engine::RepositoryAccess parse_repository(const Section& s) {
  engine::RepositoryAccess repo;
  repo.location = s.require("repository");
  repo.password_file = s.get("password_file").value_or("");
  repo.password_env = s.get("password_env").value_or("");
  if (repo.password_file.empty() && repo.password_env.empty()) {
    s.fail("password_file", "a dedupe repository needs password_file or password_env");
  }
  repo.catalog = s.get("catalog").value_or("");
  repo.target.endpoint = s.get("endpoint").value_or("");
  repo.target.region = s.get("region").value_or("");
  repo.target.profile = s.get("aws_profile").value_or("");
  repo.target.ca_file = s.get("ca_file").value_or("");
  repo.target.insecure_tls = s.flag("insecure_tls");
  repo.target.virtual_hosted = s.flag("virtual_hosted");
  return repo;
}

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
  config.sse_master_key = s.get("sse_master_key").value_or("");
  if (auto threads = s.number("threads", 1, 256)) config.threads = static_cast<unsigned>(*threads);
  ConnectionLimits& limits = config.limits;
  if (auto n = s.number("max_connections", 1, 1'000'000)) limits.max_connections = static_cast<unsigned>(*n);
  if (auto n = s.number("max_connections_per_client", 1, 1'000'000)) {
    limits.max_connections_per_client = static_cast<unsigned>(*n);
  }
  if (auto n = s.number("idle_timeout", 1, 86400)) limits.idle_timeout = std::chrono::seconds(*n);
  if (auto n = s.number("min_body_rate", 0, 1ull << 40)) limits.min_body_rate = *n;
  if (auto n = s.number("body_rate_window", 1, 3600)) limits.body_rate_window = std::chrono::seconds(*n);
  if (auto n = s.number("lifecycle_interval", 1, 86400)) config.lifecycle_interval = std::chrono::seconds(*n);
  if (auto n = s.number("lifecycle_debug_day", 1, 86400)) config.lifecycle_day = std::chrono::seconds(*n);
}

// [kms]: every key but default_key is a key id naming its key's file.
void parse_kms(const pt::ptree& section, const std::string& where, GatewayConfig& config) {
  const auto fail = [&](const std::string& key, const std::string& problem) {
    throw Error(ErrorKind::kUsage, where + " key '" + key + "': " + problem);
  };
  for (const auto& [key, value] : section) {
    if (!value.empty()) fail(key, "nested sections are not supported");
    if (key == "default_key") {
      config.kms_default_key = value.data();
      continue;
    }
    // The id travels back in x-amz-server-side-encryption-aws-kms-key-id: header-safe characters only.
    if (key.size() > 256 || key.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                   "0123456789-_.:/") != std::string::npos) {
      fail(key, "a key id is at most 256 letters, digits and - _ . : /");
    }
    if (value.data().empty()) fail(key, "needs the file of the key");
    config.kms_keys.emplace(key, value.data());  // the INI reader refuses a repeated key
  }
  if (!config.kms_default_key.empty() && !config.kms_keys.contains(config.kms_default_key)) {
    fail("default_key", "'" + config.kms_default_key + "' is not a key id of this section");
  }
}

}  // namespace

std::string bucket_mode_name(BucketMode mode) { return mode == BucketMode::kDedupe ? "dedupe" : "raw"; }

ListenAddress parse_listen_address(const std::string& text, bool tls) {
  HostPortRules rules;
  rules.allow_port_zero = true;
  HostPort address = parse_host_port(text, "listen address", rules);
  ListenAddress out;
  out.host = std::move(address.host);
  out.port = address.port;
  out.tls = tls;
  return out;
}

Access parse_access(const std::string& text) {
  if (text == "read") return Access::kRead;
  if (text == "append") return Access::kAppend;
  if (text == "write") return Access::kWrite;
  if (text == "owner") return Access::kOwner;
  throw Error(ErrorKind::kUsage, "access '" + text + "': expected read, append, write or owner");
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
  std::set<std::string> user_names, access_keys, emails, bucket_names;
  for (const auto& [section_name, section] : tree) {
    const std::string where = origin + " [" + section_name + "]";
    if (section.empty() && !section.data().empty()) {
      throw Error(ErrorKind::kUsage, origin + ": key '" + section_name + "' outside a section");
    }
    if (section_name == "server") {
      parse_server(Section(section, where,
                           {"listen", "tls_listen", "tls_certificate", "tls_key", "region", "domain", "state_dir",
                            "bucket_root", "sse_master_key", "threads", "metrics_listen", "rdma_listen",
                            "max_connections", "max_connections_per_client", "idle_timeout", "min_body_rate",
                            "body_rate_window", "lifecycle_interval", "lifecycle_debug_day"}),
                   config);
      have_server = true;
    } else if (section_name == "kms") {
      parse_kms(section, where, config);
    } else if (section_name == "dedupe") {
      config.api_bucket_repository =
          parse_repository(Section(section, where, std::set<std::string>(kRepositoryKeys.begin(), kRepositoryKeys.end())));
    } else if (section_name.starts_with("user:")) {
      const Section s(section, where, {"access_key", "secret_key", "signature_v2", "email"});
      User user{section_name.substr(5), s.require("access_key"), s.require("secret_key"), s.flag("signature_v2"),
                s.get("email").value_or("")};
      if (user.name.empty() || !user_names.insert(user.name).second) s.fail("user", "empty or repeated user name");
      // The access key is part of the credential scope, split on '/'.
      if (user.access_key.find_first_of("/, \t") != std::string::npos) s.fail("access_key", "has '/', ',' or blanks");
      if (!access_keys.insert(user.access_key).second) s.fail("access_key", "another user has the same key");
      // Addresses compare without regard to case, as S3 resolves them.
      if (!user.email.empty() && !emails.insert(ascii_lower(user.email)).second) {
        s.fail("email", "another user has the same address");
      }
      config.users.push_back(std::move(user));
    } else if (section_name.starts_with("bucket:")) {
      std::set<std::string> keys{"owner", "grants", "mode", "path", "delete_unversioned"};
      keys.insert(kRepositoryKeys.begin(), kRepositoryKeys.end());
      const Section s(section, where, keys);
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
      const std::string delete_unversioned = s.get("delete_unversioned").value_or("write");
      if (delete_unversioned != "write" && delete_unversioned != "owner") {
        s.fail("delete_unversioned", "'" + delete_unversioned + "': expected write or owner");
      }
      bucket.owner_only_unversioned_delete = delete_unversioned == "owner";
      const std::string mode = s.get("mode").value_or("raw");
      if (mode == "raw") {
        bucket.path = s.require("path");
        for (const std::string& key : kRepositoryKeys) {
          if (s.get(key)) s.fail(key, "only for mode = dedupe");
        }
      } else if (mode == "dedupe") {
        bucket.mode = BucketMode::kDedupe;
        if (s.get("path")) s.fail("path", "only for mode = raw (a dedupe bucket names its repository)");
        bucket.repository = parse_repository(s);
      } else {
        s.fail("mode", "'" + mode + "': expected raw or dedupe");
      }
      config.buckets.push_back(std::move(bucket));
    } else {
      throw Error(ErrorKind::kUsage, where + ": unknown section (expected server, dedupe, kms, user:NAME or bucket:NAME)");
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
