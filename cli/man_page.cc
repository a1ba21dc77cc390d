#include "cli/man_page.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/command_docs.h"
#include "util/error.h"

namespace keel::cli {

namespace {

// Text as troff prints it literally: backslashes and hyphens escaped, no
// line starting with a control character.
std::string roff(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else if (c == '\n') {
      out += ' ';
    } else {
      out += c;
    }
  }
  if (!out.empty() && (out[0] == '.' || out[0] == '\'')) out.insert(0, "\\&");
  return out;
}

void header(std::ostream& out, const std::string& page, const std::string& summary, const std::string& version) {
  std::string upper;
  for (char c : page) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  out << ".TH " << roff(upper) << " 1 \"\" \"keel " << roff(version) << "\" \"keel manual\"\n"
      << ".SH NAME\n" << roff(page) << " \\- " << roff(summary) << "\n";
}

void options(std::ostream& out, const std::vector<OptionDoc>& docs) {
  for (const OptionDoc& o : docs) {
    out << ".TP\n\\fB\\-\\-" << roff(o.long_name) << "\\fR";
    if (!o.short_name.empty()) out << ", \\fB" << roff(o.short_name) << "\\fR";
    if (!o.value.empty()) out << " \\fI" << roff(o.value) << "\\fR";
    out << "\n" << roff(o.description) << "\n";
  }
}

// Operands by their names in capitals, as the synopsis writes them.
void operands(std::ostream& out, const std::vector<OptionDoc>& docs) {
  for (const OptionDoc& o : docs) {
    std::string name;
    for (char c : o.long_name) name += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    out << ".TP\n\\fI" << roff(name) << "\\fR\n" << roff(o.description) << "\n";
  }
}

void footer(std::ostream& out, bool see_keel) {
  out << ".SH GLOBAL OPTIONS\n";
  App app;
  options(out, option_docs(app.global_options()));
  out << ".SH ENVIRONMENT\n"
         "KEEL_REPO, KEEL_PASSWORD, KEEL_PASSWORD_FILE, KEEL_CATALOG, KEEL_S3_TIMEOUT, KEEL_RDMA, AWS_ACCESS_KEY_ID,\n"
         "AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, AWS_PROFILE: as the global options say.\n"
         ".SH EXIT STATUS\n"
         "0 success; 1 failure; 2 usage; 3 partial (some items failed, reported); 4 no repository or one exists;\n"
         "5 wrong password; 6 corrupt data; 7 target or disk I/O; 8 locked; 9 not found; 10 drill objectives\n"
         "missed; 130 interrupted.\n";
  if (see_keel) out << ".SH SEE ALSO\n\\fBkeel\\fR(1)\n";
}

}  // namespace

std::string main_man_page(const std::string& version) {
  std::ostringstream out;
  header(out, "keel", "back up, restore and verify data in encrypted, deduplicated repositories", version);
  out << ".SH SYNOPSIS\n\\fBkeel\\fR [\\fIglobal options\\fR] \\fICOMMAND\\fR [\\fIoptions\\fR]\n"
      << ".SH DESCRIPTION\nkeel stores snapshots of files in content\\-defined, deduplicated, compressed and "
         "encrypted chunks on a local directory, S3 or RDMA target, and keeps a SQLite catalog of them.\n"
      << ".SH COMMANDS\n";
  for (const CommandSpec& spec : command_table()) {
    out << ".TP\n\\fBkeel\\-" << roff(spec.name) << "\\fR(1)\n" << roff(spec.summary) << "\n";
  }
  footer(out, false);
  return out.str();
}

std::string command_man_page(const CommandSpec& spec, const std::string& version) {
  const std::vector<UsageDoc> docs = describe_command(spec);
  std::ostringstream out;
  header(out, std::string("keel-") + spec.name, spec.summary, version);
  out << ".SH SYNOPSIS\n";
  for (const UsageDoc& doc : docs) out << ".nf\n\\fB" << roff(doc.synopsis) << "\\fR\n.fi\n";
  if (docs.size() == 1) {
    out << ".SH DESCRIPTION\n" << roff(docs[0].description) << "\n";
    if (!docs[0].operands.empty()) {
      out << ".SH ARGUMENTS\n";
      operands(out, docs[0].operands);
    }
    out << ".SH OPTIONS\n";
    options(out, docs[0].options);
  } else {
    for (const UsageDoc& doc : docs) {
      out << ".SH " << roff("keel " + doc.command) << "\n" << roff(doc.description) << "\n";
      operands(out, doc.operands);
      options(out, doc.options);
    }
  }
  footer(out, true);
  return out.str();
}

void write_man_pages(const std::string& dir, const std::string& version) {
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    const std::string path = dir + "/" + name;
    std::ofstream file(path);
    file << text;
    if (!file.flush()) throw Error(ErrorKind::kTargetIo, "cannot write the man page " + path);
  };
  write("keel.1", main_man_page(version));
  for (const CommandSpec& spec : command_table()) write(std::string("keel-") + spec.name + ".1", command_man_page(spec, version));
}

}  // namespace keel::cli
