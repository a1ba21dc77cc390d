// A dedupe-mode bucket's bytes in a keel repository. A written stream is cut
// into chunks (FastCDC with the repository's parameters) that go through
// engine::ChunkStore: deduplicated against the repository, compressed,
// encrypted and packed; commit() returns once they are durable on the
// target and indexed. The segment reference is the list of the stream's
// chunks. Reads fetch the chunks a range needs, several ahead in parallel.
// Segments are never removed here: chunks belong to the repository, and
// `keel gateway gc` reclaims those no record needs (gateway_gc.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/chunk_store.h"
#include "engine/repository.h"
#include "gateway/bucket_storage.h"
#include "engine/repository_access.h"
#include "util/id.h"

namespace keel::gateway {

class DedupeStorage final : public BucketStorage {
 public:
  // `capacity_path`: the directory SOSAPI's capacity is measured on.
  DedupeStorage(std::shared_ptr<engine::ChunkStore> chunks, std::string capacity_path);

  std::unique_ptr<Writer> create() override;
  std::unique_ptr<BodyProducer> read(const std::vector<Segment>& segments, uint64_t first, uint64_t length) override;
  void remove(const std::string&) noexcept override {}
  size_t remove_orphans(const std::set<std::string>&) override { return 0; }
  std::string capacity_path() const override { return capacity_path_; }

 private:
  std::shared_ptr<engine::ChunkStore> chunks_;
  std::string capacity_path_;
};

// Opens the repository of dedupe buckets with the password from its
// password_env or password_file (Error(kUsage) naming `user`, the
// configuration section, when neither gives one), and indexes packs a crash
// left on the target unindexed.
std::unique_ptr<engine::Repository> open_bucket_repository(const engine::RepositoryAccess& access,
                                                           const std::string& user);

// One chunk of a dedupe segment.
struct ChunkPiece {
  Id id;
  uint32_t length = 0;
};
// A dedupe segment reference: "k1:" and the hex of the chunk count, then per
// chunk its id and length. Throws Error(kIntegrity) for a malformed one.
std::string encode_chunk_list(const std::vector<ChunkPiece>& chunks);
std::vector<ChunkPiece> decode_chunk_list(const std::string& segment);

}  // namespace keel::gateway
