#include "targets/local/local_target.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <filesystem>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <thread>

#include "targets/local/direct_file.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/host.h"
#include "util/id.h"

namespace fs = std::filesystem;

namespace keel::targets::local {
namespace {

constexpr const char* kTmpDir = "tmp";
// Whole objects smaller than this (snapshots, key slots, the config) are
// written through the page cache: O_DIRECT saves nothing on a few blocks.
constexpr size_t kDirectMinPut = size_t{1} << 20;

constexpr std::string_view kUploadSuffix = ".upload";

// This host's name as it may stand in a file name.
std::string host_for_file_name() {
  std::string host = local_hostname();
  for (char& c : host) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') c = '_';
  }
  return host;
}

// tmp/<random>-<pid>-<host>.upload: the process that writes it, so the next
// command on this host can remove it once that process is gone.
std::string upload_name() {
  return Id::random().hex() + "-" + std::to_string(::getpid()) + "-" + host_for_file_name() + std::string(kUploadSuffix);
}

// The pid in an upload_name() written on this host; nothing for others'
// uploads and for names of another form.
std::optional<int64_t> upload_pid_here(const std::string& name) {
  if (!name.ends_with(kUploadSuffix)) return std::nullopt;
  const std::string stem = name.substr(0, name.size() - kUploadSuffix.size());
  const size_t first = stem.find('-');
  const size_t second = first == std::string::npos ? first : stem.find('-', first + 1);
  if (second == std::string::npos || stem.substr(second + 1) != host_for_file_name()) return std::nullopt;
  const std::string pid = stem.substr(first + 1, second - first - 1);
  if (pid.empty() || pid.size() > 10 || pid.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoll(pid);
}

class LocalTarget;

class LocalUpload : public Upload {
 public:
  LocalUpload(LocalTarget& target, std::string key, std::string tmp_path, bool direct)
      : target_(target), key_(std::move(key)), tmp_path_(std::move(tmp_path)),
        file_(std::make_unique<DirectFile>(tmp_path_, direct)) {}
  ~LocalUpload() override {
    if (file_) abort();
  }

  void write_part(uint32_t part_number, uint64_t offset, ByteView data) override {
    if (!file_) throw Error(ErrorKind::kFailure, "write_part after commit or abort on " + key_);
    try {
      file_->write(data, offset);
    } catch (const Error& e) {
      throw Error(e.kind(), "part " + std::to_string(part_number) + " of " + key_ + ": " + e.what());
    }
  }

  void commit() override;

  void abort() noexcept override {
    file_.reset();
    ::unlink(tmp_path_.c_str());
  }

 private:
  LocalTarget& target_;
  std::string key_;
  std::string tmp_path_;
  std::unique_ptr<DirectFile> file_;
};

class LocalTarget : public Target {
 public:
  explicit LocalTarget(fs::path root) : root_(std::move(root)) {}

  std::string describe() const override { return root_.string(); }

  std::unique_ptr<Upload> start_upload(const std::string& key) override { return start(key, /*direct=*/true); }

  void put(const std::string& key, ByteView data) override {
    auto upload = start(key, data.size() >= kDirectMinPut);
    upload->write_part(1, 0, data);
    upload->commit();
  }

  size_t get_range(const std::string& key, uint64_t offset, std::span<uint8_t> out) override {
    check_key(key);
    std::string path = path_of(key);
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) throw Error(ErrorKind::kNotFound, path + ": no such object");
      throw_errno("open " + path, errno);
    }
    UniqueFd owned(fd);
    return pread_full(fd, out, static_cast<off_t>(offset), "read " + path);
  }

  // Reader threads also decrypt, decompress, verify and write what they
  // read, so past two per core they only share the cores, and each more
  // holds its own range buffer, opening buffers and early pieces: on two
  // cores the adaptive limit climbed to 6-8, which restored no faster than 4
  // and held a third more memory (docs/performance.md, issue 20, seventh step).
  size_t read_concurrency() const override { return 2 * std::max(1u, std::thread::hardware_concurrency()); }

  std::optional<ObjectInfo> head(const std::string& key) override {
    check_key(key);
    struct stat st;
    std::string path = path_of(key);
    if (::stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
      throw_errno("stat " + path, errno);
    }
    return ObjectInfo{key, static_cast<uint64_t>(st.st_size)};
  }

  void list(const std::string& prefix, const std::function<void(const ObjectInfo&)>& fn) override {
    // Walk the deepest directory that the prefix names in full, then filter.
    std::string dir_part = prefix.substr(0, prefix.rfind('/') == std::string::npos ? 0 : prefix.rfind('/'));
    fs::path start = dir_part.empty() ? root_ : root_ / dir_part;
    std::error_code ec;
    if (!fs::is_directory(start, ec)) return;
    for (auto it = fs::recursive_directory_iterator(start, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      const fs::path& p = it->path();
      std::string rel = p.lexically_relative(root_).generic_string();
      if (rel == kTmpDir) {
        it.disable_recursion_pending();
        continue;
      }
      if (!it->is_regular_file(ec)) continue;
      if (rel.compare(0, prefix.size(), prefix) != 0) continue;
      // One stat for size and mtime, as file_size() alone cost; a file
      // removed meanwhile is skipped.
      struct stat st;
      if (::stat(p.c_str(), &st) != 0) {
        if (errno == ENOENT) continue;
        throw_errno("stat " + p.string(), errno);
      }
      fn(ObjectInfo{.key = rel, .size = static_cast<uint64_t>(st.st_size), .modified_unix = st.st_mtim.tv_sec});
    }
    if (ec) throw Error(ErrorKind::kTargetIo, "list " + start.string() + ": " + ec.message());
  }

  void remove(const std::string& key) override {
    check_key(key);
    std::string path = path_of(key);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) throw_errno("remove " + path, errno);
  }

  // Also, whatever their age, the uploads of processes of this host that no
  // longer run (killed, crashed): upload_name() records the writer.
  size_t remove_stale_uploads(std::chrono::seconds min_age) override {
    size_t removed = 0;
    std::error_code ec;
    auto now = fs::file_time_type::clock::now();
    for (const auto& entry : fs::directory_iterator(root_ / kTmpDir, ec)) {
      const std::optional<int64_t> pid = upload_pid_here(entry.path().filename().string());
      const bool writer_gone = pid && !process_running_here(*pid);
      auto modified = entry.last_write_time(ec);
      if (!writer_gone && (ec || now - modified < min_age)) continue;
      if (fs::remove(entry.path(), ec)) ++removed;
    }
    return removed;
  }

  // Publishes a finished temporary file under `key`.
  void publish(const std::string& tmp, const std::string& key) {
    fs::path dest = root_ / key;
    ensure_dir(dest.parent_path());
    if (::rename(tmp.c_str(), dest.c_str()) != 0) throw_errno("rename " + tmp + " to " + dest.string(), errno);
    fsync_dir(dest.parent_path().string());
  }

 private:
  std::unique_ptr<Upload> start(const std::string& key, bool direct) {
    check_key(key);
    std::string tmp = (root_ / kTmpDir / upload_name()).string();
    return std::make_unique<LocalUpload>(*this, key, tmp, direct);
  }

  std::string path_of(const std::string& key) const { return (root_ / key).string(); }

  static void check_key(const std::string& key) {
    if (key.empty() || key.front() == '/' || key.find("..") != std::string::npos) {
      throw Error(ErrorKind::kUsage, "invalid object key: " + key);
    }
  }

  // Creates a directory (and parents) once, fsyncing each parent so the new
  // entry survives a crash.
  void ensure_dir(const fs::path& dir) {
    {
      std::lock_guard lock(dirs_mu_);
      if (known_dirs_.count(dir.string())) return;
    }
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      ensure_dir(dir.parent_path());
      if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) throw_errno("mkdir " + dir.string(), errno);
      fsync_dir(dir.parent_path().string());
    }
    std::lock_guard lock(dirs_mu_);
    known_dirs_.insert(dir.string());
  }

  fs::path root_;
  std::mutex dirs_mu_;
  std::set<std::string> known_dirs_;
};

void LocalUpload::commit() {
  if (!file_) throw Error(ErrorKind::kFailure, "commit after commit or abort on " + key_);
  file_->finish();  // on failure the destructor removes the file
  fsync_or_throw(file_->fd(), tmp_path_);
  file_.reset();
  try {
    target_.publish(tmp_path_, key_);
  } catch (...) {
    ::unlink(tmp_path_.c_str());
    throw;
  }
}

}  // namespace

std::unique_ptr<Target> open_local_target(const std::string& root, bool create) {
  fs::path p = fs::absolute(root).lexically_normal();
  if (p.has_filename() == false) p = p.parent_path();
  std::error_code ec;
  if (create) {
    fs::create_directories(p / kTmpDir, ec);
    if (ec) throw Error(ErrorKind::kTargetIo, "create " + p.string() + ": " + ec.message());
  } else if (!fs::is_directory(p, ec)) {
    const fs::file_status status = fs::status(p, ec);
    if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory) {
      throw Error(ErrorKind::kTargetIo, p.string() + ": cannot be read: " + ec.message());
    }
    if (fs::exists(status)) {
      throw Error(ErrorKind::kRepository, p.string() + ": is a file, not a repository directory");
    }
    throw Error(ErrorKind::kRepository, p.string() + ": no such directory");
  } else {
    fs::create_directories(p / kTmpDir, ec);
  }
  return std::make_unique<LocalTarget>(p);
}

}  // namespace keel::targets::local
