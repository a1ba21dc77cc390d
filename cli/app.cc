#include "cli/app.h"

#include <termios.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include "cli/parse.h"
#include "util/error.h"

namespace keel::cli {

std::atomic<bool> App::cancel{false};

namespace {
std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}
}  // namespace

po::options_description App::global_options() { return cli::global_options(global); }

bool App::parse(const std::vector<std::string>& args, po::options_description& opts,
                const po::positional_options_description& positional, po::variables_map& vm) {
  if (describe) {
    describe(opts, positional);
    throw Described{};
  }
  po::options_description all;
  all.add(opts).add(global_options());
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw Error(ErrorKind::kUsage, e.what());
  }
  if (global.repo.empty()) global.repo = env("KEEL_REPO");
  if (global.password_file.empty()) global.password_file = env("KEEL_PASSWORD_FILE");
  if (global.catalog.empty()) global.catalog = env("KEEL_CATALOG");
  if (global.target.rdma.empty()) global.target.rdma = env("KEEL_RDMA");
  if (global.s3_timeout.empty()) global.s3_timeout = env("KEEL_S3_TIMEOUT");
  if (!global.append_only) {
    const std::string flag = env("KEEL_APPEND_ONLY");
    if (flag == "1" || flag == "true" || flag == "yes") {
      global.append_only = true;
    } else if (!flag.empty() && flag != "0" && flag != "false" && flag != "no") {
      throw Error(ErrorKind::kUsage, "KEEL_APPEND_ONLY='" + flag + "': give 1 (append-only) or 0");
    }
  }
  if (!global.s3_timeout.empty()) {
    global.target.io_timeout = parse_duration(global.s3_timeout, "--s3-timeout");
    if (global.target.io_timeout.count() == 0) throw Error(ErrorKind::kUsage, "--s3-timeout must be more than 0");
  }
  if (vm.count("help")) {
    std::cout << opts << global_options();
    return false;
  }
  return true;
}

std::string prompt_secret(const std::string& prompt) {
  if (!::isatty(STDIN_FILENO)) return "";
  std::cerr << prompt << std::flush;
  struct termios old_tio;
  bool restore = ::tcgetattr(STDIN_FILENO, &old_tio) == 0;
  if (restore) {
    struct termios tio = old_tio;
    tio.c_lflag &= static_cast<tcflag_t>(~ECHO);
    ::tcsetattr(STDIN_FILENO, TCSANOW, &tio);
  }
  std::string line;
  std::getline(std::cin, line);
  if (restore) ::tcsetattr(STDIN_FILENO, TCSANOW, &old_tio);
  std::cerr << "\n";
  return line;
}

engine::RepositoryAccess App::repository_access() const {
  engine::RepositoryAccess access;
  access.location = global.repo;
  access.target = global.target;
  access.password_file = global.password_file;
  access.catalog = global.catalog;
  access.on_warning = [this](const std::string& message) { warn("warning: " + message); };
  return access;
}

std::string App::password(const std::string& prompt) {
  if (std::optional<std::string> p = engine::stored_password(repository_access())) return *p;
  std::string p = prompt_secret(prompt);
  if (p.empty()) {
    throw Error(ErrorKind::kUsage, "no password: set KEEL_PASSWORD or KEEL_PASSWORD_FILE, pass --password-file, "
                                   "or run on a terminal");
  }
  return p;
}

std::unique_ptr<targets::Target> App::open_target(bool create) {
  targets::TargetOptions options = global.target;
  options.create = create;
  return targets::open_target(global.repo, options);
}

std::unique_ptr<engine::Repository> App::open_repository(std::string_view full_key_command) {
  auto repo = engine::open_repository(repository_access(), password());
  if (!full_key_command.empty()) repo->require_full_key(full_key_command);
  return repo;
}

void App::refuse_if_append_only(std::string_view command, std::string_view what) const {
  if (!global.append_only) return;
  throw Error(ErrorKind::kUsage, std::string(command) + " " + std::string(what) +
                                     ": refused under --append-only (KEEL_APPEND_ONLY), before touching " +
                                     (global.repo.empty() ? std::string("the repository") : global.repo) +
                                     "; run it where the repository owner's credentials are, without --append-only");
}

std::unique_ptr<engine::Repository> App::open_repository_append_only() {
  targets::TargetOptions options = global.target;
  options.object_acl = targets::kBucketOwnerFullControl;
  // Warnings as every other command gives them: a record the sync skipped is named.
  return engine::Repository::open(targets::open_target(global.repo, options),
                                  {password(), global.catalog, repository_access().on_warning});
}

bool App::progress_enabled() const { return !global.json && !global.quiet && ::isatty(STDERR_FILENO); }

void App::say(const std::string& line) const {
  if (!global.quiet) std::cout << line << "\n";
}

void App::warn(const std::string& line) const { std::cerr << line << "\n"; }

}  // namespace keel::cli
