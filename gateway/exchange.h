// What passes between the HTTP server and the S3 logic: a request's head,
// the body pushed to the handler as it arrives, and the response (a small
// document or a stream of object bytes pulled by the server).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "gateway/request.h"
#include "gateway/s3_error.h"
#include "util/bytes.h"

namespace keel::gateway {

// Object bytes for a response, pulled in order. read() returns 0 only when
// `out` is empty or the stream has ended; it throws on I/O errors.
class BodyProducer {
 public:
  virtual ~BodyProducer() = default;
  virtual size_t read(std::span<uint8_t> out) = 0;
};

struct Response {
  int status = 200;
  NameValues headers;
  std::string body;                       // used when there is no stream
  std::unique_ptr<BodyProducer> stream;   // stream_length bytes
  uint64_t stream_length = 0;
  // HEAD: the Content-Length the GET would have, sent without a body.
  std::optional<uint64_t> head_length;
};

// A request body, pushed by the server in the pieces it arrives in. Both
// calls may throw S3Error, which the server turns into an error response.
class RequestBody {
 public:
  virtual ~RequestBody() = default;
  virtual void write(ByteView data) = 0;
  virtual Response finish() = 0;
};

struct RequestHead {
  std::string method;
  std::string target;
  NameValues headers;  // names lower case
  std::string request_id;
  std::string client_address;  // the peer's IP address
  bool secure = false;         // it came over TLS
};

// The handler's answer to a request head: either a response now, or a body
// to feed (then its finish() gives the response).
struct Exchange {
  Response response;
  std::unique_ptr<RequestBody> body;
  std::string operation = "Unknown";  // the S3 operation, for metrics; Unknown when refused before routing
};

class RequestHandler {
 public:
  virtual ~RequestHandler() = default;
  // Never throws S3Error: failures come back as error responses.
  virtual Exchange begin(RequestHead head) = 0;
};

// The XML error document as a response, with x-amz-request-id.
Response error_response(const S3Error& error, std::string_view resource, std::string_view request_id);

// "Tue, 15 Nov 1994 08:12:31 GMT" (HTTP dates: Date, Last-Modified).
std::string http_date(int64_t seconds);
// "2009-10-12T17:50:30.000Z" (dates in S3 XML documents).
std::string iso8601(int64_t nanoseconds);

}  // namespace keel::gateway
