// The one Prometheus endpoint keel serves (the scheduler's and the gateway's
// metrics_listen): a tiny HTTP/1.1 server where GET /metrics answers with
// what `render` returns at that moment (write it with PrometheusText);
// anything else is 404 (405 for other methods). It runs on a thread of its
// own; each request and each answer must pass within kClientTimeout, so a
// stuck scraper holds nothing.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace keel {

class PrometheusServer {
 public:
  static constexpr std::chrono::seconds kClientTimeout{10};

  // `listen`: HOST:PORT, e.g. 127.0.0.1:9464, [::1]:9464 or localhost:9464;
  // port 0 takes a free one (parse_host_port's rules). `render` is called on
  // the server's thread.
  // Throws Error(kUsage) for an address it cannot parse or resolve,
  // Error(kTargetIo) if it cannot listen there.
  PrometheusServer(const std::string& listen, std::function<std::string()> render);
  ~PrometheusServer();  // stops serving and joins the thread
  PrometheusServer(const PrometheusServer&) = delete;
  PrometheusServer& operator=(const PrometheusServer&) = delete;

  // HOST:PORT actually listened on (the port resolved if 0 was asked).
  std::string address() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace keel
