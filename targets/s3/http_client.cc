#include "targets/s3/http_client.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/read.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cstring>
#include <limits>
#include <mutex>

#include "util/error.h"
#include "util/host_port.h"

namespace keel::targets::s3 {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

Endpoint Endpoint::parse(const std::string& url) {
  Endpoint e;
  std::string rest;
  if (url.rfind("https://", 0) == 0) {
    e.tls = true;
    rest = url.substr(8);
  } else if (url.rfind("http://", 0) == 0) {
    rest = url.substr(7);
  } else {
    throw Error(ErrorKind::kUsage, "endpoint " + url + ": must start with http:// or https://");
  }
  if (auto slash = rest.find('/'); slash != std::string::npos) {
    if (rest.substr(slash) != "/") throw Error(ErrorKind::kUsage, "endpoint " + url + ": must not have a path");
    rest = rest.substr(0, slash);
  }
  HostPortRules rules;
  rules.default_port = e.tls ? 443 : 80;
  HostPort address = parse_host_port(rest, "endpoint " + url + ": host", rules);
  e.host = std::move(address.host);
  e.port = std::to_string(address.port);
  return e;
}

std::string Endpoint::host_header() const {
  const std::string h = bracketed_host(host);
  bool default_port = (tls && port == "443") || (!tls && port == "80");
  return default_port ? h : h + ":" + port;
}

std::string Endpoint::url() const { return (tls ? "https://" : "http://") + host_header(); }

std::string HttpResponse::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return v;
  }
  return "";
}

namespace {

// A socket whose connect and every read and write wait at most `timeout`
// for progress, then fail with timed_out (a retryable I/O error). Asio's
// blocking calls cannot do this: when SO_RCVTIMEO fires they poll again
// without a limit (its connect never gives up before the kernel does), so a
// server that stopped answering (a full Ceph cluster does) held a request,
// and the backup, forever. The socket is non-blocking; poll() does the
// waiting.
class TimedSocket {
 public:
  using executor_type = tcp::socket::executor_type;
  using next_layer_type = tcp::socket;
  using lowest_layer_type = tcp::socket::lowest_layer_type;

  TimedSocket(tcp::socket& socket, std::chrono::milliseconds timeout) : socket_(socket), timeout_(timeout) {}

  // Connects to the first of `endpoints` that accepts within the timeout.
  void connect(const tcp::resolver::results_type& endpoints) {
    boost::system::error_code ec = asio::error::host_not_found;
    for (const auto& entry : endpoints) {
      boost::system::error_code ignored;
      socket_.close(ignored);
      socket_.open(entry.endpoint().protocol(), ec);
      if (!ec) socket_.non_blocking(true, ec);
      if (ec) continue;
      if (::connect(socket_.native_handle(), entry.endpoint().data(), entry.endpoint().size()) == 0) return;
      if (errno != EINPROGRESS) {
        ec.assign(errno, boost::system::system_category());
        continue;
      }
      if (!wait(POLLOUT, ec)) continue;
      int error = 0;
      socklen_t length = sizeof error;
      ::getsockopt(socket_.native_handle(), SOL_SOCKET, SO_ERROR, &error, &length);
      if (error == 0) return;
      ec.assign(error, boost::system::system_category());
    }
    throw boost::system::system_error(ec);
  }

  executor_type get_executor() { return socket_.get_executor(); }
  next_layer_type& next_layer() { return socket_; }
  lowest_layer_type& lowest_layer() { return socket_.lowest_layer(); }

  template <typename Buffers>
  size_t read_some(const Buffers& buffers, boost::system::error_code& ec) {
    return transfer([&] { return socket_.read_some(buffers, ec); }, POLLIN, ec);
  }
  template <typename Buffers>
  size_t write_some(const Buffers& buffers, boost::system::error_code& ec) {
    return transfer([&] { return socket_.write_some(buffers, ec); }, POLLOUT, ec);
  }
  template <typename Buffers>
  size_t read_some(const Buffers& buffers) {
    return or_throw([&](boost::system::error_code& ec) { return read_some(buffers, ec); });
  }
  template <typename Buffers>
  size_t write_some(const Buffers& buffers) {
    return or_throw([&](boost::system::error_code& ec) { return write_some(buffers, ec); });
  }

 private:
  template <typename Op>
  size_t transfer(Op op, short events, boost::system::error_code& ec) {
    for (;;) {
      size_t n = op();
      if (ec != asio::error::would_block && ec != asio::error::try_again) return n;
      if (!wait(events, ec)) return 0;
    }
  }
  // Whether the socket became ready for `events` within the timeout.
  bool wait(short events, boost::system::error_code& ec) {
    pollfd p{socket_.native_handle(), events, 0};
    int ready;
    do {
      ready = ::poll(&p, 1, static_cast<int>(timeout_.count()));
    } while (ready < 0 && errno == EINTR);
    if (ready == 0) ec = asio::error::timed_out;
    if (ready < 0) ec.assign(errno, boost::system::system_category());
    return ready > 0;
  }
  template <typename Op>
  static size_t or_throw(Op op) {
    boost::system::error_code ec;
    size_t n = op(ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

  tcp::socket& socket_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

struct HttpClient::Connection {
  Connection(asio::io_context& io, std::chrono::milliseconds timeout) : socket(io), timed(socket, timeout) {}
  tcp::socket socket;
  TimedSocket timed;  // all traffic goes through it, TLS included
  std::unique_ptr<asio::ssl::stream<TimedSocket&>> tls;
  beast::flat_buffer buffer;
};

struct HttpClient::Pool {
  asio::io_context io;
  asio::ssl::context tls_context{asio::ssl::context::tls_client};
  std::mutex mu;
  std::vector<std::unique_ptr<Connection>> idle;
};

HttpClient::HttpClient(Endpoint endpoint, HttpOptions options)
    : endpoint_(std::move(endpoint)), options_(std::move(options)), pool_(std::make_unique<Pool>()) {
  if (endpoint_.tls) {
    auto& ctx = pool_->tls_context;
    ctx.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                    asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
    if (options_.insecure_tls) {
      ctx.set_verify_mode(asio::ssl::verify_none);
    } else {
      ctx.set_verify_mode(asio::ssl::verify_peer);
      boost::system::error_code ec;
      ctx.set_default_verify_paths(ec);
      if (!options_.ca_file.empty()) {
        ctx.load_verify_file(options_.ca_file, ec);
        if (ec) throw Error(ErrorKind::kUsage, "CA file " + options_.ca_file + ": " + ec.message());
      }
    }
  }
}

HttpClient::~HttpClient() = default;

namespace {

void set_no_delay(tcp::socket& socket) {
  int one = 1;
  ::setsockopt(socket.native_handle(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Acknowledge what arrives at once rather than after the kernel's delayed-ACK
// timer (40 ms). A server that writes a response's header and body apart
// without TCP_NODELAY (Ceph RGW's default) holds the body back until the
// header is acknowledged: every response with a body then cost 40 ms.
// Linux clears the flag as it goes, so it is set again for every response.
template <typename Stream>
void acknowledge_promptly(Stream& stream) {
  tcp::socket& socket = beast::get_lowest_layer(stream);
  int one = 1;
  ::setsockopt(socket.native_handle(), IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
}

template <typename Stream>
HttpResponse exchange(Stream& stream, beast::flat_buffer& buffer, const HttpRequest& request,
                      std::optional<std::span<uint8_t>> body_into, bool& keep_alive) {
  http::request<http::span_body<const uint8_t>> req;
  req.method_string(request.method);
  req.target(request.target);
  req.version(11);
  for (const auto& [k, v] : request.headers) req.set(k, v);
  req.body() = beast::span<const uint8_t>(request.body.data(), request.body.size());
  req.prepare_payload();
  if (request.body.empty() && request.method != "PUT" && request.method != "POST") req.erase(http::field::content_length);
  http::write(stream, req);
  acknowledge_promptly(stream);

  http::response_parser<http::buffer_body> parser;
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());  // not boost::none: Beast 1.74 compares it wrongly
  if (request.method == "HEAD") parser.skip(true);
  http::read_header(stream, buffer, parser);

  HttpResponse response;
  response.status = static_cast<int>(parser.get().result_int());
  for (const auto& field : parser.get()) {
    std::string name(field.name_string());
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    response.headers.emplace_back(std::move(name), std::string(field.value()));
  }
  bool into_caller = body_into && response.status / 100 == 2;
  uint8_t* dst = nullptr;
  size_t capacity = 0;
  if (into_caller) {
    dst = body_into->data();
    capacity = body_into->size();
  } else if (auto len = parser.content_length()) {
    response.body.resize(static_cast<size_t>(*len));
    dst = response.body.data();
    capacity = response.body.size();
  }
  size_t got = 0;
  if (auto len = parser.content_length(); len && !parser.is_done()) {
    // A sized body goes straight from the socket into its destination in
    // large reads: Beast's parser would pull it through the small read
    // buffer, a few hundred bytes per system call.
    if (*len > capacity) {
      throw Error(ErrorKind::kTargetIo, "response body of " + std::to_string(*len) + " bytes is larger than the " +
                                            std::to_string(capacity) + " bytes asked for");
    }
    size_t body = static_cast<size_t>(*len);
    size_t buffered = std::min(buffer.size(), body);
    asio::buffer_copy(asio::buffer(dst, buffered), buffer.data());
    buffer.consume(buffered);
    asio::read(stream, asio::buffer(dst + buffered, body - buffered));
    response.body_size = body;
    keep_alive = parser.get().keep_alive();
    return response;
  }
  while (!parser.is_done()) {
    if (!into_caller) {
      if (got == response.body.size()) response.body.resize(std::max<size_t>(64 * 1024, response.body.size() * 2));
      dst = response.body.data();
      capacity = response.body.size();
    }
    if (got == capacity) throw Error(ErrorKind::kTargetIo, "response body larger than the " + std::to_string(capacity) + " bytes asked for");
    parser.get().body().data = dst + got;
    parser.get().body().size = capacity - got;
    boost::system::error_code ec;
    http::read(stream, buffer, parser, ec);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) throw boost::system::system_error(ec);
    got = capacity - parser.get().body().size;
  }
  response.body_size = got;
  if (!into_caller) response.body.resize(got);
  keep_alive = parser.get().keep_alive();
  return response;
}

}  // namespace

HttpResponse HttpClient::send(const HttpRequest& request, std::optional<std::span<uint8_t>> body_into) {
  for (int attempt = 0;; ++attempt) {
    std::unique_ptr<Connection> conn;
    {
      std::lock_guard lock(pool_->mu);
      if (!pool_->idle.empty()) {
        conn = std::move(pool_->idle.back());
        pool_->idle.pop_back();
      }
    }
    bool reused = conn != nullptr;
    try {
      if (!conn) {
        conn = std::make_unique<Connection>(pool_->io, options_.timeout);
        tcp::resolver resolver(pool_->io);
        conn->timed.connect(resolver.resolve(endpoint_.host, endpoint_.port));
        set_no_delay(conn->socket);
        if (endpoint_.tls) {
          conn->tls = std::make_unique<asio::ssl::stream<TimedSocket&>>(conn->timed, pool_->tls_context);
          if (!SSL_set_tlsext_host_name(conn->tls->native_handle(), endpoint_.host.c_str())) {
            throw Error(ErrorKind::kTargetIo, endpoint_.url() + ": cannot set TLS server name");
          }
          if (!options_.insecure_tls) conn->tls->set_verify_callback(asio::ssl::host_name_verification(endpoint_.host));
          conn->tls->handshake(asio::ssl::stream_base::client);
        }
      }
      bool keep_alive = false;
      HttpResponse response = conn->tls ? exchange(*conn->tls, conn->buffer, request, body_into, keep_alive)
                                        : exchange(conn->timed, conn->buffer, request, body_into, keep_alive);
      if (keep_alive) {
        std::lock_guard lock(pool_->mu);
        if (pool_->idle.size() < options_.max_idle_connections) pool_->idle.push_back(std::move(conn));
      }
      return response;
    } catch (const boost::system::system_error& e) {
      // A pooled connection the server closed while idle: one more try on a fresh one.
      if (reused && attempt == 0) continue;
      throw Error(ErrorKind::kTargetIo, request.method + " " + endpoint_.url() + request.target + ": " + e.code().message());
    }
  }
}

}  // namespace keel::targets::s3
