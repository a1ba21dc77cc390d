#include "agents/stdin/stdin_source.h"

#include <unistd.h>

#include <atomic>
#include <ctime>

#include "agents/owner_names.h"
#include "util/error.h"
#include "util/fd.h"

namespace keel::agents::stdin_stream {
namespace {

class StreamReader : public engine::FileReader {
 public:
  StreamReader(int fd, std::string label, std::function<void()> at_end)
      : fd_(fd), label_(std::move(label)), at_end_check_(std::move(at_end)) {}

  engine::Extent read(std::span<uint8_t> buf) override {
    if (buf.empty()) throw Error(ErrorKind::kFailure, "read " + label_ + ": empty buffer");
    if (at_end_) return {position_, 0};
    size_t got = read_full(fd_, buf, "read " + label_);
    // A short read means EOF was seen; reading again would block on a
    // terminal after ^D.
    if (got < buf.size()) {
      at_end_ = true;
      if (at_end_check_) at_end_check_();
    }
    if (got == 0) return {position_, 0};
    engine::Extent extent{position_, got};
    position_ += got;
    return extent;
  }

 private:
  int fd_;
  std::string label_;
  std::function<void()> at_end_check_;
  uint64_t position_ = 0;
  bool at_end_ = false;
};

class StreamSource : public engine::Source {
 public:
  StreamSource(int fd, std::string name, std::function<void()> at_end)
      : fd_(fd), name_(std::move(name)), at_end_(std::move(at_end)) {}

  std::vector<std::string> paths() const override { return {label()}; }
  bool all_or_nothing() const override { return true; }

  void walk(engine::SourceSink& sink) override {
    timespec now;
    ::clock_gettime(CLOCK_REALTIME, &now);
    OwnerNames owners;
    engine::NodeMeta root;
    root.type = engine::NodeType::kDir;
    root.mode = 0755;
    root.uid = ::getuid();
    root.gid = ::getgid();
    root.user = owners.user(root.uid);
    root.group = owners.group(root.gid);
    root.mtime_ns = root.atime_ns = root.ctime_ns = static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;

    engine::NodeMeta file = root;
    file.name = name_;
    file.type = engine::NodeType::kFile;
    file.mode = 0644;

    auto opened = std::make_shared<std::atomic<bool>>(false);
    engine::OpenFile open = [fd = fd_, label = label(), at_end = at_end_, opened]() -> std::unique_ptr<engine::FileReader> {
      if (opened->exchange(true)) throw Error(ErrorKind::kFailure, label + ": a stream can be read only once");
      return std::make_unique<StreamReader>(fd, label, at_end);
    };
    sink.enter_dir(root);
    sink.add_node(file, open);
    sink.leave_dir();
  }

 private:
  std::string label() const { return "stdin:" + name_; }

  int fd_;
  std::string name_;
  std::function<void()> at_end_;
};

}  // namespace

std::unique_ptr<engine::Source> make_stream_source(int fd, std::string name, std::function<void()> at_end) {
  if (name.empty() || name == "." || name == ".." || name.find_first_of(std::string("/\0", 2)) != std::string::npos) {
    throw Error(ErrorKind::kUsage, "stream name '" + name + "' must be a file name: not empty, no '/', not . or ..");
  }
  return std::make_unique<StreamSource>(fd, std::move(name), std::move(at_end));
}

}  // namespace keel::agents::stdin_stream
