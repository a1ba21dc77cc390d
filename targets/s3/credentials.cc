#include "targets/s3/credentials.h"

#include <cstdlib>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "util/error.h"
#include "util/fd.h"
#include "util/text.h"

namespace keel::targets::s3 {

namespace {

constexpr std::string_view kDefaultProfile = "default";
constexpr std::string_view kDefaultRegion = "us-east-1";

// Unset and empty variables both count as not given.
std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Inner whitespace runs become one space: "[profile   dev]" names "profile dev".
std::string collapse_spaces(std::string_view s) {
  std::string out;
  for (char c : trim(s)) {
    if (is_space(c)) {
      if (out.back() != ' ') out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

// "value ; note" and "value # note" lose the note; credential values never
// contain whitespace, so a '#' or ';' inside a value is kept.
std::string_view strip_inline_comment(std::string_view value) {
  for (size_t i = 1; i < value.size(); ++i) {
    if ((value[i] == '#' || value[i] == ';') && is_space(value[i - 1])) return trim(value.substr(0, i));
  }
  return value;
}

using IniSection = std::map<std::string, std::string>;  // lower-case key -> value

// The AWS shared files: "[section]" headers, "key = value" (or "key: value")
// with case-insensitive keys, whole-line comments starting with '#' or ';'.
// Lines indented deeper than the key before them continue its value (the
// config file's nested "s3 =" blocks); they are skipped so that a nested key
// never passes for a top-level one. Messages cite line numbers only: the
// files hold secrets.
struct IniFile {
  std::string path;
  bool exists = false;
  std::map<std::string, IniSection> sections;

  const IniSection* section(const std::string& name) const {
    auto it = sections.find(name);
    return it == sections.end() ? nullptr : &it->second;
  }
};

IniFile read_ini(const std::string& path) {
  IniFile ini{path};
  Bytes bytes;
  try {
    bytes = read_file(path);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kNotFound) return ini;
    throw;
  }
  ini.exists = true;
  std::string_view text = as_chars(bytes);
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // UTF-8 byte order mark

  IniSection* section = nullptr;
  // Indentation of the last key line in this section (npos: none yet, so
  // nothing counts as deeper); a line indented deeper continues its value.
  size_t key_indent = std::string_view::npos;
  size_t line_number = 0;
  while (!text.empty()) {
    ++line_number;
    const size_t end = text.find('\n');
    const std::string_view raw = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    const std::string_view line = trim(raw);
    const auto where = [&] { return path + " line " + std::to_string(line_number); };

    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (line.front() == '[') {
      if (line.back() != ']') throw Error(ErrorKind::kUsage, where() + ": section header without a closing ']'");
      section = &ini.sections[collapse_spaces(line.substr(1, line.size() - 2))];
      key_indent = std::string_view::npos;
      continue;
    }
    const size_t indent = raw.find_first_not_of(" \t");
    if (indent > key_indent) continue;
    const size_t delimiter = line.find_first_of("=:");
    if (delimiter == std::string_view::npos || delimiter == 0) {
      throw Error(ErrorKind::kUsage, where() + ": expected 'key = value' or a [section] header");
    }
    if (section == nullptr) throw Error(ErrorKind::kUsage, where() + ": setting before the first [section] header");
    (*section)[ascii_lower(trim(line.substr(0, delimiter)))] = strip_inline_comment(trim(line.substr(delimiter + 1)));
    key_indent = indent;
  }
  return ini;
}

// The value of `env_var`, else ~/.aws/<name>; nullopt when neither is
// available (HOME unset). A leading "~/" expands like the AWS CLI does.
std::optional<std::string> shared_file_path(const char* env_var, const char* name) {
  const std::optional<std::string> home = env("HOME");
  if (std::optional<std::string> path = env(env_var)) {
    if (path->starts_with("~/") && home) return *home + path->substr(1);
    return path;
  }
  if (!home) return std::nullopt;
  return *home + "/.aws/" + name;
}

struct KeyNames {
  std::string key_id, secret, token;
};

// Credentials from one source, nullopt when it gives none of them. A key id
// without its secret (or the reverse, or a token alone) is a mistake to
// report rather than a reason to fall through to another source.
std::optional<Credentials> complete_credentials(Credentials credentials, const std::string& where,
                                                const KeyNames& names) {
  const bool has_id = !credentials.access_key_id.empty(), has_secret = !credentials.secret_access_key.empty();
  if (!has_id && !has_secret) {
    if (credentials.session_token.empty()) return std::nullopt;
    throw Error(ErrorKind::kUsage,
                where + ": " + names.token + " is set without " + names.key_id + " and " + names.secret);
  }
  if (!has_id || !has_secret) {
    const std::string& present = has_id ? names.key_id : names.secret;
    const std::string& missing = has_id ? names.secret : names.key_id;
    throw Error(ErrorKind::kUsage, where + ": " + present + " is set but " + missing + " is not");
  }
  return credentials;
}

const KeyNames kFileKeys{"aws_access_key_id", "aws_secret_access_key", "aws_session_token"};

std::optional<Credentials> credentials_in(const IniSection& section, const std::string& where) {
  const auto value = [&](const std::string& key) {
    auto it = section.find(key);
    return it == section.end() ? std::string() : it->second;
  };
  return complete_credentials({value(kFileKeys.key_id), value(kFileKeys.secret), value(kFileKeys.token)}, where,
                              kFileKeys);
}

// The shared files, each read on first use: a broken ~/.aws/credentials
// should not stand in the way of keys given by flag.
class SharedFiles {
 public:
  const IniFile& credentials() { return load(credentials_, "AWS_SHARED_CREDENTIALS_FILE", "credentials"); }
  const IniFile& config() { return load(config_, "AWS_CONFIG_FILE", "config"); }

 private:
  static const IniFile& load(std::optional<IniFile>& file, const char* env_var, const char* name) {
    if (!file) {
      const std::optional<std::string> path = shared_file_path(env_var, name);
      file = path ? read_ini(*path) : IniFile{};
    }
    return *file;
  }

  std::optional<IniFile> credentials_, config_;
};

// The profile's sections: "[name]" in credentials, "[profile name]" in
// config, where default is "[default]" (or "[profile default]").
struct Profile {
  std::string name;
  bool named = true;  // given by flag or AWS_PROFILE rather than the default

  explicit Profile(const CredentialSources& flags) {
    if (!flags.profile.empty()) {
      name = flags.profile;
    } else if (std::optional<std::string> from_env = env("AWS_PROFILE")) {
      name = *from_env;
    } else {
      name = kDefaultProfile;
      named = false;
    }
  }

  const IniSection* credentials_section(const IniFile& credentials) const { return credentials.section(name); }
  const IniSection* config_section(const IniFile& config) const {
    if (const IniSection* section = config.section("profile " + name)) return section;
    return name == kDefaultProfile ? config.section(name) : nullptr;
  }
  std::string config_section_name() const {
    return name == kDefaultProfile ? "[default]" : "[profile " + name + "]";
  }
};

// What a shared file said about the profile, for the "nothing found" message.
std::string describe(const IniFile& file, const char* file_name, const std::string& section_name,
                     bool has_section) {
  if (file.path.empty()) return std::string("~/.aws/") + file_name + " (HOME not set)";
  if (!file.exists) return file.path + " (no such file)";
  if (!has_section) return file.path + " (no " + section_name + " section)";
  return file.path + " (" + section_name + " has no " + kFileKeys.key_id + ")";
}

std::string resolve_region(const CredentialSources& flags, const Profile& profile, SharedFiles& files) {
  if (!flags.region.empty()) return flags.region;
  if (auto region = env("AWS_REGION")) return *region;
  if (auto region = env("AWS_DEFAULT_REGION")) return *region;
  if (const IniSection* section = profile.config_section(files.config())) {
    auto it = section->find("region");
    if (it != section->end() && !it->second.empty()) return it->second;
  }
  return std::string(kDefaultRegion);
}

}  // namespace

ResolvedCredentials resolve_credentials(const CredentialSources& flags) {
  const Profile profile(flags);
  SharedFiles files;
  const std::string region = resolve_region(flags, profile, files);

  if (auto credentials = complete_credentials({flags.access_key_id, flags.secret_access_key, flags.session_token},
                                              "command-line flags",
                                              {"the access key id", "the secret access key", "the session token"})) {
    return {std::move(*credentials), region, "flags"};
  }
  // Like the AWS CLI, a profile named on the command line beats the
  // environment's keys; AWS_PROFILE does not.
  const bool profile_flag = !flags.profile.empty();
  if (!profile_flag) {
    const KeyNames env_names{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"};
    Credentials from_env{env(env_names.key_id.c_str()).value_or(""), env(env_names.secret.c_str()).value_or(""),
                         env(env_names.token.c_str()).value_or("")};
    if (auto credentials = complete_credentials(std::move(from_env), "environment", env_names)) {
      return {std::move(*credentials), region, "environment"};
    }
  }

  const IniFile& credentials_file = files.credentials();
  const IniFile& config_file = files.config();
  const IniSection* credentials_section = profile.credentials_section(credentials_file);
  const IniSection* config_section = profile.config_section(config_file);
  const std::string profile_where = "profile " + profile.name;
  for (const auto& [section, file] : {std::pair{credentials_section, &credentials_file},
                                      std::pair{config_section, &config_file}}) {
    if (section == nullptr) continue;
    const std::string where = profile_where + " (" + file->path + ")";
    if (auto credentials = credentials_in(*section, where)) return {std::move(*credentials), region, where};
  }

  const std::string in_files =
      describe(credentials_file, "credentials", "[" + profile.name + "]", credentials_section != nullptr) + " and " +
      describe(config_file, "config", profile.config_section_name(), config_section != nullptr);
  if (profile.named && credentials_section == nullptr && config_section == nullptr) {
    throw Error(ErrorKind::kUsage, "S3 credentials: profile '" + profile.name + "' is not defined: looked in " +
                                       in_files);
  }
  throw Error(ErrorKind::kUsage,
              "no S3 credentials found; looked at: command-line flags (none given); " +
                  std::string(profile_flag ? "environment (skipped: a profile was named by flag)"
                                           : "environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY not set)") +
                  "; " + profile_where + " in " + in_files +
                  ". Only static keys are read: role, SSO and credential_process profiles are not supported");
}

}  // namespace keel::targets::s3
