#include "gateway/payload_checks.h"

#include <array>
#include <cctype>
#include <variant>

#include "gateway/s3_error.h"
#include "util/crc.h"
#include "util/digest.h"
#include "util/error.h"
#include "util/text.h"

namespace keel::gateway {

namespace {

constexpr std::string_view kChecksumPrefix = "x-amz-checksum-";

}  // namespace

std::optional<Checksummer> Checksummer::make(const std::string& name) {
  if (name == "crc32") return Checksummer(name, Crc(CrcAlgorithm::kCrc32), 4);
  if (name == "crc32c") return Checksummer(name, Crc(CrcAlgorithm::kCrc32c), 4);
  if (name == "crc64nvme") return Checksummer(name, Crc(CrcAlgorithm::kCrc64Nvme), 8);
  if (name == "sha1") return Checksummer(name, Digest(DigestAlgorithm::kSha1), 20);
  if (name == "sha256") return Checksummer(name, Digest(DigestAlgorithm::kSha256), 32);
  return std::nullopt;
}

void Checksummer::update(ByteView data) {
  std::visit([&](auto& algorithm) { algorithm.update(data); }, algorithm_);
}

std::string Checksummer::base64() {
  if (auto* c = std::get_if<Crc>(&algorithm_)) return to_base64(c->big_endian());
  return to_base64(std::get<Digest>(algorithm_).finish());
}

void Checksummer::check_well_formed(const std::string& value) const {
  bool ok = false;
  try {
    ok = from_base64(value).size() == size_;
  } catch (const Error&) {
  }
  if (!ok) throw S3Error("InvalidRequest", "Value for " + std::string(kChecksumPrefix) + name_ + " header is invalid.");
}

Checksummer checksummer_for(const std::string& name) {
  auto checksummer = Checksummer::make(name);
  if (!checksummer) throw S3Error("InvalidRequest", "unknown checksum algorithm '" + name + "'");
  return std::move(*checksummer);
}

std::string checksum_element(const std::string& algorithm) {
  std::string name = "Checksum";
  for (const char c : algorithm) name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

struct PayloadChecks::State {
  Digest md5{DigestAlgorithm::kMd5};
  std::optional<Digest> sha256;
  std::string expected_sha256;
  Bytes expected_md5;  // empty: no Content-MD5
  std::optional<Checksummer> checksum;
  std::string checksum_value;  // from a header; empty: from the trailer
  bool checksum_in_trailer = false;
};

PayloadChecks::PayloadChecks(const S3Request& request, const Authentication& auth, ChecksumHeaders checksum_headers)
    : state_(std::make_unique<State>()) {
  if (auth.payload == PayloadKind::kSignedHash) {
    state_->sha256.emplace(DigestAlgorithm::kSha256);
    state_->expected_sha256 = auth.payload_sha256;
  }
  if (request.has_header("content-md5")) {
    const std::string text = request.header("content-md5");
    try {
      state_->expected_md5 = from_base64(text);
    } catch (const Error&) {
    }
    if (state_->expected_md5.size() != 16) throw S3Error("InvalidDigest", "Content-MD5 '" + text + "' is not a base64 MD5");
  }
  for (const auto& [name, value] : request.headers) {
    if (checksum_headers == ChecksumHeaders::kOfObject) break;  // the completion checks them against the object
    if (!name.starts_with(kChecksumPrefix) || name == "x-amz-checksum-type" || name == "x-amz-checksum-mode") continue;
    if (state_->checksum) throw S3Error("InvalidRequest", "only one x-amz-checksum-* header may be given");
    state_->checksum = checksummer_for(name.substr(kChecksumPrefix.size()));
    state_->checksum->check_well_formed(value);
    state_->checksum_value = value;
  }
  const std::string trailer = ascii_lower(request.header("x-amz-trailer"));
  if (!trailer.empty()) {
    if (!trailer.starts_with(kChecksumPrefix) || trailer.find(',') != std::string::npos) {
      throw S3Error("InvalidRequest", "x-amz-trailer '" + trailer + "': only one x-amz-checksum-* trailer is supported");
    }
    if (state_->checksum) throw S3Error("InvalidRequest", "a checksum in both a header and the trailer");
    state_->checksum = checksummer_for(trailer.substr(kChecksumPrefix.size()));
    state_->checksum_in_trailer = true;
  }
}

PayloadChecks::~PayloadChecks() = default;
PayloadChecks::PayloadChecks(PayloadChecks&&) noexcept = default;

void PayloadChecks::update(ByteView data) {
  state_->md5.update(data);
  if (state_->sha256) state_->sha256->update(data);
  if (state_->checksum) state_->checksum->update(data);
}

void PayloadChecks::verify(const NameValues& trailers) {
  const Bytes md5 = state_->md5.finish();
  md5_hex_ = to_hex(md5);
  if (!state_->expected_md5.empty() && state_->expected_md5 != md5) {
    throw S3Error("BadDigest", "the Content-MD5 you specified did not match what we received");
  }
  if (state_->sha256 && to_hex(state_->sha256->finish()) != state_->expected_sha256) {
    throw S3Error("XAmzContentSHA256Mismatch", "the provided x-amz-content-sha256 does not match what was computed");
  }
  if (!state_->checksum) return;
  std::string claimed = state_->checksum_value;
  const std::string header = std::string(kChecksumPrefix) + state_->checksum->name();
  if (state_->checksum_in_trailer) {
    for (const auto& [name, value] : trailers) {
      if (name == header) claimed = value;
    }
    if (claimed.empty()) throw S3Error("InvalidRequest", "the trailer announced " + header + " but did not carry it");
    state_->checksum->check_well_formed(claimed);
  }
  const std::string computed = state_->checksum->base64();
  if (claimed != computed) {
    throw S3Error("BadDigest", "the " + header + " you specified (" + claimed + ") did not match the calculated " +
                                   computed);
  }
  checksum_ = ObjectChecksum{state_->checksum->name(), computed};
}

}  // namespace keel::gateway
