#include "targets/open_target.h"

#include "targets/open_versioned_store.h"

#include <cstdlib>

#include "targets/local/local_target.h"
#include "targets/metered_target.h"
#include "targets/rdma/verbs_transport.h"
#include "targets/s3/credentials.h"
#include "targets/s3/s3_target.h"
#include "util/error.h"

namespace keel::targets {

namespace {

std::shared_ptr<s3::RdmaChannel> open_rdma_channel(const std::string& address) {
  const rdma::Endpoint server = rdma::Endpoint::parse(address);
  std::shared_ptr<rdma::Transport> transport;
  try {
    transport = rdma::make_verbs_transport();
  } catch (const Error& e) {
    throw Error(ErrorKind::kUsage, "--rdma " + address + ": " + e.what() + "; leave out --rdma to use HTTP");
  }
  rdma::SessionOptions session;
  // A slot holds a whole part: keel's are 8 MiB plus at most one blob.
  session.slot_size = 16 << 20;
  session.slot_count = 8;
  return std::make_shared<s3::RdmaChannel>(std::move(transport), server, session);
}

bool is_s3(const std::string& location) {
  if (location.empty()) throw Error(ErrorKind::kUsage, "no repository given: use --repo or set KEEL_REPO");
  return location.rfind("s3://", 0) == 0;
}

// The S3 client's options and credentials, from `options` and the environment.
std::pair<s3::S3ClientOptions, s3::Credentials> s3_client_setup(const TargetOptions& options) {
  s3::S3ClientOptions client;
  client.endpoint = options.endpoint;
  for (const char* var : {"KEEL_S3_ENDPOINT", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"}) {
    if (const char* v = std::getenv(var); client.endpoint.empty() && v && *v) client.endpoint = v;
  }
  if (client.endpoint.empty()) client.endpoint = "https://s3.amazonaws.com";
  s3::ResolvedCredentials creds = s3::resolve_credentials({.access_key_id = options.access_key_id,
                                                           .secret_access_key = options.secret_access_key,
                                                           .session_token = options.session_token,
                                                           .profile = options.profile,
                                                           .region = options.region});
  client.region = creds.region;
  client.virtual_hosted = options.virtual_hosted;
  client.http.ca_file = options.ca_file;
  client.http.insecure_tls = options.insecure_tls;
  client.http.timeout = options.io_timeout;
  client.object_acl = options.object_acl;
  if (!options.rdma.empty()) client.rdma = open_rdma_channel(options.rdma);
  return {client, creds.credentials};
}

std::unique_ptr<Target> open_bare_target(const std::string& location, const TargetOptions& options) {
  if (is_s3(location)) {
    const auto setup = s3_client_setup(options);
    // Creating the bucket is the one request made before the decorators are on.
    std::atomic<uint64_t> retries{0};
    return retry_transient(options.retry, retries,
                           [&] { return s3::open_s3_target(location, setup.first, setup.second, options.create); });
  }
  std::string path = location;
  if (path.rfind("file://", 0) == 0) path = path.substr(7);
  auto scheme = path.find("://");
  if (scheme != std::string::npos) {
    throw Error(ErrorKind::kUsage, "repository " + location + ": unsupported scheme '" + path.substr(0, scheme) +
                                       "' (this build supports local directories)");
  }
  return local::open_local_target(path, options.create);
}

}  // namespace

std::unique_ptr<VersionedStore> open_versioned_store(const std::string& location, const TargetOptions& options) {
  if (!is_s3(location)) {
    throw Error(ErrorKind::kUsage, location + ": a local directory keeps no versions of objects (versions need an S3 "
                                              "bucket with versioning or Object Lock)");
  }
  auto [client, credentials] = s3_client_setup(options);
  return s3::open_s3_versions(location, std::move(client), std::move(credentials));
}

std::unique_ptr<Target> open_target(const std::string& location, const TargetOptions& options) {
  return make_metered_target(
      make_retrying_target(make_limited_target(open_bare_target(location, options), options.limits), options.retry));
}

}  // namespace keel::targets
