#include "util/codec.h"

#include "util/error.h"

namespace keel {

void Encoder::u32(uint32_t v) {
  for (int i = 0; i < 4; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void Encoder::u64(uint64_t v) {
  for (int i = 0; i < 8; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void Encoder::varint(uint64_t v) {
  while (v >= 0x80) {
    out_.push_back(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  out_.push_back(static_cast<uint8_t>(v));
}

void Encoder::svarint(int64_t v) {
  varint((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
}

void Encoder::bytes(ByteView b) {
  varint(b.size());
  raw(b);
}

void Decoder::fail(const std::string& why) const {
  throw Error(ErrorKind::kIntegrity, what_ + ": malformed at byte " + std::to_string(pos_) + ": " + why);
}

ByteView Decoder::raw(size_t n) {
  if (n > remaining()) fail("needs " + std::to_string(n) + " bytes, " + std::to_string(remaining()) + " left");
  ByteView out = in_.subspan(pos_, n);
  pos_ += n;
  return out;
}

uint8_t Decoder::u8() { return raw(1)[0]; }

uint32_t Decoder::u32() {
  ByteView b = raw(4);
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{b[i]} << (8 * i);
  return v;
}

uint64_t Decoder::u64() {
  ByteView b = raw(8);
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{b[i]} << (8 * i);
  return v;
}

uint64_t Decoder::varint() {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    uint8_t b = u8();
    v |= uint64_t{b & 0x7fu} << shift;
    if (!(b & 0x80)) return v;
  }
  fail("varint longer than 10 bytes");
}

int64_t Decoder::svarint() {
  uint64_t v = varint();
  return static_cast<int64_t>((v >> 1) ^ (~(v & 1) + 1));
}

ByteView Decoder::bytes() {
  uint64_t n = varint();
  if (n > remaining()) fail("length " + std::to_string(n) + " exceeds the " + std::to_string(remaining()) + " bytes left");
  return raw(static_cast<size_t>(n));
}

std::string Decoder::str() {
  ByteView b = bytes();
  return std::string(as_chars(b));
}

Id Decoder::id() { return Id::from_bytes(raw(Id::kSize)); }

void Decoder::expect_done() const {
  if (!done()) fail(std::to_string(remaining()) + " trailing bytes");
}

void encode_ids(Encoder& e, const std::vector<Id>& ids) {
  e.varint(ids.size());
  for (const Id& id : ids) e.id(id);
}

std::vector<Id> decode_ids(Decoder& d) {
  uint64_t n = d.varint();
  if (n > d.remaining() / Id::kSize) d.fail("id count exceeds the record");
  std::vector<Id> ids(n);
  for (Id& id : ids) id = d.id();
  return ids;
}

Bytes encode_strings(const std::vector<std::string>& strings) {
  Encoder e;
  e.varint(strings.size());
  for (const auto& s : strings) e.str(s);
  return e.take();
}

std::vector<std::string> decode_strings(ByteView data, const std::string& what) {
  Decoder d(data, what);
  uint64_t count = d.varint();
  // Each string takes at least its one-byte length, which bounds `count`.
  if (count > d.remaining()) d.fail("count " + std::to_string(count) + " exceeds the bytes left");
  std::vector<std::string> strings;
  strings.reserve(count);
  for (uint64_t i = 0; i < count; ++i) strings.push_back(d.str());
  d.expect_done();
  return strings;
}

}  // namespace keel
