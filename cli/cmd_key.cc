#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json.h"
#include "engine/catalog_copy.h"
#include "util/error.h"

namespace keel::cli {
namespace {

std::string new_password(const std::string& file) {
  if (!file.empty()) {
    std::ifstream in(file);
    std::string line;
    if (!in || !std::getline(in, line) || line.empty()) throw Error(ErrorKind::kUsage, "cannot read a password from " + file);
    return line;
  }
  if (const char* p = std::getenv("KEEL_NEW_PASSWORD"); p && *p) return p;
  std::string a = prompt_secret("new password: ");
  if (a.empty()) throw Error(ErrorKind::kUsage, "no new password: use --new-password-file or KEEL_NEW_PASSWORD");
  if (prompt_secret("again: ") != a) throw Error(ErrorKind::kUsage, "the passwords differ");
  return a;
}

}  // namespace

int cmd_key(App& app, const Args& args) {
  std::string action, id, new_password_file;
  bool put_only = false;
  po::options_description opts("keel key list|add|remove ID: manage the passwords that open the repository");
  opts.add_options()
      ("action", po::value(&action), "list, add or remove")
      ("id", po::value(&id), "key slot id (or a unique prefix) for remove")
      ("new-password-file", po::value(&new_password_file), "read the new password from this file (add)")
      ("put-only", po::bool_switch(&put_only),
       "add: a key that writes backups but reads nothing back (format-2 repositories; docs/repository-format.md)");
  po::positional_options_description pos;
  pos.add("action", 1).add("id", 1);
  po::variables_map vm;
  if (!app.parse(args, opts, pos, vm)) return 0;
  if (action.empty()) throw Error(ErrorKind::kUsage, "key needs an action: list, add or remove");
  if (put_only && action != "add") throw Error(ErrorKind::kUsage, "--put-only goes with key add");
  if (action == "remove") app.refuse_if_append_only("keel key remove", "deletes a key slot");
  auto repo = app.open_repository("keel key");
  if (action == "list") {
    auto slots = repo->list_key_slots();
    Json j;
    j.begin_array();
    for (const auto& s : slots) {
      bool current = s.id == repo->key_slot();
      if (app.global.json) {
        j.begin_object()
            .field("id", s.id.hex())
            .field("current", current)
            .field("created", iso_time(s.created_unix * 1000000000))
            .field("host", s.host)
            .field("username", s.username)
            .field("kind", std::string(engine::key_kind_name(s.kind)))
            .end_object();
      } else {
        std::printf("%s %s  %-8s  %s  %s@%s\n", current ? "*" : " ", s.id.short_hex().c_str(),
                    std::string(engine::key_kind_name(s.kind)).c_str(), local_time(s.created_unix * 1000000000).c_str(),
                    s.username.c_str(), s.host.c_str());
      }
    }
    j.end_array();
    if (app.global.json) std::cout << j.str() << "\n";
    return 0;
  }
  if (action == "add") {
    engine::KeySlotInfo slot = repo->add_key_slot(new_password(new_password_file),
                                                  put_only ? engine::KeyKind::kPutOnly : engine::KeyKind::kFull);
    std::string kind(engine::key_kind_name(slot.kind));
    if (app.global.json) {
      std::cout << Json().begin_object().field("id", slot.id.hex()).field("kind", kind).end_object().str() << "\n";
    } else {
      app.say("added " + kind + " key slot " + slot.id.short_hex());
    }
    return 0;
  }
  if (action == "remove") {
    if (id.size() < 4) throw Error(ErrorKind::kUsage, "key remove needs a slot id (4+ hex digits; see key list)");
    std::vector<Id> hits;
    for (const auto& s : repo->list_key_slots()) {
      if (s.id.hex().compare(0, id.size(), id) == 0) hits.push_back(s.id);
    }
    if (hits.empty()) throw Error(ErrorKind::kNotFound, "no key slot " + id);
    if (hits.size() > 1) throw Error(ErrorKind::kUsage, "key slot id " + id + " is ambiguous");
    repo->remove_key_slot(hits.front());
    app.say("removed key slot " + hits.front().short_hex());
    return 0;
  }
  throw Error(ErrorKind::kUsage, "unknown key action '" + action + "' (list, add, remove)");
}

int cmd_catalog(App& app, const Args& args) {
  std::string action;
  po::options_description opts("keel catalog rebuild: rebuild the local catalog from the target alone");
  opts.add_options()("action", po::value(&action), "rebuild");
  po::positional_options_description pos;
  pos.add("action", 1);
  po::variables_map vm;
  if (!app.parse(args, opts, pos, vm)) return 0;
  if (action != "rebuild") throw Error(ErrorKind::kUsage, "unknown catalog action '" + action + "' (rebuild)");
  auto repo = app.open_repository();
  repo->rebuild_catalog();
  // The index came from packs and snapshots; history only a copy holds.
  engine::HistoryImport imported = engine::import_newest_history(*repo);
  const std::optional<engine::CatalogCopyInfo>& copy = imported.copy;
  size_t history = imported.records;
  auto& cat = repo->catalog();
  size_t snapshots = cat.list_snapshots().size(), packs = cat.list_packs().size();
  if (app.global.json) {
    std::cout << Json()
                     .begin_object()
                     .field("catalog", repo->catalog_path())
                     .field("snapshots", static_cast<uint64_t>(snapshots))
                     .field("packs", static_cast<uint64_t>(packs))
                     .field("blobs", cat.blob_count())
                     .field("history_copy", copy ? copy->key : "")
                     .field("history_records_added", static_cast<uint64_t>(history))
                     .end_object()
                     .str()
              << "\n";
  } else {
    app.say("rebuilt catalog " + repo->catalog_path() + ": " + std::to_string(snapshots) + " snapshots, " +
            std::to_string(packs) + " packs, " + std::to_string(cat.blob_count()) + " blobs");
    if (copy) {
      app.say("history: " + std::to_string(history) + " records merged from " + copy->key);
    } else {
      app.say("history: no catalog copy on the target");
    }
  }
  return 0;
}

}  // namespace keel::cli
