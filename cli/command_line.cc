#include "cli/command_line.h"

namespace keel::cli {

namespace po = boost::program_options;

bool takes_separate_value(const po::options_description& options, const std::string& arg) {
  const po::option_description* option = nullptr;
  if (arg.size() > 2 && arg.starts_with("--")) {
    if (arg.find('=') != std::string::npos) return false;
    option = options.find_nothrow(arg.substr(2), /*approx=*/false);
  } else if (arg.size() == 2 && arg[0] == '-' && arg[1] != '-') {
    option = options.find_nothrow(arg, /*approx=*/false);  // boost keeps short names with their dash
  }
  return option != nullptr && option->semantic()->max_tokens() > 0;
}

CommandLine split_command_line(const std::vector<std::string>& words, const po::options_description& global) {
  CommandLine line;
  line.args = words;
  for (size_t i = 0; i < line.args.size(); ++i) {
    const std::string& word = line.args[i];
    if (takes_separate_value(global, word)) {
      ++i;
    } else if (!word.empty() && word[0] != '-') {
      line.command = word;
      line.args.erase(line.args.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
  return line;
}

}  // namespace keel::cli
