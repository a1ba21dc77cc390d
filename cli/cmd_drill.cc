#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <utility>

#include "util/xml.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json.h"
#include "cli/parse.h"
#include "engine/catalog_copy.h"
#include "engine/drill.h"
#include "util/error.h"
#include "util/fd.h"

namespace keel::cli {
namespace {

using Rows = std::vector<std::pair<std::string, std::string>>;

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

std::string outcome(const engine::DrillReport& r) {
  if (r.objectives_met()) return "objectives met";
  std::string missed = !r.rto_met && !r.rpo_met ? "RTO and RPO" : !r.rto_met ? "RTO" : "RPO";
  return "objectives missed: " + missed;
}

// The summary, shared by the terminal and the HTML report.
Rows summary_rows(const engine::DrillReport& r) {
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

std::string report_json(const engine::DrillReport& r) {
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

std::string html_report(const engine::DrillReport& r) {
  const bool met = r.objectives_met();
  std::string html =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<title>keel drill " + r.snapshot.short_hex() + ": " + xml_escape(outcome(r)) + "</title>\n"
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
      "<p><span class=\"verdict " + (met ? "met" : "missed") + "\">" + xml_escape(outcome(r)) + "</span></p>\n"
      "<table>\n";
  for (const auto& [name, value] : summary_rows(r)) {
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

std::string default_scratch() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp && *tmp ? tmp : "/tmp";
}

std::string objective(const std::optional<double>& limit, bool met) {
  if (!limit) return "-";
  return std::string(met ? "met " : "MISSED ") + human_duration(*limit);
}

}  // namespace

int cmd_drill(App& app, const Args& args) {
  std::string spec = "latest", scratch, rto, rpo, sample, html;
  uint64_t seed = 0;
  size_t readers = 0;
  bool verify_only = false, keep = false;
  po::options_description opts(
      "keel drill [SNAPSHOT]: restore a snapshot (or verify every byte of it) against the clock and check the "
      "recovery objectives; exits 10 if one is missed");
  opts.add_options()
      ("snapshot", po::value(&spec)->default_value(spec), "snapshot id or 'latest'")
      ("scratch", po::value(&scratch), "restore into a new directory in DIR, removed afterwards (default: $TMPDIR or /tmp)")
      ("verify-only", po::bool_switch(&verify_only), "fetch, decrypt and check every byte but write nothing")
      ("rto", po::value(&rto), "recovery time objective: the drill must succeed within this (90s, 30m, 1h30m, 2d)")
      ("rpo", po::value(&rpo), "recovery point objective: the newest complete snapshot may be at most this old")
      ("sample", po::value(&sample), "drill this share of the files, picked at random (10% or 0.1)")
      ("seed", po::value(&seed), "seed that picks the sample, to repeat one (default: random, reported)")
      ("html", po::value(&html), "also write a self-contained HTML report to FILE")
      ("keep", po::bool_switch(&keep), "keep the restored files in the scratch directory")
      ("readers", po::value(&readers)->default_value(0), "ranged reads in flight (0: adaptive)");
  po::positional_options_description pos;
  pos.add("snapshot", 1);
  po::variables_map vm;
  if (!app.parse(args, opts, pos, vm)) return 0;
  if (verify_only && (!scratch.empty() || keep)) {
    throw Error(ErrorKind::kUsage, "--verify-only writes nothing: --scratch and --keep do not apply");
  }

  engine::DrillOptions options;
  options.snapshot = spec;
  options.verify_only = verify_only;
  if (!verify_only) options.scratch_dir = scratch.empty() ? default_scratch() : scratch;
  if (!rto.empty()) options.rto = parse_duration(rto, "--rto");
  if (!rpo.empty()) options.rpo = parse_duration(rpo, "--rpo");
  if (!sample.empty()) options.sample = parse_fraction(sample, "--sample");
  options.seed = seed;
  options.readers = readers;
  options.cancel = &App::cancel;
  options.keep_scratch = keep;

  auto repo = app.open_repository();
  engine::DrillReport report = engine::run_drill(*repo, options);
  std::string json = report_json(report);
  repo->catalog().add_drill(drill_record(report, json));
  if (std::string error = engine::try_save_catalog_copy(*repo); !error.empty()) {
    app.warn("keel: warning: the drill is recorded, but the catalog copy on the target failed: " + error);
  }

  for (const auto& f : report.failures) app.warn("keel: failed to restore " + f.path + ": " + f.reason);
  if (!report.scratch_error.empty()) app.warn("keel: scratch directory left behind: " + report.scratch_error);
  if (app.global.json) {
    std::cout << json << "\n";
  } else {
    app.say("drill of snapshot " + report.snapshot.short_hex() + ": " + outcome(report));
    for (const auto& [name, value] : summary_rows(report)) {
      char label[16];
      std::snprintf(label, sizeof label, "%-12s", name.c_str());
      app.say("  " + std::string(label) + value);
    }
  }
  if (!html.empty()) write_file_atomic(html, as_bytes(html_report(report)));

  if (!report.objectives_met()) return static_cast<int>(ErrorKind::kObjectivesMissed);
  if (report.errors > 0) return static_cast<int>(ErrorKind::kPartial);
  return 0;
}

int cmd_drills(App& app, const Args& args) {
  po::options_description opts("keel drills: the history of restore drills, oldest first");
  po::variables_map vm;
  if (!app.parse(args, opts, {}, vm)) return 0;
  auto repo = app.open_repository();
  std::vector<catalog::DrillRecord> drills = repo->catalog().list_drills();
  if (app.global.json) {
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
    return 0;
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
  return 0;
}

}  // namespace keel::cli
