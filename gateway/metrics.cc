#include "gateway/metrics.h"

#include <algorithm>
#include <limits>

#include "util/prometheus_text.h"

namespace keel::gateway {

namespace {

std::string label(const std::string& operation) { return PrometheusText::label("operation", operation); }

void render_dedupe(PrometheusText& out, const std::vector<DedupeFigures>& figures) {
  if (figures.empty()) return;
  const auto repository = [](const DedupeFigures& f) { return PrometheusText::label("repository", f.repository); };
  out.family("keel_gateway_dedupe_logical_bytes_total", "counter",
             "Bytes clients wrote to dedupe buckets since the gateway started, by repository.");
  for (const auto& f : figures) out.sample("keel_gateway_dedupe_logical_bytes_total", repository(f), f.logical_bytes);
  out.family("keel_gateway_dedupe_stored_bytes_total", "counter",
             "Bytes added to the repository for them (new chunks, compressed and sealed).");
  for (const auto& f : figures) out.sample("keel_gateway_dedupe_stored_bytes_total", repository(f), f.stored_bytes);
  out.family("keel_gateway_dedupe_ratio", "gauge",
             "Logical bytes written per byte added to the repository (1 before any write, +Inf while all deduplicated).");
  for (const auto& f : figures) {
    const double ratio = f.stored_bytes > 0 ? static_cast<double>(f.logical_bytes) / static_cast<double>(f.stored_bytes)
                         : f.logical_bytes == 0 ? 1.0
                                                : std::numeric_limits<double>::infinity();
    out.sample("keel_gateway_dedupe_ratio", repository(f), ratio);
  }
}

}  // namespace

Metrics::Metrics() : bounds_{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300} {}

void Metrics::record(const std::string& operation, int status, uint64_t bytes_in, uint64_t bytes_out,
                     double seconds) {
  std::lock_guard lock(mutex_);
  ++requests_[{operation, status}];
  bytes_in_[operation] += bytes_in;
  bytes_out_[operation] += bytes_out;
  Latency& latency = latency_[operation];
  if (latency.buckets.empty()) latency.buckets.resize(bounds_.size());
  const auto bound = std::lower_bound(bounds_.begin(), bounds_.end(), seconds);
  if (bound != bounds_.end()) ++latency.buckets[static_cast<size_t>(bound - bounds_.begin())];
  ++latency.count;
  latency.sum += seconds;
}

void Metrics::set_dedupe_source(std::function<std::vector<DedupeFigures>()> source) {
  std::lock_guard lock(mutex_);
  dedupe_source_ = std::move(source);
}

void Metrics::record_rdma(const std::string& operation, uint64_t bytes, double seconds) {
  std::lock_guard lock(mutex_);
  ++rdma_requests_[operation];
  rdma_bytes_[operation] += bytes;
  rdma_seconds_[operation] += seconds;
}

void Metrics::record_rdma_declined(const std::string& operation) {
  std::lock_guard lock(mutex_);
  ++rdma_declined_[operation];
}

void Metrics::set_rdma_sessions(size_t sessions) {
  std::lock_guard lock(mutex_);
  rdma_sessions_ = sessions;
}

void Metrics::record_connection_event(const std::string& event) {
  std::lock_guard lock(mutex_);
  ++connection_events_[event];
}

void Metrics::set_open_connections(size_t open) {
  std::lock_guard lock(mutex_);
  open_connections_ = open;
}

void Metrics::record_lifecycle_sweep(const LifecycleFigures& removed, double seconds) {
  std::lock_guard lock(mutex_);
  ++lifecycle_sweeps_;
  lifecycle_removed_.objects_expired += removed.objects_expired;
  lifecycle_removed_.versions_expired += removed.versions_expired;
  lifecycle_removed_.delete_markers_removed += removed.delete_markers_removed;
  lifecycle_removed_.uploads_aborted += removed.uploads_aborted;
  lifecycle_last_seconds_ = seconds;
}

std::string Metrics::render() const {
  std::lock_guard lock(mutex_);
  PrometheusText out;
  out.family("keel_gateway_requests_total", "counter", "S3 requests answered, by operation and HTTP status.");
  for (const auto& [key, count] : requests_) {
    out.sample("keel_gateway_requests_total", label(key.first) + "," + PrometheusText::label("status", std::to_string(key.second)),
               count);
  }
  const auto counters = [&](const char* name, const char* help, const auto& values) {
    out.family(name, "counter", help);
    for (const auto& [operation, value] : values) out.sample(name, label(operation), value);
  };
  counters("keel_gateway_received_bytes_total", "Request body bytes received, by operation.", bytes_in_);
  counters("keel_gateway_sent_bytes_total", "Response body bytes sent, by operation.", bytes_out_);
  out.family("keel_gateway_request_duration_seconds", "histogram", "Time from a request's head to its response written.");
  for (const auto& [operation, latency] : latency_) {
    uint64_t cumulative = 0;
    for (size_t i = 0; i < bounds_.size(); ++i) {
      cumulative += latency.buckets[i];
      out.sample("keel_gateway_request_duration_seconds_bucket",
                 label(operation) + "," + PrometheusText::label("le", PrometheusText::number(bounds_[i])), cumulative);
    }
    out.sample("keel_gateway_request_duration_seconds_bucket", label(operation) + ",le=\"+Inf\"", latency.count);
    out.sample("keel_gateway_request_duration_seconds_sum", label(operation), latency.sum);
    out.sample("keel_gateway_request_duration_seconds_count", label(operation), latency.count);
  }
  if (dedupe_source_) render_dedupe(out, dedupe_source_());
  // The RDMA data plane: payloads moved one-sidedly (their requests also count above, with 0 body bytes).
  counters("keel_gateway_rdma_requests_total", "Requests whose payload moved over RDMA, by operation.", rdma_requests_);
  counters("keel_gateway_rdma_bytes_total", "Payload bytes moved over RDMA (READ for uploads, WRITE for GETs).",
           rdma_bytes_);
  counters("keel_gateway_rdma_transfer_seconds_total", "Seconds spent in RDMA transfers, by operation.", rdma_seconds_);
  counters("keel_gateway_rdma_declined_total", "Requests with an RDMA token declined (resent over HTTP).",
           rdma_declined_);
  out.family("keel_gateway_rdma_sessions", "gauge", "RDMA client sessions connected.");
  out.sample("keel_gateway_rdma_sessions", "", static_cast<uint64_t>(rdma_sessions_));
  out.family("keel_gateway_connections_open", "gauge", "Client connections open now.");
  out.sample("keel_gateway_connections_open", "", static_cast<uint64_t>(open_connections_));
  out.family("keel_gateway_connection_events_total", "counter",
             "Connections refused over a cap, and request bodies cut off below the minimum rate.");
  for (const auto& [event, count] : connection_events_) {
    out.sample("keel_gateway_connection_events_total", PrometheusText::label("event", event), count);
  }
  const auto single = [&](const char* name, const char* type, const char* help, auto value) {
    out.family(name, type, help);
    out.sample(name, "", value);
  };
  single("keel_gateway_lifecycle_sweeps_total", "counter", "Lifecycle sweep runs completed.", lifecycle_sweeps_);
  single("keel_gateway_lifecycle_objects_expired_total", "counter",
         "Current versions the lifecycle rules expired (a delete marker added, or the object removed).",
         lifecycle_removed_.objects_expired);
  single("keel_gateway_lifecycle_versions_expired_total", "counter",
         "Noncurrent versions the lifecycle rules removed.", lifecycle_removed_.versions_expired);
  single("keel_gateway_lifecycle_delete_markers_removed_total", "counter",
         "Expired object delete markers the lifecycle rules removed.", lifecycle_removed_.delete_markers_removed);
  single("keel_gateway_lifecycle_uploads_aborted_total", "counter",
         "Incomplete multipart uploads the lifecycle rules aborted.", lifecycle_removed_.uploads_aborted);
  single("keel_gateway_lifecycle_last_sweep_seconds", "gauge", "Seconds the last completed lifecycle sweep run took.",
         lifecycle_last_seconds_);
  return out.take();
}

}  // namespace keel::gateway
