#include <fnmatch.h>

#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json.h"
#include "engine/restore.h"
#include "util/error.h"

namespace keel::cli {

namespace {
std::string mode_string(const engine::NodeMeta& m) {
  static const char kTypes[] = "-dlpcbs";
  std::string s(1, kTypes[static_cast<int>(m.type)]);
  const char* rwx = "rwxrwxrwx";
  for (int i = 0; i < 9; ++i) s += (m.mode & (0400 >> i)) ? rwx[i] : '-';
  return s;
}
}  // namespace

int cmd_snapshots(App& app, const Args& args) {
  po::options_description opts("keel snapshots: list restore points");
  po::variables_map vm;
  if (!app.parse(args, opts, {}, vm)) return 0;
  auto repo = app.open_repository();
  auto snaps = repo->catalog().list_snapshots();
  // A put-only key reads snapshot headers alone (its own snapshots' records
  // come from its catalog; the rest are not for it to see).
  const bool headers_only = repo->put_only();
  if (app.global.json) {
    Json j;
    j.begin_array();
    for (const auto& s : snaps) {
      j.begin_object().field("id", s.id.hex()).field("time", iso_time(s.time_ns)).field("host", s.host);
      if (headers_only) {
        j.field("tags", s.tags).field("parent", s.parent ? s.parent->hex() : "").end_object();
        continue;
      }
      j.field("username", s.username)
          .field("paths", s.paths)
          .field("tags", s.tags)
          .field("parent", s.parent ? s.parent->hex() : "")
          .field("root", s.root.hex())
          .field("files", s.stats.files)
          .field("bytes", s.stats.bytes)
          .field("bytes_added", s.stats.bytes_added)
          .field("errors", s.stats.errors)
          .end_object();
    }
    j.end_array();
    std::cout << j.str() << "\n";
    return 0;
  }
  if (headers_only) {
    std::printf("%-8s  %-19s  %-12s  %s\n", "ID", "TIME", "HOST", "TAGS");
    for (const auto& s : snaps) {
      std::printf("%-8s  %-19s  %-12s  %s\n", s.id.short_hex().c_str(), local_time(s.time_ns).c_str(), s.host.c_str(),
                  comma_joined(s.tags).c_str());
    }
    std::printf("%zu snapshots (a put-only key sees times, hosts and tags only)\n", snaps.size());
    return 0;
  }
  std::printf("%-8s  %-19s  %-12s  %10s  %10s  %s\n", "ID", "TIME", "HOST", "SIZE", "ADDED", "PATHS");
  for (const auto& s : snaps) {
    std::printf("%-8s  %-19s  %-12s  %10s  %10s  %s%s\n", s.id.short_hex().c_str(), local_time(s.time_ns).c_str(),
                s.host.c_str(), human_bytes(s.stats.bytes).c_str(), human_bytes(s.stats.bytes_added).c_str(),
                comma_joined(s.paths).c_str(), s.tags.empty() ? "" : ("  [" + comma_joined(s.tags) + "]").c_str());
  }
  std::printf("%zu snapshots\n", snaps.size());
  return 0;
}

int cmd_ls(App& app, const Args& args) {
  std::string snapshot = "latest", path = "/";
  bool long_format = false, recursive = false;
  po::options_description opts("keel ls [SNAPSHOT [PATH]]: list files in a snapshot (from the catalog)");
  opts.add_options()
      ("snapshot", po::value(&snapshot), "snapshot id or 'latest'")
      ("path", po::value(&path), "directory or file inside the snapshot")
      ("long,l", po::bool_switch(&long_format), "show mode, owner, size and time")
      ("recursive,R", po::bool_switch(&recursive), "list everything below PATH");
  po::positional_options_description pos;
  pos.add("snapshot", 1).add("path", 1);
  po::variables_map vm;
  if (!app.parse(args, opts, pos, vm)) return 0;
  auto repo = app.open_repository("keel ls");
  catalog::SnapshotRecord snap = repo->find_snapshot(snapshot);
  std::string base = path;
  if (base.empty() || base[0] != '/') base = "/" + base;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  Json j;
  j.begin_array();
  auto print = [&](const std::string& p, const engine::TreeEntry& e) {
    if (app.global.json) {
      j.begin_object()
          .field("path", p)
          .field("type", engine::node_type_name(e.meta.type))
          .field("mode", static_cast<uint64_t>(e.meta.mode))
          .field("uid", static_cast<uint64_t>(e.meta.uid))
          .field("gid", static_cast<uint64_t>(e.meta.gid))
          .field("size", e.meta.size)
          .field("mtime", iso_time(e.meta.mtime_ns));
      if (e.meta.type == engine::NodeType::kSymlink) j.field("target", e.meta.symlink_target);
      j.end_object();
    } else if (long_format) {
      std::string owner = e.meta.user.empty() ? std::to_string(e.meta.uid) : e.meta.user;
      std::string group = e.meta.group.empty() ? std::to_string(e.meta.gid) : e.meta.group;
      std::printf("%s %-8s %-8s %12llu %s %s%s\n", mode_string(e.meta).c_str(), owner.c_str(), group.c_str(),
                  static_cast<unsigned long long>(e.meta.size), local_time(e.meta.mtime_ns).c_str(), p.c_str(),
                  e.meta.type == engine::NodeType::kSymlink ? (" -> " + e.meta.symlink_target).c_str() : "");
    } else {
      std::printf("%s\n", p.c_str());
    }
  };
  engine::TreeEntry top = engine::find_entry(*repo, snap, base);
  if (top.meta.type != engine::NodeType::kDir) {
    print(base, top);
  } else if (recursive) {
    engine::walk_snapshot(*repo, snap, base, print);
  } else {
    engine::Tree tree = repo->load_tree(top.subtree);
    for (const auto& e : tree.entries) print(base == "/" ? "/" + e.meta.name : base + "/" + e.meta.name, e);
  }
  j.end_array();
  if (app.global.json) std::cout << j.str() << "\n";
  return 0;
}

int cmd_find(App& app, const Args& args) {
  std::string pattern, snapshot;
  po::options_description opts(
      "keel find PATTERN: find files in snapshots (from the catalog). A PATTERN with '/' matches the whole "
      "path, otherwise the name; shell globs");
  opts.add_options()
      ("pattern", po::value(&pattern), "glob, e.g. '*.conf' or '/etc/*/nginx.conf'")
      ("snapshot", po::value(&snapshot), "search only this snapshot (id or 'latest'); default: all");
  po::positional_options_description pos;
  pos.add("pattern", 1);
  po::variables_map vm;
  if (!app.parse(args, opts, pos, vm)) return 0;
  if (pattern.empty()) throw Error(ErrorKind::kUsage, "find needs a PATTERN");
  auto repo = app.open_repository("keel find");
  std::vector<catalog::SnapshotRecord> snaps;
  if (snapshot.empty()) {
    snaps = repo->catalog().list_snapshots();
  } else {
    snaps.push_back(repo->find_snapshot(snapshot));
  }
  bool whole_path = pattern.find('/') != std::string::npos;
  Json j;
  j.begin_array();
  uint64_t hits = 0;
  for (const auto& snap : snaps) {
    engine::walk_snapshot(*repo, snap, "/", [&](const std::string& path, const engine::TreeEntry& e) {
      const std::string& subject = whole_path ? path : e.meta.name;
      if (::fnmatch(pattern.c_str(), subject.c_str(), whole_path ? FNM_PATHNAME : 0) != 0) return;
      ++hits;
      if (app.global.json) {
        j.begin_object()
            .field("snapshot", snap.id.hex())
            .field("path", path)
            .field("type", engine::node_type_name(e.meta.type))
            .field("size", e.meta.size)
            .field("mtime", iso_time(e.meta.mtime_ns))
            .end_object();
      } else {
        std::printf("%s  %s  %10s  %s\n", snap.id.short_hex().c_str(), local_time(snap.time_ns).c_str(),
                    human_bytes(e.meta.size).c_str(), path.c_str());
      }
    });
  }
  j.end_array();
  if (app.global.json) std::cout << j.str() << "\n";
  return hits > 0 ? 0 : static_cast<int>(ErrorKind::kNotFound);
}

}  // namespace keel::cli
