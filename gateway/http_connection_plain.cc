#include "gateway/http_connection.h"

#include "gateway/http_request_loop.h"

namespace keel::gateway {

boost::asio::awaitable<void> serve_plain_connection(boost::asio::ip::tcp::socket socket, RequestHandler& handler,
                                                    Metrics& metrics, const ConnectionLimits& limits) {
  http_loop::beast::tcp_stream stream(std::move(socket));
  co_await http_loop::serve(stream, handler, metrics, limits);
  boost::system::error_code ec;
  stream.socket().shutdown(boost::asio::ip::tcp::socket::shutdown_send, ec);
}

}  // namespace keel::gateway
