#include "engine/crypto.h"

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "engine/open_into.h"
#include "engine/seal_parts.h"
#include "util/error.h"
#include "util/hmac_sha256_lanes.h"
#include "util/huge_pages.h"
#include "util/openssl.h"

namespace keel::engine {

namespace {

// EVP update calls take int lengths; larger inputs are fed in slices.
constexpr size_t kMaxUpdate = size_t{1} << 30;

const EVP_CIPHER* aes_256_gcm() {
  static const CipherPtr cipher(EVP_CIPHER_fetch(nullptr, "AES-256-GCM", nullptr));
  if (!cipher) throw_openssl("fetching AES-256-GCM");
  return cipher.get();
}

// One GCM context per thread, reused across calls: re-initialising key and
// nonce on a context that already holds the cipher avoids an allocation and a
// provider lookup per chunk.
EVP_CIPHER_CTX* gcm_context(const Key256& key, const uint8_t* nonce, bool encrypt) {
  thread_local const CipherCtxPtr ctx = [] {
    CipherCtxPtr fresh(EVP_CIPHER_CTX_new());
    if (!fresh || EVP_CipherInit_ex2(fresh.get(), aes_256_gcm(), nullptr, nullptr, 1, nullptr) != 1) {
      throw_openssl("creating an AES-256-GCM context");
    }
    return fresh;
  }();
  if (EVP_CipherInit_ex2(ctx.get(), nullptr, key.data(), nonce, encrypt ? 1 : 0, nullptr) != 1) {
    throw_openssl("initialising AES-256-GCM");
  }
  return ctx.get();
}

// Feeds `in` through the cipher; out == nullptr feeds associated data.
// Returns false if OpenSSL refuses.
bool gcm_update(EVP_CIPHER_CTX* ctx, ByteView in, uint8_t* out) {
  for (size_t done = 0; done < in.size();) {
    const int piece = static_cast<int>(std::min(in.size() - done, kMaxUpdate));
    int written = 0;
    if (EVP_CipherUpdate(ctx, out ? out + done : nullptr, &written, in.data() + done, piece) != 1) return false;
    done += static_cast<size_t>(piece);
  }
  return true;
}

// Nonces are drawn from RAND_bytes a block at a time: a call per sealed
// chunk cost OpenSSL's fork check (a getpid system call, ~4 us on the
// development VM) and a lock on the random generator, about a tenth of a
// backup's encryption CPU. A forked child must not reuse what its parent
// drew: a fork bumps the generation, and a thread whose block is of an older
// generation draws a new one.
std::atomic<uint64_t> fork_generation{0};

void fresh_nonce(uint8_t* nonce) {
  static std::once_flag registered;
  std::call_once(registered, [] { pthread_atfork(nullptr, nullptr, [] { fork_generation.fetch_add(1); }); });
  struct Block {
    uint8_t bytes[kNonceSize * 256];
    size_t used = sizeof bytes;
    uint64_t generation = 0;
  };
  thread_local Block block;
  const uint64_t generation = fork_generation.load();
  if (block.used == sizeof block.bytes || block.generation != generation) {
    if (RAND_bytes(block.bytes, static_cast<int>(sizeof block.bytes)) != 1) throw_openssl("generating nonces");
    block.used = 0;
    block.generation = generation;
  }
  std::memcpy(nonce, block.bytes + block.used, kNonceSize);
  block.used += kNonceSize;
}

// Seals head || body into box[0, kSealOverhead + head.size() + body.size()).
void seal_into(const Key256& key, ByteView head, ByteView body, ByteView associated, uint8_t* box) {
  uint8_t* nonce = box;
  uint8_t* cipher_text = nonce + kNonceSize;
  uint8_t* tag = cipher_text + head.size() + body.size();
  fresh_nonce(nonce);
  EVP_CIPHER_CTX* ctx = gcm_context(key, nonce, true);
  int final_size = 0;
  if (!gcm_update(ctx, associated, nullptr) || !gcm_update(ctx, head, cipher_text) ||
      !gcm_update(ctx, body, cipher_text + head.size()) || EVP_EncryptFinal_ex(ctx, tag, &final_size) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, static_cast<int>(kTagSize), tag) != 1) {
    throw_openssl("AES-256-GCM encryption");
  }
}

}  // namespace

void seal(const Key256& key, ByteView plain, ByteView associated, Bytes& out) {
  const size_t start = out.size();
  reserve_huge(out, start + kSealOverhead + plain.size());
  out.resize(start + kSealOverhead + plain.size());
  try {
    seal_into(key, plain, {}, associated, out.data() + start);
  } catch (...) {
    out.resize(start);
    throw;
  }
}

void seal_parts(const Key256& key, ByteView head, ByteView body, ByteView associated, Bytes& out) {
  const size_t size = kSealOverhead + head.size() + body.size();
  reserve_huge(out, size);
  out.resize(size);
  try {
    seal_into(key, head, body, associated, out.data());
  } catch (...) {
    out.clear();
    throw;
  }
}

Bytes seal(const Key256& key, ByteView plain, ByteView associated) {
  Bytes out;
  seal(key, plain, associated, out);
  return out;
}

ByteView open_sealed_into(const Key256& key, ByteView box, ByteView associated, Bytes& buffer,
                          const std::string& what) {
  if (box.size() < kSealOverhead) {
    throw Error(ErrorKind::kIntegrity, what + ": sealed box too short (" + std::to_string(box.size()) +
                                           " bytes, at least " + std::to_string(kSealOverhead) + " expected)");
  }
  const ByteView cipher_text = box.subspan(kNonceSize, box.size() - kSealOverhead);
  // The tag is copied because the ctrl call takes a non-const pointer.
  uint8_t tag[kTagSize];
  std::memcpy(tag, box.data() + box.size() - kTagSize, kTagSize);

  EVP_CIPHER_CTX* ctx = gcm_context(key, box.data(), false);
  const std::span<uint8_t> out = overwritable(buffer, cipher_text.size());
  int final_size = 0;
  if (!gcm_update(ctx, associated, nullptr) || !gcm_update(ctx, cipher_text, out.data()) ||
      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, static_cast<int>(kTagSize), tag) != 1 ||
      EVP_DecryptFinal_ex(ctx, out.data() + out.size(), &final_size) != 1) {
    ERR_clear_error();
    buffer.clear();  // never hand out unauthenticated plaintext
    throw Error(ErrorKind::kIntegrity, what + ": authentication failed (wrong key or corrupted data)");
  }
  return out;
}

void open_sealed(const Key256& key, ByteView box, ByteView associated, Bytes& out, const std::string& what) {
  out.resize(open_sealed_into(key, box, associated, out, what).size());
}

Bytes open_sealed(const Key256& key, ByteView box, ByteView associated, const std::string& what) {
  Bytes out;
  open_sealed(key, box, associated, out, what);
  return out;
}

Id keyed_id(const Key256& key, ByteView data) {
  // One HMAC context per thread, keyed once: while the key stays the same,
  // EVP_MAC_init without a key restarts from the cached inner and outer pads
  // instead of fetching the MAC and hashing the key again for every chunk.
  struct KeyedMac {
    MacCtxPtr ctx;
    Key256 key{};
    bool keyed = false;
  };
  thread_local KeyedMac mac = [] {
    const MacPtr hmac(EVP_MAC_fetch(nullptr, "HMAC", nullptr));
    if (!hmac) throw_openssl("fetching HMAC");
    KeyedMac fresh{MacCtxPtr(EVP_MAC_CTX_new(hmac.get()))};
    if (!fresh.ctx) throw_openssl("creating an HMAC context");
    return fresh;
  }();

  int init_ok;
  if (mac.keyed && mac.key == key) {
    init_ok = EVP_MAC_init(mac.ctx.get(), nullptr, 0, nullptr);
  } else {
    char digest[] = "SHA256";
    const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                                 OSSL_PARAM_construct_end()};
    mac.keyed = false;
    init_ok = EVP_MAC_init(mac.ctx.get(), key.data(), key.size(), params);
    if (init_ok == 1) {
      mac.key = key;
      mac.keyed = true;
    }
  }
  if (init_ok != 1) throw_openssl("HMAC-SHA-256 init");
  if (EVP_MAC_update(mac.ctx.get(), data.data(), data.size()) != 1) throw_openssl("HMAC-SHA-256 update");
  Id id;
  size_t written = 0;
  if (EVP_MAC_final(mac.ctx.get(), id.bytes.data(), &written, id.bytes.size()) != 1 || written != Id::kSize) {
    throw_openssl("HMAC-SHA-256 final");
  }
  return id;
}

void keyed_ids(const Key256& key, std::span<const ByteView> data, std::span<Id> ids) {
  if (ids.size() != data.size()) throw Error(ErrorKind::kFailure, "keyed_ids: one id per message");
  // Keyed once per thread while the key stays the same (as keyed_id is).
  thread_local std::optional<HmacSha256Lanes> hmac;
  thread_local Key256 hmac_key{};
  thread_local std::vector<HmacSha256Lanes::Digest> digests;
  if (!hmac || hmac_key != key) {
    hmac_key = key;
    hmac.emplace(key);
  }
  digests.resize(data.size());
  hmac->digest(data, digests);
  for (size_t i = 0; i < data.size(); ++i) ids[i].bytes = digests[i];
}

Key256 random_key() {
  Key256 key;
  if (RAND_bytes(key.data(), static_cast<int>(key.size())) != 1) throw_openssl("generating a random key");
  return key;
}

Key256 derive_key(std::string_view password, ByteView salt, const ScryptParams& params) {
  if (params.n < 2 || !std::has_single_bit(params.n) || params.r == 0 || params.p == 0) {
    throw Error(ErrorKind::kUsage, "invalid scrypt parameters (N " + std::to_string(params.n) + ", r " +
                                       std::to_string(params.r) + ", p " + std::to_string(params.p) +
                                       "): N must be a power of two above 1, r and p at least 1");
  }
  // scrypt needs 128*r*(N+p+2) bytes; OpenSSL refuses more than 32 MiB unless
  // told otherwise, which the default N=2^15, r=8 already exceeds.
  const unsigned __int128 needed = static_cast<unsigned __int128>(128) * params.r * (params.n + params.p + 2);
  if (needed > static_cast<unsigned __int128>(SIZE_MAX / 2)) {
    throw Error(ErrorKind::kUsage, "scrypt parameters need more memory than this machine can address");
  }
  uint64_t max_memory = static_cast<uint64_t>(needed) + (1u << 20);

  const KdfPtr kdf(EVP_KDF_fetch(nullptr, "SCRYPT", nullptr));
  if (!kdf) throw_openssl("fetching scrypt");
  const KdfCtxPtr ctx(EVP_KDF_CTX_new(kdf.get()));
  if (!ctx) throw_openssl("creating a scrypt context");

  uint64_t n = params.n;
  uint32_t r = params.r;
  uint32_t p = params.p;
  // OSSL_PARAM wants non-const buffers; the KDF only reads them.
  const OSSL_PARAM kdf_params[] = {
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_PASSWORD, const_cast<char*>(password.data()), password.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, const_cast<uint8_t*>(salt.data()), salt.size()),
      OSSL_PARAM_construct_uint64(OSSL_KDF_PARAM_SCRYPT_N, &n),
      OSSL_PARAM_construct_uint32(OSSL_KDF_PARAM_SCRYPT_R, &r),
      OSSL_PARAM_construct_uint32(OSSL_KDF_PARAM_SCRYPT_P, &p),
      OSSL_PARAM_construct_uint64(OSSL_KDF_PARAM_SCRYPT_MAXMEM, &max_memory),
      OSSL_PARAM_construct_end(),
  };
  Key256 key;
  if (EVP_KDF_derive(ctx.get(), key.data(), key.size(), kdf_params) != 1) throw_openssl("scrypt key derivation");
  return key;
}

}  // namespace keel::engine
