#include "gateway/raw_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <system_error>

#include "util/error.h"
#include "util/id.h"

namespace keel::gateway {

namespace {

namespace fs = std::filesystem;

// Creates `dir` and the missing directories above it, fsyncing the parent of
// each one created: a file fsync'd into data/xx is only durable once data/xx
// itself is reachable after a power loss. One mkdir(2) when `dir` exists.
void make_dirs(const std::string& dir) {
  const std::string parent = fs::path(dir).parent_path().string();
  if (::mkdir(dir.c_str(), 0755) != 0) {
    if (errno == EEXIST) return;
    if (errno != ENOENT || parent.empty() || parent == dir) throw_errno("gateway: cannot create directory " + dir, errno);
    make_dirs(parent);
    // EEXIST: another request created it meanwhile and may not have synced
    // its parent yet, so this one syncs too rather than return early.
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) throw_errno("gateway: cannot create directory " + dir, errno);
  }
  fsync_dir(parent.empty() ? "." : parent);
}

std::string new_name() {
  const std::string id = Id::random().hex().substr(0, 32);
  return "data/" + id.substr(0, 2) + "/" + id;
}

// Reads a stretch of an object from its segment files, opened up front so
// that an overwrite committed meanwhile (which unlinks them) cannot break it.
class SegmentReader final : public BodyProducer {
 public:
  explicit SegmentReader(uint64_t length) : left_(length) {}

  void add(UniqueFd fd, uint64_t offset, uint64_t length, std::string path) {
    pieces_.push_back({std::move(fd), offset, length, std::move(path)});
  }

  size_t read(std::span<uint8_t> out) override {
    size_t total = 0;
    while (total < out.size() && left_ > 0 && next_ < pieces_.size()) {
      Piece& piece = pieces_[next_];
      const size_t want = static_cast<size_t>(std::min<uint64_t>({out.size() - total, piece.left, left_}));
      const size_t got = pread_full(piece.fd.get(), out.subspan(total, want), static_cast<off_t>(piece.offset), piece.path);
      if (got != want) throw Error(ErrorKind::kTargetIo, piece.path + ": shorter than its recorded length");
      piece.offset += got;
      piece.left -= got;
      left_ -= got;
      total += got;
      if (piece.left == 0) ++next_;
    }
    return total;
  }

 private:
  struct Piece {
    UniqueFd fd;
    uint64_t offset;
    uint64_t left;
    std::string path;
  };
  std::vector<Piece> pieces_;
  size_t next_ = 0;
  uint64_t left_;
};

}  // namespace

class RawFiles::FileWriter final : public BucketStorage::Writer {
 public:
  FileWriter(const RawFiles& files, std::string name)
      : files_(files), name_(std::move(name)), temp_path_(files.root_ + "/tmp/" + fs::path(name_).filename().string()) {
    fd_ = open_or_throw(temp_path_, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  }

  ~FileWriter() override {
    if (!committed_) ::unlink(temp_path_.c_str());
  }

  void write(ByteView data) override {
    write_all(fd_.get(), data, temp_path_);
    size_ += data.size();
  }

  uint64_t size() const override { return size_; }

  std::string commit() override {
    fsync_or_throw(fd_.get(), temp_path_);
    fd_.reset();
    const std::string final_path = files_.path(name_);
    const std::string dir = fs::path(final_path).parent_path().string();
    make_dirs(dir);
    if (::rename(temp_path_.c_str(), final_path.c_str()) != 0) {
      throw_errno("rename " + temp_path_ + " to " + final_path, errno);
    }
    committed_ = true;
    fsync_dir(dir);
    return name_;
  }

 private:
  const RawFiles& files_;
  std::string name_;  // data/xx/id
  std::string temp_path_;
  UniqueFd fd_;
  uint64_t size_ = 0;
  bool committed_ = false;
};

RawFiles::RawFiles(std::string root) : root_(std::move(root)) {
  make_dirs(root_ + "/data");
  make_dirs(root_ + "/tmp");
}

std::unique_ptr<BucketStorage::Writer> RawFiles::create() { return std::make_unique<FileWriter>(*this, new_name()); }

std::unique_ptr<BodyProducer> RawFiles::read(const std::vector<Segment>& segments, uint64_t first, uint64_t length) {
  auto reader = std::make_unique<SegmentReader>(length);
  uint64_t skip = first;
  for (const auto& segment : segments) {
    if (skip >= segment.length) {
      skip -= segment.length;
      continue;
    }
    reader->add(open(segment.file), skip, segment.length - skip, path(segment.file));
    skip = 0;
  }
  return reader;
}

UniqueFd RawFiles::open(const std::string& file) const { return open_or_throw(path(file), O_RDONLY | O_CLOEXEC); }

void RawFiles::remove(const std::string& file) noexcept { ::unlink(path(file).c_str()); }

size_t RawFiles::remove_orphans(const std::set<std::string>& referenced) {
  size_t removed = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root_ + "/tmp", ec)) {
    removed += fs::remove(entry.path(), ec) ? 1 : 0;
  }
  // Names are data/<xx>/<id>: built from the two levels walked, not by
  // fs::relative, which canonicalises (an lstat per path component) each of
  // what may be millions of files.
  for (const auto& sub : fs::directory_iterator(root_ + "/data", ec)) {
    if (!sub.is_directory(ec)) continue;
    const std::string prefix = "data/" + sub.path().filename().string() + "/";
    for (const auto& entry : fs::directory_iterator(sub.path(), ec)) {
      if (!entry.is_regular_file(ec)) continue;
      if (!referenced.contains(prefix + entry.path().filename().string())) removed += fs::remove(entry.path(), ec) ? 1 : 0;
    }
  }
  return removed;
}

}  // namespace keel::gateway
