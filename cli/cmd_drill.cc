#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "cli/commands.h"
#include "cli/number_option.h"
#include "cli/drill_report.h"
#include "cli/parse.h"
#include "cli/restore_report.h"
#include "engine/catalog_copy.h"
#include "engine/drill.h"
#include "util/error.h"
#include "util/fd.h"

namespace keel::cli {
namespace {

std::string default_scratch() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp && *tmp ? tmp : "/tmp";
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
      ("seed", count_option(&seed, "--seed", 0, UINT64_MAX), "seed that picks the sample, to repeat one (default: random, reported)")
      ("html", po::value(&html), "also write a self-contained HTML report to FILE")
      ("keep", po::bool_switch(&keep), "keep the restored files in the scratch directory")
      ("readers", count_option(&readers, "--readers", 0, kMaxReaders)->default_value("0"), "ranged reads in flight (0: adaptive)");
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

  auto repo = app.open_repository("keel drill");
  engine::RestoreProgress progress;
  options.progress = &progress;
  engine::DrillReport report;
  {
    Progress shown(app, "drill", [&] { return restore_status(progress); });
    report = engine::run_drill(*repo, options);
  }
  std::string json = drill_report_json(report);
  repo->catalog().add_drill(drill_record(report, json));
  if (std::string error = engine::try_save_catalog_copy(*repo); !error.empty()) {
    app.warn("keel: warning: the drill is recorded, but the catalog copy on the target failed: " + error);
  }

  for (const auto& f : report.failures) app.warn("keel: failed to restore " + f.path + ": " + f.reason);
  if (!report.scratch_error.empty()) app.warn("keel: scratch directory left behind: " + report.scratch_error);
  if (app.global.json) {
    std::cout << json << "\n";
  } else {
    app.say("drill of snapshot " + report.snapshot.short_hex() + ": " + drill_outcome(report));
    for (const auto& [name, value] : drill_summary_rows(report)) {
      char label[16];
      std::snprintf(label, sizeof label, "%-12s", name.c_str());
      app.say("  " + std::string(label) + value);
    }
  }
  if (!html.empty()) write_file_atomic(html, as_bytes(drill_report_html(report)));

  if (!report.objectives_met()) return static_cast<int>(ErrorKind::kObjectivesMissed);
  if (report.errors > 0) return static_cast<int>(ErrorKind::kPartial);
  return 0;
}
int cmd_drills(App& app, const Args& args) {
  po::options_description opts("keel drills: the history of restore drills, oldest first");
  po::variables_map vm;
  if (!app.parse(args, opts, {}, vm)) return 0;
  auto repo = app.open_repository();
  print_drill_history(repo->catalog().list_drills(), app.global.json);
  return 0;
}

}  // namespace keel::cli
