#include <boost/beast/ssl/ssl_stream.hpp>

#include "gateway/http_connection.h"
#include "gateway/http_request_loop.h"

namespace keel::gateway {

boost::asio::awaitable<void> serve_tls_connection(boost::asio::ip::tcp::socket socket, boost::asio::ssl::context& tls,
                                                  RequestHandler& handler, Metrics& metrics,
                                                  const ConnectionLimits& limits) {
  using namespace http_loop;
  beast::ssl_stream<beast::tcp_stream> stream(beast::tcp_stream(std::move(socket)), tls);
  lowest(stream).expires_after(limits.idle_timeout);
  co_await stream.async_handshake(asio::ssl::stream_base::server, use_awaitable);
  co_await serve(stream, handler, metrics, limits);
  boost::system::error_code ec;
  lowest(stream).expires_after(kWriteTimeout);
  co_await stream.async_shutdown(asio::redirect_error(use_awaitable, ec));
}

}  // namespace keel::gateway
