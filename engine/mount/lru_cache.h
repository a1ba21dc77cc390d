// A least-recently-used map bounded by the total weight (bytes) of its
// values. Not thread-safe: its owner locks. Values are shared pointers, so
// one evicted while a reader still holds it stays alive until released.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>
#include <utility>

namespace keel::engine::mount {

template <typename Key, typename Value, typename Hash = std::hash<Key>>
class LruCache {
 public:
  explicit LruCache(uint64_t capacity) : capacity_(capacity) {}

  // The value under `key`, now the most recently used; null if absent.
  std::shared_ptr<const Value> get(const Key& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->value;
  }

  // Inserts (or replaces) `key`, then evicts the least recently used
  // entries until the weights fit. A value heavier than the whole capacity
  // is not kept.
  void put(const Key& key, std::shared_ptr<const Value> value, uint64_t weight) {
    erase(key);
    if (weight > capacity_) return;
    order_.push_front(Entry{key, std::move(value), weight});
    index_.emplace(key, order_.begin());
    weight_ += weight;
    while (weight_ > capacity_) erase(order_.back().key);
  }

  void erase(const Key& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return;
    weight_ -= it->second->weight;
    order_.erase(it->second);
    index_.erase(it);
  }

  uint64_t weight() const { return weight_; }
  uint64_t capacity() const { return capacity_; }
  size_t size() const { return index_.size(); }

 private:
  struct Entry {
    Key key;
    std::shared_ptr<const Value> value;
    uint64_t weight;
  };
  uint64_t capacity_;
  uint64_t weight_ = 0;
  std::list<Entry> order_;  // most recently used first
  std::unordered_map<Key, typename std::list<Entry>::iterator, Hash> index_;
};

}  // namespace keel::engine::mount
