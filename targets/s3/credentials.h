// Where S3 credentials and the region come from, in the order AWS CLI users
// expect: command-line flags, the environment, then a profile in the shared
// credentials and config files.
#pragma once

#include <string>

#include "targets/s3/sigv4.h"

namespace keel::targets::s3 {

// What the command line gave; an empty field was not given.
struct CredentialSources {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;
  std::string profile;
  std::string region;
};

struct ResolvedCredentials {
  Credentials credentials;
  std::string region;
  std::string source;  // for messages: "flags", "environment", "profile default (/home/u/.aws/credentials)"
};

// Credentials, first found wins:
//  1. flags (access key id and secret, with the optional session token);
//  2. AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, unless a
//     profile was named by flag (as the AWS CLI's --profile does);
//  3. the profile (flag, else AWS_PROFILE, else "default"): its [name] section
//     in AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials, then its
//     [profile name] ([default] for default) section in AWS_CONFIG_FILE or
//     ~/.aws/config, with keys aws_access_key_id, aws_secret_access_key and
//     aws_session_token.
// Region: flag, AWS_REGION, AWS_DEFAULT_REGION, the profile's region in the
// config file, else "us-east-1". Empty environment variables count as unset.
// Throws Error(kUsage) when a source gives only part of a key pair (or a
// session token alone), when a named profile exists in neither file, and
// when no source has credentials (the message lists the places looked at).
ResolvedCredentials resolve_credentials(const CredentialSources& flags);

}  // namespace keel::targets::s3
