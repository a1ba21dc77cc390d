#include "cli/command_docs.h"

#include <algorithm>
#include <limits>
#include <sstream>

namespace keel::cli {

namespace po = boost::program_options;

namespace {

std::vector<std::string> operand_names(const po::positional_options_description& positional) {
  std::vector<std::string> names;
  // An operand repeated without bound (add("path", -1)) reports a huge count.
  unsigned count = std::min(positional.max_total_count(), 16u);
  for (unsigned i = 0; i < count; ++i) {
    const std::string& name = positional.name_for_position(i);
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

// boost keeps the caption private; it is what operator<< prints before the options.
std::string caption_of(const po::options_description& options) {
  std::ostringstream out;
  out << options;
  std::istringstream lines(out.str());
  std::string caption, line;
  while (std::getline(lines, line) && !line.starts_with("  -")) caption += (caption.empty() ? "" : " ") + line;
  if (caption.ends_with(":")) caption.pop_back();
  return caption;
}

}  // namespace

std::vector<OptionDoc> option_docs(const po::options_description& options,
                                   const po::positional_options_description& positional, bool operands) {
  const std::vector<std::string> names = operand_names(positional);
  auto doc = [](const po::option_description& option) {
    std::string short_name = option.canonical_display_name(po::command_line_style::allow_dash_for_short);
    if (!short_name.starts_with("-")) short_name.clear();
    return OptionDoc{option.long_name(), short_name, option.format_parameter(), option.description()};
  };
  std::vector<OptionDoc> docs;
  if (operands) {
    for (const std::string& name : names) {
      if (const po::option_description* option = options.find_nothrow(name, false)) docs.push_back(doc(*option));
    }
    return docs;
  }
  for (const auto& option : options.options()) {
    if (std::find(names.begin(), names.end(), option->long_name()) == names.end()) docs.push_back(doc(*option));
  }
  return docs;
}

std::vector<UsageDoc> describe_command(const CommandSpec& spec) {
  std::vector<UsageDoc> docs;
  const std::vector<std::string> actions = spec.actions.empty() ? std::vector<std::string>{""} : spec.actions;
  for (const std::string& action : actions) {
    App app;
    UsageDoc doc;
    doc.command = action.empty() ? spec.name : std::string(spec.name) + " " + action;
    app.describe = [&doc](const po::options_description& options, const po::positional_options_description& pos) {
      const std::string caption = caption_of(options);
      const size_t colon = caption.find(": ");
      doc.synopsis = caption.substr(0, colon);
      doc.description = colon == std::string::npos ? "" : caption.substr(colon + 2);
      doc.options = option_docs(options, pos);
      doc.operands = option_docs(options, pos, /*operands=*/true);
    };
    try {
      spec.run(app, action.empty() ? Args{} : Args{action});
    } catch (const App::Described&) {
    }
    docs.push_back(std::move(doc));
  }
  return docs;
}

std::vector<OptionDoc> all_option_docs() {
  App app;
  std::vector<OptionDoc> all = option_docs(app.global_options());
  for (const CommandSpec& spec : command_table()) {
    for (const UsageDoc& doc : describe_command(spec)) all.insert(all.end(), doc.options.begin(), doc.options.end());
  }
  return all;
}

}  // namespace keel::cli
