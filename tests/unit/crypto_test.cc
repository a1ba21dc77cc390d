#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "engine/crypto.h"
#include "engine/open_into.h"
#include "engine/seal_parts.h"
#include "util/error.h"

using namespace keel;
using namespace keel::engine;

namespace {

Key256 key_from_hex(std::string_view hex) {
  const Bytes bytes = from_hex(hex);
  Key256 key{};
  std::copy(bytes.begin(), bytes.end(), key.begin());  // shorter keys are zero-padded
  return key;
}

ErrorKind open_failure(const Key256& key, ByteView box, ByteView associated) {
  try {
    open_sealed(key, box, associated, "chunk 1234");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("chunk 1234") != std::string::npos);
    return e.kind();
  }
  FAIL("the box opened");
  return ErrorKind::kFailure;
}

}  // namespace

TEST_CASE("sealed boxes open to the plaintext", "[crypto]") {
  const Key256 key = random_key();
  const ByteView associated = as_bytes("id 42");

  for (size_t size : {0, 1, 15, 16, 17, 4096, 1 << 20}) {
    INFO("plaintext of " << size << " bytes");
    Bytes plain(size);
    for (size_t i = 0; i < size; ++i) plain[i] = static_cast<uint8_t>(i * 7 + 3);
    const Bytes box = seal(key, plain, associated);
    CHECK(box.size() == plain.size() + kSealOverhead);
    CHECK(open_sealed(key, box, associated, "test box") == plain);
  }
}

TEST_CASE("seal appends to the output and open resizes it", "[crypto]") {
  const Key256 key = random_key();
  const Bytes plain(100, 0x11);
  Bytes out{1, 2, 3};
  seal(key, plain, {}, out);
  REQUIRE(out.size() == 3 + plain.size() + kSealOverhead);
  CHECK(out[0] == 1);
  CHECK(out[2] == 3);

  Bytes opened(5000, 0xee);
  open_sealed(key, ByteView(out).subspan(3), {}, opened, "test box");
  CHECK(opened == plain);

  // Into a reused buffer: the plaintext at its front, the buffer not shrunk.
  Bytes buffer(5000, 0xee);
  const ByteView view = open_sealed_into(key, ByteView(out).subspan(3), {}, buffer, "test box");
  CHECK(view.data() == buffer.data());
  CHECK(Bytes(view.begin(), view.end()) == plain);
  CHECK(buffer.size() == 5000);
  Bytes altered(out.begin() + 3, out.end());
  altered[kNonceSize] ^= 1;
  CHECK_THROWS_AS(open_sealed_into(key, altered, {}, buffer, "test box"), Error);
  CHECK(buffer.empty());  // no unauthenticated plaintext left to read
}

TEST_CASE("a box sealed in two parts opens to both, replacing what the output held", "[crypto]") {
  const Key256 key = random_key();
  const ByteView ad = as_bytes("blob id");
  Bytes head = {0x00}, body(100'000);
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<uint8_t>(i * 13 + 5);
  for (size_t body_size : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{4097}, body.size()}) {
    const ByteView part = ByteView(body).first(body_size);
    Bytes joined = head;
    joined.insert(joined.end(), part.begin(), part.end());
    // Output that held more, and less, than the box.
    for (size_t held : {size_t{0}, size_t{10}, size_t{200'000}}) {
      Bytes box(held, 0xee);
      seal_parts(key, head, part, ad, box);
      INFO("body " << body_size << ", output held " << held);
      REQUIRE(box.size() == kSealOverhead + joined.size());
      CHECK(open_sealed(key, box, ad, "box") == joined);
    }
  }
  // The head alone, the body alone.
  Bytes box;
  seal_parts(key, body, {}, ad, box);
  CHECK(open_sealed(key, box, ad, "box") == body);
  seal_parts(key, {}, body, ad, box);
  CHECK(open_sealed(key, box, ad, "box") == body);
  CHECK(open_failure(key, box, as_bytes("other id")) == ErrorKind::kIntegrity);
}

TEST_CASE("any altered byte of a box fails authentication", "[crypto]") {
  const Key256 key = random_key();
  const Bytes plain(64, 0x5a);
  const Bytes associated{9, 9, 9};
  const Bytes box = seal(key, plain, associated);
  // Every byte: the nonce, the ciphertext and the tag.
  for (size_t i = 0; i < box.size(); ++i) {
    INFO("byte " << i);
    Bytes altered = box;
    altered[i] ^= 0x01;
    CHECK(open_failure(key, altered, associated) == ErrorKind::kIntegrity);
  }
}

TEST_CASE("a box does not open under another key or associated data", "[crypto]") {
  const Key256 key = random_key();
  const Bytes plain(64, 0x5a);
  const Bytes associated{1, 2, 3};
  const Bytes box = seal(key, plain, associated);

  CHECK(open_failure(random_key(), box, associated) == ErrorKind::kIntegrity);
  CHECK(open_failure(key, box, Bytes{1, 2, 4}) == ErrorKind::kIntegrity);
  CHECK(open_failure(key, box, {}) == ErrorKind::kIntegrity);
  CHECK(open_failure(key, ByteView(box).first(box.size() - 1), associated) == ErrorKind::kIntegrity);

  Bytes out(10, 1);
  CHECK_THROWS_AS(open_sealed(key, box, Bytes{1, 2, 4}, out, "x"), Error);
  CHECK(out.empty());  // no unauthenticated plaintext is left behind
}

TEST_CASE("a box shorter than nonce and tag is rejected", "[crypto]") {
  const Bytes box(kSealOverhead - 1, 0);
  try {
    open_sealed(random_key(), box, {}, "pack 7");
    FAIL("the box opened");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kIntegrity);
    CHECK(std::string(e.what()).find("pack 7") != std::string::npos);
    CHECK(std::string(e.what()).find("too short") != std::string::npos);
  }
}

TEST_CASE("sealing the same plaintext twice gives different boxes", "[crypto]") {
  const Key256 key = random_key();
  const Bytes plain(32, 0);
  const Bytes first = seal(key, plain, {});
  const Bytes second = seal(key, plain, {});
  CHECK(first != second);
  CHECK(!std::equal(first.begin(), first.begin() + kNonceSize, second.begin()));
}

TEST_CASE("nonces never repeat, across blocks drawn and in a forked child", "[crypto]") {
  const Key256 key = random_key();
  const Bytes plain = {1, 2, 3};
  auto nonce_of = [&] {
    const Bytes box = seal(key, plain, {});
    return Bytes(box.begin(), box.begin() + kNonceSize);
  };
  std::set<Bytes> seen;
  for (int i = 0; i < 1000; ++i) CHECK(seen.insert(nonce_of()).second);  // several blocks of nonces

  // The child's next nonce must not be the one the parent draws next.
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const Bytes nonce = nonce_of();
    _exit(write(fds[1], nonce.data(), nonce.size()) == static_cast<ssize_t>(nonce.size()) ? 0 : 1);
  }
  close(fds[1]);
  Bytes from_child(kNonceSize);
  const ssize_t got = read(fds[0], from_child.data(), from_child.size());
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  REQUIRE(got == static_cast<ssize_t>(kNonceSize));
  REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  const Bytes from_parent = nonce_of();
  CHECK(from_child != from_parent);
  CHECK(seen.count(from_child) == 0);
}

TEST_CASE("keyed_id is HMAC-SHA-256", "[crypto]") {
  // RFC 4231 test cases 1 and 2. HMAC zero-pads keys shorter than the hash
  // block, so a 20- or 4-byte key padded to 32 bytes gives the same MAC.
  const Key256 key1 = key_from_hex("0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b");
  CHECK(keyed_id(key1, as_bytes("Hi There")).hex() ==
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  const Key256 key2 = key_from_hex("4a656665");  // "Jefe"
  CHECK(keyed_id(key2, as_bytes("what do ya want for nothing?")).hex() ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // Back to the first key: a cached key must not leak into the next call.
  CHECK(keyed_id(key1, as_bytes("Hi There")).hex() ==
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
}

TEST_CASE("keyed ids depend on key and data", "[crypto]") {
  const Key256 key = random_key();
  const Bytes data(1000, 0x33);
  const Id id = keyed_id(key, data);
  CHECK(keyed_id(key, data) == id);
  CHECK(keyed_id(random_key(), data) != id);
  Bytes other = data;
  other.back() ^= 1;
  CHECK(keyed_id(key, other) != id);
  CHECK(keyed_id(key, {}) != id);
}

TEST_CASE("random keys differ", "[crypto]") { CHECK(random_key() != random_key()); }

TEST_CASE("derive_key is scrypt", "[crypto]") {
  // RFC 7914 section 12; a 32-byte output is the first half of the 64-byte one.
  CHECK(to_hex(derive_key("", {}, ScryptParams{16, 1, 1})) ==
        "77d6576238657b203b19ca42c18a0497f16b4844e3074ae8dfdffa3fede21442");
  CHECK(to_hex(derive_key("password", as_bytes("NaCl"), ScryptParams{1024, 8, 16})) ==
        "fdbabe1c9d3472007856e7190d01e9fe7c6ad7cbc8237830e77376634b373162");
}

TEST_CASE("derive_key is deterministic and salted", "[crypto]") {
  const Bytes salt(16, 0x21);
  const ScryptParams cheap{1024, 8, 1};
  const Key256 key = derive_key("correct horse", salt, cheap);
  CHECK(derive_key("correct horse", salt, cheap) == key);
  CHECK(derive_key("correct horse!", salt, cheap) != key);
  CHECK(derive_key("correct horse", Bytes(16, 0x22), cheap) != key);
  CHECK(derive_key("correct horse", salt, ScryptParams{2048, 8, 1}) != key);
}

TEST_CASE("derive_key works with the default parameters", "[crypto]") {
  // N=2^15, r=8 needs 32 MiB, above OpenSSL's default memory limit.
  const Bytes salt(16, 0x21);
  CHECK(derive_key("pw", salt, ScryptParams{}) == derive_key("pw", salt, ScryptParams{}));
}

TEST_CASE("derive_key rejects invalid parameters", "[crypto]") {
  for (const ScryptParams& params : {ScryptParams{1000, 8, 1}, ScryptParams{1, 8, 1}, ScryptParams{1024, 0, 1},
                                     ScryptParams{1024, 8, 0}}) {
    INFO("N " << params.n << " r " << params.r << " p " << params.p);
    try {
      derive_key("pw", {}, params);
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::kUsage);
    }
  }
}
