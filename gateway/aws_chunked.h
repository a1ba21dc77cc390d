// Decodes aws-chunked request bodies (Content-Encoding: aws-chunked):
//   <hex size>[;chunk-signature=<sig>]\r\n<data>\r\n ... 0[;chunk-signature=<sig>]\r\n
// then either an empty line or trailer lines ("name:value") and an empty line.
// Signed bodies (STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER]) chain each
// chunk's signature from the previous one, starting at the request's own;
// a signed trailer ends with x-amz-trailer-signature. Push-based, so a
// request body of any size streams through in the pieces it arrives in.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "gateway/request.h"
#include "gateway/sigv4_verify.h"
#include "util/bytes.h"
#include "util/digest.h"

namespace keel::gateway {

class AwsChunkedDecoder {
 public:
  using Sink = std::function<void(ByteView)>;

  // `signing`: check chunk signatures chained from it (nullopt: unsigned).
  // `trailer`: trailer lines follow the final chunk.
  AwsChunkedDecoder(std::optional<ChunkSigning> signing, bool trailer, Sink sink);

  // Decodes the next piece of the encoded body; chunk data goes to the sink
  // as it arrives, before that chunk's signature can be checked, so the
  // caller commits nothing until finish() returns. Throws S3Error
  // (IncompleteBody, InvalidRequest for bad framing, SignatureDoesNotMatch).
  void feed(ByteView encoded);
  // Throws S3Error IncompleteBody unless the final chunk (and trailer) came.
  void finish() const;

  bool done() const { return state_ == State::kDone; }
  uint64_t decoded_size() const { return decoded_size_; }
  // Trailer lines other than x-amz-trailer-signature, names lower case.
  const NameValues& trailers() const { return trailers_; }

 private:
  enum class State { kHeader, kData, kDataEnd, kTrailer, kDone };

  void header_line(std::string_view line);
  void trailer_line(std::string_view line);
  void end_chunk();
  // Consumes up to a '\n' into line_; true when a whole line is there.
  bool take_line(ByteView& input);

  std::optional<ChunkSigning> signing_;
  bool trailer_;
  Sink sink_;
  State state_ = State::kHeader;
  std::string line_;
  uint64_t remaining_ = 0;      // data bytes left in the current chunk
  bool final_chunk_ = false;
  std::string chunk_signature_;  // claimed for the current chunk
  std::string previous_signature_;
  std::optional<Digest> chunk_digest_;
  std::string trailer_text_;  // "name:value\n" lines as signed
  std::string trailer_signature_;
  NameValues trailers_;
  uint64_t decoded_size_ = 0;
};

}  // namespace keel::gateway
