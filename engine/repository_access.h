// How to reach and unlock a repository, as the CLI's global options and the
// gateway's configuration name it: the location (a directory or
// s3://bucket/prefix) with its target options, where the password comes from
// and the catalog path. One place opens a repository for both.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "engine/repository.h"
#include "targets/open_target.h"

namespace keel::engine {

struct RepositoryAccess {
  std::string location;           // --repo
  targets::TargetOptions target;  // endpoint, region, credentials, TLS
  std::string password_env = "KEEL_PASSWORD";  // the environment variable holding the password
  std::string password_file;      // else the first line of this file
  std::string catalog;            // empty: the default catalog path
  std::function<void(const std::string&)> on_warning;  // OpenOptions::on_warning
};

// The password from the environment variable, else from the password file;
// nullopt when neither is set. Throws Error(kUsage) if the file cannot be
// read or its first line is empty.
std::optional<std::string> stored_password(const RepositoryAccess& access);

// Opens the repository; throws as Repository::open does.
std::unique_ptr<Repository> open_repository(const RepositoryAccess& access, const std::string& password);

}  // namespace keel::engine
