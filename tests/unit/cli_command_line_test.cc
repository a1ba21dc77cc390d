#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "cli/command_line.h"
#include "cli/global_options.h"

using keel::cli::CommandLine;
using keel::cli::GlobalOptions;
using keel::cli::split_command_line;
using keel::cli::takes_separate_value;
using Words = std::vector<std::string>;

TEST_CASE("every global option that takes a value keeps its value from being taken for the command",
          "[cli][command_line]") {
  GlobalOptions global;
  const auto options = keel::cli::global_options(global);
  for (const auto& option : options.options()) {
    if (option->semantic()->max_tokens() == 0) continue;
    const std::string name = "--" + option->long_name();
    CommandLine line = split_command_line({name, "30s", "backup", "/data"}, options);
    INFO(name);
    CHECK(line.command == "backup");
    CHECK(line.args == Words{name, "30s", "/data"});
  }
}

TEST_CASE("the command line split knows switches, short options and attached values", "[cli][command_line]") {
  GlobalOptions global;
  const auto options = keel::cli::global_options(global);
  CHECK(takes_separate_value(options, "--s3-timeout"));
  CHECK(takes_separate_value(options, "-r"));
  CHECK_FALSE(takes_separate_value(options, "--json"));
  CHECK_FALSE(takes_separate_value(options, "-q"));
  CHECK_FALSE(takes_separate_value(options, "--s3-timeout=30s"));
  CHECK_FALSE(takes_separate_value(options, "--no-such-option"));
  CHECK_FALSE(takes_separate_value(options, "backup"));

  CHECK(split_command_line({"--json", "snapshots"}, options).command == "snapshots");
  CHECK(split_command_line({"-r", "/repo", "-q", "check", "--read-data"}, options).args ==
        Words{"-r", "/repo", "-q", "--read-data"});
  CHECK(split_command_line({"--s3-timeout=30s", "restore", "latest"}, options).command == "restore");
  // The command's own arguments after it are left alone, even those that look like commands.
  CHECK(split_command_line({"backup", "init"}, options).args == Words{"init"});
  CHECK(split_command_line({"--repo", "/r"}, options).command.empty());
}
