// The RDMA data plane end to end on one machine: keel's S3 client and the
// gateway (its HTTP server on loopback TCP) with the loopback RDMA transport
// between them. Covers payloads over RDMA, declines and the fallback to
// HTTP, the reply-header variants servers send, token rejections and
// reconnecting after the server dropped a session.
#include <catch2/catch.hpp>

#include <cstring>
#include <thread>

#include "targets/rdma/loopback_transport.h"
#include "targets/rdma/s3_headers.h"
#include "targets/s3/s3_client.h"
#include "targets/s3/sigv4.h"
#include "tests/rdma/gateway_fixture.h"
#include "util/digest.h"
#include "util/error.h"

namespace {

using namespace keel;
using namespace keel::gateway;
namespace rdma = keel::targets::rdma;
namespace s3 = keel::targets::s3;

rdma::SessionOptions small_sessions() {
  rdma::SessionOptions options;
  options.slot_size = 1 << 20;
  options.slot_count = 2;
  options.timeout = std::chrono::milliseconds(200);
  return options;
}

Bytes pattern(size_t size, uint8_t seed) {
  Bytes out(size);
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<uint8_t>(seed + i * 31 + i / 251);
  return out;
}

// The in-process gateway with the RDMA plane on the loopback transport, or without one.
struct Gateway : test::InProcessGateway {
  Gateway(std::shared_ptr<rdma::Transport> transport, bool with_rdma) {
    if (with_rdma) start_rdma(std::move(transport), "127.0.0.1", 0, small_sessions());
  }
};

s3::S3ClientOptions client_options(const std::string& url, std::shared_ptr<s3::RdmaChannel> channel) {
  s3::S3ClientOptions options;
  options.endpoint = url;
  options.rdma = std::move(channel);
  return options;
}

std::shared_ptr<s3::RdmaChannel> channel_to(std::shared_ptr<rdma::Transport> transport, uint16_t port) {
  return std::make_shared<s3::RdmaChannel>(std::move(transport), rdma::Endpoint{"127.0.0.1", port}, small_sessions(),
                                           std::chrono::milliseconds(0));
}

}  // namespace

TEST_CASE("rdma s3: uploads and ranged GETs move over RDMA and store what HTTP stores", "[rdma][gateway]") {
  auto transport = std::shared_ptr<rdma::Transport>(rdma::make_loopback_transport());
  Gateway gateway(transport, true);
  s3::S3Client client(client_options(gateway.served.url(), channel_to(transport, gateway.plane->port())),
                      {test::kRdmaAccessKey, test::kRdmaSecretKey, ""});
  s3::S3Client http(client_options(gateway.served.url(), nullptr), {test::kRdmaAccessKey, test::kRdmaSecretKey, ""});

  const Bytes object = pattern(700 << 10, 7);
  client.put_object("data", "whole", object);
  http.put_object("data", "whole-http", object);
  CHECK(client.head_object("data", "whole")->etag == http.head_object("data", "whole-http")->etag);

  // A part is all its upload holds here: parts but the last must be 5 MiB, more than a test slot.
  const Bytes part = pattern(1 << 20, 1);
  const std::string id = client.create_multipart_upload("data", "parts");
  client.complete_multipart_upload("data", "parts", id, {{1, client.upload_part("data", "parts", id, 1, part)}});
  const std::string http_id = http.create_multipart_upload("data", "parts-http");
  http.complete_multipart_upload("data", "parts-http", http_id,
                                 {{1, http.upload_part("data", "parts-http", http_id, 1, part)}});
  CHECK(client.head_object("data", "parts")->etag == http.head_object("data", "parts-http")->etag);

  Bytes back(200 << 10);
  REQUIRE(client.get_range("data", "parts", 5000, back) == back.size());
  CHECK(std::memcmp(back.data(), part.data() + 5000, back.size()) == 0);
  // The object ends before the buffer does: fewer bytes, as over HTTP.
  Bytes tail(64 << 10);
  CHECK(client.get_range("data", "whole", object.size() - 100, tail) == 100);
  CHECK(std::memcmp(tail.data(), object.data() + object.size() - 100, 100) == 0);
  CHECK_THROWS_MATCHES(client.get_range("data", "missing", 0, tail), Error,
                       Catch::Predicate<Error>([](const Error& e) { return e.kind() == ErrorKind::kNotFound; }));

  const s3::S3Stats& stats = client.stats();
  CHECK(stats.rdma_put.requests == 2);
  CHECK(stats.rdma_put.bytes == object.size() + part.size());
  CHECK(stats.rdma_get.requests == 2);
  CHECK(stats.rdma_get.bytes == back.size() + 100);
  CHECK(stats.http_put.requests == 0);
  CHECK(stats.rdma_fallbacks == 0);
  CHECK(stats.bytes_sent < 4096);  // XML only: the payloads went by RDMA

  const std::string metrics = gateway.served.metrics.render();
  CHECK_THAT(metrics, Catch::Contains("keel_gateway_rdma_requests_total{operation=\"UploadPart\"} 1"));
  CHECK_THAT(metrics, Catch::Contains("keel_gateway_rdma_bytes_total{operation=\"PutObject\"} " +
                                      std::to_string(object.size())));
  CHECK_THAT(metrics, Catch::Contains("keel_gateway_rdma_sessions 1"));

  SECTION("a payload larger than a slot goes over HTTP without trying RDMA") {
    client.put_object("data", "big", pattern((1 << 20) + 1, 3));
    CHECK(stats.http_put.requests == 1);
    CHECK(stats.rdma_fallbacks == 0);
  }
}

TEST_CASE("rdma s3: a gateway without rdma_listen declines and the client falls back to HTTP", "[rdma][gateway]") {
  auto transport = std::shared_ptr<rdma::Transport>(rdma::make_loopback_transport());
  Gateway gateway(transport, false);
  // A session the gateway knows nothing of: the request is declined, not the connection.
  auto listener = transport->listen({"127.0.0.1", 0}, small_sessions());
  s3::S3Client client(client_options(gateway.served.url(), channel_to(transport, listener->port())),
                      {test::kRdmaAccessKey, test::kRdmaSecretKey, ""});
  const Bytes object = pattern(100 << 10, 9);
  client.put_object("data", "k", object);
  Bytes back(object.size());
  CHECK(client.get_range("data", "k", 0, back) == object.size());
  CHECK(back == object);
  CHECK(client.stats().rdma_fallbacks == 2);
  CHECK(client.stats().http_put.requests == 1);
  CHECK(client.stats().http_get.requests == 1);
  CHECK(client.stats().rdma_put.requests == 0);

  SECTION("and so does a client whose RDMA server is not there at all") {
    s3::S3Client lonely(client_options(gateway.served.url(), channel_to(transport, 999)), {test::kRdmaAccessKey, test::kRdmaSecretKey, ""});
    lonely.put_object("data", "k2", object);
    CHECK(lonely.stats().rdma_fallbacks == 1);
    CHECK(lonely.stats().http_put.requests == 1);
  }
}

namespace {

// A server speaking the protocol as other implementations may: `reply`
// says how it answers a request that carries a token.
class ScriptedServer final : public RequestHandler {
 public:
  enum class Reply { k501WithErrorBody, k200WithReply501, k206WithReply200 };
  ScriptedServer(rdma::Transport& transport, Reply reply) : listener_(transport.listen({"", 0}, small_sessions())), reply_(reply) {}

  Exchange begin(RequestHead head) override {
    std::string token;
    for (const auto& [name, value] : head.headers)
      if (name == rdma::kTokenHeader) token = value;
    Exchange exchange;
    if (token.empty()) {
      ++http_requests;
      if (head.method == "PUT") exchange.body = std::make_unique<Md5Body>();
      return exchange;
    }
    ++rdma_requests;
    if (reply_ == Reply::k501WithErrorBody) {
      exchange.response = error_response(S3Error("NotImplemented", "no RDMA here"), "/b/k", "id");
    } else if (reply_ == Reply::k200WithReply501) {
      exchange.response.headers.emplace_back(rdma::kReplyHeader, "501");
    } else {
      if (!session_) session_ = listener_->accept();
      rdma::Token parsed = rdma::Token::parse(token);
      parsed.length = 5;
      rdma::Slot slot = listener_->pool().get();
      std::memcpy(slot.data().data(), "hello", 5);
      session_->write(parsed, slot);
      exchange.response.status = 206;
      exchange.response.headers = {{std::string(rdma::kReplyHeader), "200"},
                                   {std::string(rdma::kBytesTransferredHeader), claimed_bytes}};
    }
    return exchange;
  }

  uint16_t port() const { return listener_->port(); }
  std::atomic<int> http_requests{0}, rdma_requests{0};
  std::string claimed_bytes = "5";  // what the 206 says it wrote

 private:
  class Md5Body final : public RequestBody {
   public:
    void write(ByteView data) override { bytes_.insert(bytes_.end(), data.begin(), data.end()); }
    Response finish() override {
      Response r;
      r.headers.emplace_back("etag", "\"" + to_hex(md5(bytes_)) + "\"");
      return r;
    }

   private:
    Bytes bytes_;
  };

  std::unique_ptr<rdma::Listener> listener_;
  std::unique_ptr<rdma::ServerSession> session_;
  Reply reply_;
};

}  // namespace

TEST_CASE("rdma s3: the reply variants servers send are understood", "[rdma][gateway]") {
  auto transport = std::shared_ptr<rdma::Transport>(rdma::make_loopback_transport());
  test::TempDir dir("keel-rdma-scripted");
  const GatewayConfig config = test::rdma_gateway_config(dir);

  SECTION("501 with an S3 error body, and 200 with x-amz-rdma-reply: 501, are declines") {
    for (auto reply : {ScriptedServer::Reply::k501WithErrorBody, ScriptedServer::Reply::k200WithReply501}) {
      ScriptedServer server(*transport, reply);
      test::Served served(config, server);
      s3::S3Client client(client_options(served.url(), channel_to(transport, server.port())), {test::kRdmaAccessKey, test::kRdmaSecretKey, ""});
      client.put_object("b", "k", pattern(1000, 1));
      CHECK(server.rdma_requests == 1);
      CHECK(server.http_requests == 1);
      CHECK(client.stats().rdma_fallbacks == 1);
      CHECK(client.stats().http_put.bytes == 1000);
    }
  }
  SECTION("a 206 answered with x-amz-rdma-reply: 200 is the range, by RDMA") {
    ScriptedServer server(*transport, ScriptedServer::Reply::k206WithReply200);
    test::Served served(config, server);
    s3::S3Client client(client_options(served.url(), channel_to(transport, server.port())), {test::kRdmaAccessKey, test::kRdmaSecretKey, ""});
    Bytes out(64);
    REQUIRE(client.get_range("b", "k", 10, out) == 5);
    CHECK(std::string(as_chars(ByteView(out).first(5))) == "hello");
    CHECK(client.stats().rdma_get.requests == 1);
    CHECK(server.http_requests == 0);
  }
  SECTION("a reply claiming more bytes than the buffer holds is an integrity error") {
    ScriptedServer server(*transport, ScriptedServer::Reply::k206WithReply200);
    server.claimed_bytes = "65";
    test::Served served(config, server);
    s3::S3Client client(client_options(served.url(), channel_to(transport, server.port())),
                        {test::kRdmaAccessKey, test::kRdmaSecretKey, ""});
    Bytes out(64);
    CHECK_THROWS_MATCHES(client.get_range("b", "k", 10, out), Error,
                         Catch::Predicate<Error>([](const Error& e) { return e.kind() == ErrorKind::kIntegrity; }));
  }
}

TEST_CASE("rdma s3: the gateway rejects tokens outside the buffer, of another session, reused or unsigned",
          "[rdma][gateway]") {
  auto transport = std::shared_ptr<rdma::Transport>(rdma::make_loopback_transport());
  Gateway gateway(transport, true);
  auto session = transport->connect({"", gateway.plane->port()}, small_sessions());
  auto other = transport->connect({"", gateway.plane->port()}, small_sessions());
  test::check_token_rejections(gateway, *session, *other, small_sessions());
}

TEST_CASE("rdma s3: a session the server dropped is replaced, nothing is lost", "[rdma][gateway]") {
  auto transport = std::shared_ptr<rdma::Transport>(rdma::make_loopback_transport());
  Gateway gateway(transport, true);
  const uint16_t port = gateway.plane->port();
  s3::S3Client client(client_options(gateway.served.url(), channel_to(transport, port)), {test::kRdmaAccessKey, test::kRdmaSecretKey, ""});
  client.put_object("data", "a", pattern(5000, 1));
  // The RDMA side restarts: every session is gone.
  gateway.start_rdma(transport, "127.0.0.1", port, small_sessions());
  client.put_object("data", "b", pattern(6000, 2));
  Bytes back(6000);
  CHECK(client.get_range("data", "b", 0, back) == 6000);
  CHECK(back == pattern(6000, 2));
  CHECK(client.stats().rdma_put.requests == 2);
  CHECK(client.stats().rdma_get.requests == 1);
  CHECK(client.rdma_reconnects() == 1);
}

TEST_CASE("rdma s3: the gateway forgets the sessions of clients that have gone", "[rdma][gateway]") {
  auto transport = std::shared_ptr<rdma::Transport>(rdma::make_loopback_transport());
  Gateway gateway(transport, true);
  {
    s3::S3Client client(client_options(gateway.served.url(), channel_to(transport, gateway.plane->port())),
                        {test::kRdmaAccessKey, test::kRdmaSecretKey, ""});
    client.put_object("data", "a", pattern(5000, 1));
    CHECK(gateway.plane->sessions() == 1);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (gateway.plane->sessions() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(gateway.plane->sessions() == 0);
  CHECK_THAT(gateway.served.metrics.render(), Catch::Contains("keel_gateway_rdma_sessions 0"));
}
