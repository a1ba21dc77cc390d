#include "gateway/gateway_keys.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.h"
#include "util/fd.h"

namespace keel::gateway {

engine::Key256 load_key_file(const std::string& path, const std::string& setting) {
  engine::Key256 key;
  const std::string name = setting + " " + path;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd && errno == ENOENT) {
    // First start: a new key, written whole and durable before it seals anything.
    key = engine::random_key();
    const std::string tmp = path + ".tmp";
    {
      UniqueFd out(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
      if (!out || ::write(out.get(), key.data(), key.size()) != static_cast<ssize_t>(key.size()) ||
          ::fsync(out.get()) != 0) {
        throw Error(ErrorKind::kUsage, setting + " " + tmp + ": cannot write: " + std::strerror(errno));
      }
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      throw Error(ErrorKind::kUsage, name + ": cannot create: " + std::strerror(errno));
    }
    return key;
  }
  if (!fd) throw Error(ErrorKind::kUsage, name + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || st.st_size != static_cast<off_t>(key.size())) {
    throw Error(ErrorKind::kUsage, name + " must hold exactly 32 bytes");
  }
  if ((st.st_mode & 077) != 0) throw Error(ErrorKind::kUsage, name + " may be read by others; chmod 600 it");
  if (::read(fd.get(), key.data(), key.size()) != static_cast<ssize_t>(key.size())) {
    throw Error(ErrorKind::kUsage, name + ": cannot read: " + std::strerror(errno));
  }
  return key;
}

GatewayKeys GatewayKeys::load(const GatewayConfig& config) {
  GatewayKeys keys;
  if (!config.sse_master_key.empty()) keys.set_master(load_key_file(config.sse_master_key, "sse_master_key"));
  for (const auto& [id, path] : config.kms_keys) keys.add_kms_key(id, load_key_file(path, "[kms] " + id));
  keys.set_default_kms_key(config.kms_default_key);
  return keys;
}

const engine::Key256* GatewayKeys::kms_key(const std::string& id) const {
  const auto it = kms_.find(id);
  return it == kms_.end() ? nullptr : &it->second;
}

}  // namespace keel::gateway
