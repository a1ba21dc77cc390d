#include "gateway/encryption.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "gateway/s3_api_util.h"
#include "gateway/s3_error.h"
#include "gateway/xml_reader.h"
#include "util/codec.h"
#include "util/digest.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/xml.h"

namespace keel::gateway {

namespace {

constexpr const char* kSseS3 = "AES256";

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
  } else if (kind == static_cast<uint8_t>(Kind::kGatewayKey)) {
    out.kind = Kind::kGatewayKey;
    out.wrapped_key = field();
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

std::optional<engine::Key256> data_key(const StoredEncryption& stored, const std::optional<CustomerKey>& key,
                                       const std::string& wrong_key_code) {
  if (stored.kind != Kind::kCustomerKey) {
    if (key) throw S3Error("InvalidRequest", "The encryption parameters are not applicable to this object.");
    return std::nullopt;
  }
  if (!key) {
    throw S3Error("InvalidRequest", "The object was stored using a form of Server Side Encryption. The correct "
                                    "parameters must be provided to retrieve the object.");
  }
  if (key_check(key->key, stored.salt) != stored.key_check) {
    throw S3Error(wrong_key_code, wrong_key_code == "AccessDenied"
                                      ? "Access Denied: the customer key is not the one the object was written with"
                                      : "The provided encryption parameters did not match the ones used originally.");
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

void check_encryption_headers(const S3Request& request, Operation operation, bool honours_sse_s3) {
  const bool reads = operation == Operation::kGetObject || operation == Operation::kHeadObject;
  const bool parts = operation == Operation::kUploadPart || operation == Operation::kUploadPartCopy;
  if (!reads && !parts && !writes_object(operation)) return;
  const std::string sse = request.header("x-amz-server-side-encryption");
  const bool kms_key = request.has_header("x-amz-server-side-encryption-aws-kms-key-id");
  if (sse.empty() && !kms_key) return;
  if (request.has_header("x-amz-server-side-encryption-customer-algorithm")) {
    throw S3Error("InvalidArgument", "Server Side Encryption with Customer provided key is incompatible with the "
                                     "encryption method specified");
  }
  if (!writes_object(operation)) {
    // As S3: an object's encryption is chosen when it is written, not asked for on reads.
    throw S3Error("InvalidArgument", "x-amz-server-side-encryption is only valid when an object is written");
  }
  if (kms_key && sse != "aws:kms") {
    throw S3Error("InvalidArgument", "Server Side Encryption with AWS KMS managed key requires HTTP header "
                                     "x-amz-server-side-encryption : aws:kms");
  }
  if (sse != kSseS3) {
    throw S3Error("InvalidArgument", "x-amz-server-side-encryption '" + sse +
                                         "' is not supported: the gateway has no KMS; AES256 (SSE-S3) is");
  }
  if (!honours_sse_s3) throw unencrypted_bucket(request.bucket, "x-amz-server-side-encryption: AES256");
}

std::string ObjectEncryption::etag(const std::string& md5_hex) const {
  // SSE-S3 ETags stay the MD5, as on AWS: whoever reads the listing may read the object.
  return customer && data_key ? customer_key_etag(*data_key, md5_hex) : md5_hex;
}

void ObjectEncryption::add_headers(Response& response) const {
  if (customer) add_customer_key_headers(response, *customer);
  if (stored.kind == Kind::kGatewayKey) response.headers.emplace_back("x-amz-server-side-encryption", kSseS3);
}

ObjectEncryption encryption_for_write(const S3Request& request, const engine::Key256* master_key, bool sse_by_default) {
  ObjectEncryption out;
  out.customer = customer_key(request, false);
  if (out.customer) {
    out.stored = encrypt_with_customer_key(*out.customer);
    out.data_key = data_key(out.stored, out.customer);
  } else if (master_key && (sse_by_default || request.header("x-amz-server-side-encryption") == kSseS3)) {
    out.data_key = engine::random_key();
    out.stored.kind = Kind::kGatewayKey;
    out.stored.wrapped_key = engine::seal(*master_key, *out.data_key, as_bytes(kWrappedKeyLabel));
  }
  return out;
}

ObjectEncryption encryption_for_read(const S3Request& request, ByteView stored, bool copy_source,
                                     const engine::Key256* master_key, const std::string& wrong_key_code) {
  ObjectEncryption out;
  out.customer = customer_key(request, copy_source);
  out.stored = decode_encryption(stored);
  if (out.stored.kind != Kind::kGatewayKey) {
    out.data_key = data_key(out.stored, out.customer, wrong_key_code);
    return out;
  }
  if (out.customer) throw S3Error("InvalidRequest", "The encryption parameters are not applicable to this object.");
  if (!master_key) {
    throw Error(ErrorKind::kUsage, "gateway: an object is encrypted with the gateway's master key (SSE-S3), and the "
                                   "configuration names no sse_master_key");
  }
  const Bytes key = engine::open_sealed(*master_key, out.stored.wrapped_key, as_bytes(kWrappedKeyLabel),
                                        "an SSE-S3 object's data key (is sse_master_key the key it was written with?)");
  out.data_key.emplace();
  std::copy(key.begin(), key.end(), out.data_key->begin());
  return out;
}

engine::Key256 load_master_key(const std::string& path) {
  engine::Key256 key;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd && errno == ENOENT) {
    // First start: a new key, written whole and durable before it seals anything.
    key = engine::random_key();
    const std::string tmp = path + ".tmp";
    {
      UniqueFd out(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
      if (!out || ::write(out.get(), key.data(), key.size()) != static_cast<ssize_t>(key.size()) ||
          ::fsync(out.get()) != 0) {
        throw Error(ErrorKind::kUsage, "sse_master_key " + tmp + ": cannot write: " + std::strerror(errno));
      }
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      throw Error(ErrorKind::kUsage, "sse_master_key " + path + ": cannot create: " + std::strerror(errno));
    }
    return key;
  }
  if (!fd) throw Error(ErrorKind::kUsage, "sse_master_key " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || st.st_size != static_cast<off_t>(key.size())) {
    throw Error(ErrorKind::kUsage, "sse_master_key " + path + " must hold exactly 32 bytes");
  }
  if ((st.st_mode & 077) != 0) {
    throw Error(ErrorKind::kUsage, "sse_master_key " + path + " may be read by others; chmod 600 it");
  }
  if (::read(fd.get(), key.data(), key.size()) != static_cast<ssize_t>(key.size())) {
    throw Error(ErrorKind::kUsage, "sse_master_key " + path + ": cannot read: " + std::strerror(errno));
  }
  return key;
}

S3Error unencrypted_bucket(const std::string& bucket, const std::string& asked) {
  return S3Error("InvalidArgument", "the bucket '" + bucket + "' is a raw bucket, whose objects are stored "
                                    "unencrypted; " + asked + " needs a dedupe bucket, or an "
                                    "sse_master_key in the gateway's configuration");
}

bool reports_encryption(Operation operation) {
  switch (operation) {
    case Operation::kPutObject:
    case Operation::kCopyObject:
    case Operation::kGetObject:
    case Operation::kHeadObject:
    case Operation::kCreateMultipartUpload:
    case Operation::kUploadPart:
    case Operation::kUploadPartCopy:
    case Operation::kCompleteMultipartUpload:
      return true;
    default:
      return false;
  }
}

std::string encryption_configuration(const std::string& xml) {
  const auto tree = read_xml_body(xml);
  const auto root = tree.get_child_optional("ServerSideEncryptionConfiguration");
  if (!root) throw S3Error("MalformedXML", "the body is not a <ServerSideEncryptionConfiguration> document");
  size_t rules = 0;
  for (const auto& [name, rule] : *root) {
    if (name != "Rule") continue;
    ++rules;
    const std::string algorithm = xml_value(rule, "ApplyServerSideEncryptionByDefault.SSEAlgorithm");
    if (algorithm != kSseS3) {
      throw S3Error("InvalidArgument", "SSEAlgorithm '" + algorithm +
                                           "' is not supported: the gateway has no KMS; AES256 (SSE-S3) is");
    }
  }
  if (rules != 1) throw S3Error("MalformedXML", "a ServerSideEncryptionConfiguration holds one Rule");
  XmlWriter out;
  out.open("ServerSideEncryptionConfiguration", kS3Namespace)
      .open("Rule")
      .open("ApplyServerSideEncryptionByDefault")
      .element("SSEAlgorithm", kSseS3);
  return out.finish();
}

}  // namespace keel::gateway
