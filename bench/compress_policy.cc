// What each compression setting costs and saves on real data: cuts the files
// of a dataset into chunks as a backup does (keel's chunker, default sizes),
// keeps each distinct chunk once, and stores it with every setting in turn,
// summing the bytes a repository would hold and the CPU time compressing took
// (this thread's CPU clock, so other processes on a busy machine count little).
// Chunks are grouped by the dataset's top-level directory (the kinds of data).
//
//   keel_compress_policy DATASET_DIR [--repeat N]
//   keel_compress_policy DATASET_DIR --per-chunk
//
// Prints a markdown table per kind and for the whole dataset. With
// --per-chunk, prints one CSV row per distinct chunk instead (its kind, size,
// the level-1 frame size of the probe's sample, and the frame size and CPU
// nanoseconds at each level of kPerChunkLevels, no probe), from which
// bench/compress_policy_sim.py works out per-chunk policies (which level for
// which chunk) without compressing again.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>
#include <string>
#include <unordered_set>
#include <vector>

#include "engine/chunker.h"
#include "engine/compress.h"
#include "engine/crypto.h"
#include "util/checksum.h"
#include "util/error.h"

namespace keel::engine {
namespace {

struct Setting {
  std::string name;
  CompressorParams params;
  bool off = false;  // store everything raw
};

std::vector<Setting> settings() {
  std::vector<Setting> all{{"off", {}, true}};
  for (int level : {-7, -5, -3, -1, 1, 2, 3, 6, 9}) {
    all.push_back({"zstd " + std::to_string(level), CompressorParams{.level = level}});
  }
  all.push_back({"zstd 3, no probe", CompressorParams{.level = 3, .probe = false}});
  all.push_back({"zstd 1, no probe", CompressorParams{.level = 1, .probe = false}});
  all.push_back({"zstd -1, no probe", CompressorParams{.level = -1, .probe = false}});
  // zstd picks these logs by level and source size; smaller tables are cheaper
  // to clear and fit the caches better, a smaller window finds fewer matches.
  all.push_back({"zstd 1, window 20", CompressorParams{.level = 1, .window_log = 20}});
  all.push_back({"zstd 1, hash 14", CompressorParams{.level = 1, .hash_log = 14}});
  all.push_back({"zstd 1, hash 17", CompressorParams{.level = 1, .hash_log = 17}});
  all.push_back({"zstd 2, chain 14", CompressorParams{.level = 2, .chain_log = 14}});
  all.push_back({"zstd 3, hash 15 chain 14", CompressorParams{.level = 3, .hash_log = 15, .chain_log = 14}});
  all.push_back({"zstd 3, window 20", CompressorParams{.level = 3, .window_log = 20}});
  return all;
}

// Levels of the --per-chunk rows.
constexpr int kPerChunkLevels[] = {-7, -5, -3, -1, 1, 2, 3};
// The probe's sample (compress.cc): eight 4 KiB slices spread over a chunk
// of at least 64 KiB.
constexpr size_t kProbeSlices = 8, kProbeSliceSize = 4096, kProbeMinInput = 2 * kProbeSlices * kProbeSliceSize;

struct Totals {
  uint64_t raw = 0, stored = 0, stored_raw_chunks = 0, chunks = 0;
  double cpu_s = 0;
};

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::string kind_of(const std::filesystem::path& root, const std::filesystem::path& file) {
  const auto relative = std::filesystem::relative(file, root);
  return relative.begin() == relative.end() ? "." : relative.begin()->string();
}

Bytes read_file(const std::filesystem::path& path) {
  Bytes data(std::filesystem::file_size(path));
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw Error(ErrorKind::kTargetIo, "cannot open " + path.string());
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::read(fd, data.data() + done, data.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  data.resize(done);
  return data;
}

// The frame size of `data` at `compressor`'s level, or data.size() when
// zstd does not shrink it.
size_t frame_size(Compressor& compressor, ByteView data, Bytes& out) {
  out.clear();
  return compressor.compress(data, out) ? out.size() : data.size();
}

// One CSV row for a distinct chunk (see the file comment).
void print_chunk_row(const std::string& kind, ByteView chunk, std::vector<std::unique_ptr<Compressor>>& by_level,
                     Compressor& probe, Bytes& out) {
  size_t probe_frame = 0;  // 0: too small to be probed
  if (chunk.size() >= kProbeMinInput) {
    Bytes sample(kProbeSlices * kProbeSliceSize);
    const size_t stride = (chunk.size() - kProbeSliceSize) / (kProbeSlices - 1);
    for (size_t i = 0; i < kProbeSlices; ++i) {
      std::copy_n(chunk.data() + i * stride, kProbeSliceSize, sample.data() + i * kProbeSliceSize);
    }
    probe_frame = frame_size(probe, sample, out);
  }
  std::printf("%s,%zu,%zu", kind.c_str(), chunk.size(), probe_frame);
  for (auto& compressor : by_level) {
    const double started = thread_cpu_s();
    const size_t size = frame_size(*compressor, chunk, out);
    std::printf(",%zu,%.0f", size, (thread_cpu_s() - started) * 1e9);
  }
  std::printf("\n");
}

void print_table(const std::string& kind, const std::vector<Setting>& all, const std::vector<Totals>& totals) {
  const Totals& off = totals[0];
  std::printf("\n### %s: %.1f MiB in %llu distinct chunks\n\n", kind.c_str(), static_cast<double>(off.raw) / (1 << 20),
              static_cast<unsigned long long>(off.chunks));
  std::printf("| setting | stored MiB | ratio | vs zstd 3 | CPU s/GB | MB/s (1 core) | chunks raw |\n");
  std::printf("|:--|--:|--:|--:|--:|--:|--:|\n");
  const Totals* level3 = nullptr;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].name == "zstd 3") level3 = &totals[i];
  }
  for (size_t i = 0; i < all.size(); ++i) {
    const Totals& t = totals[i];
    const double gb = static_cast<double>(t.raw) / 1e9;
    std::printf("| %s | %.1f | %.3f | %.3fx | %.3f | %.0f | %.1f%% |\n", all[i].name.c_str(),
                static_cast<double>(t.stored) / (1 << 20), static_cast<double>(t.raw) / static_cast<double>(t.stored),
                static_cast<double>(t.stored) / static_cast<double>(level3->stored), t.cpu_s / gb,
                t.cpu_s > 0 ? gb * 1000 / t.cpu_s : 0.0,
                100.0 * static_cast<double>(t.stored_raw_chunks) / static_cast<double>(std::max<uint64_t>(t.chunks, 1)));
  }
}

int run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: keel_compress_policy DATASET_DIR [--repeat N]\n");
    return 2;
  }
  const std::filesystem::path root = argv[1];
  int repeat = 1;
  if (argc == 4 && std::string(argv[2]) == "--repeat") repeat = std::max(1, std::atoi(argv[3]));
  const bool per_chunk = argc == 3 && std::string(argv[2]) == "--per-chunk";

  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    if (entry.is_regular_file() && !entry.is_symlink()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());

  const std::vector<Setting> all = settings();
  std::vector<std::unique_ptr<Compressor>> compressors;
  for (const Setting& s : all) compressors.push_back(s.off ? nullptr : std::make_unique<Compressor>(s.params));
  std::map<std::string, std::vector<Totals>> by_kind;
  std::vector<Totals> overall(all.size());
  std::unordered_set<uint64_t> seen;  // XXH3 of each chunk: dedupe as the repository would
  const Chunker chunker(ChunkerParams{}, random_key());
  Bytes out;
  out.reserve(16 << 20);
  std::vector<std::unique_ptr<Compressor>> by_level;
  Compressor probe(CompressorParams{.level = 1, .probe = false});
  if (per_chunk) {
    std::printf("kind,size,probe1");
    for (int level : kPerChunkLevels) {
      std::printf(",s%d,t%d", level, level);
      by_level.push_back(std::make_unique<Compressor>(CompressorParams{.level = level, .probe = false}));
    }
    std::printf("\n");
  }

  for (const auto& path : files) {
    const Bytes data = read_file(path);
    std::vector<Totals>& kind = by_kind.try_emplace(kind_of(root, path), all.size()).first->second;
    for (size_t pos = 0; pos < data.size();) {
      const size_t cut = chunker.next_cut(ByteView(data).subspan(pos), true);
      const ByteView chunk = ByteView(data).subspan(pos, cut);
      pos += cut;
      if (!seen.insert(xxh3_64(chunk)).second) continue;
      if (per_chunk) {
        // A backup stores no all-zero chunk (a hole instead).
        if (std::any_of(chunk.begin(), chunk.end(), [](uint8_t b) { return b != 0; })) {
          print_chunk_row(kind_of(root, path), chunk, by_level, probe, out);
        }
        continue;
      }
      for (size_t i = 0; i < all.size(); ++i) {
        uint64_t stored = chunk.size();
        double cpu = 0;
        if (compressors[i]) {
          for (int r = 0; r < repeat; ++r) {
            out.clear();
            const double started = thread_cpu_s();
            const bool shrank = compressors[i]->compress(chunk, out);
            cpu += thread_cpu_s() - started;
            stored = shrank ? out.size() : chunk.size();
          }
          cpu /= repeat;
        }
        for (Totals* t : {&kind[i], &overall[i]}) {
          t->raw += chunk.size();
          t->stored += stored;
          t->cpu_s += cpu;
          t->chunks += 1;
          t->stored_raw_chunks += stored == chunk.size() ? 1 : 0;
        }
      }
    }
  }
  if (per_chunk) return 0;
  std::printf("# compression settings on %s (%zu files)\n", root.c_str(), files.size());
  for (const auto& [kind, totals] : by_kind) print_table(kind, all, totals);
  print_table("all", all, overall);
  return 0;
}

}  // namespace
}  // namespace keel::engine

int main(int argc, char** argv) {
  try {
    return keel::engine::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "keel_compress_policy: %s\n", e.what());
    return 1;
  }
}
