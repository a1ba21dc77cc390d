// Sealing to a public key (ECIES over X25519), so that a writer can seal what
// only the holder of the private key opens: format-2 repositories seal each
// writer's blob key and every snapshot record this way (repository-format.md).
//
//   sealed = ephemeral public key (32) || box(HKDF-SHA-256(X25519(ephemeral,
//            recipient), salt ephemeral || recipient, info "keel seal to public key"),
//            associated data)
//
// A fresh ephemeral key pair per call: the sender keeps nothing that opens it.
#pragma once

#include "engine/crypto.h"
#include "util/bytes.h"

namespace keel::engine {

constexpr size_t kPublicSealOverhead = 32 + kSealOverhead;

struct SealingKeyPair {
  Key256 private_key;
  Key256 public_key;

  static SealingKeyPair generate();
  // The pair whose private half is `private_key`.
  static SealingKeyPair from_private(const Key256& private_key);
};

// Appends the sealed form of `plain` to `out`.
void seal_to(const Key256& public_key, ByteView plain, ByteView associated, Bytes& out);
Bytes seal_to(const Key256& public_key, ByteView plain, ByteView associated);

// Opens what seal_to sealed for this pair. Throws Error(kIntegrity) naming
// `what` if it is short, altered, sealed to another key or under other
// associated data.
Bytes open_sealed_to(const SealingKeyPair& pair, ByteView sealed, ByteView associated, const std::string& what);

}  // namespace keel::engine
