#include "cli/drill_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "cli/format.h"
#include "cli/json.h"
#include "util/xml.h"

namespace keel::cli {

using Rows = std::vector<std::pair<std::string, std::string>>;

namespace {

// The HTML report lists this many failures; the JSON report has them all.
constexpr size_t kHtmlFailures = 200;

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g%%", fraction * 100);
  return buf;
}

// A drill of a small sample takes milliseconds: show them, not "0.00s".
std::string drill_duration(double seconds) {
  if (seconds >= 1 || seconds <= 0) return human_duration(seconds);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3gms", seconds * 1000);
  return buf;
}

std::string rto_verdict(const engine::DrillReport& r) {
  if (!r.rto_seconds) return "not set (took " + drill_duration(r.seconds) + ")";
  std::string limits = "took " + drill_duration(r.seconds) + ", objective " + human_duration(*r.rto_seconds);
  if (r.rto_met) return "met: " + limits;
  if (r.errors > 0) return "missed: " + std::to_string(r.errors) + " items failed to restore (" + limits + ")";
  return "missed: " + limits;
}

std::string rpo_verdict(const engine::DrillReport& r) {
  std::string seen = std::isfinite(r.rpo_seen_seconds)
                         ? "newest complete restore point " + drill_duration(r.rpo_seen_seconds) + " old"
                         : "no complete restore point";
  if (!r.rpo_seconds) return "not set (" + seen + ")";
  return std::string(r.rpo_met ? "met: " : "missed: ") + seen + ", objective " + human_duration(*r.rpo_seconds);
}

}  // namespace

std::string drill_outcome(const engine::DrillReport& r) {
  if (r.objectives_met()) return "objectives met";
  std::string missed = !r.rto_met && !r.rpo_met ? "RTO and RPO" : !r.rto_met ? "RTO" : "RPO";
  return "objectives missed: " + missed;
}

// The summary, shared by the terminal and the HTML report.
Rows drill_summary_rows(const engine::DrillReport& r) {
  double snapshot_age = static_cast<double>(r.started_unix_ns - r.snapshot_time_ns) / 1e9;
  std::string mode = "verify only (nothing written)";
  if (!r.verify_only) {
    mode = "restore to " + r.scratch + (r.scratch_kept ? " (kept)" : r.scratch_error.empty() ? " (removed)" : " (left behind)");
  }
  std::string files = std::to_string(r.files);
  if (r.sample < 1) files += " (" + percent(r.sample) + " sample, seed " + std::to_string(r.seed) + ")";
  return {
      {"snapshot", r.snapshot.short_hex() + ", taken " + local_time(r.snapshot_time_ns) + ", " +
                       drill_duration(std::max(0.0, snapshot_age)) + " old"},
      {"started", local_time(r.started_unix_ns)},
      {"mode", mode},
      {"first file", r.first_file_seconds < 0 ? "none" : drill_duration(r.first_file_seconds)},
      {"total time", drill_duration(r.seconds)},
      {"throughput", human_rate(r.throughput_bps)},
      {"files", files},
      {"bytes", human_bytes(r.bytes)},
      {"errors", std::to_string(r.errors)},
      {"RTO", rto_verdict(r)},
      {"RPO", rpo_verdict(r)},
  };
}

std::string drill_report_json(const engine::DrillReport& r) {
  Json j;
  j.begin_object()
      .field("snapshot", r.snapshot.hex())
      .field("snapshot_time", iso_time(r.snapshot_time_ns))
      .field("snapshot_time_ns", r.snapshot_time_ns)
      .field("started", iso_time(r.started_unix_ns))
      .field("started_unix_ns", r.started_unix_ns)
      .field("seconds", r.seconds)
      .field("first_file_seconds", r.first_file_seconds)
      .field("files", r.files)
      .field("bytes", r.bytes)
      .field("errors", r.errors)
      .field("throughput_bps", r.throughput_bps)
      .field("rto_seconds", r.rto_seconds)
      .field("rpo_seconds", r.rpo_seconds)
      .field("rto_met", r.rto_met)
      .field("rpo_met", r.rpo_met)
      .field("rpo_seen_seconds", r.rpo_seen_seconds)  // null: no complete restore point
      .field("objectives_met", r.objectives_met())
      .field("verify_only", r.verify_only)
      .field("sample", r.sample)
      .field("seed", r.seed)
      .field("scratch", r.scratch)
      .field("scratch_kept", r.scratch_kept);
  j.key("timeline").begin_array();
  for (const auto& s : r.timeline) j.begin_object().field("t_seconds", s.t_seconds).field("bytes_done", s.bytes_done).end_object();
  j.end_array();
  j.key("failures").begin_array();
  for (const auto& f : r.failures) j.begin_object().field("path", f.path).field("reason", f.reason).end_object();
  j.end_array().end_object();
  return j.str();
}

catalog::DrillRecord drill_record(const engine::DrillReport& r, std::string json) {
  catalog::DrillRecord d;
  d.started_ns = r.started_unix_ns;
  d.snapshot = r.snapshot;
  d.seconds = r.seconds;
  d.first_file_seconds = r.first_file_seconds;
  d.files = r.files;
  d.bytes = r.bytes;
  d.errors = r.errors;
  d.rto_seconds = r.rto_seconds;
  d.rpo_seconds = r.rpo_seconds;
  d.rto_met = r.rto_met;
  d.rpo_met = r.rpo_met;
  d.rpo_seen_seconds = r.rpo_seen_seconds;
  d.verify_only = r.verify_only;
  d.sample = r.sample;
  d.seed = r.seed;
  d.report_json = std::move(json);
  return d;
}


namespace {

std::string fixed(double v, int decimals = 1) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// 1, 2 or 5 times a power of ten, at least `v`: the top of an axis.
double nice_ceiling(double v) {
  if (v <= 0) return 1;
  double power = std::pow(10, std::floor(std::log10(v)));
  for (double step : {1.0, 2.0, 5.0, 10.0}) {
    if (step * power >= v) return step * power;
  }
  return 10 * power;
}

// Throughput over time as an inline SVG line plot: each point is the rate
// between two samples, at the middle of their interval.
std::string throughput_svg(const engine::DrillReport& r) {
  constexpr double kWidth = 720, kHeight = 280, kLeft = 70, kRight = 20, kTop = 20, kBottom = 45;
  constexpr int kGridLines = 4;
  std::vector<std::pair<double, double>> points;  // seconds, MB/s
  for (size_t i = 1; i < r.timeline.size(); ++i) {
    double dt = r.timeline[i].t_seconds - r.timeline[i - 1].t_seconds;
    if (dt <= 0) continue;
    double bytes = static_cast<double>(r.timeline[i].bytes_done - r.timeline[i - 1].bytes_done);
    points.emplace_back((r.timeline[i].t_seconds + r.timeline[i - 1].t_seconds) / 2, bytes / dt / 1e6);
  }
  double t_max = r.seconds > 0 ? r.seconds : 1;
  double rate_max = r.throughput_bps / 1e6;
  for (const auto& p : points) rate_max = std::max(rate_max, p.second);
  rate_max = nice_ceiling(rate_max);
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  auto x = [&](double t) { return fixed(kLeft + t / t_max * plot_w); };
  auto y = [&](double mbps) { return fixed(kTop + plot_h - mbps / rate_max * plot_h); };

  std::string svg = "<svg viewBox=\"0 0 " + fixed(kWidth, 0) + " " + fixed(kHeight, 0) +
                    "\" role=\"img\" aria-label=\"restore throughput over time\">\n";
  for (int g = 0; g <= kGridLines; ++g) {
    double rate = rate_max * g / kGridLines;
    svg += "<line class=\"grid\" x1=\"" + x(0) + "\" x2=\"" + x(t_max) + "\" y1=\"" + y(rate) + "\" y2=\"" + y(rate) +
           "\"/><text class=\"tick\" x=\"" + fixed(kLeft - 8) + "\" y=\"" + y(rate) + "\" text-anchor=\"end\" dy=\"4\">" +
           fixed(rate, rate_max < 10 ? 1 : 0) + "</text>\n";
    double t = t_max * g / kGridLines;
    svg += "<text class=\"tick\" x=\"" + x(t) + "\" y=\"" + fixed(kTop + plot_h + 18) + "\" text-anchor=\"middle\">" +
           xml_escape(drill_duration(t)) + "</text>\n";
  }
  svg += "<text class=\"label\" x=\"" + fixed(kLeft + plot_w / 2) + "\" y=\"" + fixed(kHeight - 6) +
         "\" text-anchor=\"middle\">time since the drill started</text>\n";
  svg += "<text class=\"label\" transform=\"rotate(-90)\" x=\"" + fixed(-(kTop + plot_h / 2)) +
         "\" y=\"16\" text-anchor=\"middle\">MB/s</text>\n";
  svg += "<line class=\"mean\" x1=\"" + x(0) + "\" x2=\"" + x(t_max) + "\" y1=\"" + y(r.throughput_bps / 1e6) +
         "\" y2=\"" + y(r.throughput_bps / 1e6) + "\"><title>average " + xml_escape(human_rate(r.throughput_bps)) +
         "</title></line>\n";
  std::string line;
  for (const auto& [t, rate] : points) line += x(t) + "," + y(rate) + " ";
  svg += "<polyline class=\"rate\" points=\"" + line + "\"/>\n";
  for (const auto& [t, rate] : points) {
    if (points.size() > 60) break;  // dots only where they stay readable
    svg += "<circle class=\"rate\" cx=\"" + x(t) + "\" cy=\"" + y(rate) + "\" r=\"2.5\"/>\n";
  }
  return svg + "</svg>\n";
}

}  // namespace

std::string drill_report_html(const engine::DrillReport& r) {
  const bool met = r.objectives_met();
  std::string html =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<title>keel drill " + r.snapshot.short_hex() + ": " + xml_escape(drill_outcome(r)) + "</title>\n"
      "<style>\n"
      "body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:780px;color:#222}\n"
      "h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:2rem}\n"
      ".id{font-family:monospace;font-size:.85rem;color:#555;word-break:break-all}\n"
      ".verdict{display:inline-block;padding:.3rem .8rem;border-radius:4px;color:#fff;font-weight:600}\n"
      ".met{background:#2e7d32}.missed{background:#c62828}\n"
      "table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.35rem .6rem;border-bottom:1px solid #ddd}\n"
      "th{width:9rem;color:#555;font-weight:500}\n"
      "svg{width:100%;height:auto}.grid{stroke:#e5e5e5}.tick,.label{font-size:11px;fill:#666}\n"
      "polyline.rate{fill:none;stroke:#1565c0;stroke-width:2}circle.rate{fill:#1565c0}\n"
      ".mean{stroke:#888;stroke-dasharray:4 4}li{font-family:monospace;font-size:.85rem}\n"
      "</style>\n</head>\n<body>\n"
      "<h1>Restore drill of snapshot " + r.snapshot.short_hex() + "</h1>\n"
      "<p class=\"id\">snapshot " + r.snapshot.hex() + "</p>\n"
      "<p><span class=\"verdict " + (met ? "met" : "missed") + "\">" + xml_escape(drill_outcome(r)) + "</span></p>\n"
      "<table>\n";
  for (const auto& [name, value] : drill_summary_rows(r)) {
    html += "<tr><th>" + xml_escape(name) + "</th><td>" + xml_escape(value) + "</td></tr>\n";
  }
  html += "</table>\n<h2>Throughput over time</h2>\n" + throughput_svg(r);
  if (!r.failures.empty()) {
    html += "<h2>Failures</h2>\n<ul>\n";
    for (size_t i = 0; i < r.failures.size() && i < kHtmlFailures; ++i) {
      html += "<li>" + xml_escape(r.failures[i].path) + ": " + xml_escape(r.failures[i].reason) + "</li>\n";
    }
    if (r.failures.size() > kHtmlFailures) {
      html += "<li>and " + std::to_string(r.failures.size() - kHtmlFailures) + " more (see keel drill --json)</li>\n";
    }
    html += "</ul>\n";
  }
  return html + "<p class=\"id\">keel " KEEL_VERSION "</p>\n</body>\n</html>\n";
}

namespace {

std::string objective(const std::optional<double>& limit, bool met) {
  if (!limit) return "-";
  return std::string(met ? "met " : "MISSED ") + human_duration(*limit);
}

}  // namespace

void print_drill_history(const std::vector<catalog::DrillRecord>& drills, bool json) {
  if (json) {
    Json j;
    j.begin_array();
    for (const auto& d : drills) {
      j.begin_object()
          .field("id", d.id)
          .field("started", iso_time(d.started_ns))
          .field("started_unix_ns", d.started_ns)
          .field("snapshot", d.snapshot.hex())
          .field("seconds", d.seconds)
          .field("first_file_seconds", d.first_file_seconds)
          .field("files", d.files)
          .field("bytes", d.bytes)
          .field("errors", d.errors)
          .field("rto_seconds", d.rto_seconds)
          .field("rpo_seconds", d.rpo_seconds)
          .field("rto_met", d.rto_met)
          .field("rpo_met", d.rpo_met)
          .field("rpo_seen_seconds", d.rpo_seen_seconds)
          .field("verify_only", d.verify_only)
          .field("sample", d.sample)
          .field("seed", d.seed)
          .end_object();
    }
    j.end_array();
    std::cout << j.str() << "\n";
    return;
  }
  std::printf("%-5s  %-19s  %-8s  %-7s  %6s  %10s  %10s  %8s  %10s  %6s  %-16s  %s\n", "ID", "STARTED", "SNAPSHOT",
              "MODE", "SAMPLE", "TIME", "FIRST FILE", "FILES", "BYTES", "ERRORS", "RTO", "RPO");
  for (const auto& d : drills) {
    std::printf("%-5lld  %-19s  %-8s  %-7s  %6s  %10s  %10s  %8llu  %10s  %6llu  %-16s  %s\n",
                static_cast<long long>(d.id), local_time(d.started_ns).c_str(), d.snapshot.short_hex().c_str(),
                d.verify_only ? "verify" : "restore", percent(d.sample).c_str(), drill_duration(d.seconds).c_str(),
                d.first_file_seconds < 0 ? "-" : drill_duration(d.first_file_seconds).c_str(),
                static_cast<unsigned long long>(d.files), human_bytes(d.bytes).c_str(),
                static_cast<unsigned long long>(d.errors), objective(d.rto_seconds, d.rto_met).c_str(),
                objective(d.rpo_seconds, d.rpo_met).c_str());
  }
  std::printf("%zu drills\n", drills.size());
}

}  // namespace keel::cli
