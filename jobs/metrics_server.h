// A tiny HTTP/1.1 server for Prometheus: GET /metrics answers with what
// `render` returns at that moment; anything else is 404 (405 for other
// methods). It runs on a thread of its own; each request and each answer
// must pass within kClientTimeout, so a stuck scraper holds nothing.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace keel::jobs {

class MetricsServer {
 public:
  static constexpr std::chrono::seconds kClientTimeout{10};

  // `listen`: HOST:PORT, e.g. 127.0.0.1:9464, [::1]:9464 or localhost:9464;
  // port 0 takes a free one. `render` is called on the server's thread.
  // Throws Error(kUsage) for an address it cannot parse or resolve,
  // Error(kTargetIo) if it cannot listen there.
  MetricsServer(const std::string& listen, std::function<std::string()> render);
  ~MetricsServer();  // stops serving and joins the thread
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // HOST:PORT actually listened on (the port resolved if 0 was asked).
  std::string address() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace keel::jobs
