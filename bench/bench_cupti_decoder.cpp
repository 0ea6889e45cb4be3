// How fast the CUPTI decoder turns records into events, on this CPU:
//   1. a synthetic mix as a training step makes it (per kernel: a runtime
//      launch, the kernel; every 4th a copy; every 16th an NVTX range, a sync),
//      against the bare walk over the same buffers with cuptiActivityGetNextRecord;
//   2. the real PyTorch DDP recording from an H200 (tests/data/gpu).
// Events go to a writer that only counts them, so the figures are the
// decoder's own; the trace store's cost is measured by its own benchmark.
// Prints records per second and the ratio to the bare walk.

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <map>
#include <string>

#include <cupti.h>

#include "core/trace_writer.h"
#include "profiler/activity_buffers.h"
#include "profiler/cupti/activity_decoder.h"
#include "profiler/cupti/replay_source.h"
#include "profiler/replay_file.h"

namespace {

using cs::trace::LaneId;
using cs::trace::StringId;

class CountingWriter final : public cs::trace::TraceWriter {
 public:
  void add_rank(const cs::trace::RankInfo&) override {}
  LaneId add_lane(std::int32_t, cs::trace::LaneKind, std::string_view, std::int32_t) override {
    return LaneId{++lanes};
  }
  StringId intern(std::string_view text) override {
    auto [it, added] =
        strings.emplace(std::string(text), StringId{std::uint32_t(strings.size() + 1)});
    return it->second;
  }
  void add(const cs::trace::Event&) override { ++events; }
  void add(const cs::trace::Event&, const cs::trace::KernelLaunch&) override { ++events; }
  void add(const cs::trace::StepMetrics&) override {}
  void add(const cs::trace::CounterSample&) override {}
  void set_meta(std::string_view, std::string_view) override {}
  cs::Status flush() override { return {}; }
  cs::Status close(std::string_view) override { return {}; }
  cs::Status error() const override { return {}; }
  std::int64_t committed_steps() const override { return 0; }  // steps are not kept
  const std::string& path() const override { return path_; }

  std::uint64_t events = 0;
  std::uint32_t lanes = 0;
  std::map<std::string, StringId> strings;
  std::string path_ = "(counting)";
};

using Clock = std::chrono::steady_clock;
constexpr std::uint64_t T0 = 1'760'000'000'000'000'000ull;

// Buffers filled as CUPTI fills them: at most `buffer_bytes` of records each.
cs::profiler::ReplayRecording synthetic(std::size_t kernels, std::size_t buffer_bytes) {
  cs::profiler::ReplayBuilder b(CUPTI_API_VERSION);
  const auto name = b.add_string(
      "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_"
      "11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_");
  const auto range = b.add_string("forward");
  b.begin_buffer();
  std::uint32_t correlation = 1;
  for (std::size_t i = 0; i < kernels; ++i, ++correlation) {
    if (b.buffer_size() + 1024 > buffer_bytes) b.begin_buffer();
    const std::uint64_t t = T0 + i * 10'000;
    CUpti_ActivityAPI api{};
    api.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    api.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
    api.start = t;
    api.end = t + 3'000;
    api.threadId = 100;
    api.correlationId = correlation;
    b.add_record(api);
    CUpti_ActivityKernel10 k{};
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.start = t + 4'000;
    k.end = t + 9'000;
    k.streamId = 7 + i % 2;
    k.correlationId = correlation;
    b.add_record(k, {{offsetof(CUpti_ActivityKernel10, name), name}});
    if (i % 4 == 0) {
      CUpti_ActivityMemcpy6 m{};
      m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
      m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
      m.bytes = 4096;
      m.start = t + 9'100;
      m.end = t + 9'500;
      m.streamId = 13;
      m.correlationId = correlation;
      b.add_record(m);
    }
    if (i % 16 == 0) {
      CUpti_ActivityMarker2 start{};
      start.kind = CUPTI_ACTIVITY_KIND_MARKER;
      start.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
      start.timestamp = t;
      start.id = correlation;
      start.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
      start.objectId.pt.threadId = 100;
      b.add_record(start, {{offsetof(CUpti_ActivityMarker2, name), range}});
      CUpti_ActivityMarker2 end = start;
      end.flags = CUPTI_ACTIVITY_FLAG_MARKER_END;
      end.timestamp = t + 9'900;
      b.add_record(end);
      CUpti_ActivitySynchronization2 sync{};
      sync.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
      sync.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
      sync.start = t + 9'600;
      sync.end = t + 9'900;
      sync.correlationId = correlation;
      b.add_record(sync);
    }
  }
  b.end_buffer();
  return b.take();
}

struct Figures {
  std::uint64_t records = 0;
  std::uint64_t events = 0;
  double walk_s = 0;
  double decode_s = 0;
};

// Decodes every buffer the source hands over `repeats` times with one
// decoder (its first use allocates its correlation rings), timing the decoder
// alone; the bare walk over the same buffers is the reference.
Figures measure(std::unique_ptr<cs::profiler::ActivitySource> source, std::size_t buffer_bytes,
                int repeats = 1, cs::profiler::DecoderOptions options = {}) {
  cs::profiler::BufferPool pool(buffer_bytes, std::size_t{8} << 30);
  cs::profiler::BufferQueue queue;
  if (auto started = source->start(pool, queue); !started) {
    std::fprintf(stderr, "bench_cupti_decoder: %s\n", started.message().c_str());
    return {};
  }
  queue.close();
  std::vector<cs::profiler::ActivityBuffer> buffers;
  while (auto b = queue.pop())
    buffers.push_back(*b);
  Figures f;
  auto start = Clock::now();
  for (int r = 0; r < repeats; ++r) {
    for (const auto& b : buffers)
      f.records += cs::profiler::count_records(b.data, b.valid);
  }
  f.walk_s = std::chrono::duration<double>(Clock::now() - start).count();
  CountingWriter writer;
  cs::profiler::ActivityDecoder decoder(writer, options);
  start = Clock::now();
  for (int r = 0; r < repeats; ++r) {
    for (const auto& b : buffers)
      decoder.decode(b);
  }
  decoder.finish();
  f.decode_s = std::chrono::duration<double>(Clock::now() - start).count();
  f.events = writer.events;
  for (const auto& b : buffers)
    pool.release(b.data);
  return f;
}

// False, said, when there was nothing to time (every rate would be nan).
bool print(const char* what, const Figures& f) {
  if (f.records == 0 || f.decode_s <= 0 || f.walk_s <= 0) {
    std::fprintf(stderr, "bench_cupti_decoder: %s: no records decoded\n", what);
    return false;
  }
  std::printf(
      "%-34s %9llu records %9llu events  decode %7.1f M records/s (%6.0f ns each)  "
      "bare walk %7.1f M/s  decode/walk time %.1fx\n",
      what, static_cast<unsigned long long>(f.records), static_cast<unsigned long long>(f.events),
      f.records / f.decode_s / 1e6, 1e9 * f.decode_s / f.records, f.records / f.walk_s / 1e6,
      f.decode_s / f.walk_s);
  return true;
}

}  // namespace

int main(int argc, char**) {
  if (argc > 1) {
    std::fprintf(stderr, "bench_cupti_decoder: takes no arguments\nusage: bench_cupti_decoder\n");
    return 2;
  }
  constexpr std::size_t kBuffer = std::size_t{4} << 20;
  if (!print("synthetic step mix (400k kernels)",
             measure(cs::profiler::make_replay_source(synthetic(400'000, kBuffer), "synthetic"),
                     kBuffer)))
    return 1;
  // The same under `profile --capture-range cudaProfilerApi`, a range open
  // throughout: what holding each event against it costs (a lock a look).
  cs::profiler::DecoderOptions captured;
  auto range = std::make_shared<cs::profiler::CaptureRange>();
  range->open_throughout();
  captured.capture_range = range;
  if (!print("  ... in a capture range",
             measure(cs::profiler::make_replay_source(synthetic(400'000, kBuffer), "synthetic"),
                     kBuffer, 1, captured)))
    return 1;
  const std::string torch =
      std::string(CS_SOURCE_DIR) + "/tests/data/gpu/h200_torch_ddp_rank0.cupti";
  auto recording = cs::profiler::read_replay(torch);
  if (!recording) {
    std::fprintf(stderr, "bench_cupti_decoder: %s\n", recording.message().c_str());
    return 1;
  }
  // Twenty passes, so that the figure is not one cold pass.
  return print("H200 PyTorch DDP recording (x20)",
               measure(cs::profiler::make_replay_source(std::move(recording).value(), "torch"),
                       std::size_t{1} << 20, 20))
             ? 0
             : 1;
}
