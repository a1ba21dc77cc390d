// keel: back up, restore and verify data in encrypted, deduplicated repositories.
#include <csignal>
#include <cstring>
#include <iostream>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/completion.h"
#include "cli/man_page.h"
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

void usage(std::ostream& out) {
  out << "usage: keel [--repo LOCATION] COMMAND [options]\n\ncommands:\n";
  for (const keel::cli::CommandSpec& spec : keel::cli::command_table()) {
    std::string name = spec.name;
    out << "  " << name << std::string(name.size() < 12 ? 12 - name.size() : 1, ' ') << spec.summary << "\n";
  }
  out << "\nRun 'keel COMMAND --help' for a command's options, 'man keel-COMMAND' for its manual.\n"
         "Exit codes: docs/exit-codes.md\n";
}

// Modes for packaging, not listed in the usage: they write what is generated
// from the option definitions (man pages, shell completions).
int generate(const std::vector<std::string>& args) {
  if (args.size() == 2 && args[0] == "--generate-man") {
    keel::cli::write_man_pages(args[1], KEEL_VERSION);
    return 0;
  }
  if (args.size() == 2 && args[0] == "--generate-completion" && args[1] == "bash") {
    std::cout << keel::cli::bash_completion();
    return 0;
  }
  if (args.size() == 2 && args[0] == "--generate-completion" && args[1] == "zsh") {
    std::cout << keel::cli::zsh_completion();
    return 0;
  }
  std::cerr << "keel: usage: keel --generate-man DIR | keel --generate-completion bash|zsh\n";
  return static_cast<int>(keel::ErrorKind::kUsage);
}

}  // namespace

int main(int argc, char** argv) {
  keel::keep_large_allocations_in_heap();
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGPIPE, SIG_IGN);

  const std::vector<std::string> words(argv + 1, argv + argc);
  if (!words.empty() && words[0].starts_with("--generate-")) {
    try {
      return generate(words);
    } catch (const keel::Error& e) {
      std::cerr << "keel: " << e.what() << "\n";
      return e.exit_code();
    }
  }
  App app;
  keel::cli::CommandLine line = keel::cli::split_command_line(words, app.global_options());
  if (line.command.empty()) {
    for (const std::string& word : line.args) {
      if (word == "--version") {
        std::cout << "keel " KEEL_VERSION "\n";
        return 0;
      }
    }
  }
  if (line.command.empty() || line.command == "help") {
    usage(line.command.empty() ? std::cerr : std::cout);
    return line.command.empty() ? static_cast<int>(keel::ErrorKind::kUsage) : 0;
  }
  const keel::cli::CommandSpec* spec = keel::cli::find_command(line.command);
  if (spec == nullptr) {
    std::cerr << "keel: unknown command '" << line.command << "'\n\n";
    usage(std::cerr);
    return static_cast<int>(keel::ErrorKind::kUsage);
  }
  try {
    return spec->run(app, line.args);
  } catch (const keel::Error& e) {
    std::cerr << "keel " << line.command << ": " << e.what() << "\n";
    return e.exit_code();
  } catch (const std::exception& e) {
    std::cerr << "keel " << line.command << ": internal error: " << e.what() << "\n";
    return static_cast<int>(keel::ErrorKind::kFailure);
  }
}
