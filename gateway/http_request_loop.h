// The gateway's request loop on one connection, a template over the stream
// (a plain TCP stream or TLS over it). Included only by
// http_connection_plain.cc and http_connection_tls.cc, one instantiation each:
// together they are most of the gateway's compile time (Boost.Beast
// coroutines), and as two translation units they compile in parallel.
#pragma once

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>
#include <span>
#include <type_traits>
#include <utility>

#include "gateway/config.h"
#include "gateway/exchange.h"
#include "gateway/metrics.h"
#include "util/error.h"
#include "util/id.h"
#include "util/text.h"

namespace keel::gateway::http_loop {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::awaitable;
using asio::use_awaitable;

constexpr size_t kHeaderLimit = 64 * 1024;
constexpr size_t kBodyBuffer = 1024 * 1024;
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

inline std::string_view view(beast::string_view s) { return {s.data(), s.size()}; }

inline std::string new_request_id() { return Id::random().hex().substr(0, 16); }

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
    head.secure = !std::is_same_v<Stream, beast::tcp_stream>;
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
}  // namespace keel::gateway::http_loop
