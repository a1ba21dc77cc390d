// Which calls a test double makes fail: the shared half of the
// fault-injecting target (targets/fault_injecting_target.h) and file system
// (util/fault_injecting_file_system.h). A rule selects calls by operation,
// subject prefix (an object key, a path), call number and probability, and
// hits at most `times` of them; the random choices come from a seeded
// generator, so a single-threaded run replays exactly. Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace keel {

template <class Op>
struct FaultSelection {
  std::optional<Op> op;     // every operation when empty
  std::string prefix;       // subjects starting with this; "" matches all
  uint64_t call = 0;        // only the n-th call (from 1) this rule matches; 0: any
  double probability = 1.0; // the chance a selected call is hit
  uint64_t times = 0;       // hits at most this many calls; 0: no limit
};

// `Rule` has a member `FaultSelection<Op> when`.
template <class Rule, class Op>
class FaultSchedule {
 public:
  struct Decision {
    std::optional<Rule> rule;  // the first rule that hit this call, if any
    uint64_t call = 0;         // this call's number among all calls seen
    uint64_t random = 0;       // for the fault's details
  };

  explicit FaultSchedule(std::vector<Rule> rules = {}, uint64_t seed = 1) { set_rules(std::move(rules), seed); }

  // Replaces the rules and starts counting again.
  void set_rules(std::vector<Rule> rules, uint64_t seed) {
    std::lock_guard lock(mu_);
    rules_ = std::move(rules);
    matched_.assign(rules_.size(), 0);
    hit_.assign(rules_.size(), 0);
    rng_.seed(seed);
    calls_ = 0;
    log_.clear();
  }

  // `label` ("lost-response on commit packs/3f/…") goes into the log if hit;
  // `name_of(rule)` names the fault.
  template <class NameOf>
  Decision decide(Op op, const std::string& subject, const std::string& label, NameOf&& name_of) {
    std::lock_guard lock(mu_);
    Decision d;
    d.call = ++calls_;
    for (size_t i = 0; i < rules_.size(); ++i) {
      const FaultSelection<Op>& when = rules_[i].when;
      if (when.op && *when.op != op) continue;
      if (subject.compare(0, when.prefix.size(), when.prefix) != 0) continue;
      const uint64_t nth = ++matched_[i];
      if (when.call && nth != when.call) continue;
      if (when.times && hit_[i] >= when.times) continue;
      if (when.probability < 1.0 && std::uniform_real_distribution<double>(0, 1)(rng_) >= when.probability) continue;
      if (d.rule) continue;  // one fault per call; later rules still count it
      ++hit_[i];
      d.rule = rules_[i];
      d.random = rng_();
      log_.push_back("call " + std::to_string(d.call) + ": " + name_of(rules_[i]) + " on " + label);
    }
    return d;
  }

  uint64_t calls() const {
    std::lock_guard lock(mu_);
    return calls_;
  }
  uint64_t hits() const {
    std::lock_guard lock(mu_);
    return log_.size();
  }
  // One line per hit: "call 12: lost-response on commit packs/3f/3fa2…".
  std::vector<std::string> log() const {
    std::lock_guard lock(mu_);
    return log_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<Rule> rules_;
  std::vector<uint64_t> matched_, hit_;
  std::mt19937_64 rng_;
  uint64_t calls_ = 0;
  std::vector<std::string> log_;
};

}  // namespace keel
