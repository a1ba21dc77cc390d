// Records stored whole on the target (config, snapshots, leases,
// condemnations): an 8-byte magic naming the kind, then a sealed box of the
// record under the data key. The associated data is the object's id (or a
// fixed string), so boxes cannot be swapped between objects.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/crypto.h"
#include "targets/target.h"
#include "util/bytes.h"
#include "util/id.h"

namespace keel::engine {

Bytes seal_object(std::string_view magic, const Key256& key, ByteView body, ByteView associated);

// The record inside `object`. Throws Error(kIntegrity) naming `what` if it
// does not start with `magic` ("not a keel <kind>") or does not open.
Bytes open_object(std::string_view magic, std::string_view kind, const Key256& key, ByteView object,
                  ByteView associated, const std::string& what);

// The id an object is named by ("packs/3f/3fa2..." -> 3fa2...); nullopt for
// foreign files (a stray upload, an editor's backup copy).
std::optional<Id> id_from_key(const std::string& key);

// Reads and opens the object at `key`; nullopt if there is none (removed
// since it was listed).
std::optional<Bytes> read_object(targets::Target& target, const std::string& key, std::string_view magic,
                                 std::string_view kind, const Key256& data_key, ByteView associated,
                                 const std::string& what);

// The ids of the objects under `prefix` (foreign names are skipped).
std::vector<Id> list_object_ids(targets::Target& target, std::string_view prefix);

// The same, each with its Last-Modified by the store's clock
// (targets::ObjectInfo::modified_unix).
struct ListedId {
  Id id;
  int64_t modified_unix = 0;
};
std::vector<ListedId> list_object_ids_modified(targets::Target& target, std::string_view prefix);

}  // namespace keel::engine
