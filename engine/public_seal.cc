#include "engine/public_seal.h"

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>

#include <algorithm>
#include <optional>

#include "util/error.h"
#include "util/openssl.h"

namespace keel::engine {
namespace {

constexpr std::string_view kKdfInfo = "keel seal to public key";

PkeyPtr x25519_private(const Key256& key) {
  PkeyPtr pkey(EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nullptr, key.data(), key.size()));
  if (!pkey) throw_openssl("loading an X25519 private key");
  return pkey;
}

Key256 public_of(EVP_PKEY* pkey) {
  Key256 pub;
  size_t length = pub.size();
  if (EVP_PKEY_get_raw_public_key(pkey, pub.data(), &length) != 1 || length != pub.size()) {
    throw_openssl("reading an X25519 public key");
  }
  return pub;
}

// The box key both sides derive: HKDF over the X25519 shared secret, salted
// with both public keys so that it is bound to this exchange. Returns
// nothing if the peer key is degenerate (a low-order point: the shared
// secret would be zero, which OpenSSL refuses).
std::optional<Key256> box_key(const Key256& own_private, const Key256& peer_public, const Key256& ephemeral_public,
                              const Key256& recipient_public) {
  PkeyPtr own = x25519_private(own_private);
  PkeyPtr peer(EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nullptr, peer_public.data(), peer_public.size()));
  if (!peer) throw_openssl("loading an X25519 public key");
  PkeyCtxPtr ctx(EVP_PKEY_CTX_new_from_pkey(nullptr, own.get(), nullptr));
  Key256 shared;
  size_t length = shared.size();
  if (!ctx || EVP_PKEY_derive_init(ctx.get()) != 1) throw_openssl("starting an X25519 exchange");
  if (EVP_PKEY_derive_set_peer(ctx.get(), peer.get()) != 1 ||
      EVP_PKEY_derive(ctx.get(), shared.data(), &length) != 1 || length != shared.size()) {
    ERR_clear_error();
    return std::nullopt;
  }
  uint8_t salt[64];
  std::copy(ephemeral_public.begin(), ephemeral_public.end(), salt);
  std::copy(recipient_public.begin(), recipient_public.end(), salt + 32);
  const KdfPtr kdf(EVP_KDF_fetch(nullptr, "HKDF", nullptr));
  if (!kdf) throw_openssl("fetching HKDF");
  const KdfCtxPtr kctx(EVP_KDF_CTX_new(kdf.get()));
  if (!kctx) throw_openssl("creating an HKDF context");
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, shared.data(), shared.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, salt, sizeof salt),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, const_cast<char*>(kKdfInfo.data()), kKdfInfo.size()),
      OSSL_PARAM_construct_end(),
  };
  Key256 key;
  if (EVP_KDF_derive(kctx.get(), key.data(), key.size(), params) != 1) throw_openssl("HKDF-SHA-256");
  return key;
}

}  // namespace

SealingKeyPair SealingKeyPair::generate() { return from_private(random_key()); }

SealingKeyPair SealingKeyPair::from_private(const Key256& private_key) {
  PkeyPtr pkey = x25519_private(private_key);
  return {private_key, public_of(pkey.get())};
}

void seal_to(const Key256& public_key, ByteView plain, ByteView associated, Bytes& out) {
  SealingKeyPair ephemeral = SealingKeyPair::generate();
  std::optional<Key256> key = box_key(ephemeral.private_key, public_key, ephemeral.public_key, public_key);
  if (!key) throw Error(ErrorKind::kIntegrity, "the repository's public key is not a usable X25519 key");
  out.insert(out.end(), ephemeral.public_key.begin(), ephemeral.public_key.end());
  seal(*key, plain, associated, out);
}

Bytes seal_to(const Key256& public_key, ByteView plain, ByteView associated) {
  Bytes out;
  seal_to(public_key, plain, associated, out);
  return out;
}

Bytes open_sealed_to(const SealingKeyPair& pair, ByteView sealed, ByteView associated, const std::string& what) {
  if (sealed.size() < kPublicSealOverhead) {
    throw Error(ErrorKind::kIntegrity, what + ": sealed box too short (" + std::to_string(sealed.size()) + " bytes)");
  }
  Key256 ephemeral;
  std::copy(sealed.begin(), sealed.begin() + 32, ephemeral.begin());
  std::optional<Key256> key = box_key(pair.private_key, ephemeral, ephemeral, pair.public_key);
  if (!key) throw Error(ErrorKind::kIntegrity, what + ": authentication failed (a degenerate ephemeral key)");
  return open_sealed(*key, sealed.subspan(32), associated, what);
}

}  // namespace keel::engine
