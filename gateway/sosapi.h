// Veeam's Smart Object Storage API (SOSAPI 1.0): Veeam Backup & Replication
// reads two XML objects under a fixed prefix in each bucket to learn what
// the store supports and how much room it has. The gateway generates them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace keel::gateway {

inline constexpr std::string_view kSosapiPrefix = ".system-d26a9498-cb7c-4a87-a44a-8ae204f5ba6c/";

enum class SosapiDocument { kSystem, kCapacity };

// Which document a key names, if any ("<prefix>system.xml", "<prefix>capacity.xml").
std::optional<SosapiDocument> sosapi_document(std::string_view key);

// system.xml: protocol version "1.0", the model name, capacity reporting on,
// upload sessions and IAM/STS off, 1 MiB blocks recommended.
std::string sosapi_system_xml();

// capacity.xml: the bucket's filesystem size and free space (statvfs of
// `path`) and the bytes the bucket's objects use. Throws Error(kTargetIo).
std::string sosapi_capacity_xml(const std::string& path, uint64_t used_bytes);

}  // namespace keel::gateway
