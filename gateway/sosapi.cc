#include "gateway/sosapi.h"

#include <cerrno>
#include <cstring>
#include <sys/statvfs.h>

#include "util/error.h"
#include "util/xml.h"

namespace keel::gateway {

std::optional<SosapiDocument> sosapi_document(std::string_view key) {
  if (!key.starts_with(kSosapiPrefix)) return std::nullopt;
  const std::string_view name = key.substr(kSosapiPrefix.size());
  if (name == "system.xml") return SosapiDocument::kSystem;
  if (name == "capacity.xml") return SosapiDocument::kCapacity;
  return std::nullopt;
}

std::string sosapi_system_xml() {
  XmlWriter xml;
  // The SOSAPI document spells the version with its quotes.
  xml.open("SystemInfo").element("ProtocolVersion", "\"1.0\"").element("ModelName", "keel gateway");
  xml.open("ProtocolCapabilities")
      .element("CapacityInfo", true)
      .element("UploadSessions", false)
      .element("IAMSTS", false)
      .close();
  xml.open("SystemRecommendations").element("KbBlockSize", uint64_t{1024}).close();
  return xml.finish();
}

std::string sosapi_capacity_xml(const std::string& path, uint64_t used_bytes) {
  struct statvfs fs {};
  if (statvfs(path.c_str(), &fs) != 0) {
    throw Error(ErrorKind::kTargetIo, path + ": statvfs: " + std::strerror(errno));
  }
  XmlWriter xml;
  xml.open("CapacityInfo")
      .element("Capacity", static_cast<uint64_t>(fs.f_blocks) * fs.f_frsize)
      .element("Available", static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize)
      .element("Used", used_bytes);
  return xml.finish();
}

}  // namespace keel::gateway
