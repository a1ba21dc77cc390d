// The Transport seam through its loopback provider: what every provider must
// do (the verbs provider runs the same checks in tests/rdma, inside a VM).
#include <catch2/catch.hpp>

#include <cstring>
#include <thread>

#include "targets/rdma/loopback_transport.h"
#include "util/error.h"

using namespace keel::targets::rdma;
using namespace std::chrono_literals;

namespace {

SessionOptions small_options() {
  SessionOptions o;
  o.slot_size = 64 << 10;
  o.slot_count = 2;
  o.timeout = 1000ms;
  return o;
}

void fill(std::span<uint8_t> data, uint8_t seed) {
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(seed + i * 31);
}

}  // namespace

TEST_CASE("rdma loopback moves bytes both ways under token checks", "[rdma]") {
  auto transport = make_loopback_transport();
  auto listener = transport->listen({"", 0}, small_options());
  auto client = transport->connect({"", listener->port()}, small_options());
  auto server = listener->accept();
  REQUIRE(server->session_id() == client->session_id());

  // PutObject direction: the server READs the client's slot.
  Slot upload = client->acquire();
  fill(upload.data(), 7);
  Slot server_slot = listener->pool().get();
  Token put = client->grant(upload, 40000);
  server->read(Token::parse(put.encode()), server_slot);
  CHECK(std::memcmp(server_slot.data().data(), upload.data().data(), 40000) == 0);
  CHECK_THROWS_WITH(server->read(put, server_slot), Catch::Contains("already used"));

  // GetObject direction: the server WRITEs into the client's slot.
  Slot download = client->acquire();
  std::memset(download.data().data(), 0, download.data().size());
  fill(server_slot.data(), 99);
  server->write(client->grant(download, 4096), server_slot);
  CHECK(std::memcmp(download.data().data(), server_slot.data().data(), 4096) == 0);
  CHECK(download.data()[4096] == 0);  // nothing beyond the token's length

  // A range reaching past the registered pool, and another session's token.
  Token outside = client->grant(download, 4096);
  outside.address += 2 * small_options().slot_size - 100;
  CHECK_THROWS_WITH(server->write(outside, server_slot), Catch::Contains("outside"));
  auto other = transport->connect({"", listener->port()}, small_options());
  auto other_server = listener->accept();
  Slot other_slot = other->acquire();
  CHECK_THROWS_WITH(server->read(other->grant(other_slot, 10), server_slot), Catch::Contains("session"));
  CHECK_THROWS_AS(client->grant(other_slot, 10), keel::Error);
}

TEST_CASE("rdma loopback client sees a lost server and reconnects", "[rdma]") {
  auto transport = make_loopback_transport();
  auto listener = transport->listen({"", 0}, small_options());
  auto client = transport->connect({"", listener->port()}, small_options());
  auto server = listener->accept();
  CHECK(client->alive(0ms));
  uint64_t first = client->session_id();

  std::thread drop([&] {
    std::this_thread::sleep_for(20ms);
    server.reset();
  });
  CHECK_FALSE(client->alive(2000ms));
  drop.join();

  client->reconnect();
  server = listener->accept();
  CHECK(client->session_id() != first);
  Slot slot = client->acquire();
  fill(slot.data(), 1);
  Slot server_slot = listener->pool().get();
  server->read(client->grant(slot, 100), server_slot);
  CHECK(std::memcmp(server_slot.data().data(), slot.data().data(), 100) == 0);
}

TEST_CASE("rdma loopback accept times out with a clear error", "[rdma]") {
  auto transport = make_loopback_transport();
  SessionOptions o = small_options();
  o.timeout = 10ms;
  auto listener = transport->listen({"", 0}, o);
  CHECK_THROWS_WITH(listener->accept(), Catch::Contains("no client connected"));
  CHECK_THROWS_WITH(transport->connect({"", 999}, o), Catch::Contains("nothing listens"));
}
