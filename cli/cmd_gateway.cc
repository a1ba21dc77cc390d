#include <iostream>

#include "cli/commands.h"
#include "gateway/config.h"
#include "gateway/http_server.h"
#include "gateway/rdma_plane.h"
#include "gateway/s3_api.h"
#include "targets/rdma/verbs_transport.h"
#include "util/error.h"

namespace keel::cli {

int cmd_gateway(App& app, const Args& args) {
  std::string config_path;
  po::options_description opts(
      "keel gateway --config FILE: serve an S3-compatible endpoint whose buckets keep their objects on this host\n"
      "(configuration format: docs/gateway.md). Prints the URLs it listens on (and the metrics URL when metrics_listen\n"
      "is set), then serves until SIGINT/SIGTERM. With [server] rdma_listen it also serves the RDMA data plane\n"
      "(docs/rdma.md): clients given --rdma move object payloads by one-sided RDMA; without it they are declined\n"
      "and use HTTP");
  opts.add_options()("config", po::value(&config_path)->required(), "the gateway's configuration file");
  po::variables_map vm;
  if (!app.parse(args, opts, {}, vm)) return 0;

  gateway::GatewayConfig config = gateway::GatewayConfig::load(config_path);
  gateway::S3Api api(std::move(config));
  gateway::Metrics metrics;
  std::unique_ptr<gateway::RdmaPlane> rdma;
  if (const auto& at = api.config().rdma_listen) {
    // Slots hold a whole part (keel's are 8 MiB and a blob more); one per server thread.
    targets::rdma::SessionOptions options;
    options.slot_size = 16 << 20;
    options.slot_count = api.config().threads;
    try {
      rdma = std::make_unique<gateway::RdmaPlane>(targets::rdma::make_verbs_transport(), *at, options, metrics);
    } catch (const Error& e) {
      throw Error(e.kind(), config_path + ": rdma_listen " + at->host + ":" + std::to_string(at->port) + ": " +
                                e.what() + " (remove rdma_listen to serve HTTP only)");
    }
    api.serve_rdma(*rdma);
  }
  gateway::HttpServer server(api.config(), api, metrics);
  for (const auto& url : server.urls()) std::cout << "listening on " << url << std::endl;
  if (rdma) std::cout << "rdma on " << api.config().rdma_listen->host << ":" << rdma->port() << std::endl;
  if (const auto url = server.metrics_url()) std::cout << "metrics on " << *url << std::endl;
  server.run();
  app.say("keel gateway stopped");
  return 0;
}

}  // namespace keel::cli
