// How long commands show what they are doing: a line redrawn on a terminal,
// or newline-delimited "status" objects on stdout with --json
// (docs/json.md#progress). The same figures feed both.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/app.h"

namespace keel::cli {

// What a command has done so far.
struct ProgressStatus {
  struct Count {
    std::string name;  // "files", "packs", "snapshots": JSON keys NAME and NAME_total
    uint64_t done = 0;
    std::optional<uint64_t> total;  // unknown: no "/total", JSON null
  };
  struct Size {
    std::string key;    // JSON key: "bytes_read"
    std::string label;  // on the line: "1.2 GiB read"
    uint64_t bytes = 0;
  };
  std::string phase;  // where a command in steps is ("mark"); empty: no "phase" key
  std::vector<Count> counts;
  // The bytes the rate and the ETA are about; absent for a command that
  // counts no bytes as it goes (then the ETA follows the first count with a total).
  std::optional<uint64_t> bytes;
  std::optional<uint64_t> bytes_total;
  std::string bytes_label;  // "scanned": "1.2 GiB scanned"
  std::vector<Size> sizes;  // further sizes, after the bytes

  // Seconds left at the rate so far; nullopt when no total is known or nothing is done yet.
  std::optional<double> eta_seconds(double elapsed_s) const;
};

// "[12.00s] 3/10 files, 1.2 GiB/4.0 GiB, 98.0 MB/s, ETA 30.00s"
std::string progress_text(const ProgressStatus& status, double elapsed_s);
// {"type":"status","command":...,"seconds":...,<counts>,<bytes>,"bytes_per_second":...,"eta_seconds":...}
std::string progress_json(const std::string& command, const ProgressStatus& status, double elapsed_s);

// Calls `tick` with the seconds elapsed every `interval` on a thread of its
// own while alive, and `done` once when it is destroyed.
class Ticker {
 public:
  Ticker(std::chrono::milliseconds interval, std::function<void(double elapsed_s)> tick,
         std::function<void(double elapsed_s)> done);
  ~Ticker();
  Ticker(const Ticker&) = delete;
  Ticker& operator=(const Ticker&) = delete;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Redraws a one-line status on stderr every 250 ms while alive (when
// enabled) and clears it at the end.
class ProgressLine {
 public:
  ProgressLine(bool enabled, std::function<std::string(double elapsed_s)> render);

 private:
  std::optional<Ticker> ticker_;
};

// A long command's progress while alive: on a terminal the progress line
// (App::progress_enabled); with --json (and not --quiet) a status line on
// stdout every second and one more when the command ends without an error,
// so that at least one comes before the final document; else nothing.
class Progress {
 public:
  Progress(const App& app, std::string command, std::function<ProgressStatus()> sample);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

 private:
  const int exceptions_at_start_;
  std::atomic<bool> final_status_{true};  // false when the command ends by an exception
  std::optional<ProgressLine> line_;
  std::optional<Ticker> status_lines_;
};

}  // namespace keel::cli
