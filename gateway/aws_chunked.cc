#include "gateway/aws_chunked.h"

#include <openssl/crypto.h>

#include <algorithm>

#include "gateway/s3_error.h"
#include "util/text.h"
#include "targets/s3/sigv4.h"

namespace keel::gateway {

namespace {

namespace sigv4 = keel::targets::s3;

// A chunk header is a size and one signature; anything this long is not one.
constexpr size_t kMaxLine = 4096;
constexpr size_t kMaxTrailerBytes = 16 * 1024;
constexpr std::string_view kSignatureExtension = ";chunk-signature=";
constexpr std::string_view kTrailerSignature = "x-amz-trailer-signature";

[[noreturn]] void malformed(const std::string& what) {
  throw S3Error("InvalidRequest", "malformed aws-chunked body: " + what);
}

void check_signature(const std::string& expected, const std::string& claimed, const std::string& what) {
  if (expected.size() != claimed.size() || CRYPTO_memcmp(expected.data(), claimed.data(), expected.size()) != 0) {
    throw S3Error("SignatureDoesNotMatch", "the " + what + " signature does not match");
  }
}

}  // namespace

AwsChunkedDecoder::AwsChunkedDecoder(std::optional<ChunkSigning> signing, bool trailer, Sink sink)
    : signing_(std::move(signing)), trailer_(trailer), sink_(std::move(sink)) {
  if (signing_) previous_signature_ = signing_->seed_signature;
}

bool AwsChunkedDecoder::take_line(ByteView& input) {
  const auto newline = std::find(input.begin(), input.end(), uint8_t{'\n'});
  const bool complete = newline != input.end();
  const size_t take = static_cast<size_t>(newline - input.begin()) + (complete ? 1 : 0);
  if (line_.size() + take > kMaxLine) malformed("a line longer than " + std::to_string(kMaxLine) + " bytes");
  line_.append(as_chars(input.first(take)));
  input = input.subspan(take);
  return complete;
}

void AwsChunkedDecoder::feed(ByteView input) {
  while (!input.empty()) {
    switch (state_) {
      case State::kHeader:
      case State::kTrailer:
      case State::kDataEnd: {
        if (!take_line(input)) return;
        std::string_view line(line_);
        line.remove_suffix(1);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (state_ == State::kHeader) {
          header_line(line);
        } else if (state_ == State::kTrailer) {
          trailer_line(line);
        } else {
          if (!line.empty()) malformed("chunk data runs past its declared size");
          state_ = final_chunk_ ? State::kDone : State::kHeader;
        }
        line_.clear();
        break;
      }
      case State::kData: {
        const size_t take = static_cast<size_t>(std::min<uint64_t>(remaining_, input.size()));
        const ByteView piece = input.first(take);
        if (chunk_digest_) chunk_digest_->update(piece);
        sink_(piece);
        decoded_size_ += take;
        remaining_ -= take;
        input = input.subspan(take);
        if (remaining_ == 0) end_chunk();
        break;
      }
      case State::kDone:
        malformed("bytes after the final chunk");
    }
  }
}

void AwsChunkedDecoder::header_line(std::string_view line) {
  const size_t semicolon = line.find(';');
  const std::string_view size_text = line.substr(0, semicolon);
  if (size_text.empty() || size_text.size() > 15 ||
      size_text.find_first_not_of("0123456789abcdefABCDEF") != std::string_view::npos) {
    malformed("chunk size '" + std::string(size_text.substr(0, 32)) + "' is not hexadecimal");
  }
  remaining_ = std::stoull(std::string(size_text), nullptr, 16);
  chunk_signature_.clear();
  if (semicolon != std::string_view::npos) {
    const std::string_view extension = line.substr(semicolon);
    if (!extension.starts_with(kSignatureExtension)) malformed("unknown chunk extension");
    chunk_signature_ = std::string(extension.substr(kSignatureExtension.size()));
  }
  if (signing_ && chunk_signature_.empty()) malformed("a chunk without its chunk-signature");
  if (signing_) chunk_digest_.emplace(DigestAlgorithm::kSha256);
  final_chunk_ = remaining_ == 0;
  if (final_chunk_) {
    end_chunk();
  } else {
    state_ = State::kData;
  }
}

void AwsChunkedDecoder::end_chunk() {
  if (signing_) {
    const std::string to_sign = sigv4::chunk_string_to_sign(signing_->amz_date, signing_->scope, previous_signature_,
                                                            to_hex(chunk_digest_->finish()));
    check_signature(sigv4::signature(signing_->key, to_sign), chunk_signature_, "chunk");
    previous_signature_ = chunk_signature_;
    chunk_digest_.reset();
  }
  state_ = final_chunk_ && trailer_ ? State::kTrailer : State::kDataEnd;
}

void AwsChunkedDecoder::trailer_line(std::string_view line) {
  if (!line.empty()) {
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) malformed("trailer line without a name");
    const std::string name = ascii_lower(trim_blanks(line.substr(0, colon)));
    const std::string value = std::string(trim_blanks(line.substr(colon + 1)));
    if (name == kTrailerSignature) {
      trailer_signature_ = value;
    } else {
      trailer_text_ += name + ":" + value + "\n";
      if (trailer_text_.size() > kMaxTrailerBytes) malformed("trailer too large");
      trailers_.emplace_back(name, value);
    }
    return;
  }
  if (signing_) {
    if (trailer_signature_.empty()) malformed("a signed trailer without x-amz-trailer-signature");
    const std::string to_sign = sigv4::trailer_string_to_sign(signing_->amz_date, signing_->scope,
                                                              previous_signature_,
                                                              sigv4::sha256_hex(as_bytes(trailer_text_)));
    check_signature(sigv4::signature(signing_->key, to_sign), trailer_signature_, "trailer");
  }
  state_ = State::kDone;
}

void AwsChunkedDecoder::finish() const {
  // Some clients end the final chunk without its empty line: nothing is lost.
  const bool final_line_missing = state_ == State::kDataEnd && final_chunk_ && line_.empty();
  if (state_ != State::kDone && !final_line_missing) {
    throw S3Error("IncompleteBody", "the aws-chunked body ended before its final chunk");
  }
}

}  // namespace keel::gateway
