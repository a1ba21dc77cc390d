#include "util/crc.h"

#include <array>
#include <cstring>

namespace keel {

namespace {

struct Tables {
  std::array<std::array<uint64_t, 256>, 8> slice;
  unsigned width;  // bits
};

constexpr Tables make_tables(uint64_t reflected_polynomial, unsigned width) {
  Tables t{};
  t.width = width;
  for (unsigned b = 0; b < 256; ++b) {
    uint64_t r = b;
    for (int bit = 0; bit < 8; ++bit) r = (r & 1) ? (r >> 1) ^ reflected_polynomial : r >> 1;
    t.slice[0][b] = r;
  }
  for (unsigned k = 1; k < 8; ++k) {
    for (unsigned b = 0; b < 256; ++b) {
      const uint64_t previous = t.slice[k - 1][b];
      t.slice[k][b] = (previous >> 8) ^ t.slice[0][previous & 0xff];
    }
  }
  return t;
}

constexpr Tables kCrc32Tables = make_tables(0xEDB88320u, 32);
constexpr Tables kCrc32cTables = make_tables(0x82F63B78u, 32);
constexpr Tables kCrc64NvmeTables = make_tables(0x9A6C9329AC4BC9B5ull, 64);

const Tables& tables(CrcAlgorithm algorithm) {
  switch (algorithm) {
    case CrcAlgorithm::kCrc32: return kCrc32Tables;
    case CrcAlgorithm::kCrc32c: return kCrc32cTables;
    case CrcAlgorithm::kCrc64Nvme: return kCrc64NvmeTables;
  }
  return kCrc32Tables;
}

uint64_t all_ones(unsigned width) { return width == 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1; }

uint64_t load_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

// The register holds the CRC in its low `width` bits, so eight input bytes
// xor onto it and each byte of the sum indexes its own slice.
uint64_t update_register(const Tables& t, uint64_t reg, ByteView data) {
  const uint8_t* p = data.data();
  size_t n = data.size();
  for (; n >= 8; p += 8, n -= 8) {
    const uint64_t x = reg ^ load_le64(p);
    reg = 0;
    for (unsigned i = 0; i < 8; ++i) reg ^= t.slice[7 - i][(x >> (8 * i)) & 0xff];
  }
  for (; n > 0; ++p, --n) reg = (reg >> 8) ^ t.slice[0][(reg ^ *p) & 0xff];
  return reg;
}

}  // namespace

Crc::Crc(CrcAlgorithm algorithm) : algorithm_(algorithm), state_(all_ones(tables(algorithm).width)) {}

void Crc::update(ByteView data) { state_ = update_register(tables(algorithm_), state_, data); }

uint64_t Crc::value() const { return state_ ^ all_ones(tables(algorithm_).width); }

Bytes Crc::big_endian() const {
  const unsigned bytes = tables(algorithm_).width / 8;
  const uint64_t v = value();
  Bytes out(bytes);
  for (unsigned i = 0; i < bytes; ++i) out[i] = static_cast<uint8_t>(v >> (8 * (bytes - 1 - i)));
  return out;
}

uint64_t crc(CrcAlgorithm algorithm, ByteView data) {
  Crc c(algorithm);
  c.update(data);
  return c.value();
}

}  // namespace keel
