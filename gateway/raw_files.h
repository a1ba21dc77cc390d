// The files of a raw-mode bucket: object and part bytes as plain files under
// the bucket's directory, "data/<xx>/<random id>". A file is written under
// tmp/, fsync'd and renamed into data/ before its name is committed to the
// metadata database; files no committed record names are orphans of a crash
// and are removed at start-up.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>

#include "util/bytes.h"
#include "util/fd.h"

namespace keel::gateway {

class RawFiles {
 public:
  // Creates the directories when missing. Throws Error(kTargetIo).
  explicit RawFiles(std::string root);

  class Writer {
   public:
    Writer(Writer&&) noexcept = default;
    ~Writer();  // removes the temporary file unless committed
    void write(ByteView data);
    // Appends `length` bytes from `offset` of `source`'s `file`; `observe`
    // sees them as they pass (for an ETag).
    void append_from(const RawFiles& source, const std::string& file, uint64_t offset, uint64_t length,
                     const std::function<void(ByteView)>& observe = {});
    uint64_t size() const { return size_; }
    // Makes the bytes durable under their final name and returns it.
    std::string commit();

   private:
    friend class RawFiles;
    Writer(const RawFiles& files, std::string name);
    const RawFiles* files_;
    std::string name_;  // data/xx/id
    std::string temp_path_;
    UniqueFd fd_;
    uint64_t size_ = 0;
    bool committed_ = false;
  };

  Writer create() const;
  // A new file here with a copy of `source`'s `file`.
  std::string copy(const RawFiles& source, const std::string& file, uint64_t length) const;
  UniqueFd open(const std::string& file) const;
  // Best effort: a file left behind is an orphan for the next start-up.
  void remove(const std::string& file) const noexcept;
  // Removes temporary files and data files that `referenced` does not name.
  // Returns how many files went.
  size_t remove_orphans(const std::set<std::string>& referenced) const;

  const std::string& root() const { return root_; }

 private:
  std::string path(const std::string& file) const { return root_ + "/" + file; }
  std::string root_;
};

}  // namespace keel::gateway
