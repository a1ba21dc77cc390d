#include "engine/tree.h"

#include <algorithm>

#include "util/codec.h"

namespace keel::engine {
namespace {

constexpr uint8_t kTreeVersion = 1;

void encode_meta(Encoder& e, const NodeMeta& m) {
  e.str(m.name);
  e.u8(static_cast<uint8_t>(m.type));
  e.varint(m.mode);
  e.varint(m.uid);
  e.varint(m.gid);
  e.str(m.user);
  e.str(m.group);
  e.svarint(m.mtime_ns);
  e.svarint(m.ctime_ns);
  e.varint(m.size);
  e.varint(m.inode);
  e.varint(m.device);
  e.varint(m.nlink);
  e.varint(m.rdev);
  e.str(m.symlink_target);
  e.varint(m.xattrs.size());
  for (const Xattr& x : m.xattrs) {
    e.str(x.name);
    e.bytes(x.value);
  }
}

NodeMeta decode_meta(Decoder& d) {
  NodeMeta m;
  m.name = d.str();
  uint8_t type = d.u8();
  if (type > static_cast<uint8_t>(NodeType::kSocket)) d.fail("unknown node type " + std::to_string(type));
  m.type = static_cast<NodeType>(type);
  m.mode = static_cast<uint32_t>(d.varint());
  m.uid = static_cast<uint32_t>(d.varint());
  m.gid = static_cast<uint32_t>(d.varint());
  m.user = d.str();
  m.group = d.str();
  m.mtime_ns = d.svarint();
  m.ctime_ns = d.svarint();
  m.size = d.varint();
  m.inode = d.varint();
  m.device = d.varint();
  m.nlink = d.varint();
  m.rdev = d.varint();
  m.symlink_target = d.str();
  uint64_t n = d.varint();
  if (n > d.remaining()) d.fail("xattr count exceeds the record");
  m.xattrs.resize(n);
  for (Xattr& x : m.xattrs) {
    x.name = d.str();
    ByteView v = d.bytes();
    x.value.assign(v.begin(), v.end());
  }
  return m;
}

}  // namespace

const char* node_type_name(NodeType type) {
  switch (type) {
    case NodeType::kFile: return "file";
    case NodeType::kDir: return "dir";
    case NodeType::kSymlink: return "symlink";
    case NodeType::kFifo: return "fifo";
    case NodeType::kCharDevice: return "chardev";
    case NodeType::kBlockDevice: return "blockdev";
    case NodeType::kSocket: return "socket";
  }
  return "unknown";
}

Bytes Tree::encode() const {
  Encoder e;
  e.u8(kTreeVersion);
  e.varint(entries.size());
  for (const TreeEntry& entry : entries) {
    encode_meta(e, entry.meta);
    if (entry.meta.type == NodeType::kFile) {
      e.varint(entry.content.size());
      for (const ContentRef& ref : entry.content) {
        e.u8(ref.hole ? 1 : 0);
        e.varint(ref.length);
        if (!ref.hole) e.id(ref.chunk);
      }
      e.raw(entry.file_hash);
    } else if (entry.meta.type == NodeType::kDir) {
      e.id(entry.subtree);
    }
  }
  return e.take();
}

Tree Tree::decode(ByteView body, const std::string& what) {
  Decoder d(body, what);
  uint8_t version = d.u8();
  if (version != kTreeVersion) d.fail("unsupported tree version " + std::to_string(version));
  Tree tree;
  uint64_t n = d.varint();
  if (n > d.remaining()) d.fail("entry count exceeds the record");
  tree.entries.resize(n);
  for (TreeEntry& entry : tree.entries) {
    entry.meta = decode_meta(d);
    if (entry.meta.type == NodeType::kFile) {
      uint64_t refs = d.varint();
      if (refs > d.remaining()) d.fail("content count exceeds the record");
      entry.content.resize(refs);
      for (ContentRef& ref : entry.content) {
        uint8_t kind = d.u8();
        if (kind > 1) d.fail("unknown content kind");
        ref.hole = kind == 1;
        ref.length = d.varint();
        if (!ref.hole) ref.chunk = d.id();
      }
      ByteView h = d.raw(entry.file_hash.size());
      std::copy(h.begin(), h.end(), entry.file_hash.begin());
    } else if (entry.meta.type == NodeType::kDir) {
      entry.subtree = d.id();
    }
  }
  d.expect_done();
  return tree;
}

const TreeEntry* Tree::find(std::string_view name) const {
  auto it = std::lower_bound(entries.begin(), entries.end(), name,
                             [](const TreeEntry& e, std::string_view n) { return e.meta.name < n; });
  return it != entries.end() && it->meta.name == name ? &*it : nullptr;
}

}  // namespace keel::engine
