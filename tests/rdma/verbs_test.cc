// The verbs RC provider on a real RDMA device (Soft-RoCE inside the VM that
// tests/rdma/run-in-vm.sh boots). Exits 77 (skipped) where there is no device,
// except inside that VM ($KEEL_IN_RXE_VM), where it fails.
// `keel_rdma_vm_tests --serve HOST PORT` is the server process the
// reconnect test starts and kills: it accepts one session and runs
// "write SEED TOKEN" / "read TOKEN" lines from stdin, answering on stdout.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <iostream>
#include <string>
#include <vector>

#include "targets/rdma/availability.h"
#include "tests/rdma/vm_host.h"
#include "targets/rdma/verbs_transport.h"
#include "util/error.h"

extern char** environ;

std::string keel::test::rdma_test_host;

using namespace keel::targets::rdma;
using namespace std::chrono_literals;

namespace {

const std::string& g_host = keel::test::rdma_test_host;

SessionOptions options() {
  SessionOptions o;
  o.slot_size = 8 << 20;
  o.slot_count = 2;
  o.timeout = 10s;  // TCG-emulated Soft-RoCE is slow
  return o;
}

void fill(std::span<uint8_t> data, uint64_t seed) {
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>((seed * 131 + i * 7 + (i >> 12)) & 0xff);
}

uint64_t fnv1a(std::span<const uint8_t> data) {
  uint64_t h = 1469598103934665603ull;
  for (uint8_t b : data) h = (h ^ b) * 1099511628211ull;
  return h;
}

struct Connected {
  std::unique_ptr<ClientSession> client;
  std::unique_ptr<ServerSession> server;
};

Connected connect_pair(Transport& transport, Listener& listener) {
  auto accepted = std::async(std::launch::async, [&] { return listener.accept(); });
  auto client = transport.connect({g_host, listener.port()}, options());
  return {std::move(client), accepted.get()};
}

int serve(const std::string& host, uint16_t port) {
  auto transport = make_verbs_transport();
  auto listener = transport->listen({host, port}, options());
  std::cout << "listening" << std::endl;
  auto session = listener->accept();
  Slot slot = listener->pool().get();
  std::string verb;
  while (std::cin >> verb) {
    try {
      if (verb == "write") {
        uint64_t seed;
        std::string token;
        std::cin >> seed >> token;
        Token t = Token::parse(token);
        fill(slot.data().first(t.length), seed);
        session->write(t, slot);
        std::cout << "ok" << std::endl;
      } else {
        std::string token;
        std::cin >> token;
        Token t = Token::parse(token);
        session->read(t, slot);
        std::cout << "ok " << fnv1a(slot.data().first(t.length)) << std::endl;
      }
    } catch (const keel::Error& e) {
      std::cout << "error " << e.what() << std::endl;
    }
  }
  return 0;
}

// A `--serve` child with its stdin and stdout on pipes.
class ServerProcess {
 public:
  explicit ServerProcess(uint16_t port) {
    int in[2], out[2];
    REQUIRE(pipe(in) == 0);
    REQUIRE(pipe(out) == 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addclose(&actions, in[1]);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    std::string port_text = std::to_string(port);
    const char* argv[] = {"/proc/self/exe", "--serve", g_host.c_str(), port_text.c_str(), nullptr};
    REQUIRE(posix_spawn(&pid_, "/proc/self/exe", &actions, nullptr, const_cast<char**>(argv), environ) == 0);
    posix_spawn_file_actions_destroy(&actions);
    close(in[0]);
    close(out[1]);
    to_ = fdopen(in[1], "w");
    from_ = fdopen(out[0], "r");
    REQUIRE(line() == "listening");
  }
  ~ServerProcess() {
    fclose(to_);
    fclose(from_);
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  void send(const std::string& text) {
    fputs((text + "\n").c_str(), to_);
    fflush(to_);
  }
  std::string line() {  // "" at EOF
    char buf[512];
    if (!fgets(buf, sizeof buf, from_)) return "";
    std::string s(buf);
    if (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  }
  void kill_now() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
};

}  // namespace

TEST_CASE("verbs RC moves 4 KiB to 8 MiB both ways, data intact", "[rdma]") {
  auto transport = make_verbs_transport();
  auto listener = transport->listen({g_host, 0}, options());
  auto [client, server] = connect_pair(*transport, *listener);
  CHECK(client->session_id() == server->session_id());
  Slot server_slot = listener->pool().get();
  Slot client_slot = client->acquire();
  for (uint64_t size : {uint64_t{4} << 10, uint64_t{64} << 10, uint64_t{1} << 20, uint64_t{8} << 20}) {
    INFO("size " << size);
    // PutObject direction: the server READs the client's buffer.
    fill(client_slot.data().first(size), size);
    std::memset(server_slot.data().data(), 0, size);
    auto start = std::chrono::steady_clock::now();
    server->read(client->grant(client_slot, size), server_slot);
    auto read_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(std::memcmp(server_slot.data().data(), client_slot.data().data(), size) == 0);

    // GetObject direction: the server WRITEs into the client's buffer.
    fill(server_slot.data().first(size), size + 1);
    std::memset(client_slot.data().data(), 0, size + 1);
    start = std::chrono::steady_clock::now();
    server->write(client->grant(client_slot, size), server_slot);
    auto write_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(std::memcmp(server_slot.data().data(), client_slot.data().data(), size) == 0);
    CHECK(client_slot.data()[size] == 0);
    std::printf("rdma %8llu bytes: READ %.2f ms (%.1f MB/s), WRITE %.2f ms (%.1f MB/s)\n",
                static_cast<unsigned long long>(size), read_s * 1e3, size / read_s / 1e6, write_s * 1e3,
                size / write_s / 1e6);
  }
}

TEST_CASE("verbs RC carries several requests of one session at once, each its own bytes", "[rdma]") {
  // As the gateway does for a client whose upload threads send parts together.
  SessionOptions o = options();
  o.slot_size = 1 << 20;
  o.slot_count = 8;
  auto transport = make_verbs_transport();
  auto listener = transport->listen({g_host, 0}, o);
  auto accepted = std::async(std::launch::async, [&] { return listener->accept(); });
  auto client = transport->connect({g_host, listener->port()}, o);
  auto server = accepted.get();
  constexpr int kThreads = 6, kRounds = 8;
  std::vector<std::future<int>> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.push_back(std::async(std::launch::async, [&, t] {
      int good = 0;
      for (int round = 0; round < kRounds; ++round) {
        const uint64_t size = (uint64_t{64} << 10) * (1 + (t + round) % 16);
        Slot mine = client->acquire();
        Slot theirs = listener->pool().get();
        fill(mine.data().first(size), t * 1000 + round);
        server->read(client->grant(mine, size), theirs);
        good += std::memcmp(theirs.data().data(), mine.data().data(), size) == 0;
        fill(theirs.data().first(size), t * 1000 + round + 500);
        server->write(client->grant(mine, size), theirs);
        good += std::memcmp(theirs.data().data(), mine.data().data(), size) == 0;
      }
      return good;
    }));
  }
  for (auto& w : workers) CHECK(w.get() == 2 * kRounds);
  CHECK(server->alive(0ms));
}

TEST_CASE("verbs RC rejects tokens outside the registered range or from another session", "[rdma]") {
  auto transport = make_verbs_transport();
  auto listener = transport->listen({g_host, 0}, options());
  auto a = connect_pair(*transport, *listener);
  auto b = connect_pair(*transport, *listener);
  CHECK(a.client->session_id() != b.client->session_id());
  Slot server_slot = listener->pool().get();
  Slot a_slot = a.client->acquire();
  Slot b_slot = b.client->acquire();

  Token past_end = a.client->grant(a_slot, 4096);
  past_end.address += 2 * options().slot_size - 1024;
  CHECK_THROWS_WITH(a.server->write(past_end, server_slot), Catch::Contains("outside"));
  Token before = a.client->grant(a_slot, 4096);
  before.address -= 4096;
  CHECK_THROWS_WITH(a.server->read(before, server_slot), Catch::Contains("outside"));
  CHECK_THROWS_WITH(a.server->read(b.client->grant(b_slot, 4096), server_slot), Catch::Contains("session"));
  Token once = a.client->grant(a_slot, 4096);
  a.server->read(once, server_slot);
  CHECK_THROWS_WITH(a.server->read(once, server_slot), Catch::Contains("already used"));
  // The rejections left both sessions usable.
  fill(b_slot.data().first(4096), 3);
  b.server->read(b.client->grant(b_slot, 4096), server_slot);
  CHECK(std::memcmp(server_slot.data().data(), b_slot.data().data(), 4096) == 0);
}

TEST_CASE("verbs RC client fails cleanly when the server dies mid-transfer, then reconnects", "[rdma]") {
  const auto port = static_cast<uint16_t>(20000 + getpid() % 20000);
  auto transport = make_verbs_transport();
  auto server = std::make_unique<ServerProcess>(port);
  auto client = transport->connect({g_host, port}, options());
  const uint64_t first_session = client->session_id();
  Slot slot = client->acquire();

  fill(slot.data().first(64 << 10), 11);
  server->send("read " + client->grant(slot, 64 << 10).encode());
  CHECK(server->line() == "ok " + std::to_string(fnv1a(slot.data().first(64 << 10))));

  // An 8 MiB WRITE into our slot, and the server killed once its first bytes have landed.
  std::memset(slot.data().data(), 0, 8 << 20);
  server->send("write 12 " + client->grant(slot, 8 << 20).encode());
  const volatile uint8_t* first_byte = slot.data().data();
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (*first_byte == 0 && std::chrono::steady_clock::now() < deadline) usleep(100);
  server->kill_now();
  REQUIRE(*first_byte != 0);
  CHECK(server->line().empty());  // no response: the request failed
  CHECK_FALSE(client->alive(10s));

  server = std::make_unique<ServerProcess>(port);
  client->reconnect();
  CHECK(client->alive(0ms));
  CHECK(client->session_id() != first_session);
  server->send("write 13 " + client->grant(slot, 1 << 20).encode());
  REQUIRE(server->line() == "ok");
  std::vector<uint8_t> expected(1 << 20);
  fill(expected, 13);
  CHECK(std::memcmp(slot.data().data(), expected.data(), expected.size()) == 0);
}

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--serve") {
    try {
      return serve(argv[2], static_cast<uint16_t>(std::stoi(argv[3])));
    } catch (const std::exception& e) {
      std::cerr << "rdma test server: " << e.what() << "\n";
      return 1;
    }
  }
  if (auto reason = rdma_unavailable_reason()) {
    // Inside the harness's VM a missing device is a failure, not a skip.
    const bool required = std::getenv("KEEL_IN_RXE_VM") != nullptr;
    std::cout << (required ? "FAIL" : "SKIP") << ": RDMA disabled: " << *reason << "\n";
    return required ? 1 : 77;
  }
  const char* host = std::getenv("KEEL_RDMA_TEST_IP");
  if (!host) host = std::getenv("RXE_IP");
  if (!host) {
    std::cout << "SKIP: set KEEL_RDMA_TEST_IP to an address on the RDMA device's interface\n";
    return 77;
  }
  keel::test::rdma_test_host = host;
  return Catch::Session().run(argc, argv);
}
