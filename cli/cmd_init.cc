#include <iostream>

#include "cli/commands.h"
#include "cli/number_option.h"
#include "cli/json.h"
#include "cli/parse.h"
#include "engine/compress.h"
#include "engine/repository.h"
#include "util/error.h"

namespace keel::cli {

int cmd_init(App& app, const Args& args) {
  engine::RepoConfig config;
  uint32_t min_kib = config.chunker.min_size / 1024, avg_kib = config.chunker.avg_size / 1024,
           max_kib = config.chunker.max_size / 1024;
  uint64_t pack_mib = config.pack_size >> 20;
  std::string compression = engine::compression_name(engine::kCompressionDefault);
  uint32_t format = 1;
  std::string object_lock, lock_period;
  po::options_description opts("keel init [options]: create an encrypted repository");
  opts.add_options()
      ("chunk-min", count_option(&min_kib, "--chunk-min", 1, kMaxChunkKib, "KiB")->default_value(std::to_string(min_kib)), "smallest chunk, KiB")
      ("chunk-avg", count_option(&avg_kib, "--chunk-avg", 1, kMaxChunkKib, "KiB")->default_value(std::to_string(avg_kib)), "average chunk, KiB (a power of two)")
      ("chunk-max", count_option(&max_kib, "--chunk-max", 1, kMaxChunkKib, "KiB")->default_value(std::to_string(max_kib)), "largest chunk, KiB")
      ("compression", po::value(&compression)->default_value(compression),
       "repository default: off, fast, default, max, or a zstd level (-7..19; 0 is off)")
      ("pack-size", count_option(&pack_mib, "--pack-size", 1, kMaxPackMib, "MiB")->default_value(std::to_string(pack_mib)), "target pack size, MiB")
      ("format", count_option(&format, "--format", 1, 2)->default_value("1"),
       "repository format: 1, or 2 for put-only keys (keel key add --put-only; needs this keel or newer)")
      ("object-lock", po::value(&object_lock), "governance or compliance: lock every object written (S3 bucket with Object Lock enabled; docs/immutable.md)")
      ("lock-period", po::value(&lock_period), "with --object-lock: how long each snapshot and everything it uses stays locked (e.g. 30d)");
  po::variables_map vm;
  if (!app.parse(args, opts, {}, vm)) return 0;
  config.chunker = {min_kib * 1024, avg_kib * 1024, max_kib * 1024};
  config.chunker.validate();
  config.compression_level = engine::parse_compression(compression, "--compression");
  config.pack_size = pack_mib << 20;
  config.version = format;
  if (!object_lock.empty() || !lock_period.empty()) {
    const std::optional<targets::LockMode> mode = targets::parse_lock_mode(object_lock);
    if (!mode) throw Error(ErrorKind::kUsage, "--object-lock must be governance or compliance, not '" + object_lock + "'");
    if (lock_period.empty()) throw Error(ErrorKind::kUsage, "--object-lock needs --lock-period (e.g. 30d)");
    const std::chrono::seconds period = parse_duration(lock_period, "--lock-period");
    if (period.count() <= 0) throw Error(ErrorKind::kUsage, "--lock-period must be positive");
    config.object_lock = engine::ObjectLockConfig{*mode, period};
    if (!app.global.repo.starts_with("s3://")) {
      throw Error(ErrorKind::kUsage, "--object-lock: " + app.global.repo +
                                         " is not an S3 bucket; a local directory cannot lock objects (create an S3 "
                                         "bucket with Object Lock enabled and use --repo s3://BUCKET/PREFIX)");
    }
  }

  auto target = app.open_target(/*create=*/true);
  engine::OpenOptions options;
  options.password = app.password("new repository password: ");
  options.catalog_path = app.global.catalog;
  auto repo = engine::Repository::init(std::move(target), config, options);
  if (app.global.json) {
    Json j;
    j.begin_object()
        .field("repository", repo->target().describe())
        .field("id", repo->config().repository_id.hex())
        .field("format", static_cast<uint64_t>(repo->config().version))
        .field("catalog", repo->catalog_path())
        .end_object();
    std::cout << j.str() << "\n";
  } else {
    app.say("created keel repository " + repo->config().repository_id.short_hex() + " (format " +
            std::to_string(repo->config().version) + ") at " + repo->target().describe());
    app.say("catalog: " + repo->catalog_path());
    if (const auto& lock = repo->config().object_lock) {
      app.say(std::string("object lock: ") + targets::lock_mode_name(lock->mode) + ", " +
              std::to_string(lock->period.count()) + " s per snapshot");
    }
  }
  return 0;
}

}  // namespace keel::cli
