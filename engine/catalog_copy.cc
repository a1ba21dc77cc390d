#include "engine/catalog_copy.h"

#include <fcntl.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>
#include <vector>

#include "engine/compress.h"
#include "engine/crypto.h"
#include "engine/object_lock.h"
#include "util/codec.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/huge_pages.h"
#include "util/id.h"

namespace keel::engine {

namespace {

constexpr std::string_view kPrefix = "catalog/";
constexpr std::string_view kMagic = "KEELCAT1";
constexpr size_t kFrameSize = 4u << 20;  // plaintext bytes per sealed frame
constexpr uint8_t kLastFrame = 1, kCompressed = 2;
constexpr size_t kMaxSealedFrame = kFrameSize * 2 + kSealOverhead + 64;

// Binds a frame to its copy and its place, so frames cannot be reordered,
// dropped at the end or moved between copies.
Bytes frame_aad(const std::string& key, uint64_t index) {
  Encoder e;
  e.str(key);
  e.u64(index);
  return e.take();
}

std::string catalog_id(catalog::Catalog& cat) {
  if (std::optional<std::string> id = cat.get_meta("catalog_id")) return *id;
  std::string id = Id::random().hex().substr(0, 16);
  cat.set_meta("catalog_id", id);
  return id;
}

std::optional<CatalogCopyInfo> parse_key(const targets::ObjectInfo& o) {
  // catalog/<id>/<20 digits>
  std::string_view rest = std::string_view(o.key).substr(kPrefix.size());
  size_t slash = rest.find('/');
  if (slash == std::string_view::npos || rest.size() - slash - 1 != 20) return std::nullopt;
  std::string_view digits = rest.substr(slash + 1);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  // Twenty digits can exceed int64: such a name is foreign (anyone who may
  // create objects can write one), not a reason to stop every listing.
  int64_t time_ns = 0;
  if (std::from_chars(digits.data(), digits.data() + digits.size(), time_ns).ec != std::errc()) return std::nullopt;
  return CatalogCopyInfo{o.key, std::string(rest.substr(0, slash)), time_ns, o.size};
}

std::vector<CatalogCopyInfo> list_copies(targets::Target& target) {
  std::vector<CatalogCopyInfo> copies;
  target.list(std::string(kPrefix), [&](const targets::ObjectInfo& o) {
    if (auto c = parse_key(o)) copies.push_back(*c);
  });
  std::sort(copies.begin(), copies.end(), [](const CatalogCopyInfo& a, const CatalogCopyInfo& b) {
    return std::tie(a.time_ns, a.key) < std::tie(b.time_ns, b.key);
  });
  return copies;
}

// Whether the copy's first frame opens under the data key. frame_aad binds
// every frame to the copy's name, so neither garbage nor a real copy's bytes
// under another name pass: only a full key writes a copy that does.
bool first_frame_opens(Repository& repo, const CatalogCopyInfo& copy) {
  targets::Target& target = repo.target();
  try {
    Bytes head(kMagic.size() + 4);
    if (target.get_range(copy.key, 0, head) != head.size() ||
        !std::equal(kMagic.begin(), kMagic.end(), head.begin())) {
      return false;
    }
    uint32_t length = Decoder(ByteView(head).subspan(kMagic.size()), copy.key).u32();
    if (length > kMaxSealedFrame) return false;
    Bytes sealed(length), body;
    if (target.get_range(copy.key, head.size(), sealed) != length) return false;
    open_sealed(repo.keys().data, sealed, frame_aad(copy.key, 0), body, copy.key);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kIntegrity && e.kind() != ErrorKind::kNotFound) throw;
    return false;
  }
  return true;
}

// A file in the catalog's directory, removed when the scope ends.
class ScratchFile {
 public:
  explicit ScratchFile(const std::string& catalog_path)
      : path_(catalog_path + ".copy-" + Id::random().short_hex()) {}
  ~ScratchFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// trim_catalog_copies; `written`: a copy this process just wrote, known to
// authenticate without reading it back.
size_t trim_copies(Repository& repo, size_t keep, const std::optional<std::string>& catalog_id,
                   const std::string& written) {
  std::map<std::string, std::vector<CatalogCopyInfo>> by_catalog;  // oldest first (list_copies sorts)
  for (CatalogCopyInfo& c : list_copies(repo.target())) {
    if (!catalog_id || c.catalog_id == *catalog_id) by_catalog[c.catalog_id].push_back(std::move(c));
  }
  size_t removed = 0;
  // Object Lock: a copy stays until its lock ends.
  auto remove = [&](const CatalogCopyInfo& c) {
    if (!still_locked_since(repo, c.time_ns / 1'000'000'000) && remove_unless_locked(repo, c.key)) ++removed;
  };
  for (const auto& [id, copies] : by_catalog) {
    if (copies.size() <= keep) continue;
    // Newest first. Credentials that may create objects can write copies
    // under a real catalog's id with later times, so copies are checked
    // until one authenticates: it stays (forged ones never push the real
    // history out), those above it that do not hold no history anyone can
    // read and go, and beyond it and the next `keep` - 1 the rest go as
    // before. One check (a ranged read of the first frame) per catalog that
    // has too many copies, none after a save.
    bool authentic = false;
    size_t kept = 0;
    for (auto c = copies.rbegin(); c != copies.rend(); ++c) {
      if (!authentic) authentic = c->key == written || first_frame_opens(repo, *c);
      if (!authentic || kept == keep) {
        remove(*c);
      } else {
        ++kept;
      }
    }
  }
  return removed;
}

}  // namespace

CatalogCopyInfo save_catalog_copy(Repository& repo, size_t keep) {
  catalog::Catalog& cat = repo.catalog();
  targets::Target& target = repo.target();
  CatalogCopyInfo info;
  info.catalog_id = catalog_id(cat);
  info.time_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  char digits[21];
  std::snprintf(digits, sizeof digits, "%020lld", static_cast<long long>(info.time_ns));
  info.key = std::string(kPrefix) + info.catalog_id + "/" + digits;

  ScratchFile file(repo.catalog_path());
  cat.export_to(file.path());
  UniqueFd fd = open_or_throw(file.path(), O_RDONLY);
  const uint64_t file_size = std::filesystem::file_size(file.path());

  // Frames are gathered into parts of the repository's part size, so the
  // copy streams like a pack does and is never held whole.
  std::unique_ptr<targets::Upload> upload = target.start_upload(info.key);
  const size_t part_size = std::max<uint64_t>(repo.config().part_size, target.min_part_size());
  // Buffers kept across frames and sized once, on huge pages: fresh memory
  // costs a page fault per 4 KiB touched (on the development VM, 22 us
  // each), and a new body per frame and a part grown by doubling made a
  // fifth of a first backup's page faults.
  Bytes part(kMagic.begin(), kMagic.end()), plain, packed, body, sealed;
  reserve_huge(part, part_size + 4 + kMaxSealedFrame);
  reserve_huge(plain, kFrameSize);
  plain.resize(kFrameSize);
  reserve_huge(body, 5 + kFrameSize);
  uint32_t part_number = 1;
  uint64_t part_offset = 0;
  Compressor compressor(repo.config().compression_level != kCompressionOff ? repo.config().compression_level
                                                                           : kCompressionDefault);
  uint64_t done = 0;
  for (uint64_t index = 0;; ++index) {
    size_t n = pread_full(fd.get(), std::span<uint8_t>(plain).first(std::min<uint64_t>(kFrameSize, file_size - done)),
                          static_cast<off_t>(done), file.path());
    done += n;
    bool last = done >= file_size;
    packed.clear();
    bool compressed = compressor.compress(ByteView(plain).first(n), packed);
    body.assign(1, static_cast<uint8_t>((last ? kLastFrame : 0) | (compressed ? kCompressed : 0)));
    Encoder e;
    e.u32(static_cast<uint32_t>(n));
    body.insert(body.end(), e.data().begin(), e.data().end());
    ByteView payload = compressed ? ByteView(packed) : ByteView(plain).first(n);
    body.insert(body.end(), payload.begin(), payload.end());
    sealed.clear();
    seal(repo.keys().data, body, frame_aad(info.key, index), sealed);
    Encoder len;
    len.u32(static_cast<uint32_t>(sealed.size()));
    part.insert(part.end(), len.data().begin(), len.data().end());
    part.insert(part.end(), sealed.begin(), sealed.end());
    if (part.size() >= part_size || last) {
      upload->write_part(part_number++, part_offset, part);
      part_offset += part.size();
      info.size = part_offset;
      part.clear();
    }
    if (last) break;
  }
  upload->commit();
  if (keep != kKeepAllCopies) trim_copies(repo, keep, info.catalog_id, info.key);
  return info;
}

size_t trim_catalog_copies(Repository& repo, size_t keep, const std::optional<std::string>& catalog_id) {
  return trim_copies(repo, keep, catalog_id, {});
}

std::string try_save_catalog_copy(Repository& repo, size_t keep) {
  // Copies are sealed under the data key, which a put-only key lacks; its
  // history stays in the host's own catalog (repository-format.md).
  if (repo.put_only()) return {};
  try {
    save_catalog_copy(repo, keep);
    return {};
  } catch (const Error& e) {
    return e.what();
  }
}

HistoryImport import_newest_history(Repository& repo) {
  if (repo.put_only()) return {};
  std::vector<CatalogCopyInfo> copies = list_copies(repo.target());
  for (auto copy = copies.rbegin(); copy != copies.rend(); ++copy) {
    try {
      return {*copy, import_catalog_history(repo, *copy)};
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kIntegrity) throw;
      repo.warn(std::string(e.what()) + ": skipped, history taken from an older copy");
    }
  }
  return {};
}

size_t import_catalog_history(Repository& repo, const CatalogCopyInfo& copy) {
  targets::Target& target = repo.target();
  const std::string what = "catalog copy " + copy.key + " on " + target.describe();
  auto read_exact = [&](uint64_t offset, size_t length) {
    Bytes out(length);
    if (target.get_range(copy.key, offset, out) != length) {
      throw Error(ErrorKind::kIntegrity, what + ": truncated at offset " + std::to_string(offset));
    }
    return out;
  };
  if (read_exact(0, kMagic.size()) != Bytes(kMagic.begin(), kMagic.end())) {
    throw Error(ErrorKind::kIntegrity, what + ": not a keel catalog copy");
  }

  ScratchFile file(repo.catalog_path());
  UniqueFd fd = open_or_throw(file.path(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  uint64_t offset = kMagic.size();
  Bytes body, raw;
  for (uint64_t index = 0;; ++index) {
    Bytes length_field = read_exact(offset, 4);
    uint32_t sealed_length = Decoder(length_field, what).u32();
    if (sealed_length > kMaxSealedFrame) {
      throw Error(ErrorKind::kIntegrity, what + ": frame " + std::to_string(index) + " claims an impossible length");
    }
    Bytes sealed = read_exact(offset + 4, sealed_length);
    offset += 4 + sealed_length;
    open_sealed(repo.keys().data, sealed, frame_aad(copy.key, index), body, what + " frame " + std::to_string(index));
    Decoder d(body, what);
    uint8_t flags = d.u8();
    uint32_t raw_length = d.u32();
    ByteView payload = d.raw(d.remaining());
    if (flags & kCompressed) {
      decompress(payload, raw_length, raw, what);
    } else {
      if (payload.size() != raw_length) throw Error(ErrorKind::kIntegrity, what + ": frame length mismatch");
      raw.assign(payload.begin(), payload.end());
    }
    write_all(fd.get(), raw, file.path());
    if (flags & kLastFrame) break;
  }
  fd.reset();
  return repo.catalog().import_history(file.path());
}

}  // namespace keel::engine
