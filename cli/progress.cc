#include "cli/progress.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <iostream>
#include <mutex>
#include <thread>

#include "cli/format.h"
#include "cli/json.h"

namespace keel::cli {
namespace {

constexpr std::chrono::milliseconds kLineInterval{250};
constexpr std::chrono::milliseconds kStatusInterval{1000};

double rate_of(const ProgressStatus& status, double elapsed_s) {
  return status.bytes && elapsed_s > 0 ? static_cast<double>(*status.bytes) / elapsed_s : 0;
}

}  // namespace

std::optional<double> ProgressStatus::eta_seconds(double elapsed_s) const {
  std::optional<double> done, total;
  if (bytes && bytes_total) {
    done = static_cast<double>(*bytes);
    total = static_cast<double>(*bytes_total);
  } else {
    for (const Count& c : counts) {
      if (!c.total) continue;
      done = static_cast<double>(c.done);
      total = static_cast<double>(*c.total);
      break;
    }
  }
  // Past the total (a backup's estimate, the parent's size), the time left is unknown.
  if (!done || *done <= 0 || *done > *total || elapsed_s <= 0) return std::nullopt;
  return std::max(0.0, (*total - *done) * elapsed_s / *done);
}

std::string progress_text(const ProgressStatus& status, double elapsed_s) {
  std::string s = "[" + human_duration(elapsed_s) + "]";
  if (!status.phase.empty()) s += " " + status.phase + ":";
  const char* sep = " ";
  auto add = [&](const std::string& part) {
    s += sep + part;
    sep = ", ";
  };
  for (const auto& c : status.counts) {
    add(std::to_string(c.done) + (c.total ? "/" + std::to_string(*c.total) : "") + " " + c.name);
  }
  if (status.bytes) {
    add(human_bytes(*status.bytes) + (status.bytes_total ? "/" + human_bytes(*status.bytes_total) : "") +
        (status.bytes_label.empty() ? "" : " " + status.bytes_label));
  }
  for (const auto& size : status.sizes) add(human_bytes(size.bytes) + " " + size.label);
  if (status.bytes) add(human_rate(rate_of(status, elapsed_s)));
  std::optional<double> eta = status.eta_seconds(elapsed_s);
  if (eta && *eta > 0) add("ETA " + human_duration(*eta));
  return s;
}

std::string progress_json(const std::string& command, const ProgressStatus& status, double elapsed_s) {
  Json j;
  j.begin_object().field("type", "status").field("command", command).field("seconds", elapsed_s);
  if (!status.phase.empty()) j.field("phase", status.phase);
  for (const auto& c : status.counts) j.field(c.name, c.done).field(c.name + "_total", c.total);
  if (status.bytes) j.field("bytes", *status.bytes).field("bytes_total", status.bytes_total);
  for (const auto& size : status.sizes) j.field(size.key, size.bytes);
  if (status.bytes) j.field("bytes_per_second", rate_of(status, elapsed_s));
  j.field("eta_seconds", status.eta_seconds(elapsed_s));
  return j.end_object().str();
}

struct Ticker::State {
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  std::thread thread;
};

Ticker::Ticker(std::chrono::milliseconds interval, std::function<void(double)> tick, std::function<void(double)> done)
    : state_(std::make_unique<State>()) {
  state_->thread = std::thread([s = state_.get(), interval, tick = std::move(tick), done = std::move(done)] {
    auto start = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
    std::unique_lock lock(s->mu);
    while (!s->cv.wait_for(lock, interval, [s] { return s->stop; })) tick(elapsed());
    done(elapsed());
  });
}

Ticker::~Ticker() {
  {
    std::lock_guard lock(state_->mu);
    state_->stop = true;
  }
  state_->cv.notify_all();
  state_->thread.join();
}

ProgressLine::ProgressLine(bool enabled, std::function<std::string(double)> render) {
  if (!enabled) return;
  ticker_.emplace(
      kLineInterval, [render = std::move(render)](double t) { std::cerr << "\r\033[K" << render(t) << std::flush; },
      [](double) { std::cerr << "\r\033[K" << std::flush; });
}

Progress::Progress(const App& app, std::string command, std::function<ProgressStatus()> sample)
    : exceptions_at_start_(std::uncaught_exceptions()) {
  if (app.progress_enabled()) {
    line_.emplace(true, [sample = std::move(sample)](double t) { return progress_text(sample(), t); });
  } else if (app.global.json && !app.global.quiet) {
    auto write = [command = std::move(command), sample = std::move(sample)](double t) {
      std::cout << progress_json(command, sample(), t) << "\n" << std::flush;
    };
    status_lines_.emplace(kStatusInterval, write, [this, write](double t) {
      if (final_status_) write(t);
    });
  }
}

Progress::~Progress() {
  final_status_ = std::uncaught_exceptions() <= exceptions_at_start_;
  status_lines_.reset();
  line_.reset();
}

}  // namespace keel::cli
