#include "util/spares.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

TEST_CASE("spares: the one given back last is taken first, none made while one is free", "[spares]") {
  keel::Spares<int> spares;
  std::unique_ptr<int> a = spares.take();
  std::unique_ptr<int> b = spares.take();
  int* const first = a.get();
  int* const second = b.get();
  CHECK(first != second);
  spares.give(std::move(a));
  spares.give(std::move(b));
  CHECK(spares.take().get() == second);  // dropped: a spare is not returned by itself
  {
    keel::Spare<int> held(spares);
    CHECK(&*held == first);
    *held = 7;
  }
  keel::Spare<int> again(spares);
  CHECK(&*again == first);  // handed back at the end of its scope, contents kept
  CHECK(*again == 7);
}

TEST_CASE("spares: as many made as held at once across threads", "[spares]") {
  keel::Spares<int> spares;
  std::mutex mu;
  std::set<int*> seen;
  std::atomic<int> holding{0}, most{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        // Counted from before the take to after the give: never fewer out.
        const int now = ++holding;
        for (int m = most; now > m && !most.compare_exchange_weak(m, now);) {
        }
        std::unique_ptr<int> s = spares.take();
        {
          std::lock_guard lock(mu);
          seen.insert(s.get());
        }
        spares.give(std::move(s));
        --holding;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(seen.size() <= static_cast<size_t>(most.load()));
  CHECK(!seen.empty());
}
