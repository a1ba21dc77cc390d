#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli/backup_report.h"
#include "cli/commands.h"
#include "cli/copy_report.h"
#include "cli/number_option.h"
#include "cli/format.h"
#include "cli/job_report.h"
#include "cli/json.h"
#include "cli/parse.h"
#include "engine/repository_access.h"
#include "jobs/job_store.h"
#include "jobs/metrics.h"
#include "jobs/runner.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/file_lock.h"

namespace keel::cli {
namespace {

constexpr const char* kUsage =
    "usage: keel job ACTION [options]: named backup recipes that keel scheduler runs\n\n"
    "actions:\n"
    "  add NAME     store a job: --paths, --schedule, retention, RPO and hooks (opens the repository once);\n"
    "               with --copy-to REPO a copy job instead: keel copy of --repo's snapshots into REPO\n"
    "  list         every job: schedule, next run, last outcome, RPO status\n"
    "  show NAME    a job's definition, status and recent runs\n"
    "  run NAME     run a job now, in the foreground (exit code: its outcome)\n"
    "  remove NAME  forget a job (its snapshots and run history stay)\n\n"
    "Run 'keel job ACTION --help' for an action's options. See docs/jobs.md.\n";

std::string absolute_path(const std::string& path) {
  return std::filesystem::absolute(path).lexically_normal().string();
}

// --jobs, shared by every action.
void add_jobs_option(po::options_description& opts, std::string& path) {
  opts.add_options()("jobs", po::value(&path), "job store (env KEEL_JOBS; default $XDG_DATA_HOME/keel/jobs.db)");
}

// Parses `keel job ACTION NAME [options]`: NAME, --jobs, `opts` and the
// global options. False after --help.
bool parse_named(App& app, const Args& args, const char* action, po::options_description& opts, std::string& name,
                 std::string& jobs_file, po::variables_map& vm) {
  opts.add_options()("name", po::value(&name), "the job's name");
  add_jobs_option(opts, jobs_file);
  po::positional_options_description pos;
  pos.add("name", 1);
  if (!app.parse(args, opts, pos, vm)) return false;
  if (name.empty()) throw Error(ErrorKind::kUsage, std::string("job ") + action + " needs a job's NAME (see keel job list)");
  return true;
}

// The destination of a copy job, as `keel copy` opens its --repo: the
// job's target options, the password from KEEL_COPY_PASSWORD or the file.
engine::RepositoryAccess copy_destination(const jobs::Job& job, const std::string& catalog) {
  engine::RepositoryAccess access;
  access.location = job.copy_to;
  access.target = job.target_options();
  access.password_env = "KEEL_COPY_PASSWORD";
  access.password_file = job.copy_password_file;
  access.catalog = catalog;
  return access;
}

std::string copy_destination_password(const engine::RepositoryAccess& access) {
  std::string password = engine::stored_password(access).value_or("");
  if (password.empty()) password = prompt_secret("password of " + access.location + ": ");
  if (password.empty()) {
    throw Error(ErrorKind::kUsage, "no password for the copy's destination " + access.location +
                                       ": set KEEL_COPY_PASSWORD or give the job --copy-password-file");
  }
  return password;
}

// A copy job copies snapshots that exist; what a backup job's options choose does not apply.
void check_copy_job(const jobs::Job& job, const po::variables_map& vm) {
  for (const char* option : {"paths", "exclude", "stdin-from-command", "stdin-name", "tag", "memory", "append-only",
                             "keep-last", "keep-hourly", "keep-daily", "keep-weekly", "keep-monthly", "keep-yearly",
                             "keep-tag"}) {
    if (vm.count(option) && !vm[option].defaulted()) {
      throw Error(ErrorKind::kUsage, std::string("--") + option + " is for backup jobs; a copy job (--copy-to) copies "
                                     "the snapshots --copy-host, --copy-tag and --copy-path select (forget at the "
                                     "destination with keel forget there)");
    }
  }
  if (job.copy_to == job.repo) throw Error(ErrorKind::kUsage, "--copy-to names the job's own repository: copy elsewhere");
}

int job_add(App& app, const Args& args) {
  jobs::Job job;
  std::string jobs_file, rpo, copy_newer_than;
  po::options_description opts("keel job add NAME --paths PATH --schedule CRON [options]: store a backup job");
  opts.add_options()
      ("paths", po::value(&job.paths)->composing(), "a file or directory to back up (repeatable)")
      ("exclude,e", po::value(&job.excludes)->composing(), "skip items matching this glob (repeatable)")
      ("stdin-from-command", po::value(&job.stream_command),
       "in place of --paths: back up what this shell command prints, as one file; no snapshot unless it exits 0")
      ("stdin-name", po::value(&job.stream_name)->default_value("stdin"), "file name for --stdin-from-command")
      ("tag", po::value(&job.tags)->composing(), "tag its snapshots, besides job:NAME (repeatable)")
      ("memory", count_option(&job.memory_mib, "--memory", 1, kMaxMemoryMib, "MiB")->default_value(std::to_string(job.memory_mib)), "MiB of data in flight at most")
      ("schedule", po::value(&job.schedule), "cron expression: \"0 2 * * *\", \"*/15 * * * *\", @daily, ...")
      ("timezone", po::value(&job.time_zone), "IANA time zone of the schedule (default: this machine's)")
      ("keep-last", count_option(&job.retention.last, "--keep-last", 0, kMaxKeepCount), "after each run keep the newest N snapshots of the job")
      ("keep-hourly", count_option(&job.retention.hourly, "--keep-hourly", 0, kMaxKeepCount), "... and the newest of each of the last N hours")
      ("keep-daily", count_option(&job.retention.daily, "--keep-daily", 0, kMaxKeepCount), "... days")
      ("keep-weekly", count_option(&job.retention.weekly, "--keep-weekly", 0, kMaxKeepCount), "... weeks")
      ("keep-monthly", count_option(&job.retention.monthly, "--keep-monthly", 0, kMaxKeepCount), "... months")
      ("keep-yearly", count_option(&job.retention.yearly, "--keep-yearly", 0, kMaxKeepCount), "... years")
      ("keep-tag", po::value(&job.retention.keep_tags)->composing(), "never forget snapshots with this tag")
      ("rpo", po::value(&rpo), "recovery point objective: the newest successful run may be this old (24h, 90m)")
      ("before", po::value(&job.before_hook), "shell command run before the backup; if it fails, nothing is backed up")
      ("after", po::value(&job.after_hook), "shell command run after the backup, whatever its outcome")
      ("copy-to", po::value(&job.copy_to),
       "a copy job: each run copies the repository's snapshots into this one (keel copy, docs/copy.md)")
      ("copy-password-file", po::value(&job.copy_password_file),
       "the copy destination's password file (stored as a path; env KEEL_COPY_PASSWORD holds the password itself)")
      ("copy-host", po::value(&job.copy_selection.hosts)->composing(), "copy only snapshots of this host (repeatable)")
      ("copy-tag", po::value(&job.copy_selection.tags)->composing(), "copy only snapshots with this tag (repeatable: all)")
      ("copy-path", po::value(&job.copy_selection.paths)->composing(), "copy only snapshots of this path (repeatable: all)")
      ("copy-newer-than", po::value(&copy_newer_than), "copy only snapshots taken within this long (30d)");
  po::variables_map vm;
  if (!parse_named(app, args, "add", opts, job.name, jobs_file, vm)) return 0;
  jobs::validate_job_name(job.name);
  job.append_only = app.global.append_only;  // its runs back up as keel backup --append-only (no --keep-* then)
  if (!job.is_copy() && (!job.copy_password_file.empty() || !job.copy_selection.hosts.empty() ||
                         !job.copy_selection.tags.empty() || !job.copy_selection.paths.empty() ||
                         !copy_newer_than.empty())) {
    throw Error(ErrorKind::kUsage, "the --copy-* options go with --copy-to REPO (a copy job)");
  }
  if (job.is_copy()) {
    job.repo = app.global.repo;
    check_copy_job(job, vm);
    if (!copy_newer_than.empty()) job.copy_newer_than = parse_duration(copy_newer_than, "--copy-newer-than");
  } else if (job.paths.empty() == job.stream_command.empty()) {
    throw Error(ErrorKind::kUsage,
                "give the job something to back up: --paths PATH or --stdin-from-command COMMAND (not both)");
  } else if (!job.stream_command.empty() && !job.excludes.empty()) {
    throw Error(ErrorKind::kUsage, "--exclude is for --paths; a --stdin-from-command job backs up one stream");
  }
  if (job.stream_command.empty()) job.stream_name.clear();
  if (job.schedule.empty()) throw Error(ErrorKind::kUsage, "give the job a --schedule, e.g. \"0 2 * * *\"");
  const engine::RetentionPolicy& keep = job.retention;
  const uint64_t counts = uint64_t{keep.last} + keep.hourly + keep.daily + keep.weekly + keep.monthly + keep.yearly;
  if (!keep.keep_tags.empty() && counts == 0) {
    // Alone it would forget every untagged snapshot, the new one included.
    throw Error(ErrorKind::kUsage, "--keep-tag goes with a --keep-last/hourly/daily/weekly/monthly/yearly count");
  }
  if (app.global.repo.empty()) throw Error(ErrorKind::kUsage, "give the job a repository: --repo or KEEL_REPO");
  if (job.append_only && counts > 0) {
    throw Error(ErrorKind::kUsage, "an --append-only job cannot forget (its --keep-* rules delete snapshots): run "
                                   "keel forget --prune on a schedule where the repository's owner credentials are");
  }
  job.time_zone = job.cron().time_zone();  // the default resolved now, so the job does not move with TZ
  if (!rpo.empty()) job.rpo = parse_duration(rpo, "--rpo");
  for (std::string& path : job.paths) {
    path = absolute_path(path);
    std::error_code ec;
    if (!std::filesystem::exists(std::filesystem::symlink_status(path, ec))) {
      app.warn("keel: warning: " + path + " does not exist (yet); runs fail until it does");
    }
  }

  jobs::JobStore store(jobs_path(jobs_file));
  if (store.find(job.name)) {
    throw Error(ErrorKind::kUsage, "a job named " + job.name + " exists already (keel job remove " + job.name + " first)");
  }
  // Opening the repository proves the location and password work and finds
  // the catalog the runs will record their history in.
  auto repo = job.append_only ? app.open_repository_append_only() : app.open_repository();
  job.repo = app.global.repo;
  job.endpoint = app.global.target.endpoint;
  job.region = app.global.target.region;
  job.aws_profile = app.global.target.profile;
  job.ca_file = app.global.target.ca_file.empty() ? "" : absolute_path(app.global.target.ca_file);
  job.virtual_hosted = app.global.target.virtual_hosted;
  job.rdma = app.global.target.rdma;
  if (!app.global.password_file.empty()) job.password_file = absolute_path(app.global.password_file);
  job.catalog = absolute_path(repo->catalog_path());
  if (job.is_copy()) {
    if (!job.copy_password_file.empty()) job.copy_password_file = absolute_path(job.copy_password_file);
    engine::RepositoryAccess destination = copy_destination(job, "");
    auto copy = engine::open_repository(destination, copy_destination_password(destination));
    if (copy->config().repository_id == repo->config().repository_id) {
      throw Error(ErrorKind::kUsage, "--copy-to is the job's own repository (" + job.repo + "): copy elsewhere");
    }
    job.copy_catalog = absolute_path(copy->catalog_path());
  }
  job.created_ns = jobs::to_unix_ns(std::chrono::system_clock::now());
  store.add(job);

  if (app.global.json) {
    Json j;
    job_json(j, job);
    std::cout << j.str() << "\n";
  } else {
    const std::string what = job.is_copy() ? "copies of " + job.repo + " to " + job.copy_to
                           : !job.stream_command.empty() ? "the output of '" + job.stream_command + "' to " + job.repo
                                                         : std::to_string(job.paths.size()) + " path(s) to " + job.repo;
    app.say("added job " + job.name + ": " + what + " at '" + job.schedule + "' (" + job.time_zone + "), next run " +
            fire_text(job.next_fire()));
  }
  return 0;
}

jobs::JobStatus status_of(const jobs::Job& job, const jobs::JobStore& store) {
  jobs::JobStatus status = jobs::load_job_status(job);
  status.running = FileLock::held_elsewhere(store.run_lock_path(job.name));
  return status;
}

int job_list(App& app, const Args& args) {
  std::string jobs_file;
  po::options_description opts("keel job list: every job with its schedule, next run, last outcome and RPO status");
  add_jobs_option(opts, jobs_file);
  po::variables_map vm;
  if (!app.parse(args, opts, {}, vm)) return 0;
  jobs::JobStore store(jobs_path(jobs_file));
  const jobs::TimePoint now = std::chrono::system_clock::now();
  Json j;
  j.begin_array();
  if (!app.global.json) {
    std::printf("%-16s  %-24s  %-19s  %-19s  %-11s  %s\n", "NAME", "SCHEDULE", "NEXT RUN", "LAST RUN", "OUTCOME", "RPO");
  }
  std::vector<jobs::Job> all = store.list();
  for (const jobs::Job& job : all) {
    jobs::JobStatus status{.name = job.name, .rpo = job.rpo, .next_fire = job.next_fire()};
    try {
      status = status_of(job, store);
    } catch (const Error& e) {
      app.warn("keel: job " + job.name + ": cannot read its run history: " + e.what());  // list the others
    }
    if (app.global.json) {
      j.begin_object().field("name", job.name).key("job");
      job_json(j, job);
      j.key("status");
      job_status_json(j, status, now);
      j.end_object();
      continue;
    }
    std::string outcome = status.running ? "running"
                          : status.last_run ? std::string(catalog::job_outcome_name(status.last_run->outcome))
                                            : "-";
    std::string last = status.last_run ? local_time(status.last_run->started_ns) : "-";
    std::printf("%-16s  %-24s  %-19s  %-19s  %-11s  %s\n", job.name.c_str(), job.schedule.c_str(),
                fire_text(status.next_fire).c_str(), last.c_str(), outcome.c_str(), rpo_text(status, now).c_str());
  }
  j.end_array();
  if (app.global.json) {
    std::cout << j.str() << "\n";
  } else {
    std::printf("%zu jobs in %s\n", all.size(), store.path().c_str());
  }
  return 0;
}

int job_show(App& app, const Args& args) {
  std::string name, jobs_file;
  size_t runs = 10;
  po::options_description opts("keel job show NAME: a job's definition, status and recent runs");
  opts.add_options()("runs", count_option(&runs, "--runs", 0, kMaxKeepCount)->default_value(std::to_string(runs)), "show this many of the newest runs (0: all)");
  po::variables_map vm;
  if (!parse_named(app, args, "show", opts, name, jobs_file, vm)) return 0;
  jobs::JobStore store(jobs_path(jobs_file));
  jobs::Job job = store.get(name);
  jobs::JobStatus status = status_of(job, store);
  std::vector<catalog::JobRunRecord> history = catalog::Catalog::open(job.catalog)->list_job_runs(job.name, runs);
  const jobs::TimePoint now = std::chrono::system_clock::now();
  if (app.global.json) {
    Json j;
    j.begin_object().key("job");
    job_json(j, job);
    j.key("status");
    job_status_json(j, status, now);
    j.key("runs").begin_array();
    for (const auto& run : history) job_run_json(j, run);
    j.end_array().end_object();
    std::cout << j.str() << "\n";
    return 0;
  }
  auto row = [](const char* label, const std::string& value) { std::printf("  %-14s%s\n", label, value.c_str()); };
  auto list = [](const std::vector<std::string>& items) {
    std::string out;
    for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
    return out.empty() ? "-" : out;
  };
  const engine::RetentionPolicy& r = job.retention;
  std::string retention = "keep everything";
  if (!r.empty()) {
    retention = "last " + std::to_string(r.last) + ", hourly " + std::to_string(r.hourly) + ", daily " +
                std::to_string(r.daily) + ", weekly " + std::to_string(r.weekly) + ", monthly " +
                std::to_string(r.monthly) + ", yearly " + std::to_string(r.yearly);
    if (!r.keep_tags.empty()) retention += "; tags kept: " + list(r.keep_tags);
  }
  std::printf("job %s\n", job.name.c_str());
  row("repository", job.repo + (job.endpoint.empty() ? "" : " (endpoint " + job.endpoint + ")") +
                        (job.rdma.empty() ? "" : " (rdma " + job.rdma + ")") +
                        (job.append_only ? " (append-only)" : ""));
  if (job.is_copy()) {
    const engine::SnapshotSelection& s = job.copy_selection;
    row("copy to", job.copy_to);
    row("selection", "hosts " + list(s.hosts) + "; tags " + list(s.tags) + "; paths " + list(s.paths) +
                         (job.copy_newer_than ? "; newer than " + human_duration(static_cast<double>(job.copy_newer_than->count())) : ""));
    row("newest copy", status.newest_copy_ns ? local_time(*status.newest_copy_ns) : "-");
  } else {
    if (!job.stream_command.empty()) {
      row("command", job.stream_command + " (as " + job.stream_name + ")");
    } else {
      row("paths", list(job.paths));
      row("excludes", list(job.excludes));
    }
    row("tags", list(std::vector<std::string>{job.tag()}) + (job.tags.empty() ? "" : ", " + list(job.tags)));
  }
  row("schedule", job.schedule + " (" + job.time_zone + ")");
  row("retention", retention);
  row("RPO", rpo_text(status, now));
  row("before hook", job.before_hook.empty() ? "-" : job.before_hook);
  row("after hook", job.after_hook.empty() ? "-" : job.after_hook);
  row("password file", job.password_file.empty() ? "- (KEEL_PASSWORD or KEEL_PASSWORD_FILE)" : job.password_file);
  row("catalog", job.catalog);
  row("next run", fire_text(status.next_fire) + (status.running ? " (running now)" : ""));
  std::printf("\n%-6s  %-19s  %9s  %-11s  %-8s  %8s  %10s  %6s  %s\n", "RUN", "STARTED", "TIME", "OUTCOME", "SNAPSHOT",
              "FILES", "ADDED", "ERRORS", "MESSAGE");
  for (const auto& run : history) {
    std::string time = run.ended_ns ? human_duration(static_cast<double>(run.ended_ns - run.started_ns) / 1e9) : "-";
    std::printf("%-6lld  %-19s  %9s  %-11s  %-8s  %8llu  %10s  %6llu  %s\n", static_cast<long long>(run.id),
                local_time(run.started_ns).c_str(), time.c_str(),
                std::string(catalog::job_outcome_name(run.outcome)).c_str(),
                run.snapshot ? run.snapshot->short_hex().c_str() : "-", static_cast<unsigned long long>(run.files),
                human_bytes(run.bytes_added).c_str(), static_cast<unsigned long long>(run.errors), run.message.c_str());
  }
  return 0;
}

int job_run(App& app, const Args& args) {
  std::string name, jobs_file, metrics_file;
  po::options_description opts(
      "keel job run NAME: run a job now in the foreground. Exit code: 0 success, 3 partial, 8 another run of the "
      "job is going, 130 interrupted, else the failure's (docs/exit-codes.md)");
  opts.add_options()("metrics-file", po::value(&metrics_file), "write the job's Prometheus metrics to FILE afterwards");
  po::variables_map vm;
  if (!parse_named(app, args, "run", opts, name, jobs_file, vm)) return 0;
  jobs::JobStore store(jobs_path(jobs_file));
  jobs::Job job = store.get(name);
  if (app.global.append_only && !job.is_copy()) {
    if (!job.retention.empty()) app.refuse_if_append_only("keel job run " + job.name, "forgets snapshots (its --keep-* rules)");
    job.append_only = true;
  }
  // The job's own password file wins over KEEL_PASSWORD_FILE, a flag over both.
  if (!vm.count("password-file") && !job.password_file.empty()) app.global.password_file = job.password_file;

  jobs::RunOptions options;
  options.lock_path = store.run_lock_path(job.name);
  options.password = [&] { return app.password(); };
  options.cancel = &App::cancel;
  engine::BackupProgress progress;
  options.progress = &progress;
  engine::CopyProgress copy_progress;
  options.copy_progress = &copy_progress;
  const engine::RepositoryAccess destination = copy_destination(job, job.copy_catalog);
  options.copy_password = [&] { return copy_destination_password(destination); };
  options.warn = [&](const std::string& line) { app.warn(line); };
  jobs::RunResult result;
  {
    Progress shown(app, job.is_copy() ? "copy" : "backup",
                   [&] { return job.is_copy() ? copy_status(copy_progress) : backup_status(progress); });
    result = jobs::run_job(job, options);
  }
  const catalog::JobRunRecord& run = result.record;
  if (!metrics_file.empty()) {
    jobs::JobStatus status = jobs::load_job_status(job);
    write_file_atomic(metrics_file, as_bytes(jobs::render_metrics({status}, std::chrono::system_clock::now())));
  }

  const std::string outcome(catalog::job_outcome_name(run.outcome));
  if (app.global.json) {
    Json j;
    j.begin_object().key("run");
    job_run_json(j, run);
    j.field("exit_code", result.exit_code).field("snapshots_forgotten", static_cast<uint64_t>(result.snapshots_forgotten));
    j.key("backup");
    if (result.backup) {
      j.begin_object();
      backup_json_fields(j, *result.backup);
      j.end_object();
    } else {
      j.null();
    }
    j.key("copy");
    if (result.copy) {
      j.begin_object();
      copy_json_fields(j, *result.copy, false);
      j.end_object();
    } else {
      j.null();
    }
    j.end_object();
    std::cout << j.str() << "\n";
  } else if (result.copy) {
    app.say("job " + job.name + ": " + outcome + ": " + copy_summary(*result.copy, job.repo));
  } else if (result.backup) {
    std::string forgot = result.snapshots_forgotten ? "; forgot " + std::to_string(result.snapshots_forgotten) +
                                                          " old snapshot(s)"
                                                    : "";
    app.say("job " + job.name + ": " + outcome + ": " + backup_summary(result.backup->snapshot) + forgot);
  }
  if (run.outcome != catalog::JobOutcome::kSuccess) app.warn("keel job run: job " + job.name + " " + outcome + ": " + run.message);
  return result.exit_code;
}

int job_remove(App& app, const Args& args) {
  std::string name, jobs_file;
  po::options_description opts("keel job remove NAME: forget a job; its snapshots and run history stay");
  po::variables_map vm;
  if (!parse_named(app, args, "remove", opts, name, jobs_file, vm)) return 0;
  jobs::JobStore store(jobs_path(jobs_file));
  store.remove(name);
  if (app.global.json) {
    std::cout << Json().begin_object().field("removed", name).end_object().str() << "\n";
  } else {
    app.say("removed job " + name + " (its snapshots and run history stay in the repository)");
  }
  return 0;
}

}  // namespace

int cmd_job(App& app, const Args& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    (args.empty() ? std::cerr : std::cout) << kUsage;
    return args.empty() ? static_cast<int>(ErrorKind::kUsage) : 0;
  }
  const Args rest(args.begin() + 1, args.end());
  if (args[0] == "add") return job_add(app, rest);
  if (args[0] == "list") return job_list(app, rest);
  if (args[0] == "show") return job_show(app, rest);
  if (args[0] == "run") return job_run(app, rest);
  if (args[0] == "remove") return job_remove(app, rest);
  throw Error(ErrorKind::kUsage, "unknown job action '" + args[0] + "' (add, list, show, run, remove)");
}

}  // namespace keel::cli
