#include "gateway/raw_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "util/error.h"
#include "util/id.h"

namespace keel::gateway {

namespace {

namespace fs = std::filesystem;

void make_dirs(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(ErrorKind::kTargetIo, "gateway: cannot create directory " + dir + ": " + ec.message());
}

std::string new_name() {
  const std::string id = Id::random().hex().substr(0, 32);
  return "data/" + id.substr(0, 2) + "/" + id;
}

}  // namespace

RawFiles::RawFiles(std::string root) : root_(std::move(root)) {
  make_dirs(root_ + "/data");
  make_dirs(root_ + "/tmp");
}

RawFiles::Writer::Writer(const RawFiles& files, std::string name)
    : files_(&files), name_(std::move(name)), temp_path_(files.root_ + "/tmp/" + fs::path(name_).filename().string()) {
  fd_ = open_or_throw(temp_path_, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
}

RawFiles::Writer::~Writer() {
  if (!committed_ && !temp_path_.empty()) ::unlink(temp_path_.c_str());
}

void RawFiles::Writer::write(ByteView data) {
  write_all(fd_.get(), data, temp_path_);
  size_ += data.size();
}

std::string RawFiles::Writer::commit() {
  fsync_or_throw(fd_.get(), temp_path_);
  fd_.reset();
  const std::string final_path = files_->path(name_);
  const std::string dir = fs::path(final_path).parent_path().string();
  make_dirs(dir);
  if (::rename(temp_path_.c_str(), final_path.c_str()) != 0) throw_errno("rename " + temp_path_ + " to " + final_path, errno);
  committed_ = true;
  fsync_dir(dir);
  return name_;
}

RawFiles::Writer RawFiles::create() const { return Writer(*this, new_name()); }

void RawFiles::Writer::append_from(const RawFiles& source, const std::string& file, uint64_t offset, uint64_t length,
                                   const std::function<void(ByteView)>& observe) {
  constexpr size_t kBuffer = 1 << 20;
  const UniqueFd in = source.open(file);
  const std::string in_path = source.path(file);
  Bytes buffer(static_cast<size_t>(std::min<uint64_t>(kBuffer, std::max<uint64_t>(length, 1))));
  for (uint64_t done = 0; done < length;) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(buffer.size(), length - done));
    const size_t got = pread_full(in.get(), std::span(buffer).first(want), static_cast<off_t>(offset + done), in_path);
    if (got != want) throw Error(ErrorKind::kTargetIo, in_path + ": shorter than its recorded length");
    const ByteView piece(buffer.data(), got);
    if (observe) observe(piece);
    write(piece);
    done += got;
  }
}

std::string RawFiles::copy(const RawFiles& source, const std::string& file, uint64_t length) const {
  Writer writer = create();
  writer.append_from(source, file, 0, length);
  return writer.commit();
}

UniqueFd RawFiles::open(const std::string& file) const { return open_or_throw(path(file), O_RDONLY | O_CLOEXEC); }

void RawFiles::remove(const std::string& file) const noexcept { ::unlink(path(file).c_str()); }

size_t RawFiles::remove_orphans(const std::set<std::string>& referenced) const {
  size_t removed = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root_ + "/tmp", ec)) {
    removed += fs::remove(entry.path(), ec) ? 1 : 0;
  }
  for (const auto& entry : fs::recursive_directory_iterator(root_ + "/data", ec)) {
    if (!entry.is_regular_file(ec)) continue;
    const std::string name = fs::relative(entry.path(), root_, ec).string();
    if (!referenced.contains(name)) removed += fs::remove(entry.path(), ec) ? 1 : 0;
  }
  return removed;
}

}  // namespace keel::gateway
