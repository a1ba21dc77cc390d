// The target decorators (retries, limits, metrics, fault injection) and the
// fault-injecting file system, each on its own over the in-memory target.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <atomic>
#include <map>
#include <thread>

#include "targets/fault_injecting_target.h"
#include "targets/limited_target.h"
#include "targets/memory/memory_target.h"
#include "targets/metered_target.h"
#include "targets/retrying_target.h"
#include "targets/target_decorator.h"
#include "tests/unit/test_support.h"
#include "util/error.h"
#include "util/fault_injecting_file_system.h"

using namespace keel;
using namespace keel::targets;

namespace {

constexpr RetryPolicy kQuick{.max_attempts = 3, .base = std::chrono::milliseconds(0), .cap = std::chrono::milliseconds(1)};

struct Stack {
  std::shared_ptr<memory::MemoryStore> store = std::make_shared<memory::MemoryStore>();
  std::shared_ptr<FaultInjector> injector = std::make_shared<FaultInjector>();
  std::unique_ptr<Target> faulty() { return make_fault_injecting_target(memory::open_memory_target(store), injector); }
};

std::map<std::string, uint64_t> stats_of(const Target& t) {
  std::map<std::string, uint64_t> out;
  for (const auto& [name, value] : t.transfer_stats()) out[name] = value;
  return out;
}

}  // namespace

TEST_CASE("retrying target: transient failures are retried, permanent ones are not", "[target][decorator]") {
  Stack s;
  auto t = make_retrying_target(s.faulty(), kQuick);
  const Bytes data = test::random_bytes(1000, 1);

  s.injector->set_rules({{.when = {.op = TargetOp::kPut, .times = 2}}}, 1);
  t->put("a", data);
  CHECK(s.injector->hits() == 2);
  CHECK(t->throttle_events() == 2);
  CHECK(stats_of(*t)["retries"] == 2);
  CHECK(t->get("a") == data);

  s.injector->set_rules({{.when = {.op = TargetOp::kHead}, .persistence = Persistence::kPermanent}}, 1);
  CHECK_THROWS_AS(t->head("a"), Error);
  CHECK(s.injector->calls() == 1);

  s.injector->set_rules({{.when = {.op = TargetOp::kGetRange}, .error = ErrorKind::kTargetIo}}, 1);
  try {
    t->get("a");
    FAIL("expected the read to give up");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kTargetIo);
    CHECK(e.transient());
    CHECK(std::string(e.what()).find("gave up after 3 attempts") != std::string::npos);
    CHECK(std::string(e.what()).find("memory:memory/a") != std::string::npos);
  }
}

TEST_CASE("retrying target: a listing tried again hands each key over once", "[target][decorator]") {
  Stack s;
  auto t = make_retrying_target(s.faulty(), kQuick);
  for (int i = 0; i < 5; ++i) t->put("k/" + std::to_string(i), {});
  s.injector->set_rules({{.kind = FaultKind::kLostResponse, .when = {.op = TargetOp::kList, .times = 1}}}, 1);
  std::map<std::string, int> seen;
  t->list("k/", [&](const ObjectInfo& o) { ++seen[o.key]; });
  CHECK(seen.size() == 5);
  for (const auto& [key, times] : seen) CHECK(times == 1);

  // The caller's own transient error is not the target's to retry.
  s.injector->set_rules({}, 1);
  int calls = 0;
  CHECK_THROWS_AS(t->list("k/",
                          [&](const ObjectInfo&) {
                            ++calls;
                            throw Error(ErrorKind::kTargetIo, "caller", Persistence::kTransient);
                          }),
                  Error);
  CHECK(calls == 1);
}

TEST_CASE("retrying target: an upload whose commit reply was lost is committed once", "[target][decorator]") {
  Stack s;
  auto t = make_retrying_target(s.faulty(), kQuick);
  s.injector->set_rules({{.kind = FaultKind::kLostResponse, .when = {.op = TargetOp::kCommit, .times = 1}},
                         {.kind = FaultKind::kLostResponse, .when = {.op = TargetOp::kWritePart, .times = 1}}},
                        1);
  const Bytes data = test::random_bytes(3000, 2);
  auto upload = t->start_upload("packs/x");
  upload->write_part(1, 0, ByteView(data.data(), 1000));
  upload->write_part(2, 1000, ByteView(data.data() + 1000, 2000));
  upload->commit();
  CHECK(s.injector->hits() == 2);
  CHECK(t->get("packs/x") == data);
  CHECK(s.store->open_uploads() == 0);
}

TEST_CASE("metered target: calls, errors, bytes and time per operation", "[target][decorator]") {
  Stack s;
  auto t = make_metered_target(s.faulty());
  t->put("a", test::random_bytes(500, 3));
  Bytes out(200);
  CHECK(t->get_range("a", 0, out) == 200);
  CHECK(t->get_range("a", 400, out) == 100);
  s.injector->set_rules({{.when = {.op = TargetOp::kHead}}}, 1);
  CHECK_THROWS_AS(t->head("a"), Error);
  auto stats = stats_of(*t);
  CHECK(stats["put_calls"] == 1);
  CHECK(stats["put_bytes"] == 500);
  CHECK(stats["get_calls"] == 2);
  CHECK(stats["get_bytes"] == 300);
  CHECK(stats["head_calls"] == 1);
  CHECK(stats["head_errors"] == 1);
  CHECK(stats.count("upload_commit_microseconds"));
}

namespace {

// Counts get_range calls in flight, holding each a little.
class ConcurrencyProbe : public TargetDecorator {
 public:
  using TargetDecorator::TargetDecorator;
  size_t get_range(const std::string& key, uint64_t offset, std::span<uint8_t> out) override {
    const int now = ++inside_;
    int seen = most_.load();
    while (now > seen && !most_.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    size_t n = inner().get_range(key, offset, out);
    --inside_;
    return n;
  }
  static std::atomic<int> inside_, most_;
};
std::atomic<int> ConcurrencyProbe::inside_{0}, ConcurrencyProbe::most_{0};

}  // namespace

TEST_CASE("limited target: operations in flight and bandwidth are capped", "[target][decorator]") {
  Stack s;
  memory::open_memory_target(s.store)->put("a", test::random_bytes(1000, 4));
  auto probe = std::make_unique<ConcurrencyProbe>(memory::open_memory_target(s.store));
  auto t = make_limited_target(std::move(probe), {.max_in_flight = 2});
  CHECK(t->read_concurrency() == 2);
  std::vector<std::thread> readers;
  for (int i = 0; i < 8; ++i) {
    readers.emplace_back([&] {
      Bytes out(100);
      t->get_range("a", 0, out);
    });
  }
  for (auto& r : readers) r.join();
  CHECK(ConcurrencyProbe::most_ <= 2);

  auto paced = make_limited_target(memory::open_memory_target(s.store), {.download_bytes_per_second = 100'000});
  const auto started = std::chrono::steady_clock::now();
  Bytes out(1000);
  for (int i = 0; i < 5; ++i) paced->get_range("a", 0, out);  // 5 KB at 100 KB/s: 40 ms after the first
  CHECK(std::chrono::steady_clock::now() - started >= std::chrono::milliseconds(35));
}

TEST_CASE("fault injection: rules pick calls by operation, prefix and number, and replay from a seed",
          "[target][decorator]") {
  Stack s;
  auto t = s.faulty();
  s.injector->set_rules({{.when = {.op = TargetOp::kPut, .prefix = "packs/", .call = 2}}}, 1);
  t->put("packs/1", {});
  t->put("config", {});
  CHECK_THROWS_AS(t->put("packs/2", {}), Error);
  t->put("packs/3", {});
  CHECK(s.injector->log() == std::vector<std::string>{"call 3: error on put packs/2"});
  CHECK_FALSE(t->head("packs/2"));

  // Lost response: done, yet reported failed.
  s.injector->set_rules({{.kind = FaultKind::kLostResponse, .when = {.op = TargetOp::kRemove}}}, 1);
  CHECK_THROWS_AS(t->remove("packs/1"), Error);
  CHECK_FALSE(t->head("packs/1"));

  // Truncated and corrupted reads.
  const Bytes data = test::random_bytes(100, 5);
  t->put("d", data);
  s.injector->set_rules({{.kind = FaultKind::kTruncatedRead, .when = {.times = 1}}}, 1);
  Bytes out(100);
  CHECK(t->get_range("d", 0, out) < 100);
  s.injector->set_rules({{.kind = FaultKind::kCorruptRead, .when = {.times = 1}}}, 1);
  CHECK(t->get_range("d", 0, out) == 100);
  CHECK(out != data);

  const auto run = [&](uint64_t seed) {
    s.injector->set_rules({{.when = {.probability = 0.3}}}, seed);
    for (int i = 0; i < 40; ++i) {
      try {
        t->head("d");
      } catch (const Error&) {
      }
    }
    return s.injector->log();
  };
  const auto first = run(9);
  CHECK(first.size() > 3);
  CHECK(first.size() < 30);
  CHECK(run(9) == first);
  CHECK(run(10) != first);
}

TEST_CASE("fault-injecting file system: errno and short writes on chosen calls", "[faults][fs]") {
  test::TempDir dir;
  FaultInjectingFileSystem fs;
  const std::string path = dir.file("f");
  fs.schedule().set_rules({{.kind = FsFaultRule::kShortWrite, .when = {.op = FsOp::kPwrite}}}, 1);
  {
    UniqueFd fd = open_or_throw(fs, path, O_CREAT | O_RDWR, 0600);
    const Bytes data = test::random_bytes(1000, 6);
    pwrite_all(fs, fd.get(), data, 0, "write " + path);  // completes what came short
    CHECK(fs.schedule().hits() >= 2);
    Bytes back(1000);
    CHECK(pread_full(fd.get(), back, 0, "read") == 1000);
    CHECK(back == data);
  }
  fs.schedule().set_rules({{.when = {.op = FsOp::kPwrite, .prefix = path}, .error = ENOSPC}}, 1);
  UniqueFd fd = open_or_throw(fs, path, O_RDWR);
  try {
    pwrite_all(fs, fd.get(), as_bytes("x"), 0, "write " + path);
    FAIL("expected ENOSPC");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kTargetIo);
    CHECK(std::string(e.what()).find(std::strerror(ENOSPC)) != std::string::npos);
  }
  fs.schedule().set_rules({{.when = {.op = FsOp::kRename}, .error = EXDEV}}, 1);
  CHECK(fs.rename(path, dir.file("g")) == -1);
  CHECK(errno == EXDEV);
  struct stat st;
  CHECK(fs.lstat(path, &st) == 0);  // still under its old name
}
