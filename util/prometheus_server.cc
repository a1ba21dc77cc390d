#include "util/prometheus_server.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <thread>

#include "util/error.h"
#include "util/host_port.h"
#include "util/prometheus_text.h"

namespace keel {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// One connection: read a request, answer, repeat while the client keeps it
// alive; every step under the client timeout.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const std::function<std::string()>& render)
      : stream_(std::move(socket)), render_(render) {}

  void read() {
    request_ = {};
    stream_.expires_after(PrometheusServer::kClientTimeout);
    http::async_read(stream_, buffer_, request_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (!ec) self->answer();
    });
  }

 private:
  void answer() {
    auto response = std::make_shared<http::response<http::string_body>>();
    response->version(request_.version());
    response->keep_alive(request_.keep_alive());
    response->set(http::field::server, "keel");
    if (request_.method() != http::verb::get && request_.method() != http::verb::head) {
      response->result(http::status::method_not_allowed);
      response->set(http::field::allow, "GET, HEAD");
    } else if (const auto target = request_.target(); target.substr(0, target.find('?')) != "/metrics") {
      response->result(http::status::not_found);
      response->body() = "keel serves /metrics\n";
    } else {
      response->result(http::status::ok);
      response->set(http::field::content_type, PrometheusText::kContentType);
      response->body() = render_();
    }
    response->prepare_payload();
    if (request_.method() == http::verb::head) response->body().clear();
    stream_.expires_after(PrometheusServer::kClientTimeout);
    http::async_write(stream_, *response, [self = shared_from_this(), response](beast::error_code ec, size_t) {
      if (ec) return;
      if (response->keep_alive()) {
        self->read();
      } else {
        beast::error_code ignored;
        self->stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
      }
    });
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> request_;
  const std::function<std::string()>& render_;
};

}  // namespace

struct PrometheusServer::Impl {
  std::function<std::string()> render;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::thread thread;

  void accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;
      if (!ec) std::make_shared<Session>(std::move(socket), render)->read();
      accept();
    });
  }
};

PrometheusServer::PrometheusServer(const std::string& listen, std::function<std::string()> render)
    : impl_(std::make_unique<Impl>()) {
  impl_->render = std::move(render);
  HostPortRules rules;
  rules.allow_port_zero = true;
  const HostPort address = parse_host_port(listen, "metrics address", rules);
  tcp::endpoint endpoint;
  try {
    tcp::resolver resolver(impl_->io);
    auto results = resolver.resolve(address.host, std::to_string(address.port), tcp::resolver::numeric_service);
    if (results.empty()) throw Error(ErrorKind::kUsage, "metrics address '" + listen + "': resolves to nothing");
    endpoint = results.begin()->endpoint();
  } catch (const boost::system::system_error& e) {
    throw Error(ErrorKind::kUsage, "metrics address '" + listen + "': " + e.code().message());
  }
  try {
    impl_->acceptor.open(endpoint.protocol());
    impl_->acceptor.set_option(tcp::acceptor::reuse_address(true));
    impl_->acceptor.bind(endpoint);
    impl_->acceptor.listen();
  } catch (const boost::system::system_error& e) {
    throw Error(ErrorKind::kTargetIo, "cannot serve metrics on " + listen + ": " + e.code().message());
  }
  impl_->accept();
  impl_->thread = std::thread([impl = impl_.get()] { impl->io.run(); });
}

PrometheusServer::~PrometheusServer() {
  impl_->io.stop();
  impl_->thread.join();
}

std::string PrometheusServer::address() const {
  const tcp::endpoint e = impl_->acceptor.local_endpoint();
  return format_host_port({e.address().to_string(), e.port()});
}

}  // namespace keel
