// SSE-C in the gateway: the sealed object stream (object_cipher.h) over raw
// files, and the customer key checks of encryption.h.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include "gateway/config.h"
#include "gateway/encryption.h"
#include "gateway/gateway_keys.h"
#include "gateway/object_cipher.h"
#include "gateway/raw_files.h"
#include "gateway/request.h"
#include "tests/unit/body_reading.h"
#include "tests/unit/s3_error_code.h"
#include "tests/unit/temp_dir.h"
#include "tests/unit/test_support.h"
#include "util/digest.h"
#include "util/error.h"

using namespace keel;
using namespace keel::gateway;
using keel::test::error_code;
using keel::test::random_bytes;
using keel::test::slice;

namespace {

engine::Key256 key_of(uint8_t fill) {
  engine::Key256 key;
  key.fill(fill);
  return key;
}

std::string put(BucketStorage& storage, const engine::Key256& key, ByteView data) {
  auto writer = create_object_writer(storage, key);
  for (size_t at = 0, step = 1; at < data.size(); step = step * 7 % 90001 + 1) {
    const size_t n = std::min(step, data.size() - at);
    writer->write(data.subspan(at, n));
    at += n;
  }
  CHECK(writer->size() == data.size());
  return writer->commit();
}

Bytes get(BucketStorage& storage, const std::vector<Segment>& segments, uint64_t first, uint64_t length,
          const engine::Key256& key) {
  return keel::test::read_body(*read_object(storage, segments, first, length, key), length);
}

Bytes file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

// The stored file of raw segment `file` under `root`.
std::string stored_path(const std::string& root, const std::string& file) { return root + "/" + file; }

S3Request with_headers(NameValues headers, std::string client = "127.0.0.1") {
  S3Request request = parse_request("PUT", "/bucket/key", std::move(headers), {});
  request.client_address = std::move(client);
  return request;
}

NameValues customer_headers(const Bytes& key, const std::string& prefix = "x-amz-") {
  return {{prefix + "server-side-encryption-customer-algorithm", "AES256"},
          {prefix + "server-side-encryption-customer-key", to_base64(key)},
          {prefix + "server-side-encryption-customer-key-md5", to_base64(md5(key))}};
}

}  // namespace

TEST_CASE("object cipher: sealed lengths, round trips and ranges across block and segment boundaries",
          "[gateway][encryption]") {
  CHECK(sealed_length(0) == 0);
  CHECK(sealed_length(1) == 1 + engine::kSealOverhead);
  CHECK(sealed_length(kCipherBlock) == kCipherBlock + engine::kSealOverhead);
  CHECK(sealed_length(kCipherBlock + 1) == kCipherBlock + 1 + 2 * engine::kSealOverhead);

  keel::test::TempDir dir("keel-object-cipher");
  const std::string root = dir.file("bucket");
  RawFiles storage(root);
  const engine::Key256 key = key_of(7);
  const Bytes first = random_bytes(3 * kCipherBlock + 1000, 1), second = random_bytes(kCipherBlock, 2),
              third = random_bytes(13, 3);
  const std::string a = put(storage, key, first), b = put(storage, key, second), c = put(storage, key, third);
  // What is stored is the sealed stream, with nothing of the plaintext in it.
  const Bytes stored = file_bytes(stored_path(root, a));
  CHECK(stored.size() == sealed_length(first.size()));
  CHECK(std::search(stored.begin(), stored.end(), first.begin() + 5000, first.begin() + 5032) == stored.end());

  const std::vector<Segment> one{{a, first.size()}};
  CHECK(get(storage, one, 0, first.size(), key) == first);
  CHECK(get(storage, one, 0, 0, key).empty());
  for (const uint64_t boundary : {kCipherBlock, 2 * kCipherBlock, 3 * kCipherBlock}) {
    CHECK(get(storage, one, boundary - 3, 8, key) == slice(first, boundary - 3, 8));  // straddles a block edge
    CHECK(get(storage, one, boundary, 1, key) == slice(first, boundary, 1));          // starts on one
    CHECK(get(storage, one, boundary - 1, 1, key) == slice(first, boundary - 1, 1));  // ends on one
  }
  CHECK(get(storage, one, first.size() - 1, 1, key) == slice(first, first.size() - 1, 1));

  // Three segments, as a completed multipart upload: ranges inside and across them.
  Bytes all = first;
  all.insert(all.end(), second.begin(), second.end());
  all.insert(all.end(), third.begin(), third.end());
  const std::vector<Segment> three{{a, first.size()}, {b, second.size()}, {c, third.size()}};
  CHECK(get(storage, three, 0, all.size(), key) == all);
  CHECK(get(storage, three, first.size() - 10, 20, key) == slice(all, first.size() - 10, 20));
  CHECK(get(storage, three, first.size(), second.size(), key) == second);
  CHECK(get(storage, three, 100, all.size() - 105, key) == slice(all, 100, all.size() - 105));
  CHECK(get(storage, three, all.size() - 14, 14, key) == slice(all, all.size() - 14, 14));
  CHECK_THROWS(read_object(storage, three, all.size() - 1, 2, key));
}

TEST_CASE("object cipher: another key, an altered, moved or truncated block fails the read", "[gateway][encryption]") {
  keel::test::TempDir dir("keel-object-cipher");
  const std::string root = dir.file("bucket");
  RawFiles storage(root);
  const engine::Key256 key = key_of(1);
  const Bytes data = random_bytes(2 * kCipherBlock, 4);
  const std::string a = put(storage, key, data);
  const std::vector<Segment> segments{{a, data.size()}};
  const auto read_fails = [&](const engine::Key256& with, uint64_t first, uint64_t length) {
    try {
      get(storage, segments, first, length, with);
    } catch (const Error&) {
      return true;
    }
    return false;
  };
  CHECK(read_fails(key_of(2), 0, 10));
  CHECK_FALSE(read_fails(key, 0, 10));

  const std::string path = stored_path(root, a);
  const Bytes stored = file_bytes(path);
  const auto rewrite = [&](const Bytes& bytes) {
    std::filesystem::permissions(path, std::filesystem::perms::owner_write, std::filesystem::perm_options::add);
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(bytes.data()),
                                                                   static_cast<std::streamsize>(bytes.size()));
  };
  Bytes flipped = stored;
  flipped[stored.size() - 100] ^= 1;  // in the second block's ciphertext
  rewrite(flipped);
  CHECK_FALSE(read_fails(key, 0, 10));  // the first block is intact
  CHECK(read_fails(key, kCipherBlock + 5, 10));

  // The blocks swapped (both full, so their lengths match): each sits at the other's index.
  const size_t sealed_block = kCipherBlock + engine::kSealOverhead;
  Bytes swapped(stored.begin() + static_cast<std::ptrdiff_t>(sealed_block), stored.end());
  swapped.insert(swapped.end(), stored.begin(), stored.begin() + static_cast<std::ptrdiff_t>(sealed_block));
  rewrite(swapped);
  CHECK(read_fails(key, 0, 10));

  rewrite(Bytes(stored.begin(), stored.end() - 1));
  CHECK(read_fails(key, kCipherBlock, 10));
}

TEST_CASE("SSE-C: customer key headers checked as AWS checks them, keys checked by a keyed value",
          "[gateway][encryption]") {
  const Bytes key(32, 0x11), other(32, 0x22);
  const auto code = [](const S3Request& request) { return error_code([&] { customer_key(request, false); }); };
  CHECK_FALSE(customer_key(with_headers({}), false));
  const auto parsed = customer_key(with_headers(customer_headers(key)), false);
  REQUIRE(parsed);
  CHECK(Bytes(parsed->key.begin(), parsed->key.end()) == key);
  // The copy source's key is read from its own headers.
  CHECK_FALSE(customer_key(with_headers(customer_headers(key)), true));
  CHECK(customer_key(with_headers(customer_headers(key, "x-amz-copy-source-")), true));

  NameValues h = customer_headers(key);
  CHECK(code(with_headers({h[1], h[2]})) == "InvalidArgument");  // no algorithm
  CHECK(code(with_headers({h[0], h[2]})) == "InvalidArgument");  // no key
  CHECK(code(with_headers({h[0], h[1]})) == "InvalidArgument");  // no MD5
  CHECK(code(with_headers({{h[0].first, "AES128"}, h[1], h[2]})) == "InvalidEncryptionAlgorithmError");
  CHECK(code(with_headers({h[0], h[1], {h[2].first, to_base64(md5(other))}})) == "InvalidArgument");
  const Bytes short_key(16, 1);
  CHECK(code(with_headers(customer_headers(short_key))) == "InvalidArgument");
  CHECK(code(with_headers({h[0], {h[1].first, "not base64!"}, h[2]})) == "InvalidArgument");
  // Plain HTTP only from loopback; TLS from anywhere.
  CHECK(code(with_headers(h, "192.0.2.1")) == "InvalidRequest");
  CHECK(code(with_headers(h, "::1")) == "");
  S3Request over_tls = with_headers(h, "192.0.2.1");
  over_tls.secure = true;
  CHECK(code(over_tls) == "");

  const StoredEncryption stored = encrypt_with_customer_key(*parsed);
  const Bytes record = encode_encryption(stored);
  // Neither the key nor its MD5 is kept.
  CHECK(std::search(record.begin(), record.end(), key.begin(), key.end()) == record.end());
  const Bytes key_md5 = md5(key);
  CHECK(std::search(record.begin(), record.end(), key_md5.begin(), key_md5.end()) == record.end());
  const StoredEncryption decoded = decode_encryption(record);
  CHECK(decoded.kind == StoredEncryption::Kind::kCustomerKey);
  CHECK(decode_encryption({}).kind == StoredEncryption::Kind::kNone);
  CHECK(encode_encryption({}).empty());

  const auto data = data_key(decoded, parsed);
  REQUIRE(data);
  // The same key opens it again; the salt makes every object's data key its own.
  CHECK(*data_key(decoded, customer_key(with_headers(customer_headers(key)), false)) == *data);
  CHECK(*data_key(encrypt_with_customer_key(*parsed), parsed) != *data);
  const auto wrong = customer_key(with_headers(customer_headers(other)), false);
  CHECK(error_code([&] { data_key(decoded, wrong); }) == "InvalidRequest");
  CHECK(error_code([&] { data_key(decoded, std::nullopt); }) == "InvalidRequest");
  CHECK(error_code([&] { data_key(StoredEncryption{}, parsed); }) == "InvalidRequest");
  CHECK_FALSE(data_key(StoredEncryption{}, std::nullopt));

  // The ETag is keyed: not the plaintext's MD5, and not the same under another object's key.
  const std::string plain_md5 = to_hex(md5(as_bytes(std::string("hello"))));
  CHECK(customer_key_etag(*data, plain_md5) != plain_md5);
  CHECK(customer_key_etag(*data, plain_md5).size() == 32);
  CHECK(customer_key_etag(*data, plain_md5) != customer_key_etag(key_of(3), plain_md5));
}

TEST_CASE("SSE-S3: the master key file, per-object data keys wrapped by it", "[gateway][encryption]") {
  keel::test::TempDir dir("keel-sse-s3");
  const std::string path = dir.file("master.key");
  const engine::Key256 master = load_key_file(path, "sse_master_key");  // made on first use
  CHECK((std::filesystem::status(path).permissions() & std::filesystem::perms::all) ==
        (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));
  CHECK(load_key_file(path, "sse_master_key") == master);
  std::filesystem::permissions(path, std::filesystem::perms::group_read, std::filesystem::perm_options::add);
  CHECK_THROWS_WITH(load_key_file(path, "sse_master_key"), Catch::Contains("chmod 600"));
  std::ofstream(dir.file("short.key")) << "short";
  std::filesystem::permissions(dir.file("short.key"), std::filesystem::perms::owner_read |
                                                          std::filesystem::perms::owner_write);
  CHECK_THROWS_WITH(load_key_file(dir.file("short.key"), "sse_master_key"), Catch::Contains("32 bytes"));

  const S3Request asks = with_headers({{"x-amz-server-side-encryption", "AES256"}});
  const S3Request plain = with_headers({});
  GatewayKeys keys;
  keys.set_master(master);
  const DefaultEncryption sse_s3_default{"AES256", ""};
  // Not sealed here where the repository encrypts (a dedupe bucket); without the header or default, neither.
  CHECK_FALSE(encryption_for_write(asks, keys, false, sse_s3_default).data_key);
  CHECK_FALSE(encryption_for_write(asks, GatewayKeys{}, true, sse_s3_default).data_key);
  CHECK_FALSE(encryption_for_write(plain, keys, true, {}).data_key);
  const ObjectEncryption by_default = encryption_for_write(plain, keys, true, sse_s3_default);
  const ObjectEncryption written = encryption_for_write(asks, keys, true, {});
  REQUIRE(written.data_key);
  REQUIRE(by_default.data_key);
  CHECK(*written.data_key != *by_default.data_key);
  CHECK(written.etag("abc") == "abc");  // SSE-S3 ETags are the MD5, as AWS
  const Bytes record = encode_encryption(written.stored);
  CHECK(std::search(record.begin(), record.end(), written.data_key->begin(), written.data_key->end()) == record.end());
  CHECK(*encryption_for_read(plain, record, false, keys).data_key == *written.data_key);
  GatewayKeys other;
  other.set_master(key_of(9));
  CHECK_THROWS_AS(encryption_for_read(plain, record, false, other), Error);
  CHECK_THROWS_AS(encryption_for_read(plain, record, false, GatewayKeys{}), Error);
  CHECK(error_code([&] { encryption_for_read(with_headers(customer_headers(Bytes(32, 1))), record, false, keys); }) ==
        "InvalidRequest");
  Response r;
  written.add_headers(r, false);
  CHECK(r.headers == NameValues{{"x-amz-server-side-encryption", "AES256"}});
  // A dedupe bucket's object is SSE-S3's by its repository; a raw bucket's plain one is nobody's.
  Response dedupe, raw;
  encryption_for_write(plain, keys, false, {}).add_headers(dedupe, true);
  encryption_for_write(plain, keys, false, {}).add_headers(raw, false);
  CHECK(dedupe.headers == r.headers);
  CHECK(raw.headers.empty());
}

TEST_CASE("SSE-KMS: data keys wrapped by the named key of the key ring", "[gateway][encryption]") {
  GatewayKeys keys;
  keys.set_master(key_of(1));
  keys.add_kms_key("testkey-1", key_of(2));
  keys.add_kms_key("testkey-2", key_of(3));
  const auto kms = [](const std::string& id) {
    NameValues h{{"x-amz-server-side-encryption", "aws:kms"}};
    if (!id.empty()) h.emplace_back("x-amz-server-side-encryption-aws-kms-key-id", id);
    return with_headers(std::move(h));
  };
  const S3Request plain = with_headers({});
  const ObjectEncryption one = encryption_for_write(kms("testkey-1"), keys, false, {});
  const ObjectEncryption two = encryption_for_write(kms("testkey-2"), keys, false, {});
  REQUIRE(one.data_key);
  REQUIRE(two.data_key);
  CHECK(one.stored.kind == StoredEncryption::Kind::kKmsKey);
  CHECK(one.stored.kms_key_id == "testkey-1");
  CHECK(*one.data_key != *two.data_key);
  // The ETag is keyed, as SSE-C's: AWS's SSE-KMS ETags are not the plaintext's MD5 either.
  CHECK(one.etag("abc") != "abc");
  Response r;
  one.add_headers(r, true);  // aws:kms alone, also in a dedupe bucket
  CHECK(r.headers == NameValues{{"x-amz-server-side-encryption", "aws:kms"},
                                {"x-amz-server-side-encryption-aws-kms-key-id", "testkey-1"}});

  // The record keeps the id and the wrapped key, not the data key; reading needs that id's key.
  const Bytes record = encode_encryption(one.stored);
  CHECK(std::search(record.begin(), record.end(), one.data_key->begin(), one.data_key->end()) == record.end());
  CHECK(decode_encryption(record).kms_key_id == "testkey-1");
  CHECK(*encryption_for_read(plain, record, false, keys).data_key == *one.data_key);
  GatewayKeys swapped;  // the same ids, the keys exchanged: the wrapped key does not open
  swapped.add_kms_key("testkey-1", key_of(3));
  swapped.add_kms_key("testkey-2", key_of(2));
  CHECK_THROWS_AS(encryption_for_read(plain, record, false, swapped), Error);
  CHECK_THROWS_AS(encryption_for_read(plain, record, false, GatewayKeys{}), Error);
  // A record edited to name the other key does not open under it (the id is sealed with the data key).
  StoredEncryption renamed = one.stored;
  renamed.kms_key_id = "testkey-2";
  CHECK_THROWS_AS(encryption_for_read(plain, encode_encryption(renamed), false, swapped), Error);

  // Unknown ids; no id: the bucket's default, then the gateway's default key, else refused.
  CHECK(error_code([&] { encryption_for_write(kms("nokey"), keys, false, {}); }) == "KMS.NotFoundException");
  CHECK(error_code([&] { encryption_for_write(kms(""), keys, false, {}); }) == "InvalidArgument");
  const DefaultEncryption bucket_kms{"aws:kms", "testkey-2"};
  CHECK(encryption_for_write(kms(""), keys, false, bucket_kms).stored.kms_key_id == "testkey-2");
  CHECK(encryption_for_write(plain, keys, false, bucket_kms).stored.kms_key_id == "testkey-2");
  CHECK(encryption_for_write(kms("testkey-1"), keys, false, bucket_kms).stored.kms_key_id == "testkey-1");
  // A request's AES256 wins over the bucket's aws:kms default.
  CHECK(encryption_for_write(with_headers({{"x-amz-server-side-encryption", "AES256"}}), keys, true, bucket_kms)
            .stored.kind == StoredEncryption::Kind::kGatewayKey);
  keys.set_default_kms_key("testkey-1");
  CHECK(encryption_for_write(kms(""), keys, false, {}).stored.kms_key_id == "testkey-1");
  CHECK(encryption_for_write(plain, keys, false, {"aws:kms", ""}).stored.kms_key_id == "testkey-1");
  CHECK(error_code([&] { encryption_for_read(with_headers(customer_headers(Bytes(32, 1))), record, false, keys); }) ==
        "InvalidRequest");
}

TEST_CASE("SSE-KMS: the [kms] key ring in the configuration", "[gateway][encryption]") {
  keel::test::TempDir dir("keel-sse-kms");
  const auto parse = [&](const std::string& kms) {
    std::istringstream in("[server]\nlisten = 127.0.0.1:0\nstate_dir = " + dir.path.string() + "\n[kms]\n" + kms);
    return GatewayConfig::parse(in, "kms.conf");
  };
  const GatewayConfig config = parse("testkey-1 = " + dir.file("one.key") + "\narn:aws:kms:us-east-1:1:key/a-b = " +
                                     dir.file("two.key") + "\ndefault_key = testkey-1\n");
  CHECK(config.kms_keys == std::map<std::string, std::string>{{"testkey-1", dir.file("one.key")},
                                                              {"arn:aws:kms:us-east-1:1:key/a-b", dir.file("two.key")}});
  CHECK(config.kms_default_key == "testkey-1");
  CHECK_THROWS_WITH(parse("default_key = nokey\ntestkey-1 = " + dir.file("one.key")), Catch::Contains("nokey"));
  CHECK_THROWS_WITH(parse("bad key = " + dir.file("one.key")), Catch::Contains("a key id is"));
  CHECK_THROWS_WITH(parse("testkey-1 =\n"), Catch::Contains("needs the file"));
  CHECK_THROWS_WITH(parse("k = a\nk = b\n"), Catch::Contains("duplicate key"));

  // Loading makes the missing key files (0600), each its own key, the same on the next start.
  const GatewayKeys keys = GatewayKeys::load(config);
  REQUIRE(keys.kms_key("testkey-1"));
  REQUIRE(keys.kms_key("arn:aws:kms:us-east-1:1:key/a-b"));
  CHECK_FALSE(keys.kms_key("testkey-2"));
  CHECK_FALSE(keys.master());
  CHECK(keys.default_kms_key() == "testkey-1");
  CHECK(*keys.kms_key("testkey-1") != *keys.kms_key("arn:aws:kms:us-east-1:1:key/a-b"));
  CHECK((std::filesystem::status(dir.file("one.key")).permissions() & std::filesystem::perms::all) ==
        (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));
  CHECK(*GatewayKeys::load(config).kms_key("testkey-1") == *keys.kms_key("testkey-1"));
  std::filesystem::permissions(dir.file("two.key"), std::filesystem::perms::others_read, std::filesystem::perm_options::add);
  CHECK_THROWS_WITH(GatewayKeys::load(config), Catch::Contains("[kms] arn:aws:kms:us-east-1:1:key/a-b"));
}
