// The gateway's Prometheus metrics: requests by S3 operation and status,
// bytes received and sent, a request latency histogram and the dedupe ratio
// of each repository behind dedupe buckets, the lifecycle sweep's work, rendered in the Prometheus text
// exposition format for GET /metrics. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace keel::gateway {

// What dedupe buckets wrote into one repository since the gateway started.
struct DedupeFigures {
  std::string repository;  // its location
  uint64_t logical_bytes = 0;  // object and part bytes clients wrote
  uint64_t stored_bytes = 0;   // bytes added to the repository for them (sealed chunks)
};

// What one lifecycle sweep run removed.
struct LifecycleFigures {
  uint64_t objects_expired = 0;    // current versions expired (a delete marker added, or the object removed)
  uint64_t versions_expired = 0;   // noncurrent versions removed
  uint64_t delete_markers_removed = 0;
  uint64_t uploads_aborted = 0;
};

class Metrics {
 public:
  Metrics();

  // One request answered: its operation ("PutObject"; "Unknown" when it was
  // refused before routing), HTTP status, body bytes in and out, and the
  // seconds from its head arriving to its response written.
  void record(const std::string& operation, int status, uint64_t bytes_in, uint64_t bytes_out, double seconds);

  // Asked at each render for the dedupe figures.
  void set_dedupe_source(std::function<std::vector<DedupeFigures>()> source);
  // A payload moved over RDMA (READ for uploads, WRITE for GETs): its bytes
  // and the seconds the transfer took.
  void record_rdma(const std::string& operation, uint64_t bytes, double seconds);
  // A request with an RDMA token that was declined (its client resends it over HTTP).
  void record_rdma_declined(const std::string& operation);
  void set_rdma_sessions(size_t sessions);
  // The connection layer: an event ("refused_server_cap",
  // "refused_client_cap", "slow_body_cut") and the connections open now.
  void record_connection_event(const std::string& event);
  void set_open_connections(size_t open);

  // A lifecycle sweep run that completed: what it removed and its seconds.
  void record_lifecycle_sweep(const LifecycleFigures& removed, double seconds);

  // Text exposition format, version 0.0.4.
  std::string render() const;

 private:
  struct Latency {
    std::vector<uint64_t> buckets;  // cumulative counts are computed when rendering
    uint64_t count = 0;
    double sum = 0;
  };

  mutable std::mutex mutex_;
  std::vector<double> bounds_;  // histogram upper bounds, seconds
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::map<std::string, uint64_t> bytes_in_;
  std::map<std::string, uint64_t> bytes_out_;
  std::map<std::string, Latency> latency_;
  std::function<std::vector<DedupeFigures>()> dedupe_source_;
  std::map<std::string, uint64_t> rdma_requests_;
  std::map<std::string, uint64_t> rdma_bytes_;
  std::map<std::string, double> rdma_seconds_;
  std::map<std::string, uint64_t> rdma_declined_;
  size_t rdma_sessions_ = 0;
  std::map<std::string, uint64_t> connection_events_;
  size_t open_connections_ = 0;
  uint64_t lifecycle_sweeps_ = 0;
  LifecycleFigures lifecycle_removed_;  // totals
  double lifecycle_last_seconds_ = 0;
};

}  // namespace keel::gateway
