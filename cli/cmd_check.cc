#include <iostream>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json.h"
#include "cli/progress.h"
#include "engine/check.h"
#include "util/error.h"

namespace keel::cli {

int cmd_check(App& app, const Args& args) {
  bool read_data = false;
  po::options_description opts("keel check [--read-data]: verify the repository");
  opts.add_options()("read-data", po::bool_switch(&read_data), "read every pack and verify every stored byte");
  po::variables_map vm;
  if (!app.parse(args, opts, {}, vm)) return 0;
  auto repo = app.open_repository();
  engine::CheckOptions options;
  options.read_data = read_data;
  options.cancel = &App::cancel;
  std::atomic<uint64_t> done{0}, total{0};
  engine::CheckResult result;
  {
    Progress shown(app, "check", [&] {
      ProgressStatus s;
      s.counts.push_back({"packs", done.load(), total.load()});
      return s;
    });
    result = engine::run_check(*repo, options, [&](uint64_t d, uint64_t t) {
      done = d;
      total = t;
    });
  }
  if (app.global.json) {
    Json j;
    j.begin_object()
        .field("snapshots", result.snapshots)
        .field("trees", result.trees)
        .field("packs", result.packs)
        .field("blobs_referenced", result.blobs_referenced)
        .field("bytes_read", result.bytes_read)
        .field("blobs_stored_more_than_once", result.blobs_stored_more_than_once)
        .field("ok", result.problems.empty());
    j.key("problems").begin_array();
    for (const auto& p : result.problems) j.begin_object().field("message", p.message).field("affected", p.affected).end_object();
    j.end_array().end_object();
    std::cout << j.str() << "\n";
  } else {
    for (const auto& p : result.problems) {
      std::cout << "error: " << p.message << "\n";
      for (const auto& a : p.affected) std::cout << "  affects " << a << "\n";
    }
    if (result.blobs_stored_more_than_once) {
      app.say("info: " + std::to_string(result.blobs_stored_more_than_once) +
              " blobs are stored in more than one pack (concurrent backups or a repack in its grace period); "
              "prune reclaims the extra copies");
    }
    app.say("checked " + std::to_string(result.snapshots) + " snapshots, " + std::to_string(result.trees) + " trees, " +
            std::to_string(result.packs) + " packs" + (read_data ? ", read " + human_bytes(result.bytes_read) : "") +
            ": " + (result.problems.empty() ? "no errors" : std::to_string(result.problems.size()) + " errors"));
  }
  return result.problems.empty() ? 0 : static_cast<int>(ErrorKind::kIntegrity);
}

}  // namespace keel::cli
