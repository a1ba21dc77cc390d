// Streaming message digests (MD5, SHA-1, SHA-256) through OpenSSL, for
// content checks that S3 defines: ETags, Content-MD5, x-amz-checksum-sha*.
// Not for keys or ids: engine/crypto.h holds the keyed constructions.
#pragma once

#include <memory>

#include "util/bytes.h"

namespace keel {

enum class DigestAlgorithm { kMd5, kSha1, kSha256 };

class Digest {
 public:
  explicit Digest(DigestAlgorithm algorithm);
  ~Digest();
  Digest(Digest&&) noexcept;
  Digest& operator=(Digest&&) noexcept;

  void update(ByteView data);
  // The digest of everything updated so far; the object is then spent.
  Bytes finish();

 private:
  struct Context;
  std::unique_ptr<Context> context_;
};

Bytes md5(ByteView data);
Bytes sha256(ByteView data);

}  // namespace keel
