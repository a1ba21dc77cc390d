// The options every keel command accepts, before or after the command's name.
// One definition serves the parser, --help, the man pages and the shell
// completions.
#pragma once

#include <string>

#include <boost/program_options/options_description.hpp>

#include "targets/open_target.h"

namespace keel::cli {

struct GlobalOptions {
  std::string repo;           // --repo, KEEL_REPO
  std::string password_file;  // --password-file, KEEL_PASSWORD_FILE
  std::string catalog;        // --catalog, KEEL_CATALOG
  bool json = false;
  bool quiet = false;
  // --append-only, KEEL_APPEND_ONLY=1: this host may only create objects
  // (docs/immutable.md): backups and jobs added write without a delete or an
  // overwrite; commands that delete refuse before touching the repository.
  bool append_only = false;
  std::string s3_timeout;     // --s3-timeout, KEEL_S3_TIMEOUT
  targets::TargetOptions target;  // --endpoint, --region, --ca-file, ...
};

// The global options, storing into `into` when parsed.
boost::program_options::options_description global_options(GlobalOptions& into);

}  // namespace keel::cli
