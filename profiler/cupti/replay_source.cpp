#include "profiler/cupti/replay_source.h"

#include <cstddef>
#include <cstring>
#include <utility>
#include <vector>

#include <cupti.h>

#include "profiler/safe_memory.h"

namespace cs::profiler {

namespace {

using Segment = ReplayRecording::Segment;
using SegmentKind = ReplayRecording::SegmentKind;

// nvtxPayloadData_t (nvtx3/nvToolsExtPayload.h): {schema id, size, pointer}.
struct NvtxPayloadData {
  std::uint64_t schema_id;
  std::size_t size;
  const void* payload;
};
static_assert(sizeof(NvtxPayloadData) == 24);
constexpr std::size_t kPayloadPointerOffset = offsetof(NvtxPayloadData, payload);

// Calls `visit(record, offset)` for every record whose whole struct of the
// kind's type lies inside the buffer.
template <class Visit>
void walk(std::uint8_t* data, std::size_t size, Visit visit) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(data, size, &record) == CUPTI_SUCCESS) {
    visit(record, static_cast<std::size_t>(reinterpret_cast<std::uint8_t*>(record) - data));
  }
}

template <class Record>
Record* as(CUpti_Activity* record, std::size_t offset, std::size_t size) {
  return offset + sizeof(Record) <= size ? reinterpret_cast<Record*>(record) : nullptr;
}

// Zeroes every field that points out of the buffer, in the kinds the decoder reads.
void clear_pointer_fields(std::uint8_t* data, std::size_t size) {
  walk(data, size, [&](CUpti_Activity* record, std::size_t offset) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        if (auto* k = as<CUpti_ActivityKernel10>(record, offset, size)) {
          k->name = nullptr;
          k->reserved0 = nullptr;
          k->pAccessPolicyWindow = nullptr;
        }
        break;
      case CUPTI_ACTIVITY_KIND_MEMCPY:
        if (auto* m = as<CUpti_ActivityMemcpy6>(record, offset, size)) m->reserved0 = nullptr;
        break;
      case CUPTI_ACTIVITY_KIND_MEMCPY2:
        if (auto* m = as<CUpti_ActivityMemcpyPtoP4>(record, offset, size)) m->reserved0 = nullptr;
        break;
      case CUPTI_ACTIVITY_KIND_MEMSET:
        if (auto* m = as<CUpti_ActivityMemset4>(record, offset, size)) m->reserved0 = nullptr;
        break;
      case CUPTI_ACTIVITY_KIND_MARKER:
        if (auto* m = as<CUpti_ActivityMarker2>(record, offset, size)) {
          m->name = nullptr;
          m->domain = nullptr;
        }
        break;
      case CUPTI_ACTIVITY_KIND_MARKER_DATA:
        if (auto* m = as<CUpti_ActivityMarkerData2>(record, offset, size)) {
          if (m->payloadKind == CUPTI_METRIC_VALUE_KIND_NVTX_EXTENDED_PAYLOAD) {
            m->payload.metricValueNvtxExtendedPayload = 0;
          }
        }
        break;
      case CUPTI_ACTIVITY_KIND_OVERHEAD:
        if (auto* o = as<CUpti_ActivityOverhead3>(record, offset, size)) o->overheadData = nullptr;
        break;
      default:
        break;
    }
  });
}

class ReplaySource final : public ActivitySource {
 public:
  ReplaySource(ReplayRecording recording, std::string name)
      : recording_(std::move(recording)), name_(std::move(name)) {
    fixups_of_.resize(recording_.segments.size());
    for (const auto& f : recording_.fixups) {
      if (f.segment >= recording_.segments.size() || f.target >= recording_.segments.size())
        continue;
      const Segment& holder = recording_.segments[f.segment];
      if (holder.kind == SegmentKind::buffer) {
        fixups_of_[f.segment].push_back(f);
      } else {
        point(recording_.segments[f.segment].bytes.data(), holder.bytes.size(), f);
      }
    }
  }

  std::string describe() const override { return name_; }

  Status start(BufferPool& pool, BufferQueue& queue) override {
    struct Granted {
      std::size_t segment;
      std::uint8_t* data;
    };
    std::vector<Granted> granted;
    for (std::size_t i = 0; i < recording_.segments.size(); ++i) {
      Segment& segment = recording_.segments[i];
      if (segment.kind != SegmentKind::buffer) continue;
      dropped_ += segment.dropped_after;
      std::uint8_t* data = segment.bytes.size() <= pool.buffer_bytes() ? pool.acquire() : nullptr;
      if (!data) {
        dropped_ += count_records(segment.bytes.data(), segment.bytes.size());
        if (segment.bytes.size() > pool.buffer_bytes()) {
          warnings_.push_back("a recorded buffer of " + std::to_string(segment.bytes.size()) +
                              " bytes is larger than the tracer's buffers");
        }
        continue;
      }
      granted.push_back({i, data});
    }
    for (const Granted& g : granted) {
      const Segment& segment = recording_.segments[g.segment];
      std::memcpy(g.data, segment.bytes.data(), segment.bytes.size());
      clear_pointer_fields(g.data, segment.bytes.size());
      for (const auto& f : fixups_of_[g.segment])
        point(g.data, segment.bytes.size(), f);
      queue.push(ActivityBuffer{g.data, pool.buffer_bytes(), segment.bytes.size(), false});
    }
    return {};
  }

  void flush() override {}
  std::uint64_t take_dropped_records() override { return std::exchange(dropped_, 0); }
  void stop() override {}
  std::vector<std::string> warnings() const override { return warnings_; }

 private:
  // Writes the address a fixup names into the pointer field it names.
  void point(std::uint8_t* holder, std::size_t holder_size, const ReplayRecording::Fixup& f) {
    if (f.offset + sizeof(void*) > holder_size) return;
    const Segment& target = recording_.segments[f.target];
    if (f.target_offset >= target.bytes.size()) return;
    const void* address = target.bytes.data() + f.target_offset;
    std::memcpy(holder + f.offset, &address, sizeof address);
  }

  ReplayRecording recording_;
  std::string name_;
  std::vector<std::vector<ReplayRecording::Fixup>> fixups_of_;
  std::uint64_t dropped_ = 0;
  std::vector<std::string> warnings_;
};

}  // namespace

std::unique_ptr<ActivitySource> make_replay_source(ReplayRecording recording, std::string name) {
  return std::make_unique<ReplaySource>(std::move(recording), std::move(name));
}

Result<std::unique_ptr<ActivitySource>> open_replay_source(const std::string& path) {
  auto recording = read_replay(path);
  if (!recording) return recording.error();
  return make_replay_source(std::move(recording).value(), "replay of " + path);
}

std::size_t count_records(const std::uint8_t* data, std::size_t size) {
  std::size_t count = 0;
  CUpti_Activity* record = nullptr;
  auto* bytes = const_cast<std::uint8_t*>(data);  // CUPTI's walker only reads
  while (cuptiActivityGetNextRecord(bytes, size, &record) == CUPTI_SUCCESS)
    ++count;
  return count;
}

void capture_cupti_buffer(ReplayBuilder& builder, const ActivityBuffer& buffer,
                          std::uint64_t dropped_after) {
  std::vector<std::uint8_t> copy(buffer.data, buffer.data + buffer.valid);
  struct Pointer {
    std::size_t field;
    ReplayBuilder::Ref target;
  };
  std::vector<Pointer> pointers;
  SafeMemoryReader memory;
  auto keep_string = [&](std::size_t field, const char* text) {
    if (text) pointers.push_back({field, builder.add_string(text)});
  };
  walk(buffer.data, buffer.valid, [&](CUpti_Activity* record, std::size_t offset) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        if (auto* k = as<CUpti_ActivityKernel10>(record, offset, buffer.valid)) {
          keep_string(offset + offsetof(CUpti_ActivityKernel10, name), k->name);
        }
        break;
      case CUPTI_ACTIVITY_KIND_MARKER:
        if (auto* m = as<CUpti_ActivityMarker2>(record, offset, buffer.valid)) {
          keep_string(offset + offsetof(CUpti_ActivityMarker2, name), m->name);
          keep_string(offset + offsetof(CUpti_ActivityMarker2, domain), m->domain);
        }
        break;
      case CUPTI_ACTIVITY_KIND_MARKER_DATA: {
        auto* m = as<CUpti_ActivityMarkerData2>(record, offset, buffer.valid);
        if (!m || m->payloadKind != CUPTI_METRIC_VALUE_KIND_NVTX_EXTENDED_PAYLOAD) break;
        NvtxPayloadData data{};
        if (!memory.read(m->payload.metricValueNvtxExtendedPayload, &data, sizeof data)) break;
        if (data.size == 0 || data.size > 4096) break;
        std::vector<std::uint8_t> bytes(data.size);
        if (!memory.read(reinterpret_cast<std::uint64_t>(data.payload), bytes.data(), bytes.size()))
          break;
        const ReplayBuilder::Ref payload = builder.add_blob(bytes.data(), bytes.size());
        NvtxPayloadData header{data.schema_id, data.size, nullptr};
        const ReplayBuilder::Ref holder =
            builder.add_blob(&header, sizeof header, {{kPayloadPointerOffset, payload}});
        pointers.push_back(
            {offset + offsetof(CUpti_ActivityMarkerData2, payload.metricValueNvtxExtendedPayload),
             holder});
        break;
      }
      default:
        break;
    }
  });
  clear_pointer_fields(copy.data(), copy.size());
  builder.begin_buffer();
  builder.add_raw_record(copy.data(), copy.size(), {});
  for (const Pointer& p : pointers)
    builder.add_pointer(p.field, p.target);
  builder.end_buffer(dropped_after);
}

}  // namespace cs::profiler
