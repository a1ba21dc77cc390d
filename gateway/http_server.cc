#include "gateway/http_server.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <malloc.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "gateway/http_connection.h"
#include "util/error.h"
#include "util/host_port.h"
#include "util/prometheus_server.h"

namespace keel::gateway {

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using asio::awaitable;
using asio::use_awaitable;

// Connections open at once that make a flood, after which the heap is trimmed.
constexpr unsigned kTrimAfterPeak = 64;

}  // namespace

enum class Listener { kPlain, kTls };

struct HttpServer::Impl {
  explicit Impl(unsigned threads) : threads(threads), io(static_cast<int>(threads)), tls(asio::ssl::context::tls_server) {}

  // A connection counted against the caps while it lives.
  class Slot {
   public:
    Slot(Impl& impl, asio::ip::address client) : impl_(&impl), client_(std::move(client)) {}
    Slot(Slot&& other) noexcept : impl_(std::exchange(other.impl_, nullptr)), client_(other.client_) {}
    Slot& operator=(Slot&&) = delete;
    ~Slot() {
      if (impl_) impl_->release(client_);
    }

   private:
    Impl* impl_;
    asio::ip::address client_;
  };

  // Counts a new connection from `client`; the cap it would exceed otherwise.
  std::optional<const char*> admit(const asio::ip::address& client) {
    std::lock_guard lock(clients_mu);
    if (open_connections >= limits.max_connections) return "refused_server_cap";
    unsigned& from_client = per_client[client];
    if (from_client >= limits.max_connections_per_client) return "refused_client_cap";
    ++from_client;
    metrics->set_open_connections(++open_connections);
    peak_since_trim = std::max(peak_since_trim, open_connections);
    return std::nullopt;
  }

  void release(const asio::ip::address& client) {
    std::lock_guard lock(clients_mu);
    if (auto it = per_client.find(client); it != per_client.end() && --it->second == 0) per_client.erase(it);
    metrics->set_open_connections(--open_connections);
    // The last one of a flood gone: the heap it grew goes back too. Not after
    // ordinary traffic, whose freed buffers the heap keeps for reuse.
    if (open_connections == 0 && peak_since_trim >= kTrimAfterPeak) {
      ::malloc_trim(0);
      peak_since_trim = 0;
    }
  }

  awaitable<void> accept(tcp::acceptor& acceptor, Listener kind) {
    while (true) {
      boost::system::error_code ec;
      tcp::socket socket = co_await acceptor.async_accept(asio::redirect_error(use_awaitable, ec));
      if (ec == asio::error::operation_aborted) co_return;
      if (ec) continue;  // out of descriptors and the like: keep accepting
      const tcp::endpoint remote = socket.remote_endpoint(ec);
      if (ec) continue;  // gone already
      if (const auto refused = admit(remote.address())) {
        metrics->record_connection_event(*refused);
        refuse(socket, kind);
        continue;
      }
      socket.set_option(tcp::no_delay(true), ec);
      asio::co_spawn(io, connection(std::move(socket), kind, Slot(*this, remote.address())), asio::detached);
    }
  }

  // Over a cap: a plain listener answers 503 (what fits the socket buffer
  // now, never waiting on the client); then the connection closes.
  static void refuse(tcp::socket& socket, Listener kind) {
    boost::system::error_code ec;
    if (kind == Listener::kPlain) {
      static constexpr std::string_view kBusy =
          "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nRetry-After: 1\r\nContent-Length: 0\r\n\r\n";
      socket.non_blocking(true, ec);
      socket.write_some(asio::buffer(kBusy.data(), kBusy.size()), ec);
    }
    socket.shutdown(tcp::socket::shutdown_both, ec);
    socket.close(ec);
  }

  // `slot` lives in the coroutine frame: the connection counts until it ends.
  awaitable<void> connection(tcp::socket socket, Listener kind, [[maybe_unused]] Slot slot) {
    try {
      if (kind == Listener::kTls) {
        co_await serve_tls_connection(std::move(socket), tls, *handler, *metrics, limits);
      } else {
        co_await serve_plain_connection(std::move(socket), *handler, *metrics, limits);
      }
    } catch (const std::exception&) {
      // A broken connection ends only itself.
    }
  }

  // Declared before `io`: connections still pending when the server goes
  // are destroyed with `io`, and each releases its slot here.
  unsigned threads;
  ConnectionLimits limits;
  std::mutex clients_mu;
  std::map<asio::ip::address, unsigned> per_client;  // open connections by client address
  unsigned open_connections = 0;
  unsigned peak_since_trim = 0;
  RequestHandler* handler = nullptr;
  Metrics* metrics = nullptr;
  asio::io_context io;
  asio::ssl::context tls;
  std::vector<std::pair<std::unique_ptr<tcp::acceptor>, Listener>> acceptors;
  std::unique_ptr<PrometheusServer> metrics_server;
};

HttpServer::HttpServer(const GatewayConfig& config, RequestHandler& handler, Metrics& metrics)
    : impl_(std::make_unique<Impl>(config.threads)) {
  impl_->handler = &handler;
  impl_->metrics = &metrics;
  impl_->limits = config.limits;
  const bool any_tls = std::any_of(config.listen.begin(), config.listen.end(), [](const auto& l) { return l.tls; });
  if (any_tls) {
    boost::system::error_code ec;
    impl_->tls.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                           asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                           asio::ssl::context::no_tlsv1_1);
    impl_->tls.use_certificate_chain_file(config.tls_certificate, ec);
    if (ec) throw Error(ErrorKind::kUsage, "TLS certificate " + config.tls_certificate + ": " + ec.message());
    impl_->tls.use_private_key_file(config.tls_key, asio::ssl::context::pem, ec);
    if (ec) throw Error(ErrorKind::kUsage, "TLS key " + config.tls_key + ": " + ec.message());
  }
  for (const auto& listen : config.listen) {
    const Listener kind = listen.tls ? Listener::kTls : Listener::kPlain;
    boost::system::error_code ec;
    const auto address = asio::ip::make_address(listen.host, ec);
    if (ec) throw Error(ErrorKind::kUsage, "listen address '" + listen.host + "' is not an IP address");
    auto acceptor = std::make_unique<tcp::acceptor>(impl_->io);
    const tcp::endpoint endpoint(address, listen.port);
    acceptor->open(endpoint.protocol(), ec);
    if (!ec) acceptor->set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor->bind(endpoint, ec);
    if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      throw Error(ErrorKind::kTargetIo,
                  "cannot listen on " + format_host_port({listen.host, listen.port}) + ": " + ec.message());
    }
    impl_->acceptors.emplace_back(std::move(acceptor), kind);
  }
  if (config.metrics_listen) {
    impl_->metrics_server = std::make_unique<PrometheusServer>(
        format_host_port({config.metrics_listen->host, config.metrics_listen->port}), [&metrics] { return metrics.render(); });
  }
}

namespace {
std::string url_of(const tcp::acceptor& acceptor, bool tls) {
  const auto endpoint = acceptor.local_endpoint();
  return std::string(tls ? "https://" : "http://") + format_host_port({endpoint.address().to_string(), endpoint.port()});
}
}  // namespace

HttpServer::~HttpServer() = default;

std::vector<std::string> HttpServer::urls() const {
  std::vector<std::string> out;
  for (const auto& [acceptor, kind] : impl_->acceptors) out.push_back(url_of(*acceptor, kind == Listener::kTls));
  return out;
}

std::optional<std::string> HttpServer::metrics_url() const {
  if (!impl_->metrics_server) return std::nullopt;
  return "http://" + impl_->metrics_server->address() + "/metrics";
}

void HttpServer::run() {
  for (auto& [acceptor, kind] : impl_->acceptors) {
    asio::co_spawn(impl_->io, impl_->accept(*acceptor, kind), asio::detached);
  }
  asio::signal_set signals(impl_->io, SIGINT, SIGTERM);
  signals.async_wait([this](const boost::system::error_code& ec, int) {
    if (!ec) stop();
  });
  std::vector<std::thread> threads;
  for (unsigned i = 1; i < impl_->threads; ++i) threads.emplace_back([this] { impl_->io.run(); });
  impl_->io.run();
  for (auto& thread : threads) thread.join();
}

void HttpServer::stop() { impl_->io.stop(); }

}  // namespace keel::gateway
