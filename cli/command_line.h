// Finding the command in `keel [global options] COMMAND [arguments]`, using the
// global options' own definitions to know which of them take a value.
#pragma once

#include <string>
#include <vector>

#include <boost/program_options/options_description.hpp>

namespace keel::cli {

// True when `arg` names an option of `options` that takes a value in the
// next word ("--repo", "-r"); false for switches, "--opt=value", "-rVALUE",
// unknown options and plain words.
bool takes_separate_value(const boost::program_options::options_description& options, const std::string& arg);

struct CommandLine {
  std::string command;             // empty when none was given
  std::vector<std::string> args;   // every other word, in order (global options included)
};

// The command is the first word that is neither an option nor the value of a
// global option (`global`) that takes one.
CommandLine split_command_line(const std::vector<std::string>& words,
                               const boost::program_options::options_description& global);

}  // namespace keel::cli
