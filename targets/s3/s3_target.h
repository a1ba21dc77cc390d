// A repository in an S3 bucket under a prefix: s3://bucket/prefix.
// Uploads are S3 multipart uploads whose parts may be sent concurrently;
// an upload dropped without commit is aborted.
#pragma once

#include <memory>
#include <string>

#include "targets/s3/s3_client.h"
#include "targets/target.h"
#include "targets/versioned_store.h"

namespace keel::targets::s3 {

// `url` is "s3://bucket" or "s3://bucket/prefix". With `create`, the bucket
// is created if missing.
std::unique_ptr<Target> open_s3_target(const std::string& url, S3ClientOptions options, Credentials credentials,
                                       bool create);

// The versions of the objects under the url's prefix (ListObjectVersions,
// GetObject and DeleteObject by versionId), requests made once each.
std::unique_ptr<VersionedStore> open_s3_versions(const std::string& url, S3ClientOptions options,
                                                 Credentials credentials);

// Splits "s3://bucket/prefix/" into {"bucket", "prefix/"} (prefix empty or
// ending in '/'); throws Error(kUsage) for anything else.
std::pair<std::string, std::string> parse_s3_url(const std::string& url);

}  // namespace keel::targets::s3
