#include "engine/migrate.h"

#include <map>
#include <mutex>
#include <set>

#include "engine/change_log.h"
#include "engine/condemnation.h"
#include "engine/lease.h"
#include "engine/pack.h"
#include "engine/repository_records.h"
#include "engine/sealed_object.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace keel::engine {
namespace {

constexpr size_t kIndexers = 8;

class MigrateRun {
 public:
  MigrateRun(Repository& repo, const MigrateOptions& options) : repo_(repo), target_(repo.target()), options_(options) {}

  MigrateResult run() {
    repo_.require_full_key("keel migrate");
    result_.format_before = repo_.config().version;
    const bool switched_before = repo_.config().version >= 2;
    // Made as format 2: every pack has its header under the index key.
    if (switched_before && !target_.head(std::string(kMigratedKeysKey))) {
      result_.made_as_format2 = true;
      return std::move(result_);
    }
    std::unique_ptr<Lease> lock = acquire_lock(target_, repo_.keys().index);
    MasterKeys keys = switched_before ? repo_.keys() : format2_keys();
    index_packs(keys);
    if (switched_before) return std::move(result_);
    remove_condemnations();
    check_cancel();
    lock->check_held();
    RepoConfig config = repo_.config();
    config.version = 2;
    write_config(target_, config, keys);  // the commit point
    result_.switched = true;
    // Packs that backups running meanwhile wrote during the first pass.
    index_packs(keys);
    return std::move(result_);
  }

 private:
  void check_cancel() const {
    if (options_.cancel && options_.cancel->load()) throw Error(ErrorKind::kInterrupted, "keel migrate interrupted");
  }

  // keys-v2: an earlier run's, which pack indexes already written use, or new ones.
  MasterKeys format2_keys() {
    const std::string what = target_.describe() + "/" + std::string(kMigratedKeysKey);
    if (target_.head(std::string(kMigratedKeysKey))) {
      try {
        return open_migrated_keys(repo_.keys(), target_.get(std::string(kMigratedKeysKey)), what);
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::kIntegrity) throw;
        // Nothing reads it before the config is switched: one that does not
        // open (damaged, or planted by someone without the data key) is replaced.
        result_.warnings.push_back(std::string(e.what()) + ": replaced");
      }
    }
    MasterKeys keys = repo_.keys().migrated();
    target_.put(std::string(kMigratedKeysKey), seal_migrated_keys(keys));
    result_.keys_written = true;
    return keys;
  }

  // A pack index for every version-1 pack that has no intact one; packs
  // are judged kIndexers at a time (each a ranged read and a PUT, which a
  // remote store answers in tens of milliseconds).
  void index_packs(const MasterKeys& keys) {
    std::map<Id, uint64_t> packs;
    target_.list("packs/", [&](const targets::ObjectInfo& o) {
      if (std::optional<Id> id = id_from_key(o.key)) packs[*id] = o.size;
    });
    std::vector<Id> listed = list_object_ids(target_, kPackIndexPrefix);
    const std::set<Id> indexed(listed.begin(), listed.end());
    result_.packs = packs.size();
    ThreadPool pool(kIndexers, 2 * kIndexers);
    TaskGroup group;
    try {
      for (const auto& [id, size] : packs) {
        check_cancel();
        if (group.failed()) break;
        if (!seen_.insert(id).second) continue;  // judged by the first pass
        group.started();
        pool.submit(group.wrap([this, &keys, id = id, size = size, has_index = indexed.count(id) > 0] {
          index_pack(keys, id, size, has_index);
        }));
      }
    } catch (...) {
      try {
        group.wait();
      } catch (...) {
      }
      throw;
    }
    group.wait();
  }

  void index_pack(const MasterKeys& keys, const Id& id, uint64_t size, bool has_index) {
    if (has_index && pack_index_intact(target_, keys.index, id, size)) {
      std::lock_guard lock(mu_);
      ++result_.packs_already_indexed;
      return;
    }
    std::optional<std::vector<catalog::BlobRecord>> header;
    try {
      header = read_version1_pack_header(target_, keys.data, id, size);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kNotFound) return;  // deleted since it was listed
      if (e.kind() != ErrorKind::kIntegrity) throw;
      std::lock_guard lock(mu_);
      result_.not_indexed.push_back(e.what());
      return;
    }
    if (!header) return;  // version 2: its header is under the index key already
    put_pack_index(target_, keys.index, id, *header);
    std::lock_guard lock(mu_);
    ++result_.packs_indexed;
  }

  // Condemnation records are sealed under the data key, which format-2
  // readers do not open them with. Removing one gives its packs back to use
  // (nothing is lost); the next prune condemns them again, and its grace
  // period starts over.
  void remove_condemnations() {
    std::vector<Condemnation> records = list_condemnations(
        target_, repo_.keys().index,
        [&](const std::string&, const std::string& why) { result_.warnings.push_back(ignored_condemnation(why)); });
    if (records.empty()) return;
    for (const Condemnation& record : records) {
      check_cancel();
      target_.remove(condemnation_key(record.id));
      repo_.catalog().transaction([&] {
        for (const Id& pack : record.packs) {
          if (repo_.catalog().has_pack(pack)) repo_.catalog().set_condemned(pack, std::nullopt);
        }
      });
      ++result_.condemnations_removed;
    }
    ChangeLogEntry logged;
    logged.condemnations_changed = true;
    repo_.log_changes(logged);
  }

  Repository& repo_;
  targets::Target& target_;
  const MigrateOptions& options_;
  std::mutex mu_;  // result_ while packs are indexed
  MigrateResult result_;
  std::set<Id> seen_;  // packs judged by this run
};

}  // namespace

MigrateResult migrate_to_format2(Repository& repo, const MigrateOptions& options) {
  return MigrateRun(repo, options).run();
}

}  // namespace keel::engine
