#include "engine/sealed_object.h"

#include "util/error.h"

namespace keel::engine {

Bytes seal_object(std::string_view magic, const Key256& key, ByteView body, ByteView associated) {
  Bytes object(magic.begin(), magic.end());
  seal(key, body, associated, object);
  return object;
}

Bytes open_object(std::string_view magic, std::string_view kind, const Key256& key, ByteView object,
                  ByteView associated, const std::string& what) {
  if (object.size() < magic.size() || as_chars(object.first(magic.size())) != magic) {
    throw Error(ErrorKind::kIntegrity, what + ": not a keel " + std::string(kind));
  }
  return open_sealed(key, object.subspan(magic.size()), associated, what);
}

std::optional<Id> id_from_key(const std::string& key) {
  std::string name = key.substr(key.rfind('/') + 1);
  if (name.size() != 2 * Id::kSize) return std::nullopt;
  try {
    return Id::from_hex(name);
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::vector<ListedId> list_object_ids_modified(targets::Target& target, std::string_view prefix) {
  std::vector<ListedId> listed;
  target.list(std::string(prefix), [&](const targets::ObjectInfo& o) {
    if (std::optional<Id> id = id_from_key(o.key)) listed.push_back({*id, o.modified_unix});
  });
  return listed;
}

std::vector<Id> list_object_ids(targets::Target& target, std::string_view prefix) {
  std::vector<Id> ids;
  for (const ListedId& listed : list_object_ids_modified(target, prefix)) ids.push_back(listed.id);
  return ids;
}

std::optional<Bytes> read_object(targets::Target& target, const std::string& key, std::string_view magic,
                                 std::string_view kind, const Key256& data_key, ByteView associated,
                                 const std::string& what) {
  Bytes object;
  try {
    object = target.get(key);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kNotFound) return std::nullopt;
    throw;
  }
  return open_object(magic, kind, data_key, object, associated, what);
}

}  // namespace keel::engine
