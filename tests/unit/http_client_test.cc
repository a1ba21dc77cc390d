// The S3 HTTP client's time limits, against loopback sockets that never
// answer: a request must fail with a retryable I/O error once the timeout
// passes, not wait for the server.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "targets/s3/http_client.h"
#include "util/error.h"
#include "util/fd.h"

using keel::Error;
using keel::ErrorKind;
using keel::UniqueFd;
using keel::targets::s3::Endpoint;
using keel::targets::s3::HttpClient;
using keel::targets::s3::HttpOptions;
using keel::targets::s3::HttpRequest;

namespace {

// A listening socket on 127.0.0.1 with an ephemeral port.
struct Listener {
  explicit Listener(int backlog) : fd(::socket(AF_INET, SOCK_STREAM, 0)) {
    REQUIRE(fd);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(fd.get(), backlog) == 0);
    socklen_t len = sizeof addr;
    REQUIRE(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port = ntohs(addr.sin_port);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }

  UniqueFd fd;
  int port = 0;
};

// Sends a GET with a 300 ms timeout; returns how long it took to fail.
std::chrono::milliseconds time_failed_get(const std::string& url) {
  HttpOptions options;
  options.timeout = std::chrono::milliseconds(300);
  HttpClient client(Endpoint::parse(url), options);
  HttpRequest request;
  request.method = "GET";
  request.target = "/bucket/key";
  const auto started = std::chrono::steady_clock::now();
  try {
    client.send(request);
    FAIL("the request succeeded against a server that never answers");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kTargetIo);
    CHECK_THAT(e.what(), Catch::Contains("timed out"));
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
}

}  // namespace

TEST_CASE("http client gives up on a server that accepts and never answers", "[http]") {
  Listener server(8);  // the kernel completes the handshake; nobody reads the request
  auto took = time_failed_get(server.url());
  CHECK(took >= std::chrono::milliseconds(250));
  CHECK(took < std::chrono::milliseconds(3000));
}

TEST_CASE("http client gives up on a connection the server never accepts", "[http]") {
  // A full accept queue makes Linux drop further SYNs: the handshake neither
  // completes nor fails, as with a host that has gone away.
  Listener server(0);
  std::vector<UniqueFd> fillers;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(server.port));
  for (int i = 0; i < 2; ++i) {
    UniqueFd filler(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
    ::connect(filler.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    fillers.push_back(std::move(filler));
  }
  auto took = time_failed_get(server.url());
  CHECK(took < std::chrono::milliseconds(3000));
}
