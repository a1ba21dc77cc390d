#include "jobs/job.h"

#include <algorithm>
#include <cctype>

#include "util/error.h"

namespace keel::jobs {

namespace {
constexpr size_t kMaxNameLength = 64;
}  // namespace

targets::TargetOptions Job::target_options() const {
  targets::TargetOptions options;
  options.endpoint = endpoint;
  options.region = region;
  options.profile = aws_profile;
  options.ca_file = ca_file;
  options.virtual_hosted = virtual_hosted;
  options.rdma = rdma;
  if (append_only) options.object_acl = targets::kBucketOwnerFullControl;
  return options;
}

TimePoint Job::next_fire() const { return cron().next_after(from_unix_ns(handled_until_ns.value_or(created_ns))); }

void validate_job_name(std::string_view name) {
  bool ok = !name.empty() && name.size() <= kMaxNameLength && name[0] != '.' && name[0] != '-' &&
            std::all_of(name.begin(), name.end(), [](char c) {
              return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
            });
  if (!ok) {
    throw Error(ErrorKind::kUsage, "job name '" + std::string(name) + "': use 1 to " + std::to_string(kMaxNameLength) +
                                       " letters, digits, '.', '_' or '-', not starting with '.' or '-'");
  }
}

}  // namespace keel::jobs
