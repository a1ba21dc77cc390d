#include "engine/prune.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <set>

#include "engine/catalog_copy.h"
#include "engine/change_log.h"
#include "engine/condemnation.h"
#include "engine/live_blobs.h"
#include "engine/object_lock.h"
#include "engine/content.h"
#include "engine/pack.h"
#include "engine/pack_output.h"
#include "engine/sealed_object.h"
#include "util/checksum.h"
#include "util/error.h"
#include "util/host.h"

namespace keel::engine {
namespace {

using Clock = std::chrono::steady_clock;

// Prune reads every page of the blob and tree tables once: a large page
// cache gains nothing there and would make its memory grow with the index.
constexpr std::string_view kExternalRootsKey = "external-roots";
constexpr uint64_t kScanCacheBytes = 8ull << 20;
// Repack reads live blobs in ranges of at most kRepackRead that skip dead
// gaps larger than kRepackGap, kRepackReaders at a time, and writes the new
// packs in parts of kRepackPart (or the target's minimum),
// kRepackPartsInFlight at a time: a few MiB in all, whatever the pack size.
// Repack waits on the target, not on memory.
constexpr uint64_t kRepackGap = 256ull << 10;
constexpr uint64_t kRepackRead = 4ull << 20;
constexpr size_t kRepackReaders = 2;
constexpr uint64_t kRepackPart = 2ull << 20;
constexpr size_t kRepackPartsInFlight = 4;
// Unfinished uploads are removed only when older than the grace period and
// than this: an hour when no backup runs (a backup started since the leases
// were listed has only young uploads), a day while one does (as backups
// themselves clean up).
constexpr std::chrono::seconds kStaleUploadIdle{3600};
// A record claiming a date more than this before the store wrote it is
// named in a warning: prune writes its records with its own date and the
// store's Last-Modified follows within seconds, plus any clock skew (S3
// refuses requests signed 15 minutes off its clock).
constexpr int64_t kClaimedDateSlack = 3600;
constexpr std::chrono::seconds kStaleUploadBusy{24 * 3600};

double live_share(uint64_t live_bytes, uint64_t size) {
  return size == 0 ? 0.0 : static_cast<double>(live_bytes) / static_cast<double>(size);
}

class PruneRun {
 public:
  PruneRun(Repository& repo, const PruneOptions& options)
      : repo_(repo), options_(options), progress_(options.progress ? *options.progress : unobserved_) {
    result_.dry_run = options.dry_run;
    progress_.phase = PrunePhase::kMark;
    progress_.snapshots_marked = progress_.snapshots_total = 0;
    progress_.bytes_repacked = progress_.bytes_to_repack = 0;
    progress_.packs_settled = progress_.packs_to_settle = 0;
  }

  PruneResult run() {
    auto started = Clock::now();
    refuse_without_external_roots();
    if (!options_.dry_run) lock_ = acquire_lock(repo_.target(), repo_.keys().index, LeaseOptions{.clock = options_.clock});
    repo_.catalog().limit_cache(kScanCacheBytes);
    repo_.sync_catalog();
    mark();
    if (!options_.dry_run) renew_retention();
    plan();
    if (!options_.dry_run) {
      condemn();
      repack();
    }
    settle();
    if (!options_.dry_run) {
      compact_log();
      result_.catalog_copies_removed = trim_catalog_copies(repo_, kKeptCopies);
      remove_orphan_pack_indexes();
      std::chrono::seconds min_age = std::max(options_.grace, running_.empty() ? kStaleUploadIdle : kStaleUploadBusy);
      result_.stale_uploads_removed = repo_.target().remove_stale_uploads(min_age);
    }
    result_.live_blobs = live_->live_blobs();
    result_.trees_walked = live_->trees_walked();
    result_.mark_memory_bytes = live_->memory_bytes();
    result_.seconds = std::chrono::duration<double>(Clock::now() - started).count();
    return std::move(result_);
  }

 private:
  void check_cancel() {
    if (options_.cancel && options_.cancel->load()) throw Error(ErrorKind::kInterrupted, "prune interrupted");
  }

  void mark() {
    packs_ = repo_.catalog().list_packs();
    std::vector<catalog::SnapshotRecord> snapshots = repo_.catalog().list_snapshots();
    live_ = std::make_unique<LiveBlobs>(repo_.catalog(), packs_);
    progress_.snapshots_total = snapshots.size();
    for (const catalog::SnapshotRecord& s : snapshots) {
      check_cancel();
      live_->mark(repo_, s);
      marked_snapshots_.insert(s.id);
      ++progress_.snapshots_marked;
    }
    mark_extra_roots();
    result_.snapshots = snapshots.size();
    result_.packs = packs_.size();
    result_.blobs = live_->blobs();
    result_.unindexed_references = live_->unindexed_references();
  }

  // Object Lock: every pack a snapshot uses stays locked a period ahead.
  void renew_retention() {
    if (!repo_.config().object_lock) return;
    std::vector<LiveBlobs::PackUse> use = live_->pack_use();
    std::vector<Id> used;
    for (size_t i = 0; i < packs_.size(); ++i) {
      if (use[i].live_blobs > 0 && !packs_[i].condemned_unix) used.push_back(packs_[i].id);
    }
    result_.packs_lock_extended = renew_pack_retention(repo_, used).packs_extended;
  }

  // When the Object Lock of a pack to delete ends, if it has not yet.
  std::optional<int64_t> locked_until(const catalog::PackRecord& pack) {
    if (!repo_.config().object_lock) return std::nullopt;
    const int64_t now = targets::unix_now();
    if (pack.retain_until_unix && *pack.retain_until_unix > now) return pack.retain_until_unix;
    std::optional<targets::Retention> retention = active_retention(repo_, pack_key(pack.id));
    if (!retention) return std::nullopt;
    repo_.catalog().set_retain_until(pack.id, retention->until_unix);
    return retention->until_unix;
  }

  void refuse_without_external_roots() {
    if (options_.extra_roots) return;
    if (!repo_.target().head(std::string(kExternalRootsKey))) return;
    const Bytes holder = repo_.target().get(std::string(kExternalRootsKey));
    throw Error(ErrorKind::kUsage,
                repo_.target().describe() + ": chunks of this repository are in use outside its snapshots (by " +
                    std::string(as_chars(holder)) +
                    ", named in its external-roots object); a prune that sees only snapshots would delete them. "
                    "Collect garbage through their holder instead (keel gateway gc --config FILE)");
  }

  void mark_extra_roots() {
    if (options_.extra_roots) options_.extra_roots([this](const Id& chunk) { live_->mark_chunk(chunk); });
  }

  // Phase 1's decisions: packs to condemn and packs to repack.
  void plan() {
    std::vector<LiveBlobs::PackUse> use = live_->pack_use();
    std::vector<size_t> candidates;
    for (size_t i = 0; i < packs_.size(); ++i) {
      const catalog::PackRecord& p = packs_[i];
      result_.pack_bytes += p.size;
      if (p.condemned_unix) continue;  // settled after marking again
      if (use[i].live_blobs == 0) {
        condemned_.push_back(i);
        decide(p, PackAction::kCondemn, 0);
        ++result_.packs_condemned;
      } else if (live_share(use[i].live_bytes, p.size) < options_.repack_threshold) {
        candidates.push_back(i);
      }
    }
    // Emptiest first: the most space for the least copying.
    std::stable_sort(candidates.begin(), candidates.end(), [&](size_t a, size_t b) {
      return live_share(use[a].live_bytes, packs_[a].size) < live_share(use[b].live_bytes, packs_[b].size);
    });
    uint64_t budget = options_.max_repack;
    for (size_t i : candidates) {
      if (packs_[i].size > budget) continue;
      budget -= packs_[i].size;
      repacked_.push_back(i);
      progress_.bytes_to_repack += use[i].live_bytes;
      decide(packs_[i], PackAction::kRepack, use[i].live_bytes);
      ++result_.packs_repacked;
    }
  }

  PackDecision& decide(const catalog::PackRecord& pack, PackAction action, uint64_t live_bytes) {
    return result_.decisions.emplace_back(PackDecision{pack.id, action, pack.size, live_bytes});
  }

  // Records the condemnation on the target first (so that every host's next
  // backup sees it), then in the catalog, then lists the running backups: a
  // backup that listed the condemnations before the record existed wrote its
  // lease before that, so it is on this list and the packs wait for it.
  void condemn() {
    if (condemned_.empty() && repacked_.empty()) return;
    check_cancel();
    Condemnation record;
    record.id = Id::random();
    record.condemned_unix = options_.clock();
    record.host = local_hostname();
    for (const std::vector<size_t>* set : {&condemned_, &repacked_}) {
      for (size_t i : *set) record.packs.push_back(packs_[i].id);
    }
    own_record_ = record.id;
    put_condemnation(repo_.target(), repo_.keys().index, record);
    // Logged before the leases are listed: a backup whose lease this run
    // does not see reads the log after this entry is there.
    ChangeLogEntry logged;
    logged.condemnations_changed = true;
    repo_.log_changes(logged);
    repo_.catalog().transaction([&] {
      for (const Id& pack : record.packs) repo_.catalog().set_condemned(pack, record.condemned_unix);
    });
    std::vector<Id> running;
    for (const LeaseRecord& lease : running_leases()) running.push_back(lease.id);
    record.running_backups = running;
    put_condemnation(repo_.target(), repo_.keys().index, record);
  }

  std::vector<LeaseRecord> running_leases() {
    std::vector<LeaseRecord> alive;
    int64_t now = options_.clock();
    for (LeaseRecord& lease : list_leases(repo_.target(), repo_.keys().index, kRunningPrefix)) {
      if (!lease.expired(now)) alive.push_back(std::move(lease));
    }
    return alive;
  }

  // Copies the live blobs of the packs to repack into new packs. They were
  // condemned first, so reads go to the new copies from now on (here and on
  // every host that syncs later). A blob that fails its checksum is
  // left where it is; its pack then stays in use when settled.
  void repack() {
    if (repacked_.empty()) return;
    progress_.phase = PrunePhase::kRepack;
    PackOutput output(repo_.content(), repo_.config().pack_size, kRepackPart, kRepackPartsInFlight);
    ContentWriter& writer = output.writer();
    ReadOptions read_options{.readers = kRepackReaders, .memory_budget = kRepackReaders * kRepackRead,
                             .cancel = options_.cancel};
    // A blob that fails its checksum stays where it is; its pack then stays in use.
    auto not_repacked = [&](const Error& error) {
      result_.warnings.push_back(std::string(error.what()) + ": not repacked, the pack stays (run keel check)");
    };
    for (size_t i : repacked_) {
      check_cancel();
      const catalog::PackRecord& pack = packs_[i];
      std::vector<catalog::BlobLocation> blobs;
      for (catalog::BlobRecord& b : repo_.catalog().blobs_in_pack(pack.id)) {
        if (live_->live_in(b.id, i)) blobs.push_back({pack.id, std::move(b)});  // not a copy kept elsewhere
      }
      result_.bytes_repacked +=
          copy_sealed(repo_.content(), blobs, kRepackGap, kRepackRead, read_options, writer, not_repacked).stored_bytes;
      progress_.bytes_repacked = result_.bytes_repacked;
    }
    writer.flush();
    ChangeLogEntry logged;
    logged.packs_added = writer.take_committed();
    repo_.log_changes(logged);
    result_.packs_written = writer.packs_committed();
    result_.bytes_written = writer.pack_bytes_committed();
  }

  // Phase 2: every condemned pack is deleted, kept waiting or resurrected.
  // Running backups are listed before the catalog is synced again: one that
  // has ended since wrote its snapshot before removing its lease, so marking
  // the snapshots found now sees what it used.
  void settle() {
    if (lock_) lock_->check_held();
    check_cancel();
    progress_.phase = PrunePhase::kSettle;
    running_ = running_leases();
    result_.running_backups = running_.size();
    std::set<Id> running_ids;
    for (const LeaseRecord& lease : running_) running_ids.insert(lease.id);
    // The records, with the store's times, come from the one listing of condemned/ this makes anyway.
    std::vector<Condemnation> records = list_condemnations(
        repo_.target(), repo_.keys().index,
        [&](const std::string&, const std::string& why) { result_.warnings.push_back(ignored_condemnation(why)); });
    if (options_.dry_run) {
      add_planned_record(records, running_ids);
    } else {
      remove_expired_running_leases();
      repo_.sync_catalog();
      for (const catalog::SnapshotRecord& s : repo_.catalog().list_snapshots()) {
        if (marked_snapshots_.insert(s.id).second) live_->mark(repo_, s);
      }
      mark_extra_roots();
    }
    std::map<Id, catalog::PackRecord> packs;
    for (catalog::PackRecord& p : repo_.catalog().list_packs()) packs.emplace(p.id, std::move(p));
    int64_t now = options_.clock();
    for (const Condemnation& record : records) progress_.packs_to_settle += record.packs.size();
    ChangeLogEntry logged;
    for (Condemnation& record : records) {
      check_cancel();
      bool changed = !record.running_backups.has_value();
      if (!record.running_backups) record.running_backups = std::vector<Id>(running_ids.begin(), running_ids.end());
      // The record this run wrote (or plans) is its own: its date and list are believed.
      const bool own = record.id == own_record_;
      const int64_t since = own ? record.condemned_unix : record.grace_from();
      const std::vector<Id>& listed = *record.running_backups;
      size_t waiting = std::count_if(running_.begin(), running_.end(), [&](const LeaseRecord& lease) {
        return own ? std::find(listed.begin(), listed.end(), lease.id) != listed.end() : record.ran_when_written(lease);
      });
      const bool may_delete = now - since >= options_.grace.count() && waiting == 0;
      if (!(options_.dry_run && own)) seen(record, since, waiting);
      std::vector<Id> remaining;
      for (const Id& id : record.packs) {
        ++progress_.packs_settled;
        auto it = packs.find(id);
        if (it == packs.end()) {  // deleted already (by a run that stopped before updating the record)
          changed = true;
          continue;
        }
        const catalog::PackRecord& pack = it->second;
        // A dry run's planned repack would have moved the live blobs out.
        uint64_t live_bytes = planned_repacks_.count(id) ? 0 : live_bytes_in(pack.id);
        PackDecision& d = decide(pack, PackAction::kWait, live_bytes);
        d.condemned_unix = record.condemned_unix;
        if (!(options_.dry_run && own)) d.condemnation = record.id;
        if (live_bytes > 0) {
          d.action = PackAction::kResurrect;
          ++result_.packs_resurrected;
          if (!options_.dry_run) repo_.catalog().set_condemned(pack.id, std::nullopt);
          changed = true;
        } else if (std::optional<int64_t> until = may_delete ? locked_until(pack) : std::nullopt) {
          d.deletable_unix = *until;  // never a DELETE for a locked object
          ++result_.packs_waiting;
          ++result_.packs_locked;
          result_.bytes_waiting += pack.size;
          remaining.push_back(id);
        } else if (may_delete && !planned_repacks_.count(id) && !copies_verified(pack)) {
          d.action = PackAction::kResurrect;  // the only good copy of a blob a snapshot needs: it stays
          ++result_.packs_resurrected;
          if (!options_.dry_run) repo_.catalog().set_condemned(pack.id, std::nullopt);
          changed = true;
        } else if (may_delete) {
          d.action = PackAction::kDelete;
          ++result_.packs_deleted;
          result_.bytes_deleted += pack.size;
          if (!options_.dry_run) {
            find_relocated(pack, logged.relocated);
            repo_.target().remove(pack_key(pack.id));
            repo_.catalog().remove_pack(pack.id);
            logged.packs_removed.push_back(pack.id);
          }
          changed = true;
        } else {
          d.deletable_unix = since + options_.grace.count();
          d.waiting_for_backups = waiting;
          ++result_.packs_waiting;
          result_.bytes_waiting += pack.size;
          remaining.push_back(id);
        }
      }
      if (options_.dry_run || !changed) continue;
      record.packs = std::move(remaining);
      if (record.packs.empty()) {
        repo_.target().remove(condemnation_key(record.id));
      } else {
        // Rewritten, the object gets a new Last-Modified, from which its
        // packs' grace counts again: the record says so too, so that its
        // date and the store's agree (no warning for it).
        record.condemned_unix = now;
        put_condemnation(repo_.target(), repo_.keys().index, record);
      }
      logged.condemnations_changed = true;
    }
    if (!options_.dry_run) repo_.log_changes(logged);
  }

  // Reports a record on the target as judged, and warns of one dated well
  // before the store wrote it: forged, or from a host whose clock is behind.
  void seen(const Condemnation& record, int64_t since, size_t waiting) {
    result_.condemnations.push_back(CondemnationSeen{record.id, record.host, record.condemned_unix,
                                                     record.modified_unix, since, record.packs.size(), waiting});
    if (record.modified_unix - record.condemned_unix <= kClaimedDateSlack) return;
    result_.warnings.push_back(
        condemnation_key(record.id) + " (host " + record.host + ") claims it was written " +
        targets::iso8601_utc(record.condemned_unix) + ", but " + repo_.target().describe() + " wrote it at " +
        targets::iso8601_utc(record.modified_unix) + ": its " + std::to_string(record.packs.size()) +
        " packs' grace counts from then, and they wait for every backup running then. A record dated before it was "
        "written is forged (sealed by a put-only or stolen key) or comes from a host whose clock is behind; run keel "
        "check after this prune");
  }

  // Whether every blob a snapshot needs that `pack` holds reads back from
  // another pack as the blob its id names. Nothing on the target is trusted
  // before a delete: a pack written with a put-only (or stolen) key may
  // index blobs under ids its bytes do not match, and such a key can also
  // write a condemnation naming any pack. Usually there is nothing to read
  // (an unused pack) or little (blobs stored twice by concurrent backups, or
  // moved out by a repack). A pack holding the only good copy stays, named
  // in a warning.
  bool copies_verified(const catalog::PackRecord& pack) {
    for (const catalog::BlobRecord& b : repo_.catalog().blobs_in_pack(pack.id)) {
      if (!live_->live(b.id)) continue;
      // The copy reads go to: one in a pack in use (this one is condemned).
      std::optional<catalog::BlobLocation> kept = repo_.catalog().find_blob(b.id);
      std::optional<std::string> why = !kept || kept->pack == pack.id ? std::optional<std::string>("no other copy")
                                                                       : repo_.content().check_copy(*kept);
      if (!why) continue;
      result_.warnings.push_back("pack " + pack.id.hex() + " was not deleted: it holds blob " + b.id.hex() +
                                 ", which a snapshot needs, and the copy kept elsewhere is not that blob (" + *why +
                                 "); run keel check --read-data");
      return false;
    }
    return true;
  }

  // The live blobs of a pack about to be deleted that this catalog indexes
  // in another pack (stored twice, by concurrent backups): a catalog that
  // indexed them in this one learns from the log where they live on.
  void find_relocated(const catalog::PackRecord& pack, std::vector<LoggedRelocation>& relocated) {
    std::vector<catalog::BlobRecord> header;
    try {
      header = read_pack_header(repo_.target(), repo_.keys(), pack.id, pack.size).blobs;
    } catch (const Error&) {
      return;  // unreadable: nothing to tell (check reports it)
    }
    std::vector<Id> ids;
    for (const catalog::BlobRecord& b : header) {
      if (live_->live(b.id)) ids.push_back(b.id);
    }
    for (std::optional<catalog::BlobLocation>& loc : repo_.catalog().find_blobs(ids)) {
      if (loc && loc->pack != pack.id) relocated.push_back(LoggedRelocation{std::move(*loc), std::nullopt});
    }
  }

  // Log entries older than the retention go; the entry naming them comes
  // first, so a catalog that had not applied one of them syncs in full.
  void compact_log() {
    int64_t cut_ns = (options_.clock() - static_cast<int64_t>(options_.log_retention.count())) * 1'000'000'000;
    ChangeLogEntry compaction;
    const bool locking = repo_.config().object_lock.has_value();
    for (const std::string& key : list_log_keys(repo_.target())) {
      const int64_t written_ns = *log_key_time(key);
      if (written_ns >= cut_ns) continue;
      // Object Lock: an entry is compacted once its lock has ended, never named while it stays.
      if (locking && (still_locked_since(repo_, written_ns / 1'000'000'000) || active_retention(repo_, key))) continue;
      compaction.entries_compacted.push_back(key);
    }
    repo_.log_changes(compaction);
    for (const std::string& key : compaction.entries_compacted) repo_.target().remove(key);
  }

  // Pack indexes (engine/migrate.h) of packs no longer on the target: of
  // those deleted now, or by a run that stopped before removing them.
  void remove_orphan_pack_indexes() {
    if (repo_.config().version < 2) return;
    std::vector<Id> indexes = list_object_ids(repo_.target(), kPackIndexPrefix);
    if (indexes.empty()) return;
    std::vector<Id> listed = list_object_ids(repo_.target(), "packs/");
    const std::set<Id> packs(listed.begin(), listed.end());
    for (const Id& id : indexes) {
      if (!packs.count(id)) remove_unless_locked(repo_, pack_index_key(id));
    }
  }

  // A dry run condemns nothing, so it judges the packs it would condemn as
  // a record written now; repacked ones count as emptied by the copy.
  void add_planned_record(std::vector<Condemnation>& records, const std::set<Id>& running_ids) {
    Condemnation planned;
    planned.id = Id::random();
    own_record_ = planned.id;
    planned.condemned_unix = options_.clock();
    planned.running_backups = std::vector<Id>(running_ids.begin(), running_ids.end());
    for (size_t i : condemned_) planned.packs.push_back(packs_[i].id);
    for (size_t i : repacked_) {
      planned.packs.push_back(packs_[i].id);
      planned_repacks_.insert(packs_[i].id);
    }
    if (!planned.packs.empty()) records.push_back(std::move(planned));
  }

  void remove_expired_running_leases() {
    int64_t now = options_.clock();
    for (const LeaseRecord& lease : list_leases(repo_.target(), repo_.keys().index, kRunningPrefix)) {
      if (lease.expired(now)) repo_.target().remove(lease_key(kRunningPrefix, lease.id));  // a backup that died
    }
  }

  // Stored bytes of the live blobs whose copy to read is the one in `pack`:
  // a live blob also stored in a pack in use does not keep this one.
  uint64_t live_bytes_in(const Id& pack) {
    std::vector<catalog::BlobRecord> blobs = repo_.catalog().blobs_in_pack(pack);
    std::vector<Id> ids;
    for (const catalog::BlobRecord& b : blobs) ids.push_back(b.id);
    std::vector<std::optional<catalog::BlobLocation>> kept = repo_.catalog().find_blobs(ids);
    uint64_t bytes = 0;
    for (size_t i = 0; i < blobs.size(); ++i) {
      if (live_->live(blobs[i].id) && kept[i] && kept[i]->pack == pack) bytes += blobs[i].stored_length;
    }
    return bytes;
  }

  Repository& repo_;
  const PruneOptions& options_;
  PruneProgress unobserved_;  // where progress goes when nobody asked for it
  PruneProgress& progress_;
  PruneResult result_;
  std::unique_ptr<Lease> lock_;
  std::vector<catalog::PackRecord> packs_;  // as marked; indexes below refer to it
  std::unique_ptr<LiveBlobs> live_;
  std::set<Id> marked_snapshots_;
  std::vector<size_t> condemned_;
  std::vector<size_t> repacked_;
  std::set<Id> planned_repacks_;  // dry run only
  std::optional<Id> own_record_;  // the record condemn() wrote, or the dry run's planned one
  std::vector<LeaseRecord> running_;
};

}  // namespace

const char* prune_phase_name(PrunePhase phase) {
  switch (phase) {
    case PrunePhase::kMark: return "mark";
    case PrunePhase::kRepack: return "repack";
    case PrunePhase::kSettle: return "settle";
  }
  return "?";
}

const char* pack_action_name(PackAction action) {
  switch (action) {
    case PackAction::kCondemn: return "condemn";
    case PackAction::kRepack: return "repack";
    case PackAction::kDelete: return "delete";
    case PackAction::kWait: return "wait";
    case PackAction::kResurrect: return "resurrect";
  }
  return "?";
}

PruneResult prune(Repository& repo, const PruneOptions& options) { return PruneRun(repo, options).run(); }

void declare_external_roots(Repository& repo, const std::string& holder) {
  if (repo.target().head(std::string(kExternalRootsKey))) return;
  repo.target().put(std::string(kExternalRootsKey), as_bytes(holder));
}

}  // namespace keel::engine
