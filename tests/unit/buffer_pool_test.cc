#include "util/buffer_pool.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

using keel::BufferPool;

TEST_CASE("buffer pool recycles buffers", "[buffer_pool]") {
  BufferPool pool(4096, 2);
  uint8_t* first;
  {
    auto a = pool.get();
    first = a.get();
    a[0] = 7;
  }
  auto b = pool.get();
  CHECK(b.get() == first);  // the returned buffer is handed out again
  CHECK(pool.buffer_size() == 4096);
}

TEST_CASE("buffer pool bounds the buffers out at once", "[buffer_pool]") {
  BufferPool pool(1024, 2);
  std::atomic<int> out{0}, peak{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        auto buf = pool.get();
        int now = ++out;
        int seen = peak.load();
        while (now > seen && !peak.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::yield();
        --out;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(peak.load() <= 2);
  CHECK(peak.load() >= 1);
}

TEST_CASE("buffer pool get waits for a buffer to come back", "[buffer_pool]") {
  BufferPool pool(64, 1);
  auto held = pool.get();
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    auto buf = pool.get();
    got = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_FALSE(got.load());
  held.reset();
  waiter.join();
  CHECK(got.load());
}
