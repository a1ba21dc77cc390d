// A job: a named, stored backup recipe (what to back up, where, when, how
// long to keep it) that `keel job run` and `keel scheduler` execute.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/forget.h"
#include "engine/snapshot_selection.h"
#include "jobs/clock.h"
#include "jobs/cron.h"
#include "targets/open_target.h"

namespace keel::jobs {

struct Job {
  std::string name;  // letters, digits, '.', '_', '-': it names a lock file, a tag and a systemd instance
  std::string repo;  // repository location, as --repo takes it
  // Target settings that are not secrets; credentials come from the
  // environment or the AWS profile when the job runs.
  std::string endpoint;
  std::string region;
  std::string aws_profile;
  std::string ca_file;
  bool virtual_hosted = false;
  std::string rdma;  // --rdma HOST:PORT of a keel gateway's RDMA data plane (docs/rdma.md); empty: HTTP
  // --append-only: runs never delete or overwrite on the target (docs/immutable.md); no retention then.
  bool append_only = false;
  // A file holding the password; never the password itself. Empty:
  // KEEL_PASSWORD or KEEL_PASSWORD_FILE in the environment of the run.
  std::string password_file;
  // The repository's catalog, found when the job was added, so its run
  // history can be read without the password.
  std::string catalog;
  std::vector<std::string> paths;  // absolute
  std::vector<std::string> excludes;
  // A stream job backs up what this shell command (/bin/sh -c) prints, as the
  // one file `stream_name`, in place of paths; no snapshot unless it exits 0.
  std::string stream_command;
  std::string stream_name;
  std::vector<std::string> tags;  // besides tag()
  uint64_t memory_mib = 256;      // data in flight at most (engine::BackupOptions::memory_budget)
  std::string schedule;           // cron expression (jobs/cron.h)
  std::string time_zone;          // IANA name
  engine::RetentionPolicy retention;       // empty: keep every snapshot
  std::optional<std::chrono::seconds> rpo;  // how old the newest good backup may get
  // A copy job (--copy-to): its runs copy the selected snapshots of `repo`
  // into this repository (keel copy, docs/copy.md) instead of backing up;
  // empty: a backup job. Copy jobs have no paths, excludes, tags or retention.
  std::string copy_to;
  std::string copy_password_file;  // the destination's password file; never the password
  std::string copy_catalog;        // the destination's catalog, found when the job was added
  engine::SnapshotSelection copy_selection;             // hosts, tags, paths (no times)
  std::optional<std::chrono::seconds> copy_newer_than;  // only snapshots taken within this long
  std::string before_hook;  // shell commands (/bin/sh -c); empty: none
  std::string after_hook;
  int64_t created_ns = 0;  // Unix time the job was added
  // The scheduler's bookkeeping: every fire of the schedule up to this time
  // is handled (run, or folded into one catch-up run). Manual runs leave it
  // alone. Empty: the scheduler never started the job; fires count from
  // created_ns.
  std::optional<int64_t> handled_until_ns;

  bool is_copy() const { return !copy_to.empty(); }
  std::string tag() const { return "job:" + name; }  // on every snapshot the job makes
  CronSchedule cron() const { return CronSchedule::parse(schedule, time_zone); }
  targets::TargetOptions target_options() const;
  // The first fire not handled yet (it may be past: a missed run).
  TimePoint next_fire() const;
};

// Throws Error(kUsage) unless `name` can name a job.
void validate_job_name(std::string_view name);

}  // namespace keel::jobs
