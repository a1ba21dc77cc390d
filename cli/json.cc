#include "cli/json.h"

#include <cmath>
#include <cstdio>

namespace keel::cli {

void Json::separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_ += ',';
    first_.back() = false;
  }
}

Json& Json::begin_object() {
  separate();
  out_ += '{';
  first_.push_back(true);
  return *this;
}

Json& Json::end_object() {
  out_ += '}';
  first_.pop_back();
  return *this;
}

Json& Json::begin_array() {
  separate();
  out_ += '[';
  first_.push_back(true);
  return *this;
}

Json& Json::end_array() {
  out_ += ']';
  first_.pop_back();
  return *this;
}

Json& Json::key(std::string_view k) {
  value(k);
  out_ += ':';
  after_key_ = true;
  return *this;
}

Json& Json::value(std::string_view v) {
  separate();
  out_ += '"';
  for (unsigned char c : v) {
    switch (c) {
      case '"': out_ += "\\\""; break;
      case '\\': out_ += "\\\\"; break;
      case '\n': out_ += "\\n"; break;
      case '\r': out_ += "\\r"; break;
      case '\t': out_ += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out_ += buf;
        } else {
          out_ += static_cast<char>(c);
        }
    }
  }
  out_ += '"';
  return *this;
}

Json& Json::value(uint64_t v) {
  separate();
  out_ += std::to_string(v);
  return *this;
}

Json& Json::value(int64_t v) {
  separate();
  out_ += std::to_string(v);
  return *this;
}

Json& Json::value(double v) {
  separate();
  if (!std::isfinite(v)) {
    out_ += "null";
    return *this;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  out_ += buf;
  return *this;
}

Json& Json::value(bool v) {
  separate();
  out_ += v ? "true" : "false";
  return *this;
}

Json& Json::null() {
  separate();
  out_ += "null";
  return *this;
}

Json& Json::field(std::string_view k, const std::vector<std::string>& v) {
  key(k);
  begin_array();
  for (const auto& s : v) value(s);
  return end_array();
}

Json& Json::field(std::string_view k, const std::vector<std::pair<std::string, uint64_t>>& counters) {
  key(k);
  begin_object();
  for (const auto& [name, count] : counters) field(name, count);
  return end_object();
}

}  // namespace keel::cli
