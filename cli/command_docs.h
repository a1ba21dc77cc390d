// The commands described as data, read from the same option definitions that
// parse their arguments and print --help: the man pages and the shell
// completions are generated from these.
#pragma once

#include <string>
#include <vector>

#include <boost/program_options/options_description.hpp>
#include <boost/program_options/positional_options.hpp>

#include "cli/commands.h"

namespace keel::cli {

struct OptionDoc {
  std::string long_name;    // "repo"
  std::string short_name;   // "-r", or empty
  std::string value;        // "arg", "arg (=256)"; empty for a switch
  std::string description;
};

struct UsageDoc {
  std::string command;      // "backup", "job add"
  std::string synopsis;     // "keel backup [options] PATH..."
  std::string description;  // what follows the synopsis in the help's caption
  std::vector<OptionDoc> options;   // without the operands
  std::vector<OptionDoc> operands;  // positional arguments, in the order given
};

// The options of `options`, leaving out those `positional` fills (or, with
// `operands`, only those, in their order).
std::vector<OptionDoc> option_docs(const boost::program_options::options_description& options,
                                   const boost::program_options::positional_options_description& positional = {},
                                   bool operands = false);

// A command's usage, one entry per action (CommandSpec::actions).
std::vector<UsageDoc> describe_command(const CommandSpec& spec);

// Every option definition, global and of every command and action.
std::vector<OptionDoc> all_option_docs();

}  // namespace keel::cli
