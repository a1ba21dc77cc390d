#include <unistd.h>

#include <iostream>
#include <set>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json.h"
#include "engine/lease.h"
#include "util/error.h"

namespace keel::cli {
namespace {

struct Found {
  std::string key;   // locks/<id> or running/<id>
  const char* kind;  // what holds it
  engine::LeaseRecord lease;
};

std::string describe(const Found& f, int64_t now) {
  const engine::LeaseRecord& l = f.lease;
  std::string state = l.abandoned_here() ? "its process is gone"
                      : l.expired(now)   ? "expired " + local_time(l.expires_unix * 1'000'000'000)
                                         : "valid until " + local_time(l.expires_unix * 1'000'000'000);
  return f.key + "  " + f.kind + " on " + l.host + " (pid " + std::to_string(l.pid) + ") since " +
         local_time(l.created_unix * 1'000'000'000) + ", " + state;
}

bool confirmed(size_t count) {
  if (!::isatty(STDIN_FILENO)) {
    throw Error(ErrorKind::kUsage, "not on a terminal: give --yes to remove the " + std::to_string(count) +
                                       " lease(s) listed without asking");
  }
  std::cerr << "remove " << count << " lease(s)? [y/N] " << std::flush;
  std::string answer;
  std::getline(std::cin, answer);
  return answer == "y" || answer == "Y" || answer == "yes";
}

}  // namespace

int cmd_unlock(App& app, const Args& args) {
  bool all = false, yes = false;
  po::options_description opts(
      "keel unlock: remove stale maintenance locks (locks/) and backup leases (running/): expired ones, and those of "
      "processes on this host that are gone");
  opts.add_options()
      ("all", po::bool_switch(&all), "remove every lock and lease, also unexpired ones of other hosts: only when no "
                                     "keel process uses the repository")
      ("yes,y", po::bool_switch(&yes), "do not ask for confirmation (for scripts)");
  po::variables_map vm;
  if (!app.parse(args, opts, {}, vm)) return 0;
  app.refuse_if_append_only("keel unlock", "deletes leases");

  auto repo = app.open_repository("keel unlock");
  const int64_t now = engine::unix_now();
  std::vector<Found> remove, keep;
  for (const auto& [prefix, kind] : {std::pair{engine::kLockPrefix, "maintenance lock"},
                                     std::pair{engine::kRunningPrefix, "backup"}}) {
    for (engine::LeaseRecord& lease : engine::list_leases(repo->target(), repo->keys().index, prefix)) {
      Found f{engine::lease_key(prefix, lease.id), kind, std::move(lease)};
      (all || f.lease.stale(now) ? remove : keep).push_back(std::move(f));
    }
  }
  if (!app.global.json) {
    for (const Found& f : keep) app.say("in use: " + describe(f, now));
    for (const Found& f : remove) app.say("stale:  " + describe(f, now));
  }
  size_t removed = 0;
  if (!remove.empty() && (yes || confirmed(remove.size()))) {
    for (const Found& f : remove) {
      repo->target().remove(f.key);
      ++removed;
    }
  }
  if (app.global.json) {
    if (removed == 0) {  // declined: all of them stay
      keep.insert(keep.end(), remove.begin(), remove.end());
      remove.clear();
    }
    Json j;
    j.begin_object();
    const auto list = [&](const char* name, const std::vector<Found>& found) {
      j.key(name).begin_array();
      for (const Found& f : found) {
        j.begin_object()
            .field("key", f.key)
            .field("kind", std::string(f.kind))
            .field("host", f.lease.host)
            .field("pid", f.lease.pid)
            .field("created_unix", f.lease.created_unix)
            .field("expires_unix", f.lease.expires_unix)
            .end_object();
      }
      j.end_array();
    };
    list("removed", remove);
    list("kept", keep);
    j.end_object();
    std::cout << j.str() << "\n";
  } else {
    app.say(remove.empty() ? "nothing to remove" : "removed " + std::to_string(removed) + " lease(s)");
  }
  return 0;
}

}  // namespace keel::cli
