#include "cli/global_options.h"

#include <boost/program_options.hpp>

namespace keel::cli {

namespace po = boost::program_options;

po::options_description global_options(GlobalOptions& global) {
  po::options_description g("Global options");
  g.add_options()
      ("repo,r", po::value(&global.repo), "repository location (env KEEL_REPO)")
      ("password-file", po::value(&global.password_file), "read the password from this file (env KEEL_PASSWORD_FILE)")
      ("catalog", po::value(&global.catalog), "catalog database path (env KEEL_CATALOG)")
      ("endpoint", po::value(&global.target.endpoint), "S3 endpoint URL (env KEEL_S3_ENDPOINT, AWS_ENDPOINT_URL)")
      ("region", po::value(&global.target.region), "S3 region (env AWS_REGION; default us-east-1)")
      ("aws-profile", po::value(&global.target.profile), "profile in ~/.aws/credentials (env AWS_PROFILE)")
      ("aws-access-key-id", po::value(&global.target.access_key_id), "S3 access key (env AWS_ACCESS_KEY_ID)")
      ("aws-secret-access-key", po::value(&global.target.secret_access_key),
       "S3 secret key (env AWS_SECRET_ACCESS_KEY; visible to other users in ps: prefer the env or a profile)")
      ("aws-session-token", po::value(&global.target.session_token), "S3 session token (env AWS_SESSION_TOKEN)")
      ("ca-file", po::value(&global.target.ca_file), "trust this CA bundle for TLS, besides the system's")
      ("insecure-tls", po::bool_switch(&global.target.insecure_tls), "do NOT verify TLS certificates")
      ("virtual-hosted", po::bool_switch(&global.target.virtual_hosted), "bucket.host addressing instead of host/bucket")
      ("s3-timeout", po::value(&global.s3_timeout),
       "S3: longest wait for the server to take or send data before the request is retried (env KEEL_S3_TIMEOUT; "
       "default 60s)")
      ("rdma", po::value(&global.target.rdma),
       "S3: move object payloads by RDMA through the gateway's rdma_listen HOST:PORT, HTTP where declined "
       "(env KEEL_RDMA; docs/rdma.md)")
      ("append-only", po::bool_switch(&global.append_only),
       "this host may only create objects (env KEEL_APPEND_ONLY=1): backups and the jobs it adds write without "
       "deleting or overwriting anything; forget, prune, tag, key remove, unlock, repair and a job with --keep-* "
       "rules refuse (exit 2) before touching the repository")
      ("json", po::bool_switch(&global.json), "machine-readable output on stdout")
      ("quiet,q", po::bool_switch(&global.quiet), "no progress or summary output")
      ("help,h", "show help for this command");
  return g;
}

}  // namespace keel::cli
