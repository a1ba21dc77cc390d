#include "engine/condemnation.h"

#include <algorithm>
#include <tuple>

#include "engine/sealed_object.h"
#include "util/codec.h"
#include "util/error.h"

namespace keel::engine {
namespace {

constexpr std::string_view kCondemnationMagic = "KEELCDM1";

Bytes encode_condemnation(const Condemnation& c) {
  Encoder e;
  e.u8(1);
  e.id(c.id);
  e.svarint(c.condemned_unix);
  e.str(c.host);
  encode_ids(e, c.packs);
  e.u8(c.running_backups ? 1 : 0);
  if (c.running_backups) encode_ids(e, *c.running_backups);
  return e.take();
}

Condemnation decode_condemnation(ByteView body, const std::string& what) {
  Decoder d(body, what);
  if (d.u8() != 1) d.fail("unsupported condemnation version");
  Condemnation c;
  c.id = d.id();
  c.condemned_unix = d.svarint();
  c.host = d.str();
  c.packs = decode_ids(d);
  if (d.u8()) c.running_backups = decode_ids(d);
  d.expect_done();
  return c;
}

}  // namespace

bool Condemnation::ran_when_written(const LeaseRecord& lease) const {
  // Both clocks tell seconds. A backup writes its lease, then lists the
  // condemnations, so a start claimed in the very second the record was
  // written counts; the lease object's own time counts only when earlier
  // (a lease written just after the record, in the same second, would count
  // otherwise, and its claimed start decides that case).
  if (lease.created_unix <= modified_unix || lease.modified_unix < modified_unix) return true;
  return running_backups && std::find(running_backups->begin(), running_backups->end(), lease.id) != running_backups->end();
}

std::string ignored_condemnation(const std::string& why) {
  return why + ": ignored, it condemns nothing (damaged, or not written by keel: credentials that may only create "
               "objects can still write one); keel check reports it, keel repair moves it aside";
}

std::string condemnation_key(const Id& record) { return std::string(kCondemnedPrefix) + record.hex(); }

void put_condemnation(targets::Target& target, const Key256& key, const Condemnation& record) {
  target.put(condemnation_key(record.id), seal_object(kCondemnationMagic, key, encode_condemnation(record), record.id.view()));
}

std::vector<Condemnation> list_condemnations(targets::Target& target, const Key256& key,
                                             const OnDamagedRecord& on_damaged) {
  std::vector<Condemnation> records;
  for (const auto& [id, modified_unix] : list_object_ids_modified(target, kCondemnedPrefix)) {
    const std::string object_key = condemnation_key(id);
    const std::string what = target.describe() + "/" + object_key;
    try {
      std::optional<Bytes> body = read_object(target, object_key, kCondemnationMagic, "condemnation", key, id.view(), what);
      if (!body) continue;  // removed since it was listed
      Condemnation c = decode_condemnation(*body, what);
      if (c.id != id) throw Error(ErrorKind::kIntegrity, what + ": record names another condemnation");
      c.modified_unix = modified_unix;
      records.push_back(std::move(c));
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kIntegrity) throw;
      on_damaged(object_key, e.what());
    }
  }
  std::sort(records.begin(), records.end(), [](const Condemnation& a, const Condemnation& b) {
    return std::tie(a.condemned_unix, a.id) < std::tie(b.condemned_unix, b.id);
  });
  return records;
}

}  // namespace keel::engine
