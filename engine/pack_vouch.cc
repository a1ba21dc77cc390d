#include "engine/pack_vouch.h"

#include <algorithm>
#include <vector>

#include "engine/crypto.h"
#include "engine/pack.h"
#include "util/codec.h"
#include "util/text.h"

namespace keel::engine {
namespace {

Id vouch_of(const Key256& data_key, const Id& pack, std::span<const catalog::BlobRecord> blobs) {
  std::vector<catalog::BlobRecord> sorted(blobs.begin(), blobs.end());
  std::sort(sorted.begin(), sorted.end(), [](const catalog::BlobRecord& a, const catalog::BlobRecord& b) {
    return a.offset != b.offset ? a.offset < b.offset : a.id < b.id;
  });
  Encoder e;
  e.str("keel pack vouch");
  e.id(pack);
  e.varint(sorted.size());
  for (const catalog::BlobRecord& b : sorted) encode_blob_record(e, b);
  return keyed_id(vouch_key(data_key), e.take());
}

}  // namespace

Key256 vouch_key(const Key256& data_key) {
  const Id id = keyed_id(data_key, as_bytes(std::string_view("keel pack vouch key")));
  Key256 key;
  std::copy(id.view().begin(), id.view().end(), key.begin());
  return key;
}

std::optional<Id> pack_vouch(const MasterKeys& keys, const Id& pack, std::span<const catalog::BlobRecord> blobs) {
  if (keys.format < 2 || !keys.full()) return std::nullopt;
  return vouch_of(keys.data, pack, blobs);
}

bool pack_vouched(const MasterKeys& keys, const Id& pack, std::span<const catalog::BlobRecord> blobs,
                  const std::optional<Id>& vouch) {
  if (keys.format < 2) return true;
  if (!keys.full() || !vouch) return false;
  const Id expected = vouch_of(keys.data, pack, blobs);
  return constant_time_equal(as_chars(expected.view()), as_chars(vouch->view()));
}

}  // namespace keel::engine
