#include "gateway/http_server.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <malloc.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <atomic>
#include <limits>
#include <map>
#include <mutex>
#include <span>
#include <thread>
#include <utility>

#include "util/error.h"
#include "util/host_port.h"
#include "util/prometheus_server.h"
#include "util/text.h"
#include "util/id.h"

namespace keel::gateway {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using asio::awaitable;
using asio::use_awaitable;

constexpr size_t kHeaderLimit = 64 * 1024;
constexpr size_t kBodyBuffer = 1024 * 1024;
// Connections open at once that make a flood, after which the heap is trimmed.
constexpr unsigned kTrimAfterPeak = 64;
// A client must take each piece of a response within this.
constexpr auto kWriteTimeout = std::chrono::seconds(120);

using Clock = std::chrono::steady_clock;

// A request body's buffer, mapped for the request and unmapped after it: the
// heap keeps large frees for reuse (util/allocator.h), which would keep what
// a flood of connections took for good.
class MappedBuffer {
 public:
  // An empty body still maps a page: mmap refuses a length of zero.
  explicit MappedBuffer(size_t size) : size_(size), mapped_(std::max<size_t>(size, 1)) {
    void* p = ::mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      throw Error(ErrorKind::kFailure,
                  "cannot map a " + std::to_string(size_) + "-byte request body buffer: " + std::strerror(errno));
    }
    data_ = static_cast<uint8_t*>(p);
  }
  ~MappedBuffer() { ::munmap(data_, mapped_); }
  MappedBuffer(const MappedBuffer&) = delete;
  MappedBuffer& operator=(const MappedBuffer&) = delete;

  std::span<uint8_t> span() const { return {data_, size_}; }

 private:
  size_t size_;
  size_t mapped_;
  uint8_t* data_ = nullptr;
};

// The minimum body rate: a body must bring min_body_rate bytes in each
// window of body_rate_window (the time spent waiting for the client only).
class BodyRate {
 public:
  explicit BodyRate(const ConnectionLimits& limits)
      : window_(limits.body_rate_window),
        needed_(limits.min_body_rate * static_cast<uint64_t>(limits.body_rate_window.count())),
        idle_(limits.idle_timeout) {}

  // How long the next read may wait: the rest of this window, or, once this
  // window has what it needs, the rest of it and all of the next.
  Clock::duration deadline() const {
    if (needed_ == 0) return idle_;
    return window_ - waited_ + (bytes_ >= needed_ ? Clock::duration(window_) : Clock::duration::zero());
  }

  // A read that brought `bytes` after waiting `waited`; false when a window
  // closed with too few bytes.
  bool add(uint64_t bytes, Clock::duration waited) {
    waited_ += waited;
    bytes_ += bytes;
    while (needed_ > 0 && waited_ >= window_) {
      if (bytes_ < needed_) return false;
      waited_ -= window_;
      bytes_ = 0;  // a fresh window (what came early does not carry over)
    }
    return true;
  }

 private:
  Clock::duration window_;
  uint64_t needed_;
  Clock::duration idle_;
  Clock::duration waited_{};
  uint64_t bytes_ = 0;
};

std::string_view view(beast::string_view s) { return {s.data(), s.size()}; }

std::string new_request_id() { return Id::random().hex().substr(0, 16); }

template <typename Stream>
beast::tcp_stream& lowest(Stream& stream) {
  return beast::get_lowest_layer(stream);
}

template <typename Stream>
awaitable<void> write_response(Stream& stream, Response& response, bool keep_alive, const std::string& request_id) {
  const auto set_headers = [&](auto& message) {
    message.result(static_cast<unsigned>(response.status));
    message.keep_alive(keep_alive);
    message.set(http::field::server, "keel-gateway");
    message.set(http::field::date, http_date(std::time(nullptr)));
    bool has_id = false;
    for (const auto& [name, value] : response.headers) {
      message.insert(name, value);
      has_id = has_id || name == "x-amz-request-id";
    }
    if (!has_id) message.set("x-amz-request-id", request_id);
  };
  lowest(stream).expires_after(kWriteTimeout);
  if (response.stream) {
    http::response<http::buffer_body> message;
    set_headers(message);
    message.content_length(response.stream_length);
    http::response_serializer<http::buffer_body> serializer(message);
    co_await http::async_write_header(stream, serializer, use_awaitable);
    std::vector<uint8_t> buffer(kBodyBuffer);
    uint64_t left = response.stream_length;
    while (left > 0) {
      const size_t n = response.stream->read(std::span(buffer).first(std::min<uint64_t>(buffer.size(), left)));
      if (n == 0) throw Error(ErrorKind::kTargetIo, "object ended before its recorded length");
      left -= n;
      message.body().data = buffer.data();
      message.body().size = n;
      message.body().more = true;
      boost::system::error_code ec;
      lowest(stream).expires_after(kWriteTimeout);
      co_await http::async_write(stream, serializer, asio::redirect_error(use_awaitable, ec));
      if (ec && ec != http::error::need_buffer) throw boost::system::system_error(ec);
    }
    message.body().data = nullptr;
    message.body().size = 0;
    message.body().more = false;
    co_await http::async_write(stream, serializer, use_awaitable);
  } else if (response.head_length) {
    http::response<http::empty_body> message;
    set_headers(message);
    message.content_length(*response.head_length);
    http::response_serializer<http::empty_body> serializer(message);
    // The header alone: a HEAD response has the GET's length and no body.
    co_await http::async_write_header(stream, serializer, use_awaitable);
  } else {
    http::response<http::string_body> message;
    set_headers(message);
    message.body() = std::move(response.body);
    message.prepare_payload();
    co_await http::async_write(stream, message, use_awaitable);
  }
}

// One connection: requests in turn until the client or an error closes it.
template <typename Stream>
awaitable<void> serve(Stream& stream, RequestHandler& handler, Metrics& metrics, const ConnectionLimits& limits) {
  beast::flat_buffer buffer;
  while (true) {
    http::request_parser<http::buffer_body> parser;
    parser.header_limit(kHeaderLimit);
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    lowest(stream).expires_after(limits.idle_timeout);
    boost::system::error_code ec;
    co_await http::async_read_header(stream, buffer, parser, asio::redirect_error(use_awaitable, ec));
    if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset) co_return;
    if (ec) {
      // Malformed requests get a 400 before the connection closes.
      if (ec.category() == http::make_error_code(http::error::bad_target).category()) {
        Response bad = error_response(S3Error("InvalidRequest", "malformed HTTP request: " + ec.message()), "",
                                      new_request_id());
        co_await write_response(stream, bad, false, "");
      }
      co_return;
    }
    const auto started = std::chrono::steady_clock::now();
    uint64_t bytes_in = 0;
    auto& request = parser.get();
    RequestHead head;
    head.method = std::string(view(request.method_string()));
    head.target = std::string(view(request.target()));
    const std::string resource = head.target.substr(0, head.target.find('?'));
    head.request_id = new_request_id();
    boost::system::error_code peer_error;
    head.client_address = lowest(stream).socket().remote_endpoint(peer_error).address().to_string();
    const std::string request_id = head.request_id;
    for (const auto& field : request) head.headers.emplace_back(ascii_lower(view(field.name_string())), std::string(view(field.value())));
    bool keep_alive = request.keep_alive();
    const bool expects_continue = ascii_lower(view(request[http::field::expect])) == "100-continue";

    Exchange exchange = handler.begin(std::move(head));
    Response response;
    bool body_read = parser.is_done();  // no body at all
    if (!exchange.body) {
      response = std::move(exchange.response);
      // The body was not read; the connection cannot carry another request. Nor can
      // one whose client waits for 100 Continue: botocore, answered without it, reads
      // the next response on the connection with this one's status line (a 60 s hang).
      if (!body_read || expects_continue) keep_alive = false;
    } else {
      try {
        // Also for an empty body, for the same botocore reason.
        if (expects_continue) {
          lowest(stream).expires_after(kWriteTimeout);
          co_await asio::async_write(stream, asio::buffer("HTTP/1.1 100 Continue\r\n\r\n", 25), use_awaitable);
        }
        // Per request and no larger than the body: an idle kept-alive
        // connection holds none, and a small PUT only a small one.
        const size_t buffer_size = !parser.chunked() && parser.content_length()
                                       ? static_cast<size_t>(std::min<uint64_t>(kBodyBuffer, *parser.content_length()))
                                       : kBodyBuffer;
        const MappedBuffer body_memory(buffer_size);
        const std::span<uint8_t> body_buffer = body_memory.span();
        BodyRate rate(limits);
        // One read of the body, cut off when the client is below the minimum rate.
        const auto timed_read = [&](auto read) -> awaitable<size_t> {
          const Clock::duration allowed = rate.deadline();
          lowest(stream).expires_after(allowed);
          const auto started_read = Clock::now();
          const size_t got = co_await read();
          const Clock::duration waited = Clock::now() - started_read;
          // A read that failed having waited all it was allowed is the expiry.
          if (ec ? waited >= allowed : !rate.add(got, waited)) {
            metrics.record_connection_event("slow_body_cut");
            ec = beast::error::timeout;
          }
          co_return got;
        };
        if (!parser.chunked() && parser.content_length()) {
          // A body of known length skips the parser: what came with the header,
          // then socket reads straight into body_buffer (the parser reads 64 KiB
          // at a time and copies each piece; this was a third of a PUT's CPU).
          uint64_t remaining = *parser.content_length();
          const size_t early = static_cast<size_t>(std::min<uint64_t>(buffer.size(), remaining));
          if (early > 0) {
            exchange.body->write(ByteView(static_cast<const uint8_t*>(buffer.data().data()), early));
            buffer.consume(early);
            remaining -= early;
            bytes_in += early;
          }
          while (remaining > 0) {
            const size_t want = static_cast<size_t>(std::min<uint64_t>(body_buffer.size(), remaining));
            const size_t got = co_await timed_read([&] {
              return stream.async_read_some(asio::buffer(body_buffer.data(), want), asio::redirect_error(use_awaitable, ec));
            });
            if (ec) co_return;  // the client went away or is too slow: nothing to answer
            remaining -= got;
            bytes_in += got;
            exchange.body->write(ByteView(body_buffer.data(), got));
          }
        } else {
          while (!parser.is_done()) {
            request.body().data = body_buffer.data();
            request.body().size = body_buffer.size();
            co_await timed_read([&]() -> awaitable<size_t> {
              co_await http::async_read(stream, buffer, parser, asio::redirect_error(use_awaitable, ec));
              if (ec == http::error::need_buffer) ec = {};
              co_return body_buffer.size() - request.body().size;
            });
            if (ec) co_return;  // the client went away, sent a broken body or is too slow: nothing to answer
            const size_t got = body_buffer.size() - request.body().size;
            bytes_in += got;
            exchange.body->write(ByteView(body_buffer.data(), got));
          }
        }
        body_read = true;
        response = exchange.body->finish();
        for (auto& header : exchange.response.headers) response.headers.push_back(std::move(header));
      } catch (const S3Error& e) {
        response = error_response(e, resource, request_id);
        if (!body_read) keep_alive = false;
      } catch (const Error& e) {
        response = error_response(S3Error("InternalError", e.what()), "", request_id);
        if (!body_read) keep_alive = false;
      }
    }
    const uint64_t bytes_out = response.stream ? response.stream_length : response.body.size();
    const int status = response.status;
    co_await write_response(stream, response, keep_alive, request_id);
    metrics.record(exchange.operation, status, bytes_in, bytes_out,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    if (!keep_alive) co_return;
  }
}

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
        beast::ssl_stream<beast::tcp_stream> stream(beast::tcp_stream(std::move(socket)), tls);
        lowest(stream).expires_after(limits.idle_timeout);
        co_await stream.async_handshake(asio::ssl::stream_base::server, use_awaitable);
        co_await serve(stream, *handler, *metrics, limits);
        boost::system::error_code ec;
        lowest(stream).expires_after(kWriteTimeout);
        co_await stream.async_shutdown(asio::redirect_error(use_awaitable, ec));
      } else {
        beast::tcp_stream stream(std::move(socket));
        co_await serve(stream, *handler, *metrics, limits);
        boost::system::error_code ec;
        stream.socket().shutdown(tcp::socket::shutdown_send, ec);
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
