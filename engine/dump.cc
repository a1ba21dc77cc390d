#include "engine/dump.h"

#include <sys/sysmacros.h>

#include <algorithm>
#include <cstring>

#include "engine/restore.h"
#include "util/error.h"
#include "util/fd.h"

namespace keel::engine {

namespace {

constexpr size_t kBlock = 512;

struct Header {
  char name[100], mode[8], uid[8], gid[8], size[12], mtime[12], checksum[8], type, linkname[100], magic[6],
      version[2], uname[32], gname[32], devmajor[8], devminor[8], prefix[155], pad[12];
};
static_assert(sizeof(Header) == kBlock);

// An octal field of `width` bytes (digits and a NUL); false if `value` does not fit.
bool octal(char* field, size_t width, uint64_t value) {
  const size_t digits = width - 1;
  if (digits < 22 && (value >> (3 * digits)) != 0) return false;
  for (size_t i = digits; i-- > 0; value >>= 3) field[i] = static_cast<char>('0' + (value & 7));
  field[digits] = '\0';
  return true;
}

void copy_field(char* field, size_t width, const std::string& text) { std::memcpy(field, text.data(), std::min(width, text.size())); }

// One pax record: "<length> <key>=<value>\n", the length counting itself.
std::string pax_record(const std::string& key, const std::string& value) {
  const size_t body = key.size() + value.size() + 3;  // ' ', '=', '\n'
  size_t length = body + 1;
  while (std::to_string(length).size() + body != length) length = std::to_string(length).size() + body;
  return std::to_string(length) + " " + key + "=" + value + "\n";
}

char type_flag(NodeType type) {
  switch (type) {
    case NodeType::kFile: return '0';
    case NodeType::kSymlink: return '2';
    case NodeType::kCharDevice: return '3';
    case NodeType::kBlockDevice: return '4';
    case NodeType::kDir: return '5';
    case NodeType::kFifo: return '6';
    case NodeType::kSocket: break;
  }
  return 0;
}

class TarWriter {
 public:
  explicit TarWriter(int fd) : fd_(fd) {}

  // The header (and pax header before it, where needed) of one member.
  void header(const std::string& name, const NodeMeta& meta, uint64_t size) {
    Header h{};
    std::string pax;
    if (name.size() <= sizeof h.name) {
      copy_field(h.name, sizeof h.name, name);
    } else if (size_t split = name.rfind('/', sizeof h.prefix);
               split != std::string::npos && split > 0 && name.size() - split - 1 <= sizeof h.name &&
               name.size() - split - 1 > 0) {
      copy_field(h.prefix, sizeof h.prefix, name.substr(0, split));
      copy_field(h.name, sizeof h.name, name.substr(split + 1));
    } else {
      pax += pax_record("path", name);
      copy_field(h.name, sizeof h.name, name.substr(0, sizeof h.name));
    }
    if (meta.symlink_target.size() > sizeof h.linkname) pax += pax_record("linkpath", meta.symlink_target);
    copy_field(h.linkname, sizeof h.linkname, meta.symlink_target);
    octal(h.mode, sizeof h.mode, meta.mode & 07777);
    if (!octal(h.uid, sizeof h.uid, meta.uid)) pax += pax_record("uid", std::to_string(meta.uid));
    if (!octal(h.gid, sizeof h.gid, meta.gid)) pax += pax_record("gid", std::to_string(meta.gid));
    if (!octal(h.size, sizeof h.size, size)) pax += pax_record("size", std::to_string(size));
    const int64_t mtime_s = meta.mtime_ns >= 0 ? meta.mtime_ns / 1000000000 : 0;
    if (!octal(h.mtime, sizeof h.mtime, static_cast<uint64_t>(mtime_s))) pax += pax_record("mtime", std::to_string(mtime_s));
    if (meta.user.size() >= sizeof h.uname) pax += pax_record("uname", meta.user);
    if (meta.group.size() >= sizeof h.gname) pax += pax_record("gname", meta.group);
    copy_field(h.uname, sizeof h.uname - 1, meta.user);
    copy_field(h.gname, sizeof h.gname - 1, meta.group);
    if (meta.type == NodeType::kCharDevice || meta.type == NodeType::kBlockDevice) {
      octal(h.devmajor, sizeof h.devmajor, ::major(meta.rdev));
      octal(h.devminor, sizeof h.devminor, ::minor(meta.rdev));
    }
    h.type = type_flag(meta.type);
    if (!pax.empty()) {
      Header x{};
      copy_field(x.name, sizeof x.name, "PaxHeaders/" + name.substr(0, 80));
      octal(x.mode, sizeof x.mode, 0644);
      octal(x.size, sizeof x.size, pax.size());
      octal(x.mtime, sizeof x.mtime, static_cast<uint64_t>(mtime_s > 0 ? mtime_s : 0));
      x.type = 'x';
      emit(x);
      write(pax.data(), pax.size());
      pad(pax.size());
    }
    emit(h);
  }

  void pad(uint64_t size) {
    static const char kZeros[kBlock] = {};
    if (size % kBlock) write(kZeros, kBlock - size % kBlock);
  }

  // Two zero blocks end the archive.
  void finish() {
    static const char kZeros[2 * kBlock] = {};
    write(kZeros, sizeof kZeros);
  }

 private:
  void emit(Header& h) {
    std::memcpy(h.magic, "ustar", 6);
    std::memcpy(h.version, "00", 2);
    std::memset(h.checksum, ' ', sizeof h.checksum);
    unsigned sum = 0;
    for (size_t i = 0; i < kBlock; ++i) sum += reinterpret_cast<const unsigned char*>(&h)[i];
    octal(h.checksum, 7, sum);  // six digits and a NUL, then the space already there

    write(&h, kBlock);
  }

  void write(const void* data, size_t size) {
    write_all(fd_, ByteView(static_cast<const uint8_t*>(data), size), "tar output");
  }

  int fd_;
};

}  // namespace

DumpResult dump_tar(Repository& repo, const catalog::SnapshotRecord& snapshot, const std::string& path, int fd) {
  TarWriter tar(fd);
  DumpResult result;
  auto member = [&](const std::string& snapshot_path, const TreeEntry& e) {
    if (e.meta.type == NodeType::kSocket) return;
    std::string name = snapshot_path.substr(1);
    if (e.meta.type == NodeType::kDir) name += "/";
    if (name == "/") return;  // the root itself has no name in the archive
    ++result.entries;
    const uint64_t size = e.meta.type == NodeType::kFile ? e.meta.size : 0;
    tar.header(name, e.meta, size);
    if (e.meta.type != NodeType::kFile) return;
    const uint64_t written = stream_file(repo, snapshot, snapshot_path, fd);
    if (written != size) {
      throw Error(ErrorKind::kIntegrity, snapshot_path + " in snapshot " + snapshot.id.short_hex() + " holds " +
                                             std::to_string(written) + " bytes, its size says " + std::to_string(size));
    }
    result.file_bytes += size;
    tar.pad(size);
  };
  // walk_snapshot leaves out the directory it starts from: its own member first.
  std::string top;
  for (size_t start = 0, end; start < path.size(); start = end + 1) {
    end = std::min(path.find('/', start), path.size());
    if (end > start) top += "/" + path.substr(start, end - start);
  }
  if (top.empty()) top = "/";
  if (const TreeEntry entry = find_entry(repo, snapshot, top); entry.meta.type == NodeType::kDir) member(top, entry);
  walk_snapshot(repo, snapshot, top, member);
  tar.finish();
  return result;
}

}  // namespace keel::engine
