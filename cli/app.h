// What every command shares: global options, opening the repository, the
// password, output mode and cancellation by signal (cli/progress.h: the
// progress line).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "cli/global_options.h"
#include "engine/repository.h"
#include "engine/repository_access.h"
#include "targets/open_target.h"

namespace keel::cli {

namespace po = boost::program_options;

class App {
 public:
  GlobalOptions global;
  // Set by SIGINT/SIGTERM; long operations stop at the next safe point.
  static std::atomic<bool> cancel;

  // Options every command accepts (cli/global_options.h).
  po::options_description global_options();

  // Set while keel describes its commands (man pages, completions): parse()
  // hands a command's option definitions here and throws Described instead
  // of parsing, so the command stops before doing anything.
  std::function<void(const po::options_description&, const po::positional_options_description&)> describe;
  struct Described {};
  // Parses a command's arguments together with the global options; fills
  // `vm` and env defaults. Returns false after printing help if --help was
  // given (the command then exits 0). Throws Error(kUsage) on bad input.
  bool parse(const std::vector<std::string>& args, po::options_description& opts,
             const po::positional_options_description& positional, po::variables_map& vm);

  // The repository password: KEEL_PASSWORD, the password file, or a prompt
  // on the terminal. Throws Error(kUsage) if none can be had.
  std::string password(const std::string& prompt = "repository password: ");
  // With `full_key_command` (e.g. "keel restore"), refuses with exit 2 unless
  // the password opened a full key (put-only keys read nothing back).
  std::unique_ptr<engine::Repository> open_repository(std::string_view full_key_command = {});
  // For a writer whose credentials may only create objects: no clearing of
  // dead processes' leftovers (which deletes), and objects written readable
  // by the bucket's owner (targets::kBucketOwnerFullControl).
  std::unique_ptr<engine::Repository> open_repository_append_only();
  // Under --append-only (KEEL_APPEND_ONLY) throws Error(kUsage): `command`
  // ("keel forget") does `what` ("deletes snapshots"), which this host must not.
  // Called before the password is asked for or the target touched.
  void refuse_if_append_only(std::string_view command, std::string_view what) const;
  // --repo and the options that go with it (engine/repository_access.h).
  engine::RepositoryAccess repository_access() const;
  // The target named by --repo; `create` makes the directory or bucket.
  std::unique_ptr<targets::Target> open_target(bool create);

  bool progress_enabled() const;  // a TTY on stderr, not --json, not --quiet
  // Prints to stdout unless --quiet.
  void say(const std::string& line) const;
  void warn(const std::string& line) const;  // stderr, always
};

// Reads a secret from the terminal without echo; empty if stdin is no TTY.
std::string prompt_secret(const std::string& prompt);

}  // namespace keel::cli
