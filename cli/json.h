// A minimal streaming JSON writer for --json output.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace keel::cli {

class Json {
 public:
  Json& begin_object();
  Json& end_object();
  Json& begin_array();
  Json& end_array();
  Json& key(std::string_view k);
  Json& value(std::string_view v);
  Json& value(const char* v) { return value(std::string_view(v)); }
  Json& value(const std::string& v) { return value(std::string_view(v)); }
  Json& value(uint64_t v);
  Json& value(int64_t v);
  Json& value(int v) { return value(static_cast<int64_t>(v)); }
  Json& value(double v);
  Json& value(bool v);
  Json& null();
  template <typename T>
  Json& field(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }
  Json& field(std::string_view k, const std::vector<std::string>& v);
  // An object of named counters.
  Json& field(std::string_view k, const std::vector<std::pair<std::string, uint64_t>>& counters);
  // null when empty.
  template <typename T>
  Json& field(std::string_view k, const std::optional<T>& v) {
    key(k);
    return v ? value(*v) : null();
  }

  const std::string& str() const { return out_; }

 private:
  void separate();
  std::string out_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool after_key_ = false;
};

}  // namespace keel::cli
