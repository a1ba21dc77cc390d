#include <unistd.h>

#include "cli/commands.h"
#include "engine/dump.h"
#include "engine/restore.h"
#include "util/error.h"

namespace keel::cli {

int cmd_dump(App& app, const Args& args) {
  std::string spec, path;
  po::options_description opts(
      "keel dump SNAPSHOT PATH: write a file of a snapshot to standard output, or a directory as a POSIX tar "
      "archive (ustar with pax headers; member names are the snapshot paths without the leading '/'). Every "
      "file is checked against its stored hash as it is written");
  opts.add_options()
      ("snapshot", po::value(&spec), "snapshot id or 'latest'")
      ("path", po::value(&path), "file or directory in the snapshot ('/' for all of it)");
  po::positional_options_description pos;
  pos.add("snapshot", 1).add("path", 1);
  po::variables_map vm;
  if (!app.parse(args, opts, pos, vm)) return 0;
  if (spec.empty() || path.empty()) throw Error(ErrorKind::kUsage, "dump needs a SNAPSHOT and a PATH in it");
  auto repo = app.open_repository("keel dump");
  const catalog::SnapshotRecord snapshot = repo->find_snapshot(spec);
  const engine::TreeEntry entry = engine::find_entry(*repo, snapshot, path);
  if (entry.meta.type == engine::NodeType::kFile) {
    engine::stream_file(*repo, snapshot, path, STDOUT_FILENO);
    return 0;
  }
  if (::isatty(STDOUT_FILENO)) {
    throw Error(ErrorKind::kUsage, path + " is a directory: its tar archive goes to a pipe or a file, not a terminal "
                                          "(keel dump ... > archive.tar)");
  }
  engine::dump_tar(*repo, snapshot, path, STDOUT_FILENO);
  return 0;
}

}  // namespace keel::cli
