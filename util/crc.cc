#include "util/crc.h"

#include <algorithm>
#include <array>

#include <isa-l/crc.h>

namespace keel {

namespace {

// CRC-64/NVME has no ISA-L routine in Debian 12's libisal (2.30), so it keeps
// a table-driven loop (slicing by 8); S3 clients rarely send it.
using Crc64Tables = std::array<std::array<uint64_t, 256>, 8>;  // one slice per input byte

constexpr Crc64Tables make_crc64_tables(uint64_t reflected_polynomial) {
  Crc64Tables t{};
  for (unsigned b = 0; b < 256; ++b) {
    uint64_t r = b;
    for (int bit = 0; bit < 8; ++bit) r = (r & 1) ? (r >> 1) ^ reflected_polynomial : r >> 1;
    t[0][b] = r;
  }
  for (unsigned k = 1; k < 8; ++k) {
    for (unsigned b = 0; b < 256; ++b) {
      const uint64_t previous = t[k - 1][b];
      t[k][b] = (previous >> 8) ^ t[0][previous & 0xff];
    }
  }
  return t;
}

constexpr Crc64Tables kCrc64NvmeTables = make_crc64_tables(0x9A6C9329AC4BC9B5ull);

uint64_t load_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

// The register holds the CRC, so eight input bytes xor onto it and each byte
// of the sum indexes its own slice.
uint64_t crc64_nvme_register(uint64_t reg, ByteView data) {
  const auto& t = kCrc64NvmeTables;
  const uint8_t* p = data.data();
  size_t n = data.size();
  for (; n >= 8; p += 8, n -= 8) {
    const uint64_t x = reg ^ load_le64(p);
    reg = 0;
    for (unsigned i = 0; i < 8; ++i) reg ^= t[7 - i][(x >> (8 * i)) & 0xff];
  }
  for (; n > 0; ++p, --n) reg = (reg >> 8) ^ t[0][(reg ^ *p) & 0xff];
  return reg;
}

unsigned width(CrcAlgorithm algorithm) { return algorithm == CrcAlgorithm::kCrc64Nvme ? 64 : 32; }

uint64_t all_ones(unsigned bits) { return bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1; }

uint64_t reflected_polynomial(CrcAlgorithm algorithm) {
  switch (algorithm) {
    case CrcAlgorithm::kCrc32: return 0xEDB88320u;
    case CrcAlgorithm::kCrc32c: return 0x82F63B78u;
    case CrcAlgorithm::kCrc64Nvme: return 0x9A6C9329AC4BC9B5ull;
  }
  return 0;
}

// a * b modulo the polynomial, both reflected (the top bit is x^0), as zlib's multmodp.
uint64_t multiply_modulo(CrcAlgorithm algorithm, uint64_t a, uint64_t b) {
  const uint64_t polynomial = reflected_polynomial(algorithm);
  uint64_t product = 0;
  for (uint64_t bit = uint64_t{1} << (width(algorithm) - 1); bit != 0; bit >>= 1) {
    if (a & bit) product ^= b;
    b = (b & 1) ? (b >> 1) ^ polynomial : b >> 1;
  }
  return product;
}

}  // namespace

// state_ is the register (before the final xor) for every algorithm.
Crc::Crc(CrcAlgorithm algorithm) : algorithm_(algorithm), state_(all_ones(width(algorithm))) {}

void Crc::update(ByteView data) {
  switch (algorithm_) {
    case CrcAlgorithm::kCrc32:
      // crc32_gzip_refl takes and returns the finished value (as zlib's crc32).
      state_ = ~crc32_gzip_refl(~static_cast<uint32_t>(state_), data.data(), data.size()) & 0xffffffffu;
      return;
    case CrcAlgorithm::kCrc32c: {
      // crc32_iscsi takes and returns the register, and an int length.
      constexpr size_t kMaxRun = size_t{1} << 30;
      for (size_t done = 0; done < data.size();) {
        const size_t n = std::min(kMaxRun, data.size() - done);
        state_ = crc32_iscsi(const_cast<uint8_t*>(data.data() + done), static_cast<int>(n),
                             static_cast<uint32_t>(state_));
        done += n;
      }
      return;
    }
    case CrcAlgorithm::kCrc64Nvme:
      state_ = crc64_nvme_register(state_, data);
      return;
  }
}

uint64_t Crc::value() const { return state_ ^ all_ones(width(algorithm_)); }

Bytes Crc::big_endian() const {
  const unsigned bytes = width(algorithm_) / 8;
  const uint64_t v = value();
  Bytes out(bytes);
  for (unsigned i = 0; i < bytes; ++i) out[i] = static_cast<uint8_t>(v >> (8 * (bytes - 1 - i)));
  return out;
}

uint64_t crc_combine(CrcAlgorithm algorithm, uint64_t crc_a, uint64_t crc_b, uint64_t length_b) {
  // crc(AB) = crc(A) * x^(8 |B|) + crc(B) modulo the polynomial; the all-ones
  // initial value and final xor cancel out.
  const unsigned bits = width(algorithm);
  uint64_t shift = uint64_t{1} << (bits - 1);  // x^0
  uint64_t square = uint64_t{1} << (bits - 9);  // x^8
  for (uint64_t n = length_b; n != 0; n >>= 1) {
    if (n & 1) shift = multiply_modulo(algorithm, shift, square);
    square = multiply_modulo(algorithm, square, square);
  }
  return multiply_modulo(algorithm, shift, crc_a) ^ crc_b;
}

uint64_t crc(CrcAlgorithm algorithm, ByteView data) {
  Crc c(algorithm);
  c.update(data);
  return c.value();
}

}  // namespace keel
