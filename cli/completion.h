// Shell completion scripts generated from the command table and the option
// definitions (cli/command_docs.h): commands, actions and options complete;
// an option that takes a value completes a file name.
#pragma once

#include <string>

namespace keel::cli {

std::string bash_completion();  // for /usr/share/bash-completion/completions/keel
std::string zsh_completion();   // for /usr/share/zsh/vendor-completions/_keel

}  // namespace keel::cli
