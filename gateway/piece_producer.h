// A response body served from a sequence of pieces (a dedupe bucket's
// chunks, an encrypted object's opened blocks), of which a range is given.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>

#include "gateway/exchange.h"
#include "util/bytes.h"

namespace keel::gateway {

class PieceProducer : public BodyProducer {
 public:
  // Drops the first `skip` bytes of the pieces, then gives `length`.
  PieceProducer(uint64_t skip, uint64_t length) : skip_(skip), remaining_(length) {}

  size_t read(std::span<uint8_t> out) final {
    size_t done = 0;
    while (done < out.size() && remaining_ > 0) {
      if (offset_ == piece_.size()) {
        next_piece(piece_);
        offset_ = static_cast<size_t>(std::min<uint64_t>(skip_, piece_.size()));
        skip_ -= offset_;
        continue;
      }
      const size_t n = static_cast<size_t>(std::min<uint64_t>({out.size() - done, piece_.size() - offset_, remaining_}));
      std::memcpy(out.data() + done, piece_.data() + offset_, n);
      offset_ += n;
      done += n;
      remaining_ -= n;
    }
    return done;
  }

 protected:
  // Replaces `piece` with the next piece; throws where there is none.
  virtual void next_piece(Bytes& piece) = 0;

 private:
  uint64_t skip_;
  uint64_t remaining_;
  Bytes piece_;
  size_t offset_ = 0;  // into piece_
};

}  // namespace keel::gateway
