#include "tests/rdma/gateway_fixture.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <ctime>
#include <sstream>

#include "targets/rdma/s3_headers.h"
#include "targets/s3/s3_client.h"
#include "targets/s3/sigv4.h"
#include "util/crc.h"

namespace keel::test {

Served::Served(const gateway::GatewayConfig& config, gateway::RequestHandler& handler)
    : server_(config, handler, metrics), thread_([this] { server_.run(); }) {}

Served::~Served() {
  server_.stop();
  thread_.join();
}

gateway::GatewayConfig rdma_gateway_config(const TempDir& dir) {
  std::istringstream in(std::string("[server]\nlisten = 127.0.0.1:0\nstate_dir = ") + dir.file("state") +
                        "\nthreads = 2\n[user:alice]\naccess_key = " + kRdmaAccessKey + "\nsecret_key = " +
                        kRdmaSecretKey + "\n[user:bob]\naccess_key = RDMATESTACCESSKEY002\nsecret_key = " +
                        kRdmaSecretKey + "\n[bucket:data]\nowner = alice\ngrants = bob:write\npath = " +
                        dir.file("data") + "\n");
  return gateway::GatewayConfig::parse(in, "test");
}

InProcessGateway::InProcessGateway() : api(rdma_gateway_config(dir)), served(api.config(), api) {}

void InProcessGateway::start_rdma(std::shared_ptr<targets::rdma::Transport> transport, const std::string& host,
                                  uint16_t port, const targets::rdma::SessionOptions& options) {
  plane.reset();
  plane = std::make_unique<gateway::RdmaPlane>(std::move(transport), gateway::ListenAddress{host, port, false}, options,
                                               served.metrics);
  api.serve_rdma(*plane);
}

targets::s3::HttpResponse send_signed(const std::string& url, const std::string& method, const std::string& path,
                                      targets::s3::Headers headers, bool sign_headers) {
  targets::s3::HttpClient http(targets::s3::Endpoint::parse(url), {});
  targets::s3::SigningRequest signing;
  signing.method = method;
  signing.host = http.endpoint().host_header();
  signing.path = path;
  signing.payload_hash = "UNSIGNED-PAYLOAD";
  if (sign_headers) signing.headers = headers;
  targets::s3::HttpRequest request{method, path, headers, {}};
  request.headers.emplace_back("host", signing.host);
  for (auto& header : targets::s3::sign_request(signing, {kRdmaAccessKey, kRdmaSecretKey, ""}, "us-east-1",
                                                std::time(nullptr)))
    request.headers.push_back(header);
  return http.send(request);
}

std::string crc32c_base64(ByteView data) {
  Crc crc(CrcAlgorithm::kCrc32c);
  crc.update(data);
  return to_base64(crc.big_endian());
}

void check_token_rejections(const InProcessGateway& gateway, targets::rdma::ClientSession& session,
                            targets::rdma::ClientSession& other, const targets::rdma::SessionOptions& options) {
  namespace rdma = targets::rdma;
  const std::string url = gateway.served.url();
  rdma::Slot slot = session.acquire();
  std::memset(slot.data().data(), 'x', 4096);
  const std::string crc = crc32c_base64(ByteView(slot.data().data(), 4096));
  const auto put = [&](const rdma::Token& token, bool sign = true) {
    return send_signed(url, "PUT", "/data/forged",
                       {{"x-amz-checksum-crc32c", crc}, {std::string(rdma::kTokenHeader), token.encode()}}, sign);
  };
  const auto rejected = [](const targets::s3::HttpResponse& r) {
    INFO("HTTP " << r.status << ": " << std::string(as_chars(r.body)));
    return r.status == 403 && targets::s3::s3_error_code(r.body) == "AccessDenied" &&
           r.header(rdma::kReplyHeader) == "403";
  };

  const rdma::Token good = session.grant(slot, 4096);
  const auto first = put(good);
  CHECK(first.status == 200);
  CHECK(first.header(rdma::kReplyHeader) == "200");
  CHECK(rejected(put(good)));  // its nonce is spent

  rdma::Token past_end = session.grant(slot, 4096);
  past_end.address = slot.address() + options.slot_size * options.slot_count;
  CHECK(rejected(put(past_end)));
  rdma::Token before = session.grant(slot, 4096);
  before.address = slot.address() - options.slot_size * options.slot_count;
  CHECK(rejected(put(before)));
  rdma::Token elsewhere = session.grant(slot, 4096);
  elsewhere.session = other.session_id();  // this client's memory, another client's session
  CHECK(rejected(put(elsewhere)));
  rdma::Token nobodys = session.grant(slot, 4096);
  nobodys.session ^= 0x5a5a5a5a;
  CHECK(rejected(put(nobodys)));
  CHECK(rejected(put(session.grant(slot, 4096), false)));

  rdma::Token too_long = session.grant(slot, 4096);
  too_long.length = options.slot_size + 1;
  const auto declined = put(too_long);
  CHECK(declined.status == 501);
  CHECK(declined.header(rdma::kReplyHeader) == "501");
  const auto no_crc = send_signed(url, "PUT", "/data/forged",
                                  {{std::string(rdma::kTokenHeader), session.grant(slot, 4096).encode()}});
  CHECK(no_crc.status == 400);

  // What was refused wrote nothing: the object is the good token's bytes.
  targets::s3::S3ClientOptions plain;
  plain.endpoint = url;
  targets::s3::S3Client http(plain, {kRdmaAccessKey, kRdmaSecretKey, ""});
  Bytes stored(8192);
  CHECK(http.get_range("data", "forged", 0, stored) == 4096);
  CHECK(std::memcmp(stored.data(), slot.data().data(), 4096) == 0);
}

}  // namespace keel::test
