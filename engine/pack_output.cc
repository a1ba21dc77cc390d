#include "engine/pack_output.h"

#include <algorithm>
#include <atomic>
#include <mutex>

namespace keel::engine {

PackOutput::PackOutput(Content& content, uint64_t pack_size, uint64_t part_size, size_t parts_in_flight)
    : part_size_(std::max(part_size, content.target().min_part_size())),
      uploads_(2, parts_in_flight),
      budget_(parts_in_flight * part_size_),
      writer_(content, PackWriterOptions{pack_size, part_size_}, uploads_, budget_) {}

SealedCopy copy_sealed(Content& content, std::span<const catalog::BlobLocation> blobs, uint64_t gap, uint64_t max_read,
                       const ReadOptions& options, ContentWriter& writer,
                       const std::function<void(const Error&)>& on_fail) {
  struct Copier : BlobSink {
    std::span<const catalog::BlobLocation> blobs;
    ContentWriter& writer;
    const std::function<void(const Error&)>& on_fail;
    std::atomic<uint64_t> copied{0};
    std::atomic<uint64_t> stored_bytes{0};
    std::mutex fail_mutex;
    Copier(std::span<const catalog::BlobLocation> b, ContentWriter& w, const std::function<void(const Error&)>& f)
        : blobs(b), writer(w), on_fail(f) {}
    void deliver(size_t i, ByteView sealed) override {
      const catalog::BlobRecord& blob = blobs[i].blob;
      writer.add(blob.type, blob.id, blob.raw_length, sealed);
      ++copied;
      stored_bytes += blob.stored_length;
    }
    void fail(size_t, const Error& error) override {
      std::lock_guard lock(fail_mutex);
      on_fail(error);
    }
  } copier(blobs, writer, on_fail);
  ReadOptions sealed = options;
  sealed.form = BlobForm::kSealed;
  content.read(blobs, plan_reads(blobs, gap, max_read), sealed, copier);
  return {copier.copied, copier.stored_bytes};
}

}  // namespace keel::engine
