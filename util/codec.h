// A small binary encoding for keel's on-disk records (trees, snapshots,
// pack headers, key slots): little-endian fixed ints, LEB128 varints and
// length-prefixed byte strings. Readers bounds-check everything and throw
// Error(kIntegrity) naming `what` on malformed input.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/bytes.h"
#include "util/id.h"

namespace keel {

class Encoder {
 public:
  void u8(uint8_t v) { out_.push_back(v); }
  void u32(uint32_t v);
  void u64(uint64_t v);
  void varint(uint64_t v);
  void svarint(int64_t v);  // zigzag
  void bytes(ByteView b);   // varint length + bytes
  void str(std::string_view s) { bytes(as_bytes(s)); }
  void id(const Id& v) { raw(v.view()); }
  void raw(ByteView b) { out_.insert(out_.end(), b.begin(), b.end()); }

  const Bytes& data() const { return out_; }
  Bytes take() { return std::move(out_); }

 private:
  Bytes out_;
};

class Decoder {
 public:
  Decoder(ByteView in, std::string what) : in_(in), what_(std::move(what)) {}

  uint8_t u8();
  uint32_t u32();
  uint64_t u64();
  uint64_t varint();
  int64_t svarint();
  ByteView bytes();
  std::string str();
  Id id();
  ByteView raw(size_t n);

  bool done() const { return pos_ == in_.size(); }
  size_t remaining() const { return in_.size() - pos_; }
  // Throws unless every byte was consumed.
  void expect_done() const;
  [[noreturn]] void fail(const std::string& why) const;

 private:
  ByteView in_;
  size_t pos_ = 0;
  std::string what_;
};

// A list of ids: varint count, then each id. decode_ids throws
// Error(kIntegrity) if the count exceeds the bytes left.
void encode_ids(Encoder& e, const std::vector<Id>& ids);
std::vector<Id> decode_ids(Decoder& d);

// A list of strings as one record: varint count, then each string. Strings
// may hold any byte (file paths), so no separator would do.
Bytes encode_strings(const std::vector<std::string>& strings);
// Throws Error(kIntegrity) naming `what` if `data` is not such a list.
std::vector<std::string> decode_strings(ByteView data, const std::string& what);

}  // namespace keel
