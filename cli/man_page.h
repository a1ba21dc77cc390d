// troff man pages generated from the command table and the option
// definitions (cli/command_docs.h), so they say what --help says.
#pragma once

#include <string>

#include "cli/commands.h"

namespace keel::cli {

std::string main_man_page(const std::string& version);                         // keel(1)
std::string command_man_page(const CommandSpec& spec, const std::string& version);  // keel-COMMAND(1)

// Writes keel.1 and keel-COMMAND.1 for every command into `dir` (created).
void write_man_pages(const std::string& dir, const std::string& version);

}  // namespace keel::cli
