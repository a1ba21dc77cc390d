#include "util/digest.h"

#include <openssl/evp.h>

#include "util/error.h"
#include "util/openssl.h"

namespace keel {

namespace {

const EVP_MD* fetched(DigestAlgorithm algorithm) {
  // Fetched once: EVP_MD_fetch takes a global lock and a table lookup.
  static const MdPtr md5_md(EVP_MD_fetch(nullptr, "MD5", nullptr));
  static const MdPtr sha1_md(EVP_MD_fetch(nullptr, "SHA1", nullptr));
  static const MdPtr sha256_md(EVP_MD_fetch(nullptr, "SHA256", nullptr));
  const EVP_MD* md = algorithm == DigestAlgorithm::kMd5    ? md5_md.get()
                     : algorithm == DigestAlgorithm::kSha1 ? sha1_md.get()
                                                           : sha256_md.get();
  if (md == nullptr) throw_openssl("fetching a message digest");
  return md;
}

Bytes one_shot(DigestAlgorithm algorithm, ByteView data) {
  Digest digest(algorithm);
  digest.update(data);
  return digest.finish();
}

}  // namespace

struct Digest::Context {
  MdCtxPtr ctx{EVP_MD_CTX_new()};
};

Digest::Digest(DigestAlgorithm algorithm) : context_(std::make_unique<Context>()) {
  if (!context_->ctx || EVP_DigestInit_ex2(context_->ctx.get(), fetched(algorithm), nullptr) != 1) {
    throw_openssl("starting a message digest");
  }
}

Digest::~Digest() = default;
Digest::Digest(Digest&&) noexcept = default;
Digest& Digest::operator=(Digest&&) noexcept = default;

void Digest::update(ByteView data) {
  if (EVP_DigestUpdate(context_->ctx.get(), data.data(), data.size()) != 1) throw_openssl("message digest update");
}

Bytes Digest::finish() {
  Bytes out(EVP_MAX_MD_SIZE);
  unsigned int written = 0;
  if (EVP_DigestFinal_ex(context_->ctx.get(), out.data(), &written) != 1) throw_openssl("message digest final");
  out.resize(written);
  return out;
}

Bytes md5(ByteView data) { return one_shot(DigestAlgorithm::kMd5, data); }
Bytes sha256(ByteView data) { return one_shot(DigestAlgorithm::kSha256, data); }

}  // namespace keel
