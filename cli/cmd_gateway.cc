#include <iostream>

#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/format.h"
#include "cli/prune_cli.h"
#include "gateway/config.h"
#include "gateway/garbage_collection.h"
#include "gateway/http_server.h"
#include "gateway/lifecycle_sweeper.h"
#include "gateway/rdma_plane.h"
#include "gateway/s3_api.h"
#include "targets/rdma/verbs_transport.h"
#include "util/error.h"

namespace keel::cli {

namespace {

// Not po's required(): that would refuse --help without --config.
void require_config(const std::string& path) {
  if (path.empty()) throw Error(ErrorKind::kUsage, "--config FILE is required (see --help)");
}

int gateway_gc(App& app, const Args& args) {
  std::string config_path;
  PruneFlags flags;
  bool dry_run = false;
  po::options_description opts(
      "keel gateway gc --config FILE [options]: reclaim the repository space of chunks that no object version or\n"
      "uploaded part of the gateway's dedupe buckets (nor any snapshot) uses any more, with keel prune's machinery:\n"
      "unused packs are condemned, then deleted by a later run once the grace period has passed. Every version that\n"
      "gateway.db holds keeps its chunks, locked or not. Run it while the gateway is stopped (exit 8 otherwise)");
  opts.add_options()("config", po::value(&config_path), "the gateway's configuration file (required)");
  add_prune_options(opts, flags);
  opts.add_options()("dry-run,n", po::bool_switch(&dry_run), "show what would be condemned, repacked and deleted");
  po::variables_map vm;
  if (!app.parse(args, opts, {}, vm)) return 0;
  require_config(config_path);
  const gateway::GatewayConfig config = gateway::GatewayConfig::load(config_path);
  engine::PruneOptions options = prune_options(flags, dry_run);
  engine::PruneProgress progress;
  options.progress = &progress;
  std::vector<gateway::RepositoryCollection> results;
  {
    Progress shown(app, "gateway gc", [&] { return prune_status(progress); });
    results = gateway::collect_garbage(config, options);
  }
  if (app.global.json) {
    Json j;
    j.begin_array();
    for (const auto& r : results) {
      j.begin_object()
          .field("repository", r.location)
          .field("buckets", r.buckets)
          .field("referenced_chunks", r.referenced_chunks)
          .key("prune");
      prune_json(j, r.prune);
      j.end_object();
    }
    j.end_array();
    std::cout << j.str() << "\n";
    return 0;
  }
  if (results.empty()) app.say("no dedupe buckets in " + config_path + ": nothing to collect");
  for (const auto& r : results) {
    app.say("repository " + r.location + " (buckets:" + [&] {
      std::string names;
      for (const auto& bucket : r.buckets) names += " " + bucket;
      return names;
    }() + "): " + std::to_string(r.referenced_chunks) + " chunk references in gateway.db");
    print_prune(app, r.prune);
  }
  return 0;
}

}  // namespace

int cmd_gateway(App& app, const Args& args) {
  if (!args.empty() && args[0] == "gc") return gateway_gc(app, Args(args.begin() + 1, args.end()));
  std::string config_path;
  po::options_description opts(
      "keel gateway --config FILE: serve an S3-compatible endpoint whose buckets keep their objects on this host\n"
      "(raw mode) or deduplicated in a keel repository (dedupe mode; configuration format: docs/gateway.md).\n"
      "Prints the URLs it listens on (and the metrics URL when metrics_listen is set), then serves until\n"
      "SIGINT/SIGTERM. With [server] rdma_listen it also serves the RDMA data plane (docs/rdma.md): clients\n"
      "given --rdma move object payloads by one-sided RDMA; without it they are declined and use HTTP.\n"
      "keel gateway gc --config FILE reclaims what deleted versions of dedupe buckets left\n"
      "(keel gateway gc --help)");
  opts.add_options()("config", po::value(&config_path), "the gateway's configuration file (required)");
  po::variables_map vm;
  if (!app.parse(args, opts, {}, vm)) return 0;
  require_config(config_path);

  gateway::GatewayConfig config = gateway::GatewayConfig::load(config_path);
  gateway::S3Api api(std::move(config));
  gateway::Metrics metrics;
  metrics.set_dedupe_source([&api] { return api.dedupe_figures(); });
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
  gateway::LifecycleSweeper lifecycle(api, api.config().lifecycle_interval, metrics, std::cerr);
  server.run();
  app.say("keel gateway stopped");
  return 0;
}

}  // namespace keel::cli
