// Turns a repository location from the command line into a Target.
//   /path, ./path, file:///path   a local directory
//   s3://bucket[/prefix]           an S3 bucket (endpoint from options or env)
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "targets/limited_target.h"
#include "targets/retrying_target.h"
#include "targets/target.h"

namespace keel::targets {

inline constexpr const char* kBucketOwnerFullControl = "bucket-owner-full-control";

struct TargetOptions {
  bool create = false;  // make the location if it does not exist (init)
  // S3: empty fields fall back to KEEL_S3_ENDPOINT / AWS_ENDPOINT_URL, the
  // AWS environment variables and ~/.aws files (see s3/credentials.h).
  std::string endpoint;
  std::string region;
  std::string profile;
  std::string access_key_id;      // flags win over the environment and profiles
  std::string secret_access_key;
  std::string session_token;
  std::string ca_file;
  bool insecure_tls = false;
  bool virtual_hosted = false;
  // S3: how long a request waits for the server to take or send data before
  // it fails (and is retried).
  std::chrono::milliseconds io_timeout{60000};
  // S3: the gateway's RDMA data plane, "host:port" (docs/rdma.md); empty: HTTP only.
  std::string rdma;
  // S3: a canned ACL for every object written (x-amz-acl); empty: none.
  // Append-only writers send kBucketOwnerFullControl: on S3 an object belongs
  // to the user who wrote it, and the bucket owner who prunes and restores
  // could not read it otherwise.
  std::string object_acl;
  // How transient failures are retried, and how hard the target is driven.
  RetryPolicy retry;
  TargetLimits limits;
};

// The bare target for `location` under its decorators, outermost first:
// metrics (what callers asked and waited), retries, limits.
// Throws Error(kUsage) for a location keel cannot use.
std::unique_ptr<Target> open_target(const std::string& location, const TargetOptions& options);

}  // namespace keel::targets
