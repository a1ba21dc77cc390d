// RAII owners for OpenSSL EVP objects, and the error helper every user of
// OpenSSL shares.
#pragma once

#include <openssl/evp.h>
#include <openssl/kdf.h>

#include <memory>
#include <string>

namespace keel {

template <auto Free>
struct OpenSslDeleter {
  template <typename T>
  void operator()(T* p) const {
    Free(p);
  }
};

using CipherPtr = std::unique_ptr<EVP_CIPHER, OpenSslDeleter<EVP_CIPHER_free>>;
using CipherCtxPtr = std::unique_ptr<EVP_CIPHER_CTX, OpenSslDeleter<EVP_CIPHER_CTX_free>>;
using MdPtr = std::unique_ptr<EVP_MD, OpenSslDeleter<EVP_MD_free>>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, OpenSslDeleter<EVP_MD_CTX_free>>;
using MacPtr = std::unique_ptr<EVP_MAC, OpenSslDeleter<EVP_MAC_free>>;
using MacCtxPtr = std::unique_ptr<EVP_MAC_CTX, OpenSslDeleter<EVP_MAC_CTX_free>>;
using KdfPtr = std::unique_ptr<EVP_KDF, OpenSslDeleter<EVP_KDF_free>>;
using KdfCtxPtr = std::unique_ptr<EVP_KDF_CTX, OpenSslDeleter<EVP_KDF_CTX_free>>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, OpenSslDeleter<EVP_PKEY_free>>;
using PkeyCtxPtr = std::unique_ptr<EVP_PKEY_CTX, OpenSslDeleter<EVP_PKEY_CTX_free>>;

// Throws Error(kFailure) "<operation> failed: <newest OpenSSL error>" and
// clears OpenSSL's error queue.
[[noreturn]] void throw_openssl(const std::string& operation);

}  // namespace keel
