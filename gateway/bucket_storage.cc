#include "gateway/bucket_storage.h"

#include <algorithm>

#include "util/error.h"

namespace keel::gateway {

std::string copy_bytes(BodyProducer& source, uint64_t length, BucketStorage::Writer& to,
                       const std::function<void(ByteView)>& observe) {
  constexpr size_t kBuffer = 1 << 20;
  Bytes buffer(static_cast<size_t>(std::min<uint64_t>(kBuffer, std::max<uint64_t>(length, 1))));
  for (uint64_t done = 0; done < length;) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(buffer.size(), length - done));
    const size_t got = source.read(std::span(buffer).first(want));
    if (got == 0) throw Error(ErrorKind::kIntegrity, "gateway: the copy source ended before its recorded length");
    const ByteView piece(buffer.data(), got);
    if (observe) observe(piece);
    to.write(piece);
    done += got;
  }
  return to.commit();
}

}  // namespace keel::gateway
