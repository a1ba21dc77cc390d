// keel: back up, restore and verify data in encrypted, deduplicated repositories.
#include <csignal>
#include <cstring>
#include <iostream>
#include <map>

#include "cli/commands.h"
#include "util/allocator.h"
#include "util/error.h"

namespace {

using keel::cli::App;

void on_signal(int sig) {
  if (App::cancel.exchange(true)) {
    std::signal(sig, SIG_DFL);  // a second signal stops at once
    std::raise(sig);
  }
}

const std::map<std::string, int (*)(App&, const keel::cli::Args&)> kCommands = {
    {"init", keel::cli::cmd_init},       {"backup", keel::cli::cmd_backup}, {"snapshots", keel::cli::cmd_snapshots},
    {"ls", keel::cli::cmd_ls},           {"find", keel::cli::cmd_find},           {"restore", keel::cli::cmd_restore}, {"check", keel::cli::cmd_check},
    {"key", keel::cli::cmd_key},         {"catalog", keel::cli::cmd_catalog},
    {"forget", keel::cli::cmd_forget},   {"prune", keel::cli::cmd_prune},
    {"drill", keel::cli::cmd_drill},     {"drills", keel::cli::cmd_drills},
    {"job", keel::cli::cmd_job},         {"scheduler", keel::cli::cmd_scheduler},
    {"gateway", keel::cli::cmd_gateway},
    {"mount", keel::cli::cmd_mount},
    {"unlock", keel::cli::cmd_unlock},
};

void usage(std::ostream& out) {
  out << "usage: keel [--repo LOCATION] COMMAND [options]\n\n"
         "commands:\n"
         "  init        create an encrypted repository\n"
         "  backup      store a snapshot of files, directories or stdin\n"
         "  snapshots   list snapshots\n"
         "  ls          list files in a snapshot\n"
         "  find        find files by name or path in all snapshots\n"
         "  restore     restore a snapshot, a subtree or one file\n"
         "  check       verify the repository (--read-data: every byte)\n"
         "  forget      remove snapshots a retention policy does not keep\n"
         "  prune       reclaim the space of data no snapshot uses\n"
         "  drill       restore drill: restore or verify a snapshot against RTO/RPO objectives\n"
         "  drills      the history of restore drills\n"
         "  job         add, list, show, run or remove scheduled backup jobs\n"
         "  scheduler   run jobs on their schedules (a foreground daemon)\n"
         "  key         list, add or remove passwords\n"
         "  catalog     rebuild the local catalog from the repository\n"
         "  mount       the snapshots as a read-only file tree (FUSE)\n"
         "  gateway     serve an S3-compatible endpoint (--config FILE; docs/gateway.md);\n"
         "              gateway gc --config FILE reclaims what dedupe buckets no longer use\n\n"
         "Run 'keel COMMAND --help' for a command's options. Exit codes: docs/exit-codes.md\n";
}

// Global options that take a value, so their value is not taken for the command.
bool takes_value(const std::string& arg) {
  for (const char* option : {"--repo", "-r", "--password-file", "--catalog", "--endpoint", "--region", "--aws-profile",
                             "--ca-file", "--aws-access-key-id", "--aws-secret-access-key", "--aws-session-token", "--rdma"}) {
    if (arg == option) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  keel::keep_large_allocations_in_heap();
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGPIPE, SIG_IGN);

  std::vector<std::string> args(argv + 1, argv + argc);
  std::string command;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--version") {
      std::cout << "keel " KEEL_VERSION "\n";
      return 0;
    }
    if (takes_value(args[i])) {
      ++i;
      continue;
    }
    if (!args[i].empty() && args[i][0] != '-') {
      command = args[i];
      args.erase(args.begin() + static_cast<ptrdiff_t>(i));
      break;
    }
  }
  if (command.empty() || command == "help") {
    usage(command.empty() ? std::cerr : std::cout);
    return command.empty() ? static_cast<int>(keel::ErrorKind::kUsage) : 0;
  }
  auto it = kCommands.find(command);
  if (it == kCommands.end()) {
    std::cerr << "keel: unknown command '" << command << "'\n\n";
    usage(std::cerr);
    return static_cast<int>(keel::ErrorKind::kUsage);
  }
  App app;
  try {
    return it->second(app, args);
  } catch (const keel::Error& e) {
    std::cerr << "keel " << command << ": " << e.what() << "\n";
    return e.exit_code();
  } catch (const std::exception& e) {
    std::cerr << "keel " << command << ": internal error: " << e.what() << "\n";
    return static_cast<int>(keel::ErrorKind::kFailure);
  }
}
