#pragma once
// A recording of CUPTI activity buffers, replayed through the same decoder
// without a GPU. Buffers hold the records exactly as CUPTI laid them out (its
// record structs back to back, each 8-byte aligned); what records point to
// (kernel names, NVTX names and domains, NVTX payloads) is kept in blobs, and
// fixups say which pointer field gets which blob's address when loaded.
//
// File (little-endian, as the records themselves on x86-64 and aarch64):
//   "CSCUPTI\0", u32 format version (1), u32 CUPTI_API_VERSION of the records,
//   u64 segment count, then per segment:
//     u32 kind (1 buffer, 2 blob), u32 0, u64 records CUPTI dropped after this
//     buffer, u64 size, bytes padded with zeros to a multiple of 8;
//   u64 fixup count, then per fixup:
//     u32 segment, u32 target segment, u64 offset of the 8-byte pointer field,
//     u64 offset in the target segment.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"

namespace cs::profiler {

struct ReplayRecording {
  enum class SegmentKind : std::uint32_t { buffer = 1, blob = 2 };
  struct Segment {
    SegmentKind kind = SegmentKind::buffer;
    std::vector<std::uint8_t> bytes;
    std::uint64_t dropped_after = 0;  // buffers: CUPTI's dropped count reported after it
  };
  struct Fixup {
    std::uint32_t segment = 0;  // holds the pointer field
    std::uint32_t target = 0;   // the segment pointed into
    std::uint64_t offset = 0;   // of the pointer field in `segment`
    std::uint64_t target_offset = 0;
  };

  std::uint32_t cupti_version = 0;
  std::vector<Segment> segments;
  std::vector<Fixup> fixups;
};

Status write_replay(const std::string& path, const ReplayRecording& recording);
// Checks the magic, the version, every size and every fixup against the
// segments; errors name the file and the byte offset.
Result<ReplayRecording> read_replay(const std::string& path);

// Builds a recording record by record, as tests and a live capture do.
class ReplayBuilder {
 public:
  struct Ref {
    std::uint32_t segment = 0;
    std::uint64_t offset = 0;
  };

  explicit ReplayBuilder(std::uint32_t cupti_version) { recording_.cupti_version = cupti_version; }

  // A zero-terminated copy of `text` that pointer fields can point to (one per distinct text).
  Ref add_string(std::string_view text);
  // Bytes that pointer fields can point to; `pointers` are pointer fields
  // inside the blob itself (offset in the blob -> what they point to).
  Ref add_blob(const void* data, std::size_t size,
               std::initializer_list<std::pair<std::size_t, Ref>> pointers = {});

  // Starts the next buffer; records go into it until end_buffer().
  void begin_buffer();
  // Appends a record struct as CUPTI writes it (its size is sizeof(Record),
  // a multiple of 8), with its pointer fields given by offset.
  template <class Record>
  void add_record(const Record& record,
                  std::initializer_list<std::pair<std::size_t, Ref>> pointers = {}) {
    static_assert(sizeof(Record) % 8 == 0, "CUPTI records are 8-byte aligned");
    add_raw_record(&record, sizeof(Record), pointers);
  }
  void add_raw_record(const void* data, std::size_t size,
                      std::initializer_list<std::pair<std::size_t, Ref>> pointers);
  // Adds a pointer fixup for the 8-byte field at `field_offset` of the current buffer.
  void add_pointer(std::size_t field_offset, Ref target);
  // Ends the buffer; `dropped_after` is what CUPTI reported dropped at that point.
  void end_buffer(std::uint64_t dropped_after = 0);
  // Bytes in the current buffer, where the next record goes.
  std::size_t buffer_size() const;

  const ReplayRecording& recording() const { return recording_; }
  ReplayRecording take() { return std::move(recording_); }

 private:
  ReplayRecording recording_;
  std::int64_t current_ = -1;  // segment index of the open buffer
  std::map<std::string, Ref, std::less<>> strings_;
};

}  // namespace cs::profiler
