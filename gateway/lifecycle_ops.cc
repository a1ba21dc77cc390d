// The lifecycle operations of S3Api: Get/Put/DeleteBucketLifecycle, the
// x-amz-expiration and x-amz-abort-* headers, and the sweep that carries
// the rules out (S3Api::sweep_lifecycle).
#include "gateway/object_lock.h"
#include "gateway/s3_api.h"
#include "gateway/s3_api_util.h"
#include "util/error.h"

namespace keel::gateway {

namespace {

// Versions or uploads read per page of a sweep, the mutex released between pages.
constexpr uint64_t kSweepPage = 500;

}  // namespace

void S3Api::set_lifecycle(Bucket& bucket, std::shared_ptr<const LifecycleConfiguration> lifecycle) {
  std::lock_guard lock(mutex_);
  const std::string xml = lifecycle ? lifecycle->to_xml() : std::string();
  metadata_.transaction([&] { metadata_.set_lifecycle(bucket.record.name, xml); });
  bucket.record.lifecycle = xml;
  bucket.lifecycle = std::move(lifecycle);
}

Response S3Api::get_bucket_lifecycle(const Call& call) {
  const auto bucket = bucket_for(call, Access::kOwner);
  std::lock_guard lock(mutex_);
  if (!bucket->lifecycle) {
    throw S3Error("NoSuchLifecycleConfiguration", "The lifecycle configuration does not exist");
  }
  return xml_response(bucket->record.lifecycle);
}

std::unique_ptr<RequestBody> S3Api::put_bucket_lifecycle(const Call& call) {
  const auto bucket = bucket_for(call, Access::kOwner);
  return small_body(call, [this, bucket](const std::string& body) {
    // Stored as it parses back (generated IDs included): what GetBucketLifecycle shows is what applies.
    set_lifecycle(*bucket, std::make_shared<const LifecycleConfiguration>(LifecycleConfiguration::parse(body)));
    return Response{};
  });
}

Response S3Api::delete_bucket_lifecycle(const Call& call) {
  const auto bucket = bucket_for(call, Access::kOwner);
  set_lifecycle(*bucket, nullptr);
  Response r;
  r.status = 204;
  return r;
}

void S3Api::add_expiration_header(Response& r, const Bucket& bucket, const ObjectRecord& object) {
  std::shared_ptr<const LifecycleConfiguration> config;
  {
    std::lock_guard lock(mutex_);
    config = bucket.lifecycle;
  }
  if (!config) return;
  // Named in real days as S3 and RGW do, also under a debug day: clients read it as a date.
  if (const auto due = config->expiration(object, LifecycleDay{})) {
    r.headers.emplace_back("x-amz-expiration", expiration_header(*due));
  }
}

void S3Api::add_abort_headers(Response& r, const Bucket& bucket, const UploadRecord& upload) {
  std::shared_ptr<const LifecycleConfiguration> config;
  {
    std::lock_guard lock(mutex_);
    config = bucket.lifecycle;
  }
  if (!config) return;
  if (const auto due = config->abort_date(upload.key, upload.initiated_ns, LifecycleDay{})) {
    r.headers.emplace_back("x-amz-abort-date", http_date(due->at_ns / 1'000'000'000));
    r.headers.emplace_back("x-amz-abort-rule-id", due->rule_id);
  }
}

S3Api::LifecycleSweep S3Api::sweep_lifecycle(int64_t now_ns, uint64_t budget) {
  std::lock_guard sweeping(sweep_mutex_);
  LifecycleSweep report;
  std::vector<std::shared_ptr<Bucket>> swept;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [name, bucket] : buckets_) {
      if (bucket->lifecycle) swept.push_back(bucket);
    }
  }
  std::erase_if(sweep_cursors_, [&](const auto& entry) {
    return std::none_of(swept.begin(), swept.end(), [&](const auto& b) { return b->record.name == entry.first; });
  });
  report.finished = true;
  for (const auto& bucket : swept) {
    SweepCursor& cursor = sweep_cursors_[bucket->record.name];
    bool more = true;
    while (more && report.examined < budget) {
      more = sweep_page(*bucket, cursor, now_ns, std::min(kSweepPage, budget - report.examined), report);
    }
    if (more) {
      report.finished = false;
    } else {
      sweep_cursors_.erase(bucket->record.name);  // swept to the end: the next sweep starts over
    }
  }
  return report;
}

bool S3Api::sweep_page(Bucket& bucket, SweepCursor& cursor, int64_t now_ns, uint64_t limit,
                       LifecycleSweep& report) {
  std::shared_ptr<const LifecycleConfiguration> config;
  {
    std::lock_guard lock(mutex_);
    config = bucket.lifecycle;
  }
  if (!config) return false;
  if (cursor.config != config) cursor = SweepCursor{config};
  // The versions under each prefix of the rules that act on versions, then
  // the uploads under each prefix of the rules that abort uploads.
  std::vector<std::string> prefixes = config->prefixes(cursor.uploads);
  if (!cursor.uploads && cursor.prefix >= prefixes.size()) {
    cursor = SweepCursor{config, 0, true};
    prefixes = config->prefixes(true);
  }
  if (cursor.prefix >= prefixes.size()) return false;
  const std::string prefix = prefixes[cursor.prefix];
  const std::string& name = bucket.record.name;
  const auto next_range = [&] {
    cursor = SweepCursor{config, cursor.prefix + 1, cursor.uploads};
    return true;  // the next call finds out whether a range is left
  };

  if (cursor.uploads) {
    std::vector<UploadRecord> uploads;
    {
      std::lock_guard lock(mutex_);
      uploads = metadata_.list_uploads(name, prefix, cursor.after_key, cursor.after_version, limit);
    }
    report.examined += uploads.size();
    std::vector<std::string> files;
    group_commit_.run([&] {
      for (const auto& upload : uploads) {
        const auto due = config->abort_date(upload.key, upload.initiated_ns, lifecycle_day_);
        if (!due || due->at_ns > now_ns || !metadata_.upload(upload.upload_id)) continue;
        const auto removed = metadata_.delete_upload(upload.upload_id);
        files.insert(files.end(), removed.begin(), removed.end());
        ++report.uploads_aborted;
      }
    });
    std::vector<Segment> unused;
    for (auto& file : files) unused.push_back({std::move(file), 0});
    removal_.add(bucket.storage, unused);
    if (uploads.size() < limit) return next_range();
    cursor.after_key = uploads.back().key;
    cursor.after_version = uploads.back().upload_id;
    return true;
  }

  std::vector<ObjectRecord> versions;
  {
    std::lock_guard lock(mutex_);
    versions = metadata_.list_versions(name, prefix, cursor.after_key, cursor.after_version, limit);
  }
  report.examined += versions.size();
  // Versions come by key, newest first: the first of a key (unless the page
  // starts inside one) is its current version.
  std::vector<std::pair<const ObjectRecord*, LifecycleAction>> actions;
  for (const auto& v : versions) {
    VersionPlace place;
    if (v.key != cursor.key) {
      cursor.key = v.key;
      cursor.noncurrent_seen = 0;
      place.current = v.latest;
      place.only_version = true;  // rechecked when it is acted on (version_count)
    } else {
      place.noncurrent_since_ns = cursor.newer_modified_ns;
      place.newer_noncurrent = cursor.noncurrent_seen;
      if (!v.delete_marker) ++cursor.noncurrent_seen;
    }
    cursor.newer_modified_ns = v.modified_ns;
    const LifecycleAction action = lifecycle_action(*config, v, place, lifecycle_day_, now_ns);
    if (action != LifecycleAction::kNone) actions.emplace_back(&v, action);
  }

  std::vector<Segment> unused;
  if (!actions.empty()) {
    group_commit_.run([&] {
      for (const auto& [version, action] : actions) {
        const ObjectRecord& v = *version;
        try {
          std::vector<Segment> freed;
          metadata_.savepoint([&] {
            // Checked again inside the transaction: a request may have changed the key since the page was read.
            const auto current = metadata_.object(name, v.key);
            const auto now_version = metadata_.object(name, v.key, v.version_id);
            if (!current || !now_version || now_version->modified_ns != v.modified_ns) return;
            const bool is_current = current->version_id == v.version_id;
            switch (action) {
              case LifecycleAction::kExpireCurrent:
                if (!is_current || v.delete_marker) return;
                delete_key(bucket, v.key, "", false, true, bucket.record.owner, freed);
                ++report.expired;
                break;
              case LifecycleAction::kRemoveDeleteMarker:
                if (!is_current || !v.delete_marker || metadata_.version_count(name, v.key) != 1) return;
                delete_key(bucket, v.key, v.version_id, false, true, bucket.record.owner, freed);
                ++report.delete_markers_removed;
                break;
              case LifecycleAction::kRemoveNoncurrent:
                if (is_current) return;
                delete_key(bucket, v.key, v.version_id, false, true, bucket.record.owner, freed);
                ++report.noncurrent_removed;
                break;
              case LifecycleAction::kNone:
                break;
            }
          });
          unused.insert(unused.end(), freed.begin(), freed.end());
        } catch (const S3Error& e) {
          // Object Lock wins over lifecycle rules: the version stays (delete_key's lock check).
          report.kept.push_back("lifecycle kept version " + v.version_id + " of '" + v.key + "' in bucket '" + name +
                                "': " + e.what());
        }
      }
    });
  }
  removal_.add(bucket.storage, unused);
  if (versions.size() < limit) return next_range();
  // Go on after the page's last version, unless it was just removed: listing
  // after a vanished version would show its key's versions again, so that
  // key's older versions wait for the next sweep.
  const ObjectRecord& last = versions.back();
  const bool last_acted = !actions.empty() && actions.back().first == &last;
  cursor.after_key = last.key;
  cursor.after_version = last_acted ? std::string() : last.version_id;
  if (last_acted) cursor.key.clear();
  return true;
}

}  // namespace keel::gateway
