// Writes the Prometheus text exposition format (version 0.0.4): metric
// families with their HELP and TYPE lines, then samples with escaped labels.
// Every /metrics keel serves (the gateway, the scheduler) is written with it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace keel {

class PrometheusText {
 public:
  static constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

  // `type`: "counter", "gauge" or "histogram".
  void family(std::string_view name, std::string_view type, std::string_view help);
  // `labels`: "" or label() pieces joined by ','.
  void sample(std::string_view name, std::string_view labels, double value);
  void sample(std::string_view name, std::string_view labels, uint64_t value);

  // key="value", the value escaped (\\, \" and \n).
  static std::string label(std::string_view key, std::string_view value);
  // A double as Prometheus reads it: shortest exact form, +Inf, -Inf, NaN.
  static std::string number(double value);

  std::string take() { return std::move(out_); }

 private:
  void sample_text(std::string_view name, std::string_view labels, const std::string& value);
  std::string out_;
};

}  // namespace keel
