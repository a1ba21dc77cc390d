// The gateway unit tests' way to take an object's bytes out of a storage
// read: all `length` of them, in uneven pieces, and then the end.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <span>

#include "gateway/exchange.h"
#include "util/bytes.h"

namespace keel::test {

inline Bytes read_body(gateway::BodyProducer& reader, uint64_t length) {
  Bytes out(length);
  for (size_t at = 0; at < out.size();) {
    const size_t n = reader.read(std::span(out).subspan(at, std::min<size_t>(out.size() - at, 7000)));
    REQUIRE(n > 0);
    at += n;
  }
  uint8_t extra;
  CHECK(reader.read(std::span(&extra, 1)) == 0);
  return out;
}

inline Bytes slice(const Bytes& data, uint64_t first, uint64_t length) {
  return Bytes(data.begin() + static_cast<std::ptrdiff_t>(first),
               data.begin() + static_cast<std::ptrdiff_t>(first + length));
}

}  // namespace keel::test
