#include <catch2/catch.hpp>

#include <fcntl.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>
#include <thread>

#include "agents/fs/exclude.h"
#include "agents/fs/file_reader.h"
#include "agents/fs/fs_source.h"
#include "agents/stdin/stdin_source.h"
#include "util/error.h"
#include "util/fault_injecting_file_system.h"
#include "util/fd.h"

using namespace keel;
using engine::Extent;
using engine::NodeMeta;
using engine::NodeType;

namespace {

constexpr uint64_t kMiB = 1024 * 1024;

const char* type_word(NodeType type) {
  switch (type) {
    case NodeType::kFile: return "file";
    case NodeType::kDir: return "dir";
    case NodeType::kSymlink: return "symlink";
    case NodeType::kFifo: return "fifo";
    case NodeType::kCharDevice: return "chr";
    case NodeType::kBlockDevice: return "blk";
    case NodeType::kSocket: return "socket";
  }
  return "?";
}

std::string join(const std::string& dir, const std::string& name) { return dir == "/" ? "/" + name : dir + "/" + name; }

// Logs a walk one line per event, paths rebuilt from the nesting, and reads
// every file through its reader, checking the extents' order.
class RecordingSink : public engine::SourceSink {
 public:
  bool read_content = true;
  size_t read_buffer = kMiB;
  std::function<void(const std::string& path)> on_enter;     // runs inside enter_dir
  std::function<void(const std::string& path)> before_open;  // runs before a file is opened

  std::vector<std::string> events;
  std::map<std::string, NodeMeta> nodes;  // directories and nodes by path
  std::map<std::string, std::string> contents;  // holes read as zeros, up to the EOF offset
  std::map<std::string, std::vector<Extent>> extents;  // data extents
  std::map<std::string, std::string> skip_reasons;
  std::map<std::string, Error> open_errors;
  std::vector<std::string> problems;  // contract violations

  void enter_dir(const NodeMeta& dir) override {
    std::string path = stack_.empty() ? "/" : join(stack_.back(), dir.name);
    if (stack_.empty() && !dir.name.empty()) problems.push_back("root named " + dir.name);
    if (dir.type != NodeType::kDir) problems.push_back(path + " entered but not a directory");
    stack_.push_back(path);
    events.push_back("enter " + path);
    nodes.insert_or_assign(path, dir);
    if (on_enter) on_enter(path);
  }

  void leave_dir() override {
    events.push_back("leave " + stack_.back());
    stack_.pop_back();
  }

  void add_node(const NodeMeta& meta, const engine::OpenFile& open) override {
    std::string path = join(stack_.back(), meta.name);
    std::string line = std::string(type_word(meta.type)) + " " + path;
    if (meta.type == NodeType::kSymlink) line += " -> " + meta.symlink_target;
    events.push_back(line);
    nodes.insert_or_assign(path, meta);
    if ((meta.type == NodeType::kFile) != static_cast<bool>(open)) problems.push_back(path + ": open set wrongly");
    if (meta.type == NodeType::kFile && read_content) read(path, open);
  }

  void skip(const std::string& path, const std::string& reason) override {
    events.push_back("skip " + path);
    skip_reasons[path] = reason;
  }

 private:
  void read(const std::string& path, const engine::OpenFile& open) {
    if (before_open) before_open(path);
    try {
      std::unique_ptr<engine::FileReader> reader = open();
      std::vector<uint8_t> buf(read_buffer);
      std::string content;
      std::vector<Extent> found;
      for (;;) {
        Extent extent = reader->read(buf);
        if (extent.offset < content.size()) {
          problems.push_back(path + ": extent offset goes backwards");
          break;
        }
        content.resize(extent.offset, '\0');
        if (extent.length == 0) break;
        content.append(reinterpret_cast<const char*>(buf.data()), extent.length);
        found.push_back(extent);
      }
      contents[path] = std::move(content);
      extents[path] = std::move(found);
    } catch (const Error& e) {
      open_errors.insert_or_assign(path, e);
    }
  }

  std::vector<std::string> stack_;
};

// A temporary directory tree, world-readable so a test can walk it as
// another user, removed at the end.
class TempTree {
 public:
  TempTree() {
    char name[] = "/tmp/keel-fs-XXXXXX";
    REQUIRE(::mkdtemp(name) != nullptr);
    REQUIRE(::chmod(name, 0755) == 0);
    root = std::filesystem::canonical(name).string();
  }
  ~TempTree() {
    std::error_code ignored;
    std::filesystem::remove_all(root, ignored);
  }

  std::string path(const std::string& relative) const { return root + "/" + relative; }
  void dir(const std::string& relative) const { REQUIRE(::mkdir(path(relative).c_str(), 0755) == 0); }
  void file(const std::string& relative, const std::string& content) const {
    UniqueFd fd = open_or_throw(path(relative), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    write_all(fd.get(), as_bytes(content), relative);
  }
  void symlink(const std::string& target, const std::string& relative) const {
    REQUIRE(::symlink(target.c_str(), path(relative).c_str()) == 0);
  }

  std::string root;
};

// The events about `tree` and below, with its path written as "R".
std::vector<std::string> events_under(const RecordingSink& sink, const std::string& root) {
  std::vector<std::string> out;
  for (const std::string& event : sink.events) {
    size_t at = event.find(root);
    if (at == std::string::npos) continue;
    std::string rest = event.substr(at + root.size());
    if (!rest.empty() && rest.front() != '/' && rest.front() != ' ') continue;
    out.push_back(event.substr(0, at) + "R" + rest);
  }
  return out;
}

RecordingSink walk(const std::vector<std::string>& paths, agents::fs::FsOptions options = {}) {
  RecordingSink sink;
  agents::fs::make_fs_source(paths, std::move(options))->walk(sink);
  return sink;
}

// Extents as (offset, length) pairs, which Catch can compare and print.
std::vector<std::pair<uint64_t, uint64_t>> spans(const std::vector<Extent>& extents) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (const Extent& e : extents) out.emplace_back(e.offset, e.length);
  return out;
}
using Spans = std::vector<std::pair<uint64_t, uint64_t>>;

int64_t ns(const timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec; }

struct stat lstat_of(const std::string& path) {
  struct stat st;
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st;
}

void make_socket(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM, 0));
  REQUIRE(fd);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  REQUIRE(path.size() < sizeof address.sun_path);
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
}

// Runs `body` with `dir` as the working directory.
void in_directory(const std::string& dir, const std::function<void()>& body) {
  std::filesystem::path previous = std::filesystem::current_path();
  std::filesystem::current_path(dir);
  try {
    body();
  } catch (...) {
    std::filesystem::current_path(previous);
    throw;
  }
  std::filesystem::current_path(previous);
}

}  // namespace

TEST_CASE("fs source walks a tree in byte-wise name order with lstat metadata", "[fs]") {
  TempTree t;
  t.file("B.txt", "upper");
  t.dir("Zeta");
  t.file("Zeta/inner.txt", "inner");
  t.file("a.txt", "hello");
  t.dir("alpha");
  t.dir("alpha/nested");
  t.file("alpha/nested/deep.txt", "deep");
  t.symlink("missing-target", "dangling");
  t.file("empty", "");
  REQUIRE(::mkfifo(t.path("fifo").c_str(), 0640) == 0);
  t.file("hard1", "linked");
  REQUIRE(::link(t.path("hard1").c_str(), t.path("hard2").c_str()) == 0);
  t.symlink("a.txt", "link");
  make_socket(t.path("sock"));
  t.file("\xc3\xa9t\xc3\xa9.txt", "utf-8 name sorts after ASCII");
  REQUIRE(::chmod(t.path("a.txt").c_str(), 04751) == 0);

  RecordingSink sink = walk({t.root});

  CHECK(sink.problems.empty());
  CHECK(events_under(sink, t.root) == std::vector<std::string>{
                                          "enter R",
                                          "file R/B.txt",
                                          "enter R/Zeta",
                                          "file R/Zeta/inner.txt",
                                          "leave R/Zeta",
                                          "file R/a.txt",
                                          "enter R/alpha",
                                          "enter R/alpha/nested",
                                          "file R/alpha/nested/deep.txt",
                                          "leave R/alpha/nested",
                                          "leave R/alpha",
                                          "symlink R/dangling -> missing-target",
                                          "file R/empty",
                                          "fifo R/fifo",
                                          "file R/hard1",
                                          "file R/hard2",
                                          "symlink R/link -> a.txt",
                                          "socket R/sock",
                                          "file R/\xc3\xa9t\xc3\xa9.txt",
                                          "leave R",
                                      });

  // The tree hangs under its real ancestors, entered from the root "/".
  std::vector<std::string> ancestors;
  for (auto p = std::filesystem::path(t.root).parent_path(); ; p = p.parent_path()) {
    ancestors.insert(ancestors.begin(), p.string());
    if (p == p.root_path()) break;
  }
  REQUIRE(sink.events.size() == 20 + 2 * ancestors.size());
  for (size_t i = 0; i < ancestors.size(); ++i) {
    CHECK(sink.events[i] == "enter " + ancestors[i]);
    CHECK(sink.events[sink.events.size() - 1 - i] == "leave " + ancestors[i]);
    struct stat st = lstat_of(ancestors[i]);
    CHECK(sink.nodes[ancestors[i]].mode == (st.st_mode & 07777));
    CHECK(sink.nodes[ancestors[i]].inode == st.st_ino);
  }
  CHECK(sink.nodes["/"].name.empty());

  const NodeMeta& a = sink.nodes[t.path("a.txt")];
  struct stat st = lstat_of(t.path("a.txt"));
  CHECK(a.name == "a.txt");
  CHECK(a.type == NodeType::kFile);
  CHECK(a.mode == 04751);
  CHECK(a.uid == st.st_uid);
  CHECK(a.gid == st.st_gid);
  if (const passwd* pw = ::getpwuid(st.st_uid)) CHECK(a.user == pw->pw_name);
  CHECK(a.size == 5);
  CHECK(a.inode == st.st_ino);
  CHECK(a.device == st.st_dev);
  CHECK(a.nlink == 1);
  CHECK(a.mtime_ns == ns(st.st_mtim));
  CHECK(a.ctime_ns == ns(st.st_ctim));

  CHECK(sink.contents[t.path("a.txt")] == "hello");
  CHECK(sink.contents[t.path("alpha/nested/deep.txt")] == "deep");
  CHECK(sink.contents[t.path("empty")].empty());
  CHECK(sink.extents[t.path("empty")].empty());
  CHECK(sink.open_errors.empty());

  const NodeMeta& hard1 = sink.nodes[t.path("hard1")];
  const NodeMeta& hard2 = sink.nodes[t.path("hard2")];
  CHECK(hard1.inode == hard2.inode);
  CHECK(hard1.nlink == 2);
  CHECK(hard2.nlink == 2);
  CHECK(sink.contents[t.path("hard2")] == "linked");

  CHECK(sink.nodes[t.path("fifo")].mode == 0640);
  CHECK(sink.nodes[t.path("link")].size == 0);
  CHECK(sink.nodes[t.path("alpha")].type == NodeType::kDir);
  CHECK(sink.nodes[t.path("alpha")].mtime_ns == ns(lstat_of(t.path("alpha")).st_mtim));
  CHECK(sink.skip_reasons.empty());
}

TEST_CASE("fs source reads files in large extents and skips holes", "[fs]") {
  TempTree t;
  std::string big(20 * kMiB, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 7919) >> 5);
  t.file("big", big);

  const uint64_t sparse_size = 64 * kMiB;
  {
    UniqueFd fd = open_or_throw(t.path("sparse"), O_WRONLY | O_CREAT, 0644);
    REQUIRE(::ftruncate(fd.get(), static_cast<off_t>(sparse_size)) == 0);
    pwrite_all(fd.get(), as_bytes(std::string(4096, 'a')), 0, "sparse");
    pwrite_all(fd.get(), as_bytes(std::string(4096, 'b')), 32 * kMiB, "sparse");
  }

  RecordingSink sink;
  sink.read_buffer = 8 * kMiB;
  agents::fs::make_fs_source({t.root}, {})->walk(sink);
  CHECK(sink.problems.empty());

  CHECK(sink.contents[t.path("big")].size() == big.size());
  CHECK((sink.contents[t.path("big")] == big));  // parenthesized: Catch would print megabytes
  CHECK(spans(sink.extents[t.path("big")]) == Spans{{0, 8 * kMiB}, {8 * kMiB, 8 * kMiB}, {16 * kMiB, 4 * kMiB}});

  std::string expected(sparse_size, '\0');
  expected.replace(0, 4096, std::string(4096, 'a'));
  expected.replace(32 * kMiB, 4096, std::string(4096, 'b'));
  CHECK(sink.contents[t.path("sparse")].size() == sparse_size);  // the trailing hole too
  CHECK((sink.contents[t.path("sparse")] == expected));

  UniqueFd probe = open_or_throw(t.path("sparse"), O_RDONLY);
  off_t first_hole = ::lseek(probe.get(), 0, SEEK_HOLE);
  if (first_hole < 0 || static_cast<uint64_t>(first_hole) >= sparse_size) {
    WARN("the temporary filesystem reports no holes; extent check skipped");
  } else {
    CHECK(spans(sink.extents[t.path("sparse")]) == Spans{{0, 4096}, {32 * kMiB, 4096}});
  }
}

namespace {

// Counts preads and returns at most `cap` bytes from each, as a file system
// that splits reads may.
struct SplittingReads : FaultInjectingFileSystem {
  size_t cap = SIZE_MAX;
  int preads = 0;
  ssize_t pread(int fd, void* data, size_t size, off_t offset) override {
    ++preads;
    return FaultInjectingFileSystem::pread(fd, data, std::min(size, cap), offset);
  }
};

// A page cache that holds at most `cap` bytes from where a read starts, and
// nothing on every other try.
struct PartlyCached : FaultInjectingFileSystem {
  size_t cap = 3000;
  int tries = 0, cached = 0;
  ssize_t pread_cached(int fd, void* data, size_t size, off_t offset) override {
    if (++tries % 2 == 0) {
      errno = EAGAIN;
      return -1;
    }
    ++cached;
    return FaultInjectingFileSystem::pread(fd, data, std::min(size, cap), offset);
  }
};

std::string read_through(FileSystem& fs, const TempTree& t, const std::string& name) {
  UniqueFd dir = open_or_throw(t.root, O_RDONLY | O_DIRECTORY);
  auto reader = agents::fs::open_file_reader(fs, dir.get(), name, t.path(name));
  std::string content;
  std::vector<uint8_t> buf(1 << 20);
  for (;;) {
    Extent e = reader->read(buf);
    if (e.length == 0) break;
    REQUIRE(e.offset == content.size());
    content.append(reinterpret_cast<const char*>(buf.data()), e.length);
  }
  return content;
}

}  // namespace

TEST_CASE("a file read comes back short at its end only", "[fs]") {
  TempTree t;
  std::string small(10000, 'x'), large(3 * kMiB + 5, '\0');
  for (size_t i = 0; i < large.size(); ++i) large[i] = static_cast<char>(i * 31 >> 3);
  t.file("small", small);
  t.file("large", large);

  SplittingReads fs;
  CHECK(read_through(fs, t, "small") == small);
  CHECK(fs.preads == 1);  // its short read is its end: no read to confirm it
  fs.preads = 0;
  CHECK((read_through(fs, t, "large") == large));
  CHECK(fs.preads == 4);  // three full 1 MiB reads and the short one

  // Reads split before the size the file had when opened are read on.
  fs.cap = 4096;
  CHECK(read_through(fs, t, "small") == small);
  CHECK((read_through(fs, t, "large") == large));
}

TEST_CASE("a file read from the page cache in part goes on where the cache ended", "[fs]") {
  TempTree t;
  std::string small(2000, 's'), medium(10000, '\0');
  for (size_t i = 0; i < medium.size(); ++i) medium[i] = static_cast<char>(i * 7 >> 2);
  t.file("small", small);
  t.file("medium", medium);
  PartlyCached fs;
  auto through = [&](const std::string& name) {
    UniqueFd dir = open_or_throw(t.root, O_RDONLY | O_DIRECTORY);
    auto reader = agents::fs::open_file_reader(fs, dir.get(), name, t.path(name));
    std::string content;
    std::vector<uint8_t> buf(1 << 20);
    for (;;) {
      std::optional<Extent> e = reader->read_cached(buf);
      if (!e) e = reader->read(buf);
      if (e->length == 0) {
        CHECK(e->offset == content.size());
        break;
      }
      REQUIRE(e->offset == content.size());
      content.append(reinterpret_cast<const char*>(buf.data()), e->length);
    }
    return content;
  };
  // All of it cached on the first try: its short read is its end.
  CHECK(through("small") == small);
  CHECK(fs.cached == 1);
  // 3000 bytes cached, then nothing: read() reads the rest, to the end.
  fs.tries = fs.cached = 0;
  CHECK(through("medium") == medium);
  CHECK(fs.tries == 2);
  CHECK(fs.cached == 1);

  // Without a page cache to ask, every read is a plain one.
  UniqueFd dir = open_or_throw(t.root, O_RDONLY | O_DIRECTORY);
  FaultInjectingFileSystem plain;
  auto reader = agents::fs::open_file_reader(plain, dir.get(), "small", t.path("small"));
  std::vector<uint8_t> buf(1 << 20);
  CHECK(!reader->read_cached(buf));
  CHECK(reader->read(buf).length == small.size());
}

TEST_CASE("fs source records extended attributes sorted by name", "[fs]") {
  TempTree t;
  t.file("tagged", "x");
  t.dir("tagged-dir");
  if (::setxattr(t.path("tagged").c_str(), "user.keel.b", "2", 1, 0) != 0) {
    REQUIRE((errno == ENOTSUP || errno == EPERM));
    WARN("the temporary filesystem has no user xattrs; check skipped");
    return;
  }
  REQUIRE(::setxattr(t.path("tagged").c_str(), "user.keel.a", "one", 3, 0) == 0);
  REQUIRE(::setxattr(t.path("tagged-dir").c_str(), "user.keel.dir", "", 0, 0) == 0);

  RecordingSink sink = walk({t.root});
  auto keel_xattrs = [](const NodeMeta& meta) {
    std::vector<engine::Xattr> found;
    for (const engine::Xattr& x : meta.xattrs) {
      if (x.name.rfind("user.keel.", 0) == 0) found.push_back(x);
    }
    return found;
  };
  CHECK(keel_xattrs(sink.nodes[t.path("tagged")]) ==
        std::vector<engine::Xattr>{{"user.keel.a", Bytes{'o', 'n', 'e'}}, {"user.keel.b", Bytes{'2'}}});
  CHECK(keel_xattrs(sink.nodes[t.path("tagged-dir")]) == std::vector<engine::Xattr>{{"user.keel.dir", Bytes{}}});
  const auto& all = sink.nodes[t.path("tagged")].xattrs;
  CHECK(std::is_sorted(all.begin(), all.end(), [](const auto& x, const auto& y) { return x.name < y.name; }));
}

TEST_CASE("exclude patterns match names anywhere, anchored paths and **", "[fs]") {
  using agents::fs::ExcludeMatcher;
  using P = std::vector<std::string>;
  auto excluded = [](const std::string& pattern, P path, bool is_dir = false) {
    return ExcludeMatcher({pattern}).excluded(path, is_dir);
  };
  CHECK(excluded("*.tmp", {"a", "b.tmp"}));
  CHECK(excluded("*.tmp", {"b.tmp"}));
  CHECK_FALSE(excluded("*.tmp", {"a.tmp", "b"}));
  CHECK(excluded("*", {".hidden"}));
  CHECK(excluded("node_modules", {"src", "node_modules"}, true));

  CHECK(excluded("/home/*/.cache", {"home", "ann", ".cache"}));
  CHECK_FALSE(excluded("/home/*/.cache", {"x", "home", "ann", ".cache"}));
  CHECK_FALSE(excluded("/home/*/.cache", {"home", "ann", ".cache", "x"}));
  CHECK_FALSE(excluded("/home/*/.cache", {"home", "a", "b", ".cache"}));

  CHECK(excluded("build/*.o", {"src", "build", "x.o"}));
  CHECK(excluded("build/*.o", {"build", "y.o"}));
  CHECK_FALSE(excluded("build/*.o", {"build", "sub", "x.o"}));

  CHECK(excluded("/a/**/z", {"a", "z"}));
  CHECK(excluded("/a/**/z", {"a", "b", "c", "z"}));
  CHECK_FALSE(excluded("/a/**/z", {"b", "z"}));
  CHECK(excluded("/a/**/b/**/c", {"a", "x", "b", "y", "z", "c"}));
  CHECK(excluded("/a/**/b/**/c", {"a", "b", "c"}));
  CHECK_FALSE(excluded("/a/**/b/**/c", {"a", "c", "b"}));
  CHECK(excluded("**", {"anything", "at", "all"}));
  CHECK(excluded("a\\*", {"a*"}));
  CHECK_FALSE(excluded("a\\*", {"ab"}));

  CHECK(excluded("cache/", {"x", "cache"}, true));
  CHECK_FALSE(excluded("cache/", {"x", "cache"}, false));

  CHECK_FALSE(ExcludeMatcher({}).excluded(P{"a"}, false));
  for (const char* bad : {"", "/", "//"}) {
    try {
      ExcludeMatcher matcher({bad});
      FAIL("accepted the pattern '" << bad << "'");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::kUsage);
    }
  }
}

TEST_CASE("fs source leaves out excluded entries but never a given path", "[fs]") {
  TempTree t;
  t.file("cache.tmp", "x");
  t.file("keep.txt", "x");
  t.dir("src");
  t.file("src/main.c", "x");
  t.dir("src/node_modules");
  t.dir("src/node_modules/pkg");
  t.file("src/node_modules/pkg/index.js", "x");
  t.dir("src/build");
  t.file("src/build/lib.o", "x");
  t.dir("build");
  t.file("build/out.o", "x");
  t.file("build/out.txt", "x");
  t.dir("logs");
  t.dir("logs/a");
  t.dir("logs/a/b");
  t.file("logs/a/b/c.log", "x");
  t.file("logs/a/keep.txt", "x");
  t.dir("dironly");
  t.dir("sub");
  t.file("sub/dironly", "x");

  agents::fs::FsOptions options;
  options.excludes = {"*.tmp", "node_modules", t.root + "/build/*.o", t.root + "/logs/**/*.log", "dironly/"};
  RecordingSink sink = walk({t.root}, options);
  CHECK(sink.problems.empty());
  CHECK(events_under(sink, t.root) == std::vector<std::string>{
                                          "enter R",
                                          "enter R/build",
                                          "file R/build/out.txt",
                                          "leave R/build",
                                          "file R/keep.txt",
                                          "enter R/logs",
                                          "enter R/logs/a",
                                          "enter R/logs/a/b",
                                          "leave R/logs/a/b",
                                          "file R/logs/a/keep.txt",
                                          "leave R/logs/a",
                                          "leave R/logs",
                                          "enter R/src",
                                          "enter R/src/build",
                                          "file R/src/build/lib.o",
                                          "leave R/src/build",
                                          "file R/src/main.c",
                                          "leave R/src",
                                          "enter R/sub",
                                          "file R/sub/dironly",
                                          "leave R/sub",
                                          "leave R",
                                      });

  RecordingSink given = walk({t.path("cache.tmp"), t.path("src/node_modules")}, options);
  CHECK(events_under(given, t.root) == std::vector<std::string>{
                                           "enter R",
                                           "file R/cache.tmp",
                                           "enter R/src",
                                           "enter R/src/node_modules",
                                           "enter R/src/node_modules/pkg",
                                           "file R/src/node_modules/pkg/index.js",
                                           "leave R/src/node_modules/pkg",
                                           "leave R/src/node_modules",
                                           "leave R/src",
                                           "leave R",
                                       });
}

TEST_CASE("fs source merges given paths under shared ancestors", "[fs]") {
  TempTree t;
  t.dir("Zeta");
  t.file("Zeta/inner.txt", "inner");
  t.file("Zeta/other.txt", "not given");
  t.file("a.txt", "hello");
  t.file("b.txt", "not given");
  t.dir("alpha");
  t.dir("alpha/nested");
  t.file("alpha/nested/deep.txt", "deep");
  t.file("alpha/top.txt", "top");
  t.symlink("alpha", "alpha-link");
  REQUIRE(::chmod(t.path("Zeta").c_str(), 0750) == 0);

  std::unique_ptr<engine::Source> source;
  in_directory(t.root, [&] {
    source = agents::fs::make_fs_source(
        {t.path("alpha/nested"), "alpha", "./a.txt", t.path("Zeta/inner.txt"), "Zeta/../a.txt"}, {});
  });
  CHECK(source->paths() == std::vector<std::string>{t.path("Zeta/inner.txt"), t.path("a.txt"), t.path("alpha")});

  RecordingSink sink;
  source->walk(sink);
  CHECK(sink.problems.empty());
  CHECK(events_under(sink, t.root) == std::vector<std::string>{
                                          "enter R",
                                          "enter R/Zeta",
                                          "file R/Zeta/inner.txt",
                                          "leave R/Zeta",
                                          "file R/a.txt",
                                          "enter R/alpha",
                                          "enter R/alpha/nested",
                                          "file R/alpha/nested/deep.txt",
                                          "leave R/alpha/nested",
                                          "file R/alpha/top.txt",
                                          "leave R/alpha",
                                          "leave R",
                                      });
  CHECK(sink.nodes[t.path("Zeta")].mode == 0750);  // ancestors carry real metadata
  CHECK(sink.contents[t.path("Zeta/inner.txt")] == "inner");

  // A symlink among the ancestors is resolved; a given symlink is not followed.
  CHECK(agents::fs::make_fs_source({t.path("alpha-link/nested")}, {})->paths() ==
        std::vector<std::string>{t.path("alpha/nested")});
  RecordingSink link_sink = walk({t.path("alpha-link")});
  CHECK(events_under(link_sink, t.root) == std::vector<std::string>{"enter R", "symlink R/alpha-link -> alpha", "leave R"});
}

TEST_CASE("fs source rejects missing paths before walking", "[fs]") {
  TempTree t;
  t.file("a.txt", "x");
  t.file("plain", "x");
  for (const std::string& missing : {t.path("missing"), t.path("nope/x"), t.path("plain/x")}) {
    try {
      agents::fs::make_fs_source({t.path("a.txt"), missing}, {});
      FAIL("accepted " << missing);
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::kNotFound);
      CHECK(std::string(e.what()) == missing + ": no such file or directory");
    }
  }
  try {
    agents::fs::make_fs_source({}, {});
    FAIL("accepted no paths");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kUsage);
  }
}

TEST_CASE("fs source reports entries that vanish mid-walk and goes on", "[fs]") {
  TempTree t;
  t.file("a-first", "x");
  t.dir("gone-dir");
  t.file("gone-file", "x");
  t.file("late", "x");
  t.file("z-last", "x");

  RecordingSink sink;
  sink.on_enter = [&](const std::string& path) {
    if (path != t.root) return;
    // The directory has been listed; now its entries disappear.
    std::filesystem::remove(t.path("gone-dir"));
    std::filesystem::remove(t.path("gone-file"));
  };
  sink.before_open = [&](const std::string& path) {
    if (path == t.path("late")) std::filesystem::remove(path);
  };
  agents::fs::make_fs_source({t.root}, {})->walk(sink);

  CHECK(events_under(sink, t.root) == std::vector<std::string>{
                                          "enter R",
                                          "file R/a-first",
                                          "skip R/gone-dir",
                                          "skip R/gone-file",
                                          "file R/late",
                                          "file R/z-last",
                                          "leave R",
                                      });
  CHECK(sink.skip_reasons[t.path("gone-file")] == "vanished before it could be read");
  REQUIRE(sink.open_errors.count(t.path("late")) == 1);
  const Error& error = sink.open_errors.at(t.path("late"));
  CHECK(error.kind() == ErrorKind::kNotFound);
  CHECK(std::string(error.what()) == t.path("late") + ": no such file or directory");
  CHECK(sink.contents[t.path("z-last")] == "x");
}

TEST_CASE("fs source skips a directory it may not read and goes on", "[fs]") {
  TempTree t;
  t.file("a.txt", "x");
  t.dir("locked");
  t.file("locked/secret", "x");
  t.file("z.txt", "x");
  REQUIRE(::chmod(t.path("locked").c_str(), 0) == 0);

  std::string log;
  if (::geteuid() != 0) {
    RecordingSink sink = walk({t.root});
    for (const std::string& event : events_under(sink, t.root)) log += event + "\n";
  } else {
    // Root reads anything: walk as nobody in a child process.
    int pipe_fds[2];
    REQUIRE(::pipe(pipe_fds) == 0);
    pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      ::close(pipe_fds[0]);
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
      RecordingSink sink;
      try {
        agents::fs::make_fs_source({t.root}, {})->walk(sink);
      } catch (...) {
        ::_exit(3);
      }
      std::string out;
      for (const std::string& event : events_under(sink, t.root)) out += event + "\n";
      write_all(pipe_fds[1], as_bytes(out), "pipe");
      ::_exit(0);
    }
    ::close(pipe_fds[1]);
    UniqueFd reader(pipe_fds[0]);
    std::vector<uint8_t> buf(65536);
    log.assign(as_chars(std::span(buf).first(read_full(reader.get(), buf, "pipe"))));
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    if (WEXITSTATUS(status) == 2) {
      WARN("cannot switch to an unprivileged user; unreadable-directory check skipped");
      ::chmod(t.path("locked").c_str(), 0755);
      return;
    }
    REQUIRE(WEXITSTATUS(status) == 0);
  }
  ::chmod(t.path("locked").c_str(), 0755);
  CHECK(log == "enter R\nfile R/a.txt\nskip R/locked\nfile R/z.txt\nleave R\n");
}

TEST_CASE("fs source walks trees deeper than PATH_MAX", "[fs]") {
  TempTree t;
  const std::string level(200, 'd');
  const int depth = 30;  // about 6000 characters below the root
  std::vector<UniqueFd> chain;
  chain.push_back(open_or_throw(t.root, O_RDONLY | O_DIRECTORY));
  for (int i = 0; i < depth; ++i) {
    REQUIRE(::mkdirat(chain.back().get(), level.c_str(), 0755) == 0);
    chain.emplace_back(::openat(chain.back().get(), level.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    REQUIRE(chain.back());
  }
  {
    UniqueFd leaf(::openat(chain.back().get(), "leaf", O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    REQUIRE(leaf);
    write_all(leaf.get(), as_bytes("at the bottom"), "leaf");
  }

  RecordingSink sink = walk({t.root});
  std::string leaf_path = t.root;
  for (int i = 0; i < depth; ++i) leaf_path += "/" + level;
  leaf_path += "/leaf";
  REQUIRE(leaf_path.size() > PATH_MAX);
  CHECK(sink.skip_reasons.empty());
  CHECK(sink.open_errors.empty());
  CHECK(sink.contents[leaf_path] == "at the bottom");
  CHECK(events_under(sink, t.root).size() == 2 * depth + 3);  // every level entered and left, and the leaf

  // remove_all cannot name paths this long: take the chain apart bottom up.
  REQUIRE(::unlinkat(chain.back().get(), "leaf", 0) == 0);
  for (int i = depth; i > 0; --i) REQUIRE(::unlinkat(chain[i - 1].get(), level.c_str(), AT_REMOVEDIR) == 0);
}

TEST_CASE("fs source with one_file_system stays on the device of each given path", "[fs]") {
  TempTree t;
  t.dir("d");
  t.file("d/f", "x");
  RecordingSink plain = walk({t.root});
  agents::fs::FsOptions one_fs;
  one_fs.one_file_system = true;
  RecordingSink same = walk({t.root}, one_fs);
  CHECK(same.events == plain.events);

  // /dev/pts is its own filesystem wherever it is mounted, with ptmx in it.
  struct stat dev, pts, ptmx;
  if (::lstat("/dev", &dev) != 0 || ::lstat("/dev/pts", &pts) != 0 || ::lstat("/dev/pts/ptmx", &ptmx) != 0 ||
      dev.st_dev == pts.st_dev) {
    WARN("no separate /dev/pts mount; mount point check skipped");
    return;
  }
  RecordingSink whole;
  whole.read_content = false;
  agents::fs::make_fs_source({"/dev"}, {})->walk(whole);
  CHECK(std::find(whole.events.begin(), whole.events.end(), "chr /dev/pts/ptmx") != whole.events.end());

  RecordingSink bounded;
  bounded.read_content = false;
  agents::fs::make_fs_source({"/dev"}, one_fs)->walk(bounded);
  auto pts_at = std::find(bounded.events.begin(), bounded.events.end(), "enter /dev/pts");
  REQUIRE(pts_at != bounded.events.end());
  CHECK(*(pts_at + 1) == "leave /dev/pts");
  CHECK(bounded.nodes["/dev/pts"].device == pts.st_dev);
}

TEST_CASE("stream source backs up a pipe as one file", "[fs]") {
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  UniqueFd read_end(pipe_fds[0]);
  std::string data(3 * kMiB, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i % 251);
  std::thread writer([&data, fd = pipe_fds[1]] {
    UniqueFd write_end(fd);
    write_all(write_end.get(), as_bytes(data), "pipe");
  });

  auto source = agents::stdin_stream::make_stream_source(read_end.get(), "db.sql");
  CHECK(source->paths() == std::vector<std::string>{"stdin:db.sql"});
  int64_t before = static_cast<int64_t>(std::time(nullptr)) * 1'000'000'000;
  engine::OpenFile saved_open;
  struct KeepOpen : RecordingSink {
    engine::OpenFile* saved;
    void add_node(const NodeMeta& meta, const engine::OpenFile& open) override {
      *saved = open;
      RecordingSink::add_node(meta, open);
    }
  } keeping;
  keeping.saved = &saved_open;
  source->walk(keeping);
  writer.join();

  CHECK(keeping.problems.empty());
  CHECK(keeping.events == std::vector<std::string>{"enter /", "file /db.sql", "leave /"});
  CHECK(keeping.contents["/db.sql"].size() == data.size());
  CHECK((keeping.contents["/db.sql"] == data));
  CHECK(spans(keeping.extents["/db.sql"]) == Spans{{0, kMiB}, {kMiB, kMiB}, {2 * kMiB, kMiB}});

  const NodeMeta& root = keeping.nodes["/"];
  CHECK(root.type == NodeType::kDir);
  CHECK(root.mode == 0755);
  CHECK(root.uid == ::getuid());
  const NodeMeta& file = keeping.nodes["/db.sql"];
  CHECK(file.mode == 0644);
  CHECK(file.size == 0);
  CHECK(file.mtime_ns >= before);

  try {
    saved_open();
    FAIL("a stream was opened twice");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kFailure);
  }
  for (const char* bad : {"", ".", "..", "a/b"}) {
    try {
      agents::stdin_stream::make_stream_source(0, bad);
      FAIL("accepted the name '" << bad << "'");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::kUsage);
    }
  }
}
