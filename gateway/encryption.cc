#include "gateway/encryption.h"

#include <algorithm>

#include "gateway/s3_api_util.h"
#include "gateway/s3_error.h"
#include "gateway/xml_reader.h"
#include "util/codec.h"
#include "util/digest.h"
#include "util/error.h"
#include "util/xml.h"

namespace keel::gateway {

namespace {

constexpr const char* kSseS3 = "AES256";
constexpr const char* kSseKms = "aws:kms";
constexpr const char* kKmsKeyIdHeader = "x-amz-server-side-encryption-aws-kms-key-id";

bool writes_object(Operation operation) {
  return operation == Operation::kPutObject || operation == Operation::kCopyObject ||
         operation == Operation::kCreateMultipartUpload;
}

using Kind = StoredEncryption::Kind;
// Domain separation of what is derived from a customer's key.
constexpr std::string_view kDataKeyLabel = "keel gateway sse-c data key";
constexpr std::string_view kKeyCheckLabel = "keel gateway sse-c key check";
constexpr std::string_view kEtagLabel = "keel gateway sse-c etag";
constexpr std::string_view kWrappedKeyLabel = "keel gateway sse-s3 data key";
constexpr std::string_view kKmsWrappedKeyLabel = "keel gateway sse-kms data key ";

engine::Key256 as_key(const Id& id) {
  engine::Key256 key;
  std::copy(id.bytes.begin(), id.bytes.end(), key.begin());
  return key;
}

Bytes labelled(std::string_view label, ByteView data) {
  Bytes out(label.begin(), label.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

Bytes key_check(const engine::Key256& key, ByteView salt) {
  const Id check = engine::keyed_id(key, labelled(kKeyCheckLabel, salt));
  return Bytes(check.bytes.begin(), check.bytes.end());
}

// The associated data a data key is sealed with: SSE-S3's label, or SSE-KMS's
// and the key id, so that a record cannot be made to name another key.
Bytes wrapping_label(const StoredEncryption& stored) {
  if (stored.kind == Kind::kKmsKey) return labelled(kKmsWrappedKeyLabel, as_bytes(stored.kms_key_id));
  return Bytes(kWrappedKeyLabel.begin(), kWrappedKeyLabel.end());
}

// A fresh random data key for `out` (kind and key id set), wrapped by `wrapping`.
void wrap_new_data_key(ObjectEncryption& out, const engine::Key256& wrapping) {
  out.data_key = engine::random_key();
  out.stored.wrapped_key = engine::seal(wrapping, *out.data_key, wrapping_label(out.stored));
}

S3Error kms_key_not_found(const std::string& id) {
  return S3Error("KMS.NotFoundException", "Invalid keyId '" + id + "': the gateway's key ring ([kms]) has no such key");
}

bool is_loopback(const std::string& address) {
  return address.starts_with("127.") || address == "::1" || address.starts_with("::ffff:127.");
}

}  // namespace

Bytes encode_encryption(const StoredEncryption& encryption) {
  if (encryption.kind == Kind::kNone) return {};
  Encoder e;
  e.u8(static_cast<uint8_t>(encryption.kind));
  if (encryption.kind == Kind::kCustomerKey) {
    e.bytes(encryption.salt);
    e.bytes(encryption.key_check);
  } else {
    e.bytes(encryption.wrapped_key);
    if (encryption.kind == Kind::kKmsKey) e.bytes(as_bytes(encryption.kms_key_id));
  }
  return e.take();
}

StoredEncryption decode_encryption(ByteView data) {
  StoredEncryption out;
  if (data.empty()) return out;
  Decoder d(data, "gateway object encryption");
  const auto field = [&] {
    const ByteView value = d.bytes();
    return Bytes(value.begin(), value.end());
  };
  const uint8_t kind = d.u8();
  if (kind == static_cast<uint8_t>(Kind::kCustomerKey)) {
    out.kind = Kind::kCustomerKey;
    out.salt = field();
    out.key_check = field();
  } else if (kind == static_cast<uint8_t>(Kind::kGatewayKey) || kind == static_cast<uint8_t>(Kind::kKmsKey)) {
    out.kind = static_cast<Kind>(kind);
    out.wrapped_key = field();
    if (out.kind == Kind::kKmsKey) {
      const Bytes id = field();
      out.kms_key_id.assign(id.begin(), id.end());
    }
  } else {
    d.fail("unknown kind " + std::to_string(kind));
  }
  d.expect_done();
  return out;
}

std::optional<CustomerKey> customer_key(const S3Request& request, bool copy_source) {
  const std::string prefix = copy_source ? "x-amz-copy-source-server-side-encryption-customer-"
                                         : "x-amz-server-side-encryption-customer-";
  const bool has_algorithm = request.has_header(prefix + "algorithm");
  const bool has_key = request.has_header(prefix + "key");
  const bool has_md5 = request.has_header(prefix + "key-md5");
  if (!has_algorithm && !has_key && !has_md5) return std::nullopt;
  // The checks and messages of AWS, in its order.
  if (!has_algorithm) {
    throw S3Error("InvalidArgument", "Requests specifying Server Side Encryption with Customer provided keys must "
                                     "provide a valid encryption algorithm.");
  }
  if (request.header(prefix + "algorithm") != kSseS3) {
    throw S3Error("InvalidEncryptionAlgorithmError", "The encryption algorithm you specified is not valid: "
                                                     "Server Side Encryption with Customer provided keys takes AES256.");
  }
  if (!has_key) {
    throw S3Error("InvalidArgument", "Requests specifying Server Side Encryption with Customer provided keys must "
                                     "provide an appropriate secret key.");
  }
  if (!has_md5) {
    throw S3Error("InvalidArgument", "Requests specifying Server Side Encryption with Customer provided keys must "
                                     "provide the client calculated MD5 of the secret key.");
  }
  if (!request.secure && !is_loopback(request.client_address)) {
    throw S3Error("InvalidRequest", "Requests specifying Server Side Encryption with Customer provided keys must be "
                                    "made over a secure connection (keel accepts plain HTTP from loopback only).");
  }
  Bytes key;
  try {
    key = from_base64(request.header(prefix + "key"));
  } catch (const Error&) {
    key.clear();
  }
  if (key.size() != engine::Key256().size()) {
    throw S3Error("InvalidArgument", "The secret key was invalid for the specified algorithm: AES256 takes a "
                                     "base64-encoded 256-bit key.");
  }
  CustomerKey out;
  std::copy(key.begin(), key.end(), out.key.begin());
  out.key_md5 = request.header(prefix + "key-md5");
  if (to_base64(md5(key)) != out.key_md5) {
    throw S3Error("InvalidArgument", "The calculated MD5 hash of the key did not match the hash that was provided.");
  }
  return out;
}

StoredEncryption encrypt_with_customer_key(const CustomerKey& key) {
  StoredEncryption out;
  out.kind = Kind::kCustomerKey;
  const engine::Key256 salt = engine::random_key();
  out.salt.assign(salt.begin(), salt.end());
  out.key_check = key_check(key.key, out.salt);
  return out;
}

std::optional<engine::Key256> data_key(const StoredEncryption& stored, const std::optional<CustomerKey>& key) {
  if (stored.kind != Kind::kCustomerKey) {
    if (key) throw S3Error("InvalidRequest", "The encryption parameters are not applicable to this object.");
    return std::nullopt;
  }
  if (!key) {
    throw S3Error("InvalidRequest", "The object was stored using a form of Server Side Encryption. The correct "
                                    "parameters must be provided to retrieve the object.");
  }
  if (key_check(key->key, stored.salt) != stored.key_check) {
    throw S3Error("InvalidRequest", "The provided encryption parameters did not match the ones used originally.");
  }
  return as_key(engine::keyed_id(key->key, labelled(kDataKeyLabel, stored.salt)));
}

std::string customer_key_etag(const engine::Key256& data_key, const std::string& md5_hex) {
  const Id digest = engine::keyed_id(data_key, labelled(kEtagLabel, as_bytes(md5_hex)));
  return to_hex(ByteView(digest.bytes.data(), 16));
}

void add_customer_key_headers(Response& response, const CustomerKey& key) {
  response.headers.emplace_back("x-amz-server-side-encryption-customer-algorithm", kSseS3);
  response.headers.emplace_back("x-amz-server-side-encryption-customer-key-md5", key.key_md5);
}

void check_encryption_headers(const S3Request& request, Operation operation, bool honours_sse_s3, bool has_kms) {
  const bool reads = operation == Operation::kGetObject || operation == Operation::kHeadObject;
  const bool parts = operation == Operation::kUploadPart || operation == Operation::kUploadPartCopy;
  if (!reads && !parts && !writes_object(operation)) return;
  const std::string sse = request.header("x-amz-server-side-encryption");
  const bool kms_key = request.has_header(kKmsKeyIdHeader);
  if (sse.empty() && !kms_key) return;
  if (request.has_header("x-amz-server-side-encryption-customer-algorithm")) {
    throw S3Error("InvalidArgument", "Server Side Encryption with Customer provided key is incompatible with the "
                                     "encryption method specified");
  }
  if (reads) {
    // As S3: an object's encryption is chosen when it is written, not asked for on reads.
    throw S3Error("InvalidArgument", "x-amz-server-side-encryption is only valid when an object is written");
  }
  if (kms_key && sse != kSseKms) {
    throw S3Error("InvalidArgument", "Server Side Encryption with AWS KMS managed key requires HTTP header "
                                     "x-amz-server-side-encryption : aws:kms");
  }
  if (sse != kSseS3 && sse != kSseKms) {
    throw S3Error("InvalidArgument", "x-amz-server-side-encryption '" + sse + "' is not valid: AES256 or aws:kms");
  }
  if (parts) return;  // the upload's encryption applies to its parts
  if (sse == kSseKms && !has_kms) {
    throw S3Error("InvalidArgument", "aws:kms: the gateway has no KMS key ring ([kms] in its configuration)");
  }
  if (sse == kSseS3 && !honours_sse_s3) throw unencrypted_bucket(request.bucket, "x-amz-server-side-encryption: AES256");
}

std::string ObjectEncryption::etag(const std::string& md5_hex) const {
  // SSE-S3 ETags stay the MD5, as on AWS: whoever reads the listing may read the object.
  // SSE-C's and SSE-KMS's are not the MD5 of the plaintext on AWS either.
  const bool keyed = customer || stored.kind == Kind::kKmsKey;
  return keyed && data_key ? customer_key_etag(*data_key, md5_hex) : md5_hex;
}

void ObjectEncryption::add_headers(Response& response, bool repository_encrypts) const {
  if (customer) add_customer_key_headers(response, *customer);
  const bool sse_s3 = stored.kind == Kind::kGatewayKey || (stored.kind == Kind::kNone && repository_encrypts);
  if (sse_s3) response.headers.emplace_back("x-amz-server-side-encryption", kSseS3);
  if (stored.kind == Kind::kKmsKey) {
    response.headers.emplace_back("x-amz-server-side-encryption", kSseKms);
    response.headers.emplace_back(kKmsKeyIdHeader, stored.kms_key_id);
  }
}

DefaultEncryption default_encryption(const std::string& configuration) {
  DefaultEncryption out;
  if (configuration.empty()) return out;
  const auto tree = read_xml_body(configuration);
  const std::string rule = "ServerSideEncryptionConfiguration.Rule.ApplyServerSideEncryptionByDefault.";
  out.algorithm = xml_value(tree, rule + "SSEAlgorithm");
  out.kms_key_id = xml_value(tree, rule + "KMSMasterKeyID");
  return out;
}

ObjectEncryption encryption_for_write(const S3Request& request, const GatewayKeys& keys, bool seals_sse_s3,
                                      const DefaultEncryption& bucket_default) {
  ObjectEncryption out;
  out.customer = customer_key(request, false);
  if (out.customer) {
    out.stored = encrypt_with_customer_key(*out.customer);
    out.data_key = data_key(out.stored, out.customer);
    return out;
  }
  const std::string asked = request.header("x-amz-server-side-encryption");
  const std::string algorithm = asked.empty() ? bucket_default.algorithm : asked;
  if (algorithm == kSseKms) {
    // The request's key id, else its bucket's (when that default is aws:kms too), else the gateway's.
    std::string id = request.header(kKmsKeyIdHeader);
    if (id.empty() && bucket_default.algorithm == kSseKms) id = bucket_default.kms_key_id;
    if (id.empty()) id = keys.default_kms_key();
    if (id.empty()) {
      throw S3Error("InvalidArgument", "Server Side Encryption with KMS managed key requires HTTP header "
                                       "x-amz-server-side-encryption-aws-kms-key-id (the gateway has no default_key)");
    }
    const engine::Key256* key = keys.kms_key(id);
    if (!key) throw kms_key_not_found(id);
    out.stored.kind = Kind::kKmsKey;
    out.stored.kms_key_id = id;
    wrap_new_data_key(out, *key);
  } else if (algorithm == kSseS3 && seals_sse_s3 && keys.master()) {
    out.stored.kind = Kind::kGatewayKey;
    wrap_new_data_key(out, *keys.master());
  }
  return out;
}

ObjectEncryption encryption_for_read(const S3Request& request, ByteView stored, bool copy_source,
                                     const GatewayKeys& keys) {
  ObjectEncryption out;
  out.customer = customer_key(request, copy_source);
  out.stored = decode_encryption(stored);
  if (out.stored.kind != Kind::kGatewayKey && out.stored.kind != Kind::kKmsKey) {
    out.data_key = data_key(out.stored, out.customer);
    return out;
  }
  if (out.customer) throw S3Error("InvalidRequest", "The encryption parameters are not applicable to this object.");
  const bool kms = out.stored.kind == Kind::kKmsKey;
  const engine::Key256* wrapping = kms ? keys.kms_key(out.stored.kms_key_id) : keys.master();
  if (!wrapping) {
    throw Error(ErrorKind::kUsage, kms ? "gateway: an object is encrypted with the key ring's key '" +
                                             out.stored.kms_key_id + "' (SSE-KMS), which [kms] no longer names"
                                       : "gateway: an object is encrypted with the gateway's master key (SSE-S3), "
                                         "and the configuration names no sse_master_key");
  }
  const Bytes key = engine::open_sealed(*wrapping, out.stored.wrapped_key, wrapping_label(out.stored),
                                        kms ? "an SSE-KMS object's data key (is the key file of '" +
                                                  out.stored.kms_key_id + "' the one it was written with?)"
                                            : "an SSE-S3 object's data key (is sse_master_key the key it was "
                                              "written with?)");
  out.data_key.emplace();
  std::copy(key.begin(), key.end(), out.data_key->begin());
  return out;
}

S3Error unencrypted_bucket(const std::string& bucket, const std::string& asked) {
  return S3Error("InvalidArgument", "the bucket '" + bucket + "' is a raw bucket, whose objects are stored "
                                    "unencrypted; " + asked + " needs a dedupe bucket, or an "
                                    "sse_master_key in the gateway's configuration");
}

std::string encryption_configuration(const std::string& xml, const GatewayKeys& keys) {
  const auto tree = read_xml_body(xml);
  const auto root = tree.get_child_optional("ServerSideEncryptionConfiguration");
  if (!root) throw S3Error("MalformedXML", "the body is not a <ServerSideEncryptionConfiguration> document");
  size_t rules = 0;
  std::string algorithm, kms_key_id;
  for (const auto& [name, rule] : *root) {
    if (name != "Rule") continue;
    ++rules;
    algorithm = xml_value(rule, "ApplyServerSideEncryptionByDefault.SSEAlgorithm");
    kms_key_id = xml_value(rule, "ApplyServerSideEncryptionByDefault.KMSMasterKeyID");
  }
  if (rules != 1) throw S3Error("MalformedXML", "a ServerSideEncryptionConfiguration holds one Rule");
  if (algorithm != kSseS3 && algorithm != kSseKms) {
    throw S3Error("InvalidArgument", "SSEAlgorithm '" + algorithm + "' is not valid: AES256 or aws:kms");
  }
  if (algorithm == kSseS3 && !kms_key_id.empty()) {
    throw S3Error("InvalidArgument", "KMSMasterKeyID is only valid with SSEAlgorithm aws:kms");
  }
  if (algorithm == kSseKms) {
    if (!keys.has_kms()) {
      throw S3Error("InvalidArgument", "aws:kms: the gateway has no KMS key ring ([kms] in its configuration)");
    }
    // Checked now rather than at each write: a default that cannot encrypt would refuse every PUT.
    if (kms_key_id.empty() && keys.default_kms_key().empty()) {
      throw S3Error("InvalidArgument", "aws:kms needs a KMSMasterKeyID: the gateway has no default_key");
    }
    if (!kms_key_id.empty() && !keys.kms_key(kms_key_id)) throw kms_key_not_found(kms_key_id);
  }
  XmlWriter out;
  out.open("ServerSideEncryptionConfiguration", kS3Namespace)
      .open("Rule")
      .open("ApplyServerSideEncryptionByDefault")
      .element("SSEAlgorithm", algorithm);
  if (!kms_key_id.empty()) out.element("KMSMasterKeyID", kms_key_id);
  return out.finish();
}

}  // namespace keel::gateway
