// The files of a raw-mode bucket: object and part bytes as plain files under
// the bucket's directory, "data/<xx>/<random id>" (the segment reference). A
// file is written under tmp/, fsync'd and renamed into data/ (directory
// fsync'd, and so is the parent of a directory made on the way) before its
// name is committed to the metadata database; files no committed record names
// are orphans of a crash and are removed at start-up.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "gateway/bucket_storage.h"
#include "util/bytes.h"
#include "util/fd.h"

namespace keel::gateway {

class RawFiles final : public BucketStorage {
 public:
  // Creates the directories when missing. Throws Error(kTargetIo).
  explicit RawFiles(std::string root);

  std::unique_ptr<Writer> create() override;
  std::unique_ptr<BodyProducer> read(const std::vector<Segment>& segments, uint64_t first, uint64_t length) override;
  void remove(const std::string& file) noexcept override;
  // Removes temporary files and data files that `referenced` does not name.
  size_t remove_orphans(const std::set<std::string>& referenced) override;
  std::string capacity_path() const override { return root_; }

 private:
  class FileWriter;
  UniqueFd open(const std::string& file) const;
  std::string path(const std::string& file) const { return root_ + "/" + file; }
  std::string root_;
};

}  // namespace keel::gateway
