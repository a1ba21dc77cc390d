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
#include <algorithm>
#include <atomic>
#include <limits>
#include <thread>

#include "util/error.h"
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
constexpr auto kIdleTimeout = std::chrono::seconds(120);

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
  lowest(stream).expires_after(kIdleTimeout);
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
      lowest(stream).expires_after(kIdleTimeout);
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
awaitable<void> serve(Stream& stream, RequestHandler& handler, Metrics& metrics) {
  beast::flat_buffer buffer;
  std::vector<uint8_t> body_buffer;
  while (true) {
    http::request_parser<http::buffer_body> parser;
    parser.header_limit(kHeaderLimit);
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    lowest(stream).expires_after(kIdleTimeout);
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
      // The body was not read; the connection cannot carry another request.
      if (!body_read) keep_alive = false;
    } else {
      try {
        if (expects_continue && !parser.is_done()) {
          lowest(stream).expires_after(kIdleTimeout);
          co_await asio::async_write(stream, asio::buffer("HTTP/1.1 100 Continue\r\n\r\n", 25), use_awaitable);
        }
        body_buffer.resize(kBodyBuffer);
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
            lowest(stream).expires_after(kIdleTimeout);
            const size_t want = static_cast<size_t>(std::min<uint64_t>(body_buffer.size(), remaining));
            const size_t got = co_await stream.async_read_some(asio::buffer(body_buffer.data(), want),
                                                               asio::redirect_error(use_awaitable, ec));
            if (ec) co_return;  // the client went away: nothing to answer
            remaining -= got;
            bytes_in += got;
            exchange.body->write(ByteView(body_buffer.data(), got));
          }
        } else {
          while (!parser.is_done()) {
            request.body().data = body_buffer.data();
            request.body().size = body_buffer.size();
            lowest(stream).expires_after(kIdleTimeout);
            co_await http::async_read(stream, buffer, parser, asio::redirect_error(use_awaitable, ec));
            if (ec == http::error::need_buffer) ec = {};
            if (ec) co_return;  // the client went away or sent a broken body: nothing to answer
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

// A metrics connection: GET /metrics answers the exposition; anything else 404.
awaitable<void> serve_metrics(beast::tcp_stream& stream, const Metrics& metrics) {
  beast::flat_buffer buffer;
  while (true) {
    http::request<http::string_body> request;
    stream.expires_after(kIdleTimeout);
    boost::system::error_code ec;
    co_await http::async_read(stream, buffer, request, asio::redirect_error(use_awaitable, ec));
    if (ec) co_return;
    http::response<http::string_body> response;
    response.version(request.version());
    response.keep_alive(request.keep_alive());
    response.set(http::field::server, "keel-gateway");
    const std::string_view target = view(request.target());
    if (request.method() == http::verb::get && target.substr(0, target.find('?')) == "/metrics") {
      response.result(http::status::ok);
      response.set(http::field::content_type, "text/plain; version=0.0.4");
      response.body() = metrics.render();
    } else {
      response.result(http::status::not_found);
      response.set(http::field::content_type, "text/plain");
      response.body() = "only GET /metrics is served here\n";
    }
    response.prepare_payload();
    co_await http::async_write(stream, response, use_awaitable);
    if (!request.keep_alive()) co_return;
  }
}

}  // namespace

enum class Listener { kPlain, kTls, kMetrics };

struct HttpServer::Impl {
  explicit Impl(unsigned threads) : io(static_cast<int>(threads)), tls(asio::ssl::context::tls_server), threads(threads) {}

  awaitable<void> accept(tcp::acceptor& acceptor, Listener kind) {
    while (true) {
      boost::system::error_code ec;
      tcp::socket socket = co_await acceptor.async_accept(asio::redirect_error(use_awaitable, ec));
      if (ec == asio::error::operation_aborted) co_return;
      if (ec) continue;  // out of descriptors and the like: keep accepting
      socket.set_option(tcp::no_delay(true), ec);
      asio::co_spawn(io, connection(std::move(socket), kind), asio::detached);
    }
  }

  awaitable<void> connection(tcp::socket socket, Listener kind) {
    try {
      if (kind == Listener::kMetrics) {
        beast::tcp_stream stream(std::move(socket));
        co_await serve_metrics(stream, *metrics);
        boost::system::error_code ec;
        stream.socket().shutdown(tcp::socket::shutdown_send, ec);
      } else if (kind == Listener::kTls) {
        beast::ssl_stream<beast::tcp_stream> stream(beast::tcp_stream(std::move(socket)), tls);
        lowest(stream).expires_after(kIdleTimeout);
        co_await stream.async_handshake(asio::ssl::stream_base::server, use_awaitable);
        co_await serve(stream, *handler, *metrics);
        boost::system::error_code ec;
        co_await stream.async_shutdown(asio::redirect_error(use_awaitable, ec));
      } else {
        beast::tcp_stream stream(std::move(socket));
        co_await serve(stream, *handler, *metrics);
        boost::system::error_code ec;
        stream.socket().shutdown(tcp::socket::shutdown_send, ec);
      }
    } catch (const std::exception&) {
      // A broken connection ends only itself.
    }
  }

  asio::io_context io;
  asio::ssl::context tls;
  unsigned threads;
  RequestHandler* handler = nullptr;
  Metrics* metrics = nullptr;
  std::vector<std::pair<std::unique_ptr<tcp::acceptor>, Listener>> acceptors;
};

HttpServer::HttpServer(const GatewayConfig& config, RequestHandler& handler, Metrics& metrics)
    : impl_(std::make_unique<Impl>(config.threads)) {
  impl_->handler = &handler;
  impl_->metrics = &metrics;
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
  std::vector<std::pair<ListenAddress, Listener>> addresses;
  for (const auto& listen : config.listen) addresses.emplace_back(listen, listen.tls ? Listener::kTls : Listener::kPlain);
  if (config.metrics_listen) addresses.emplace_back(*config.metrics_listen, Listener::kMetrics);
  for (const auto& [listen, kind] : addresses) {
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
      throw Error(ErrorKind::kTargetIo, "cannot listen on " + listen.host + ":" + std::to_string(listen.port) + ": " +
                                            ec.message());
    }
    impl_->acceptors.emplace_back(std::move(acceptor), kind);
  }
}

namespace {
std::string url_of(const tcp::acceptor& acceptor, bool tls) {
  const auto endpoint = acceptor.local_endpoint();
  const std::string host = endpoint.address().is_v6() ? "[" + endpoint.address().to_string() + "]"
                                                      : endpoint.address().to_string();
  return std::string(tls ? "https://" : "http://") + host + ":" + std::to_string(endpoint.port());
}
}  // namespace

HttpServer::~HttpServer() = default;

std::vector<std::string> HttpServer::urls() const {
  std::vector<std::string> out;
  for (const auto& [acceptor, kind] : impl_->acceptors) {
    if (kind != Listener::kMetrics) out.push_back(url_of(*acceptor, kind == Listener::kTls));
  }
  return out;
}

std::optional<std::string> HttpServer::metrics_url() const {
  for (const auto& [acceptor, kind] : impl_->acceptors) {
    if (kind == Listener::kMetrics) return url_of(*acceptor, false) + "/metrics";
  }
  return std::nullopt;
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
