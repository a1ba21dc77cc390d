// keel gateway in-process for RDMA tests: the S3 API over a raw bucket
// "data" (owner alice, bob may write), its HTTP server on 127.0.0.1 on a
// thread of its own, and the RDMA plane on any Transport (loopback in unit
// tests, verbs in the VM). Plus requests signed as keel's client signs them,
// so tests can send tokens the client never would.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "gateway/http_server.h"
#include "gateway/rdma_plane.h"
#include "gateway/s3_api.h"
#include "targets/rdma/transport.h"
#include "targets/s3/http_client.h"
#include "tests/unit/temp_dir.h"

namespace keel::test {

inline constexpr const char* kRdmaAccessKey = "RDMATESTACCESSKEY001";
inline constexpr const char* kRdmaSecretKey = "rdma-test-secret-key-0000000000000000000";

// A handler served by the gateway's HTTP server on 127.0.0.1, until destroyed.
class Served {
 public:
  Served(const gateway::GatewayConfig& config, gateway::RequestHandler& handler);
  ~Served();
  std::string url() const { return server_.urls().front(); }
  gateway::Metrics metrics;

 private:
  gateway::HttpServer server_;
  std::thread thread_;
};

// The configuration of the test gateway, keeping its state under `dir`.
gateway::GatewayConfig rdma_gateway_config(const TempDir& dir);

struct InProcessGateway {
  InProcessGateway();
  // (Re)starts the RDMA plane at host:port (0: any free port) with `options`,
  // dropping the sessions of the one before.
  void start_rdma(std::shared_ptr<targets::rdma::Transport> transport, const std::string& host, uint16_t port,
                  const targets::rdma::SessionOptions& options);

  TempDir dir{"keel-rdma-gateway"};
  gateway::S3Api api;
  Served served;
  std::unique_ptr<gateway::RdmaPlane> plane;
};

// A request with an empty body and `headers`, signed with the test user's
// key (the headers too, unless `sign_headers` is false).
targets::s3::HttpResponse send_signed(const std::string& url, const std::string& method, const std::string& path,
                                      targets::s3::Headers headers, bool sign_headers = true);

std::string crc32c_base64(ByteView data);

// Catch2 checks that the gateway refuses tokens reaching outside the client's
// registered pool (`options` made it), naming another session or none,
// reused, or not signed (403 AccessDenied with x-amz-rdma-reply: 403);
// declines one larger than its slots (501) and an upload without its
// crc32c (400); and stores the one good token's bytes once.
void check_token_rejections(const InProcessGateway& gateway, targets::rdma::ClientSession& session,
                            targets::rdma::ClientSession& other, const targets::rdma::SessionOptions& options);

}  // namespace keel::test
