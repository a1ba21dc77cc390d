#include "engine/repository_access.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/crash_leftovers.h"
#include "util/error.h"

namespace keel::engine {

std::optional<std::string> stored_password(const RepositoryAccess& access) {
  if (!access.password_env.empty()) {
    if (const char* p = std::getenv(access.password_env.c_str()); p && *p) return std::string(p);
  }
  if (access.password_file.empty()) return std::nullopt;
  std::error_code ec;
  if (std::filesystem::is_directory(access.password_file, ec)) {
    throw Error(ErrorKind::kUsage, "password file " + access.password_file + " is a directory; give the file in it");
  }
  std::ifstream in(access.password_file);
  if (!in) {
    throw Error(ErrorKind::kUsage, "cannot read password file " + access.password_file + ": " + std::strerror(errno));
  }
  std::string line;
  std::getline(in, line);
  if (in.bad()) throw Error(ErrorKind::kUsage, "cannot read password file " + access.password_file + ": " + std::strerror(errno));
  if (line.empty()) throw Error(ErrorKind::kUsage, "password file " + access.password_file + " is empty");
  return line;
}

std::unique_ptr<Repository> open_repository(const RepositoryAccess& access, const std::string& password) {
  OpenOptions options;
  options.password = password;
  options.catalog_path = access.catalog;
  options.on_warning = access.on_warning;
  std::unique_ptr<Repository> repo = Repository::open(targets::open_target(access.location, access.target), options);
  clear_dead_process_leftovers(repo->target(), repo->keys().index);
  return repo;
}

}  // namespace keel::engine
