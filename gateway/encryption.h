// Server-side encryption as S3 clients ask for it, answered truthfully. A
// dedupe bucket's objects are encrypted at rest with the repository's key
// (AES-256-GCM), which is what SSE-S3 (x-amz-server-side-encryption: AES256)
// promises: such buckets accept it, report AES256 on every object, and keep a
// PutBucketEncryption configuration of AES256. A raw bucket stores plain files,
// so it refuses AES256 rather than drop it silently. Keys the gateway cannot
// hold to (SSE-KMS, SSE-C with customer keys) are refused everywhere.
#pragma once

#include <string>

#include "gateway/request.h"
#include "gateway/s3_error.h"

namespace keel::gateway {

// Throws S3Error InvalidArgument for encryption headers `operation` cannot
// honour on a bucket whose objects are (`encrypted_at_rest`) or are not encrypted.
void check_encryption_headers(const S3Request& request, Operation operation, bool encrypted_at_rest);

// Operations whose successful response names the object's encryption
// (x-amz-server-side-encryption) when it is encrypted at rest.
bool reports_encryption(Operation operation);

// The refusal of SSE-S3 (`asked`: what the request asked for) on a raw bucket.
S3Error unencrypted_bucket(const std::string& bucket, const std::string& asked);

// A <ServerSideEncryptionConfiguration> body checked (AES256 only) and written
// back in the form GetBucketEncryption returns.
std::string encryption_configuration(const std::string& xml);

}  // namespace keel::gateway
