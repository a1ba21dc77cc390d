#include "targets/target.h"

#include "util/error.h"

namespace keel::targets {

Bytes Target::get(const std::string& key) {
  std::optional<ObjectInfo> info = head(key);
  if (!info) throw Error(ErrorKind::kNotFound, describe() + "/" + key + ": no such object");
  Bytes out(info->size);
  size_t n = get_range(key, 0, out);
  if (n != out.size()) {
    throw Error(ErrorKind::kTargetIo, describe() + "/" + key + ": object shrank while reading (" +
                                          std::to_string(n) + " of " + std::to_string(out.size()) + " bytes)");
  }
  return out;
}

void Target::set_write_retention(const std::optional<WriteRetention>& rule) {
  if (rule) throw Error(ErrorKind::kUsage, describe() + ": this target cannot lock objects (Object Lock needs S3)");
}

void Target::extend_retention(const std::string& key, const Retention&) {
  throw Error(ErrorKind::kUsage, describe() + "/" + key + ": this target cannot lock objects (Object Lock needs S3)");
}

}  // namespace keel::targets
