#include "util/prometheus_text.h"

#include <cmath>
#include <cstdio>

namespace keel {

void PrometheusText::family(std::string_view name, std::string_view type, std::string_view help) {
  out_.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out_.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

void PrometheusText::sample(std::string_view name, std::string_view labels, double value) {
  sample_text(name, labels, number(value));
}

void PrometheusText::sample(std::string_view name, std::string_view labels, uint64_t value) {
  sample_text(name, labels, std::to_string(value));
}

void PrometheusText::sample_text(std::string_view name, std::string_view labels, const std::string& value) {
  out_.append(name);
  if (!labels.empty()) out_.append("{").append(labels).append("}");
  out_.append(" ").append(value).append("\n");
}

std::string PrometheusText::label(std::string_view key, std::string_view value) {
  std::string out(key);
  out += "=\"";
  for (const char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

std::string PrometheusText::number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.15g", value);
  return buf;
}

}  // namespace keel
