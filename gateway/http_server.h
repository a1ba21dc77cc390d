// The gateway's HTTP/1.1 server (Boost.Beast on Asio, C++20 coroutines):
// plain and TLS listeners, keep-alive, Expect: 100-continue, request bodies
// pushed to the handler as they arrive and response bodies pulled from it,
// so neither side ever holds a whole object in memory.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gateway/config.h"
#include "gateway/exchange.h"
#include "gateway/metrics.h"

namespace keel::gateway {

class HttpServer {
 public:
  // Binds every address in config.listen and config.metrics_listen (port 0:
  // any free port) and loads the TLS certificate. Every request answered is
  // recorded in `metrics`, which config.metrics_listen serves. Throws
  // Error(kUsage) for a bad certificate or key, Error(kTargetIo) when an
  // address cannot be bound.
  HttpServer(const GatewayConfig& config, RequestHandler& handler, Metrics& metrics);
  ~HttpServer();

  // "http://127.0.0.1:9000", "https://[::1]:9443": what was bound.
  std::vector<std::string> urls() const;
  // "http://127.0.0.1:9465/metrics", when metrics_listen is set.
  std::optional<std::string> metrics_url() const;
  // Serves on config.threads threads until stop() or SIGINT/SIGTERM.
  void run();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace keel::gateway
