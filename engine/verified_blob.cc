#include "engine/verified_blob.h"

#include "engine/content.h"
#include "engine/crypto.h"
#include "util/error.h"

namespace keel::engine {
namespace {

// One copy, opened and checked against its id: its plaintext, or why not.
struct CopyRead {
  Bytes raw;
  std::optional<std::string> failure;
};

CopyRead read_copy(Repository& repo, const catalog::BlobLocation& copy) {
  class Sink : public BlobSink {
   public:
    void deliver(size_t, ByteView data) override { read.raw.assign(data.begin(), data.end()); }
    void fail(size_t, const Error& error) override { read.failure = error.what(); }
    CopyRead read;
  } sink;
  const std::vector<PackRange> ranges = plan_reads(std::span(&copy, 1), 0, copy.blob.stored_length);
  repo.content().read(std::span(&copy, 1), ranges, ReadOptions{.readers = 1}, sink);
  if (!sink.read.failure && keyed_id(repo.keys().id, sink.read.raw) != copy.blob.id) {
    sink.read.failure = "the copy in pack " + copy.pack.hex() + " does not hash to its id";
  }
  return std::move(sink.read);
}

}  // namespace

std::optional<std::string> copy_is_not_blob(Repository& repo, const catalog::BlobLocation& copy) {
  return read_copy(repo, copy).failure;
}

Bytes read_verified_blob(Repository& repo, const Id& id) {
  std::string failures;
  auto failed = [&](const std::string& why) { failures += (failures.empty() ? "" : "; ") + why; };
  std::optional<Id> preferred;
  try {
    Bytes raw = repo.read_blob(id);  // finds a pack another host's prune deleted meanwhile
    if (keyed_id(repo.keys().id, raw) == id) return raw;
    if (std::optional<catalog::BlobLocation> loc = repo.catalog().find_blob(id)) preferred = loc->pack;
    failed("the copy in pack " + (preferred ? preferred->hex() : std::string("?")) + " does not hash to its id");
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kIntegrity) throw;
    failed(e.what());
  }
  for (const catalog::PackRecord& pack : repo.catalog().list_packs()) {
    if (pack.id == preferred) continue;
    for (catalog::BlobRecord& b : repo.catalog().blobs_in_pack(pack.id)) {
      if (b.id != id) continue;
      CopyRead copy = read_copy(repo, catalog::BlobLocation{pack.id, std::move(b)});
      if (!copy.failure) return std::move(copy.raw);
      failed(*copy.failure);
      break;
    }
  }
  throw Error(ErrorKind::kIntegrity, "blob " + id.hex() + ": no copy is that blob (" + failures + ")");
}

}  // namespace keel::engine
