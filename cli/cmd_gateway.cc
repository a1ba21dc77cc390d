#include <iostream>

#include "cli/commands.h"
#include "gateway/config.h"
#include "gateway/http_server.h"
#include "gateway/s3_api.h"
#include "util/error.h"

namespace keel::cli {

int cmd_gateway(App& app, const Args& args) {
  std::string config_path;
  po::options_description opts(
      "keel gateway --config FILE: serve an S3-compatible endpoint whose buckets keep their objects on this host\n"
      "(configuration format: docs/gateway.md). Prints the URLs it listens on (and the metrics URL when metrics_listen\n"
      "is set), then serves until SIGINT/SIGTERM");
  opts.add_options()("config", po::value(&config_path)->required(), "the gateway's configuration file");
  po::variables_map vm;
  if (!app.parse(args, opts, {}, vm)) return 0;

  gateway::GatewayConfig config = gateway::GatewayConfig::load(config_path);
  gateway::S3Api api(std::move(config));
  gateway::Metrics metrics;
  gateway::HttpServer server(api.config(), api, metrics);
  for (const auto& url : server.urls()) std::cout << "listening on " << url << std::endl;
  if (const auto url = server.metrics_url()) std::cout << "metrics on " << *url << std::endl;
  server.run();
  app.say("keel gateway stopped");
  return 0;
}

}  // namespace keel::cli
