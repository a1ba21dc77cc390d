#include "engine/change_log.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "engine/pack.h"
#include "engine/sealed_object.h"
#include "util/codec.h"
#include "util/error.h"

namespace keel::engine {
namespace {

constexpr std::string_view kLogMagic = "KEELLOG1";
constexpr size_t kTimeDigits = 20;
constexpr size_t kRandomDigits = 16;

// Every count is checked against the bytes left: each item takes at least one.
uint64_t count(Decoder& d, std::string_view what) {
  uint64_t n = d.varint();
  if (n > d.remaining()) d.fail(std::string(what) + " count exceeds the record");
  return n;
}

// Version 2 adds a vouch (pack_vouch.h) to each pack and relocation: a
// flag byte, then the 32 bytes when it is 1.
constexpr uint8_t kEntryVersion = 2;

void encode_vouch(Encoder& e, const std::optional<Id>& vouch) {
  e.u8(vouch ? 1 : 0);
  if (vouch) e.id(*vouch);
}

std::optional<Id> decode_vouch(Decoder& d, uint8_t version) {
  if (version < 2) return std::nullopt;
  switch (d.u8()) {
    case 0:
      return std::nullopt;
    case 1:
      return d.id();
    default:
      d.fail("bad vouch flag");
  }
}

Bytes encode_entry(const ChangeLogEntry& entry) {
  Encoder e;
  e.u8(kEntryVersion);
  e.varint(entry.packs_added.size());
  for (const LoggedPack& p : entry.packs_added) {
    e.id(p.pack.id);
    e.varint(p.pack.size);
    e.svarint(p.pack.created_unix);
    e.varint(p.blobs.size());
    for (const catalog::BlobRecord& b : p.blobs) encode_blob_record(e, b);
    encode_vouch(e, p.vouch);
  }
  encode_ids(e, entry.packs_removed);
  e.varint(entry.relocated.size());
  for (const LoggedRelocation& r : entry.relocated) {
    e.id(r.location.pack);
    encode_blob_record(e, r.location.blob);
    encode_vouch(e, r.vouch);
  }
  encode_ids(e, entry.snapshots_added);
  encode_ids(e, entry.snapshots_removed);
  e.u8(entry.condemnations_changed ? 1 : 0);
  e.varint(entry.entries_compacted.size());
  for (const std::string& key : entry.entries_compacted) e.str(key);
  return e.take();
}

ChangeLogEntry decode_entry(ByteView body, const std::string& what) {
  Decoder d(body, what);
  const uint8_t version = d.u8();
  if (version < 1 || version > kEntryVersion) d.fail("unsupported log entry version");
  ChangeLogEntry entry;
  for (uint64_t n = count(d, "pack"); n > 0; --n) {
    LoggedPack& p = entry.packs_added.emplace_back();
    p.pack.id = d.id();
    p.pack.size = d.varint();
    p.pack.created_unix = d.svarint();
    for (uint64_t m = count(d, "blob"); m > 0; --m) p.blobs.push_back(decode_blob_record(d));
    p.vouch = decode_vouch(d, version);
  }
  entry.packs_removed = decode_ids(d);
  for (uint64_t n = count(d, "relocation"); n > 0; --n) {
    LoggedRelocation& r = entry.relocated.emplace_back();
    r.location.pack = d.id();
    r.location.blob = decode_blob_record(d);
    r.vouch = decode_vouch(d, version);
  }
  entry.snapshots_added = decode_ids(d);
  entry.snapshots_removed = decode_ids(d);
  entry.condemnations_changed = d.u8() != 0;
  for (uint64_t n = count(d, "compacted entry"); n > 0; --n) entry.entries_compacted.push_back(d.str());
  d.expect_done();
  return entry;
}

}  // namespace

std::string new_log_key(int64_t unix_ns) {
  char time[kTimeDigits + 1];
  std::snprintf(time, sizeof time, "%020lld", static_cast<long long>(std::max<int64_t>(0, unix_ns)));
  return std::string(kLogPrefix) + time + "-" + Id::random().hex().substr(0, kRandomDigits);
}

std::optional<int64_t> log_key_time(std::string_view key) {
  if (!key.starts_with(kLogPrefix)) return std::nullopt;
  key.remove_prefix(kLogPrefix.size());
  if (key.size() != kTimeDigits + 1 + kRandomDigits || key[kTimeDigits] != '-') return std::nullopt;
  int64_t t = 0;
  for (size_t i = 0; i < key.size(); ++i) {
    char c = key[i];
    if (i == kTimeDigits) continue;
    bool digit = c >= '0' && c <= '9';
    if (i < kTimeDigits ? !digit : !(digit || (c >= 'a' && c <= 'f'))) return std::nullopt;
    if (i < kTimeDigits) {
      if (t > (INT64_MAX - (c - '0')) / 10) return std::nullopt;
      t = t * 10 + (c - '0');
    }
  }
  return t;
}

std::string put_log_entry(targets::Target& target, const Key256& key, const ChangeLogEntry& entry) {
  int64_t now =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::string log_key = new_log_key(now);
  target.put(log_key, seal_object(kLogMagic, key, encode_entry(entry), as_bytes(log_key)));
  return log_key;
}

std::vector<std::string> list_log_keys(targets::Target& target) {
  std::vector<std::string> keys;
  target.list(std::string(kLogPrefix), [&](const targets::ObjectInfo& o) {
    if (log_key_time(o.key)) keys.push_back(o.key);
  });
  std::sort(keys.begin(), keys.end());
  return keys;
}

std::optional<ChangeLogEntry> read_log_entry(targets::Target& target, const Key256& key, const std::string& log_key) {
  std::string what = target.describe() + "/" + log_key;
  std::optional<Bytes> body = read_object(target, log_key, kLogMagic, "log entry", key, as_bytes(log_key), what);
  if (!body) return std::nullopt;
  return decode_entry(*body, what);
}

}  // namespace keel::engine
