// Server-side encryption as S3 clients ask for it, answered truthfully. A
// dedupe bucket's objects are encrypted at rest with the repository's key
// (AES-256-GCM), which is what SSE-S3 (x-amz-server-side-encryption: AES256)
// promises: such buckets accept it, report AES256 on every object, and keep a
// PutBucketEncryption configuration of AES256. A raw bucket stores plain files,
// so it refuses AES256 rather than drop it silently, unless the gateway has a
// master key (sse_master_key): then a raw bucket honours AES256 (and a default
// encryption of AES256) by sealing the object's bytes (object_cipher.h) under a
// random per-object data key that the metadata keeps wrapped by the master
// key.
//
// SSE-KMS (aws:kms) is the same in both kinds of bucket, with the data key
// wrapped by the key of the gateway's local key ring (gateway_keys.h) that the
// request, the bucket's default or the gateway's default_key names; the
// metadata keeps the key id with it. A dedupe bucket then cannot deduplicate
// such objects (their sealed blocks differ).
//
// SSE-C (customer-provided keys) works in both kinds of bucket: the object's
// bytes are sealed (object_cipher.h) under a data key derived from the
// customer's key and a random per-object salt, so that what is stored cannot
// be read without the key; a dedupe bucket then cannot deduplicate them. The
// gateway keeps only the salt and a keyed check value of the key, never the
// key or its MD5, and forgets the key when the request ends.
#pragma once

#include <optional>
#include <string>

#include "engine/crypto.h"
#include "gateway/gateway_keys.h"
#include "gateway/exchange.h"
#include "gateway/request.h"
#include "gateway/s3_error.h"
#include "util/bytes.h"

namespace keel::gateway {

// How an object's or an upload's bytes are encrypted, as the metadata keeps it.
struct StoredEncryption {
  enum class Kind : uint8_t { kNone = 0, kCustomerKey = 1, kGatewayKey = 2, kKmsKey = 3 };
  Kind kind = Kind::kNone;  // kNone: stored as sent
  Bytes salt;               // kCustomerKey: the data key and the key check derive from it and the customer's key
  Bytes key_check;          // kCustomerKey: HMAC-SHA-256 of the salt under the customer's key
  // kGatewayKey (SSE-S3): the data key sealed under the gateway's master key;
  // kKmsKey (SSE-KMS): sealed under the key ring's key `kms_key_id`.
  Bytes wrapped_key;
  std::string kms_key_id;
};
Bytes encode_encryption(const StoredEncryption& encryption);  // empty when there is none
// Throws Error(kIntegrity) for a malformed record.
StoredEncryption decode_encryption(ByteView data);

// An SSE-C key as a request sends it.
struct CustomerKey {
  engine::Key256 key{};
  std::string key_md5;  // base64, as sent: responses echo it
};

// The customer key a request names in x-amz-server-side-encryption-customer-*
// (or, `copy_source`, x-amz-copy-source-server-side-encryption-customer-*);
// nullopt when it names none. S3Error as AWS answers an incomplete or invalid
// one; InvalidRequest when it comes over plain HTTP from a peer other than
// loopback (AWS requires TLS; keel lets a client on the same host go without).
std::optional<CustomerKey> customer_key(const S3Request& request, bool copy_source);

// A new object's (or upload's) SSE-C record: a fresh random salt.
StoredEncryption encrypt_with_customer_key(const CustomerKey& key);

// The data key to read or extend something written under SSE-C `stored` with
// `key`. S3Error: `key` absent for an SSE-C object (InvalidRequest), present
// for one without (InvalidRequest), or not the key it was written with (InvalidRequest,
// as AWS answers an upload's parts and RGW any read; AWS documents no code for reads).
std::optional<engine::Key256> data_key(const StoredEncryption& stored, const std::optional<CustomerKey>& key);

// The ETag of an SSE-C or SSE-KMS object or part: not the MD5 of its plaintext (which would
// let whoever sees it confirm a guess of the content), but a keyed digest of it.
std::string customer_key_etag(const engine::Key256& data_key, const std::string& md5_hex);

// x-amz-server-side-encryption-customer-algorithm and -key-MD5.
void add_customer_key_headers(Response& response, const CustomerKey& key);

// What one request does with an object's encryption: the key it sent, the
// record, and the data key that seals or opens the bytes (none: stored as sent).
struct ObjectEncryption {
  std::optional<CustomerKey> customer;
  StoredEncryption stored;
  std::optional<engine::Key256> data_key;

  // The ETag of bytes whose MD5 is `md5_hex` written under this encryption.
  std::string etag(const std::string& md5_hex) const;
  // The customer key headers, or x-amz-server-side-encryption (and, for
  // SSE-KMS, -aws-kms-key-id) for SSE-S3 and SSE-KMS. `repository_encrypts`:
  // a dedupe bucket's object, which SSE-S3 covers when nothing else does (as S3
  // since default encryption, AES256 is reported on every such object).
  void add_headers(Response& response, bool repository_encrypts) const;
};

// What a bucket's default encryption (PutBucketEncryption) asks of a write
// that names no encryption.
struct DefaultEncryption {
  std::string algorithm;   // empty (none), "AES256" or "aws:kms"
  std::string kms_key_id;  // aws:kms: KMSMasterKeyID; empty: the gateway's default key
};
// The default of a configuration as encryption_configuration wrote it (empty: none).
DefaultEncryption default_encryption(const std::string& configuration);

// A new object's or upload's, as the request's headers or else `bucket_default`
// ask: SSE-C; SSE-KMS under the key ring's key (S3Error KMS.NotFoundException
// for an id it does not hold, InvalidArgument for aws:kms with no id and no
// default key); SSE-S3 when `seals_sse_s3` (a raw bucket of a gateway with a
// master key; a dedupe bucket's repository encrypts already).
ObjectEncryption encryption_for_write(const S3Request& request, const GatewayKeys& keys, bool seals_sse_s3,
                                      const DefaultEncryption& bucket_default);
// To read, or add parts to, what was stored with `stored` (encode_encryption),
// with the key the request names (`copy_source`: its copy source's) or the
// gateway's `keys`; data_key's S3Errors.
ObjectEncryption encryption_for_read(const S3Request& request, ByteView stored, bool copy_source,
                                     const GatewayKeys& keys);

// Throws S3Error InvalidArgument for encryption headers `operation` cannot
// honour on a bucket that can (`honours_sse_s3`: a dedupe bucket, or a raw one
// of a gateway with a master key) or cannot keep SSE-S3's promise, or for
// aws:kms on a gateway without a key ring (`has_kms`). An upload's parts may
// repeat the upload's SSE-S3 or SSE-KMS headers (the upload's key applies, as
// on RGW: S3 conformance suites send them).
void check_encryption_headers(const S3Request& request, Operation operation, bool honours_sse_s3, bool has_kms);

// The refusal of SSE-S3 (`asked`: what the request asked for) on a raw bucket.
S3Error unencrypted_bucket(const std::string& bucket, const std::string& asked);

// A <ServerSideEncryptionConfiguration> body checked (AES256, or aws:kms with a
// KMSMasterKeyID of `keys`' ring or the gateway's default key) and written back
// in the form GetBucketEncryption returns.
std::string encryption_configuration(const std::string& xml, const GatewayKeys& keys);

}  // namespace keel::gateway
