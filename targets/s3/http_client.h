// A small synchronous HTTP/1.1 client (Boost.Beast) with a keep-alive
// connection pool, TLS with certificate verification, and socket timeouts.
// Safe to use from many threads: each request takes a pooled connection.
// Network failures throw keel::Error(kTargetIo); HTTP status codes are
// returned, not thrown: the caller decides what is retryable.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "util/bytes.h"

namespace keel::targets::s3 {

struct Endpoint {
  bool tls = false;
  std::string host;  // name or address, no brackets
  std::string port;  // "443"
  // "http(s)://host[:port]"; throws Error(kUsage) for anything else.
  static Endpoint parse(const std::string& url);
  std::string host_header() const;  // host, plus ":port" when not the scheme's default
  std::string url() const;
};

struct HttpOptions {
  std::string ca_file;        // extra CA bundle; system CAs otherwise
  bool insecure_tls = false;  // skip certificate verification (explicit opt-in)
  std::chrono::milliseconds timeout{60000};  // connect, and each socket read or write
  size_t max_idle_connections = 32;
};

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;
  std::string target;  // encoded path and query: "/bucket/key?uploads="
  Headers headers;
  ByteView body;
};

struct HttpResponse {
  int status = 0;
  Headers headers;     // names lowercased
  Bytes body;          // unless read into the caller's buffer
  size_t body_size = 0;
  std::string header(std::string_view name) const;  // "" if absent
};

class HttpClient {
 public:
  HttpClient(Endpoint endpoint, HttpOptions options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends `request` and reads the response. With `body_into`, a 2xx body is
  // read straight into it (at most its size; more is an error) and
  // body_size says how much arrived; error bodies still land in `body`.
  HttpResponse send(const HttpRequest& request, std::optional<std::span<uint8_t>> body_into = std::nullopt);

  const Endpoint& endpoint() const { return endpoint_; }

 private:
  struct Connection;
  struct Pool;
  Endpoint endpoint_;
  HttpOptions options_;
  std::unique_ptr<Pool> pool_;
};

}  // namespace keel::targets::s3
