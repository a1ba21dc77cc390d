// One accepted connection of the gateway's HTTP server, served until the
// client or an error closes it. Plain and TLS live in separate translation
// units (http_connection_plain.cc, http_connection_tls.cc): each instantiates
// the request loop (http_request_loop.h) for its stream type, the longest
// compiles of the gateway, which a parallel build runs side by side.
#pragma once

// Before boost/asio/awaitable.hpp, which uses std::exchange without including it.
#include <utility>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>

#include "gateway/config.h"
#include "gateway/exchange.h"
#include "gateway/metrics.h"

namespace keel::gateway {

// Serves `socket` as plain HTTP, then shuts down its sending side. Throws
// what the connection's I/O throws (the caller ends the connection on it).
boost::asio::awaitable<void> serve_plain_connection(boost::asio::ip::tcp::socket socket, RequestHandler& handler,
                                                    Metrics& metrics, const ConnectionLimits& limits);

// The same over TLS: the server handshake with `tls`, the requests, then the
// TLS shutdown.
boost::asio::awaitable<void> serve_tls_connection(boost::asio::ip::tcp::socket socket, boost::asio::ssl::context& tls,
                                                  RequestHandler& handler, Metrics& metrics,
                                                  const ConnectionLimits& limits);

}  // namespace keel::gateway
