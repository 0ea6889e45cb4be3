#include "profiler/cupti/activity_decoder.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include <cupti.h>

#include "core/kernel_names.h"
#include "core/step_names.h"
#include "profiler/cupti/api_filter.h"
#include "profiler/safe_memory.h"

namespace cs::profiler {

using trace::Category;
using trace::Collective;
using trace::demangle;
using trace::Event;
using trace::EventKind;
using trace::LaneId;
using trace::LaneKind;
using trace::nccl_call_from_range_name;
using trace::NcclCall;
using trace::NcclKernel;
using trace::parse_nccl_kernel_name;
using trace::StringId;

namespace {

// Correlation ids grow by one per API call: a ring indexed by id keeps the
// recent ones in fixed memory (an entry is overwritten 131072 calls later).
constexpr std::size_t kRingSize = 1u << 17;
// NCCL ranges remembered per thread, and what waits at most.
constexpr std::size_t kNcclRangesPerThread = 256;
constexpr std::size_t kMaxWaiting = 1u << 16;
constexpr std::size_t kMaxEarlyPayloads = 4096;

// Lanes sort: GPU streams by (device, stream), then threads and NVTX lanes in
// order of appearance, then the tracer's own.
constexpr std::int32_t kThreadSortBase = 10'000'000;
constexpr std::int32_t kNvtxSortBase = 20'000'000;
constexpr std::int32_t kTracerSortBase = 30'000'000;

// nvtxPayloadData_t of nvtx3/nvToolsExtPayload.h (NVTX payload extension,
// version 1): the binary payload a NCCL range carries.
struct NvtxPayloadData {
  std::uint64_t schema_id;
  std::size_t size;
  const void* payload;
};
static_assert(sizeof(NvtxPayloadData) == 24);

const char* copy_kind_name(std::uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "Memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "Memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return "Memcpy HtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return "Memcpy AtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
      return "Memcpy AtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
      return "Memcpy AtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
      return "Memcpy DtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "Memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return "Memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "Memcpy PtoP";
    default:
      return "Memcpy";
  }
}

const char* sync_name(CUpti_ActivitySynchronizationType type) {
  switch (type) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE:
      return "Event synchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT:
      return "Stream wait event";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE:
      return "Stream synchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE:
      return "Context synchronize";
    default:
      return "Synchronize";
  }
}

const char* overhead_name(CUpti_ActivityOverheadKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER:
      return "Driver JIT compilation";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH:
      return "CUPTI buffer flush";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION:
      return "CUPTI instrumentation";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE:
      return "CUPTI resource";
    case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING:
      return "Module loading";
    case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING:
      return "Lazy function loading";
    case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL:
      return "Command buffer full";
    case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST:
      return "CUPTI buffer request";
    case CUPTI_ACTIVITY_OVERHEAD_UVM_ACTIVITY_INIT:
      return "UVM activity init";
    default:
      return "Tracer overhead";
  }
}

std::uint32_t object_thread(CUpti_ActivityObjectKind kind, const CUpti_ActivityObjectKindId& id) {
  return kind == CUPTI_ACTIVITY_OBJECT_THREAD || kind == CUPTI_ACTIVITY_OBJECT_PROCESS
             ? id.pt.threadId
             : 0;
}

// The struct size of the kinds the decoder reads (0 for the others).
std::size_t record_size(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMCPY2:
      return sizeof(CUpti_ActivityMemcpyPtoP4);
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return sizeof(CUpti_ActivityMemset4);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
      return sizeof(CUpti_ActivityAPI);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      return sizeof(CUpti_ActivitySynchronization2);
    case CUPTI_ACTIVITY_KIND_MARKER:
      return sizeof(CUpti_ActivityMarker2);
    case CUPTI_ACTIVITY_KIND_MARKER_DATA:
      return sizeof(CUpti_ActivityMarkerData2);
    case CUPTI_ACTIVITY_KIND_OVERHEAD:
      return sizeof(CUpti_ActivityOverhead3);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
      return sizeof(CUpti_ActivityExternalCorrelation);
    default:
      return 0;
  }
}

std::string hex(std::uint64_t value) {
  char text[20];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace

struct ActivityDecoder::Impl {
  struct NcclPayload {
    bool present = false;
    std::uint64_t comm = 0;  // 0: not given
    std::int64_t bytes = -1;
    std::optional<std::int32_t> peer_or_root;
  };
  struct OpenMarker {
    std::int64_t start = 0;
    std::uint32_t thread = 0;
    std::string domain;
    std::string name;
    NcclPayload payload;
    std::optional<std::int32_t> step;  // the step it marks (steps_from_ranges)
  };
  struct NcclRange {
    std::int64_t start = 0;
    std::int64_t end = 0;
    NcclCall call;
    NcclPayload payload;
    bool used = false;
  };
  struct ApiSlot {
    std::uint32_t correlation = 0;
    std::uint32_t thread = 0;
    std::int64_t start = 0;
    std::int64_t end = 0;
  };
  struct StepSlot {
    std::uint32_t correlation = 0;
    std::int32_t step = -1;
  };
  struct KernelName {
    std::string raw;
    StringId id;
    std::optional<NcclKernel> nccl;
  };
  struct Waiting {
    Event event;
    std::uint32_t correlation = 0;
    std::uint32_t age = 0;  // buffers decoded since
    std::optional<trace::KernelLaunch> launch;  // an NCCL kernel's
  };

  Impl(trace::TraceWriter& w, DecoderOptions o)
      : writer(w), options(o), api_ring(kRingSize), step_ring(kRingSize) {}

  trace::TraceWriter& writer;
  DecoderOptions options;
  DecoderCounts counts;
  SafeMemoryReader memory;

  std::unordered_map<std::uint64_t, LaneId> gpu_lanes;  // device << 32 | stream
  std::unordered_map<std::uint32_t, LaneId> thread_lanes;
  std::map<std::pair<std::string, std::uint32_t>, LaneId> nvtx_lanes;
  std::optional<LaneId> overhead_lane;
  std::optional<LaneId> steps_lane;
  trace::StepRanges step_ranges;  // which NVTX ranges are steps (steps_from_ranges)
  std::optional<LaneId> unknown_thread_lane;
  std::int32_t threads_seen = 0;
  std::int32_t nvtx_lanes_seen = 0;

  std::unordered_map<std::string, StringId> strings;
  std::unordered_map<const char*, KernelName> kernel_names;
  std::unordered_map<std::uint64_t, StringId> api_names;

  std::vector<ApiSlot> api_ring;
  std::vector<StepSlot> step_ring;

  std::unordered_map<std::uint32_t, OpenMarker> open_markers;
  std::unordered_map<std::uint32_t, NcclPayload> early_payloads;
  std::unordered_map<std::uint32_t, std::deque<NcclRange>> nccl_ranges;
  std::unordered_map<std::uint32_t, std::int64_t> last_nccl_launch_end;
  bool seen_nccl_domain = false;

  std::deque<Waiting> waiting_nccl;
  std::deque<Waiting> waiting_sync;

  // --- names and lanes ---------------------------------------------------

  StringId intern(const std::string& text) {
    auto it = strings.find(text);
    if (it != strings.end()) return it->second;
    const StringId id = writer.intern(text);
    strings.emplace(text, id);
    return id;
  }

  LaneId gpu_lane(std::uint32_t device, std::uint32_t stream) {
    const std::uint64_t key = (std::uint64_t{device} << 32) | stream;
    auto it = gpu_lanes.find(key);
    if (it != gpu_lanes.end()) return it->second;
    const std::int32_t sort = static_cast<std::int32_t>(
        std::min<std::uint32_t>(device, 99) * 100000 + std::min<std::uint32_t>(stream, 99999));
    const LaneId lane = writer.add_lane(
        options.rank, LaneKind::gpu_stream,
        "GPU " + std::to_string(device) + " stream " + std::to_string(stream), sort);
    gpu_lanes.emplace(key, lane);
    return lane;
  }

  LaneId thread_lane(std::uint32_t thread) {
    auto it = thread_lanes.find(thread);
    if (it != thread_lanes.end()) return it->second;
    const LaneId lane =
        writer.add_lane(options.rank, LaneKind::cpu_thread, "Thread " + std::to_string(thread),
                        kThreadSortBase + threads_seen++);
    thread_lanes.emplace(thread, lane);
    return lane;
  }

  LaneId nvtx_lane(const std::string& domain, std::uint32_t thread) {
    auto key = std::make_pair(domain, thread);
    auto it = nvtx_lanes.find(key);
    if (it != nvtx_lanes.end()) return it->second;
    const std::string name = (domain.empty() ? std::string("NVTX") : "NVTX " + domain) +
                             " thread " + std::to_string(thread);
    const LaneId lane = writer.add_lane(options.rank, LaneKind::annotation, name,
                                        kNvtxSortBase + nvtx_lanes_seen++);
    nvtx_lanes.emplace(std::move(key), lane);
    return lane;
  }

  LaneId tracer_lane(std::optional<LaneId>& lane, const char* name, std::int32_t offset) {
    if (!lane)
      lane = writer.add_lane(options.rank, LaneKind::cpu_thread, name, kTracerSortBase + offset);
    return *lane;
  }

  const KernelName& kernel_name(const char* raw) {
    if (!raw) raw = "(unnamed kernel)";
    auto it = kernel_names.find(raw);
    if (it != kernel_names.end() && it->second.raw == raw) return it->second;
    KernelName name;
    name.raw = raw;
    const std::string readable = demangle(raw);
    name.id = intern(readable);
    name.nccl = parse_nccl_kernel_name(readable);
    return kernel_names.insert_or_assign(raw, std::move(name)).first->second;
  }

  StringId api_name(CUpti_ActivityKind kind, CUpti_CallbackId cbid) {
    const std::uint64_t key = (std::uint64_t{static_cast<std::uint32_t>(kind)} << 32) | cbid;
    auto it = api_names.find(key);
    if (it != api_names.end()) return it->second;
    const StringId id = intern(cupti_api::name(kind, cbid));
    api_names.emplace(key, id);
    return id;
  }

  // --- correlation ---------------------------------------------------------

  const ApiSlot* find_api(std::uint32_t correlation) const {
    if (correlation == 0) return nullptr;
    const ApiSlot& slot = api_ring[correlation % kRingSize];
    return slot.correlation == correlation ? &slot : nullptr;
  }

  std::int32_t step_of(std::uint32_t correlation) const {
    if (correlation == 0) return -1;
    const StepSlot& slot = step_ring[correlation % kRingSize];
    return slot.correlation == correlation ? slot.step : -1;
  }

  // --- writing ---------------------------------------------------------------

  bool has_time(std::uint64_t start, std::uint64_t end) {
    if ((start == 0 && end == 0) || end < start) {
      ++counts.without_timestamps;
      return false;
    }
    return true;
  }

  // False when the event falls outside the capture range (not written).
  bool write(const Event& event, const std::optional<trace::KernelLaunch>& launch = {}) {
    if (options.capture_range && !captured(event)) {
      ++counts.outside_capture_range;
      return false;
    }
    if (event.peer >= 0 && !options.p2p_peer_ranks.empty() && is_point_to_point(event.collective)) {
      Event renumbered = event;
      renumbered.peer = store_rank_of_peer(event.peer);
      writer.add_with_launch(renumbered, launch);
    } else {
      writer.add_with_launch(event, launch);
    }
    ++counts.events;
    if (is_gpu_work(event.kind)) ++counts.gpu_work_written;
    return true;
  }
  static bool is_gpu_work(EventKind kind) {
    return kind == EventKind::kernel || kind == EventKind::memcpy || kind == EventKind::memset ||
           kind == EventKind::collective || kind == EventKind::p2p;
  }
  // Whether the capture range holds the event: GPU work by the start of the
  // call that launched it (a kernel launched in the range and run after it
  // closed is the range's), where that call is known; an NVTX range or a
  // step when it meets a span (a step the program's cudaProfilerStart fell
  // inside is the capture's); anything else by its start.
  bool captured(const Event& event) const {
    const CaptureRange& range = *options.capture_range;
    if (is_gpu_work(event.kind)) {
      if (const ApiSlot* call = find_api(static_cast<std::uint32_t>(event.correlation)))
        return range.holds(call->start);
    }
    if (event.kind == EventKind::annotation || event.kind == EventKind::step)
      return range.overlaps(event.start_ns, event.end_ns);
    return range.holds(event.start_ns);
  }
  // A send's or receive's peer as the store numbers ranks (see DecoderOptions).
  std::int32_t store_rank_of_peer(std::int32_t peer) const {
    const auto& ranks = options.p2p_peer_ranks;
    return peer < static_cast<std::int32_t>(ranks.size()) ? ranks[static_cast<std::size_t>(peer)]
                                                          : peer;
  }

  static std::optional<trace::KernelLaunch> launch_of(const CUpti_ActivityKernel10& k) {
    trace::KernelLaunch l;
    l.grid[0] = k.gridX;
    l.grid[1] = k.gridY;
    l.grid[2] = k.gridZ;
    l.block[0] = k.blockX;
    l.block[1] = k.blockY;
    l.block[2] = k.blockZ;
    l.registers_per_thread = k.registersPerThread;
    if (k.staticSharedMemory >= 0 && k.dynamicSharedMemory >= 0) {
      l.dynamic_shared_memory_bytes = k.dynamicSharedMemory;
      l.shared_memory_bytes = std::int64_t{k.staticSharedMemory} + k.dynamicSharedMemory;
    }
    return trace::checked_launch(l);
  }

  Event gpu_event(EventKind kind, Category category, std::uint32_t device, std::uint32_t stream,
                  std::uint64_t start, std::uint64_t end, StringId name,
                  std::uint32_t correlation) {
    Event e;
    e.lane = gpu_lane(device, stream);
    e.kind = kind;
    e.category = category;
    e.start_ns = static_cast<std::int64_t>(start);
    e.end_ns = static_cast<std::int64_t>(end);
    e.name = name;
    e.correlation = correlation;
    e.step = step_of(correlation);
    return e;
  }

  // --- records ---------------------------------------------------------------

  void kernel(const CUpti_ActivityKernel10& k) {
    ++counts.kernels;
    const KernelName& name = kernel_name(k.name);
    if (name.nccl) ++counts.nccl_kernels;
    if (!has_time(k.start, k.end)) return;
    Event e = gpu_event(EventKind::kernel, Category::compute, k.deviceId, k.streamId, k.start,
                        k.end, name.id, k.correlationId);
    const std::optional<trace::KernelLaunch> launch = launch_of(k);
    if (!name.nccl) {
      write(e, launch);
      return;
    }
    e.kind = name.nccl->point_to_point ? EventKind::p2p : EventKind::collective;
    e.category = Category::communication;
    e.collective = name.nccl->collective;
    e.dtype = name.nccl->dtype;
    if (annotate_nccl(e, k.correlationId, false)) {
      write(e, launch);
      return;
    }
    waiting_nccl.push_back({e, k.correlationId, 0, launch});
    if (waiting_nccl.size() > kMaxWaiting) {
      write(waiting_nccl.front().event, waiting_nccl.front().launch);
      waiting_nccl.pop_front();
    }
  }

  void memcpy_record(const CUpti_ActivityMemcpy6& m) {
    ++counts.memcpys;
    if (!has_time(m.start, m.end)) return;
    // The runtime call (cudaMemcpyAsync) has runtimeCorrelationId; a copy
    // made through the driver API directly has only correlationId.
    const std::uint32_t correlation =
        m.runtimeCorrelationId ? m.runtimeCorrelationId : m.correlationId;
    Event e = gpu_event(EventKind::memcpy, Category::memory, m.deviceId, m.streamId, m.start, m.end,
                        intern(copy_kind_name(m.copyKind)), correlation);
    e.bytes = static_cast<std::int64_t>(m.bytes);
    write(e);
  }

  void peer_copy(const CUpti_ActivityMemcpyPtoP4& m) {
    ++counts.memcpys;
    if (!has_time(m.start, m.end)) return;
    Event e = gpu_event(EventKind::memcpy, Category::memory, m.deviceId, m.streamId, m.start, m.end,
                        intern(copy_kind_name(m.copyKind)), m.correlationId);
    e.bytes = static_cast<std::int64_t>(m.bytes);
    write(e);
  }

  void memset_record(const CUpti_ActivityMemset4& m) {
    ++counts.memsets;
    if (!has_time(m.start, m.end)) return;
    Event e = gpu_event(EventKind::memset, Category::memory, m.deviceId, m.streamId, m.start, m.end,
                        intern("Memset"), m.correlationId);
    e.bytes = static_cast<std::int64_t>(m.bytes);
    write(e);
  }

  void api(const CUpti_ActivityAPI& a, bool ignored_thread) {
    if (ignored_thread || !cupti_api::keep(a.kind, a.cbid)) {
      ++counts.filtered_api_calls;
      return;
    }
    ++counts.api_calls;
    if (!has_time(a.start, a.end)) return;
    api_ring[a.correlationId % kRingSize] = {a.correlationId, a.threadId,
                                             static_cast<std::int64_t>(a.start),
                                             static_cast<std::int64_t>(a.end)};
    Event e;
    e.lane = thread_lane(a.threadId);
    e.kind = EventKind::api_call;
    e.category = Category::other;
    e.start_ns = static_cast<std::int64_t>(a.start);
    e.end_ns = static_cast<std::int64_t>(a.end);
    e.name = api_name(a.kind, a.cbid);
    e.correlation = a.correlationId;
    e.step = step_of(a.correlationId);
    write(e);
  }

  void sync(const CUpti_ActivitySynchronization2& s) {
    ++counts.syncs;
    if (!has_time(s.start, s.end)) return;
    Event e;
    e.kind = EventKind::sync;
    e.category = Category::synchronization;
    e.start_ns = static_cast<std::int64_t>(s.start);
    e.end_ns = static_cast<std::int64_t>(s.end);
    e.name = intern(sync_name(s.type));
    e.correlation = s.correlationId;
    e.step = step_of(s.correlationId);
    if (const ApiSlot* call = find_api(s.correlationId)) {
      e.lane = thread_lane(call->thread);
      write(e);
      return;
    }
    waiting_sync.push_back({e, s.correlationId, 0});
    if (waiting_sync.size() > kMaxWaiting) {
      place_sync(waiting_sync.front(), true);
      waiting_sync.pop_front();
    }
  }

  // Writes a waiting sync event on its caller's lane; false while the call is unknown.
  bool place_sync(Waiting& w, bool final) {
    if (const ApiSlot* call = find_api(w.correlation)) {
      w.event.lane = thread_lane(call->thread);
    } else if (final) {
      w.event.lane =
          tracer_lane(unknown_thread_lane, "Synchronization (calling thread unknown)", 1);
    } else {
      return false;
    }
    write(w.event);
    return true;
  }

  NcclPayload read_payload(const CUpti_ActivityMarkerData2& d) {
    NcclPayload p;
    switch (d.payloadKind) {
      case CUPTI_METRIC_VALUE_KIND_UINT64:
        p.present = true;
        p.bytes = static_cast<std::int64_t>(d.payload.metricValueUint64);
        break;
      case CUPTI_METRIC_VALUE_KIND_INT64:
        p.present = true;
        p.bytes = d.payload.metricValueInt64;
        break;
      case CUPTI_METRIC_VALUE_KIND_NVTX_EXTENDED_PAYLOAD: {
        // NCCL's schemas start {uint64 communicator, size_t bytes, int third}.
        NvtxPayloadData data{};
        if (!memory.read(d.payload.metricValueNvtxExtendedPayload, &data, sizeof data)) break;
        if (data.size < 16 || data.size > 4096 || !data.payload) break;
        std::uint8_t raw[20] = {};
        const std::size_t take = std::min<std::size_t>(data.size, sizeof raw);
        if (!memory.read(reinterpret_cast<std::uint64_t>(data.payload), raw, take)) break;
        std::uint64_t comm = 0;
        std::uint64_t bytes = 0;
        std::memcpy(&comm, raw, 8);
        std::memcpy(&bytes, raw + 8, 8);
        if (bytes > (std::uint64_t{1} << 50)) break;  // not a message size: not NCCL's layout
        p.present = true;
        p.comm = comm;
        p.bytes = static_cast<std::int64_t>(bytes);
        if (take >= 20) {
          std::int32_t third = 0;
          std::memcpy(&third, raw + 16, 4);
          p.peer_or_root = third;
        }
        break;
      }
      default:
        break;
    }
    return p;
  }

  void marker_data(const CUpti_ActivityMarkerData2& d) {
    NcclPayload payload = read_payload(d);
    if (!payload.present) return;
    auto it = open_markers.find(d.id);
    if (it != open_markers.end()) {
      it->second.payload = payload;
      return;
    }
    if (early_payloads.size() >= kMaxEarlyPayloads) early_payloads.clear();
    early_payloads[d.id] = payload;
  }

  void marker(const CUpti_ActivityMarker2& m) {
    const std::uint32_t thread = object_thread(m.objectKind, m.objectId);
    if (m.flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
      OpenMarker open;
      open.start = static_cast<std::int64_t>(m.timestamp);
      open.thread = thread;
      open.domain = m.domain ? m.domain : "";
      open.name = m.name ? m.name : "";
      if (auto early = early_payloads.find(m.id); early != early_payloads.end()) {
        open.payload = early->second;
        early_payloads.erase(early);
      }
      if (open.domain == "NCCL") seen_nccl_domain = true;
      if (options.steps_from_ranges)
        open.step = step_ranges.started(open.thread, open.domain, open.name, open.start);
      open_markers[m.id] = std::move(open);
      return;
    }
    if (m.flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
      auto it = open_markers.find(m.id);
      if (it == open_markers.end()) {
        ++counts.unmatched_range_ends;  // the start was dropped, or came before tracing began
        return;
      }
      OpenMarker open = std::move(it->second);
      open_markers.erase(it);
      ++counts.nvtx_ranges;
      if (open.step) step_ranges.ended(static_cast<std::int64_t>(m.timestamp));
      if (!has_time(static_cast<std::uint64_t>(open.start), m.timestamp)) return;
      Event e;
      e.start_ns = open.start;
      e.end_ns = static_cast<std::int64_t>(m.timestamp);
      if (open.step) {
        if (!steps_lane) steps_lane = writer.add_lane(options.rank, LaneKind::steps, "steps", -1);
        e.lane = *steps_lane;
        e.kind = EventKind::step;
        e.category = Category::other;
        e.step = *open.step;
        e.name = intern(open.name);
        if (write(e)) ++counts.steps;
        return;
      }
      e.lane = nvtx_lane(open.domain, open.thread);
      e.kind = EventKind::annotation;
      e.category = Category::other;
      std::string name = open.name;
      if (open.domain == "NCCL") {
        if (auto call = nccl_call_from_range_name(open.name)) {
          e.collective = call->collective;
          if (open.payload.present) {
            e.bytes = std::max<std::int64_t>(open.payload.bytes, 0);
            if (call->third_field_is_peer_or_root && open.payload.peer_or_root) {
              e.peer = *open.payload.peer_or_root;
            }
            if (open.payload.comm) name += " (comm " + hex(open.payload.comm) + ")";
          }
          remember_nccl_range(open, *call, e.end_ns);
        }
      }
      e.name = intern(name);
      write(e);
      return;
    }
    if (m.flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) {
      ++counts.nvtx_marks;
      if (!has_time(m.timestamp, m.timestamp)) return;
      Event e;
      e.lane = nvtx_lane(m.domain ? m.domain : "", thread);
      e.kind = EventKind::annotation;
      e.category = Category::other;
      e.start_ns = e.end_ns = static_cast<std::int64_t>(m.timestamp);
      e.name = intern(m.name ? m.name : "");
      write(e);
      return;
    }
    ++counts.other_kinds;  // NVTX synchronisation-object markers
  }

  void remember_nccl_range(const OpenMarker& open, const NcclCall& call, std::int64_t end) {
    auto& ranges = nccl_ranges[open.thread];
    ranges.push_back({open.start, end, call, open.payload, false});
    if (ranges.size() > kNcclRangesPerThread) ranges.pop_front();
  }

  bool nccl_range_open_before(std::uint32_t thread, std::int64_t time) const {
    for (const auto& [id, open] : open_markers) {
      if (open.thread == thread && open.domain == "NCCL" && open.start <= time) return true;
    }
    return false;
  }

  // Gives an NCCL kernel the size, count and peer of the NCCL calls that
  // launched it: the NCCL range around its launch, or, for calls grouped in
  // ncclGroupStart/End (launched from ncclGroupEnd), the ranges that ended on
  // the launching thread since its previous NCCL launch. True when done
  // (annotated, or nothing more will come); false to wait for later buffers.
  bool annotate_nccl(Event& e, std::uint32_t correlation, bool final) {
    const ApiSlot* launch = find_api(correlation);
    if (!launch) return final || !seen_nccl_domain;
    auto& ranges = nccl_ranges[launch->thread];
    std::vector<NcclRange*> calls;
    for (auto it = ranges.rbegin(); it != ranges.rend(); ++it) {
      if (it->start <= launch->start && launch->end <= it->end) {
        calls.push_back(&*it);
        break;
      }
    }
    if (calls.empty()) {
      if (!final && nccl_range_open_before(launch->thread, launch->start)) return false;
      auto previous = last_nccl_launch_end.find(launch->thread);
      const std::int64_t since = previous == last_nccl_launch_end.end() ? 0 : previous->second;
      for (auto& r : ranges) {
        if (!r.used && r.end <= launch->start && r.start >= since) calls.push_back(&r);
      }
    }
    if (calls.empty()) return final || !seen_nccl_domain;
    last_nccl_launch_end[launch->thread] = launch->end;
    apply_nccl_calls(e, calls);
    return true;
  }

  void apply_nccl_calls(Event& e, const std::vector<NcclRange*>& calls) {
    const NcclRange& first = *calls.front();
    std::int64_t bytes = 0;
    bool sized = false;
    bool all_p2p = true;
    bool same_collective = true;
    bool same_peer =
        first.call.third_field_is_peer_or_root && first.payload.peer_or_root.has_value();
    const std::int32_t peer = first.payload.peer_or_root.value_or(-1);
    for (NcclRange* r : calls) {
      r->used = true;
      if (r->payload.present && r->payload.bytes >= 0) {
        bytes += r->payload.bytes;
        sized = true;
      }
      all_p2p = all_p2p && r->call.point_to_point;
      same_collective = same_collective && r->call.collective == first.call.collective;
      same_peer = same_peer && r->call.third_field_is_peer_or_root &&
                  r->payload.peer_or_root.value_or(-1) == peer;
    }
    // A SendRecv kernel's calls say which it was (send or receive).
    if ((e.collective == Collective::none || e.collective == Collective::send_recv) &&
        same_collective)
      e.collective = first.call.collective;
    if (all_p2p) e.kind = EventKind::p2p;
    if (same_peer) e.peer = peer;
    if (sized) {
      e.bytes = bytes;
      if (const int size = trace::data_type_bytes(e.dtype); size > 0) e.count = bytes / size;
      ++counts.nccl_annotated;
    }
  }

  void overhead(const CUpti_ActivityOverhead3& o, bool from_cupti) {
    // CUPTI allocates the details (e.g. command-buffer-full data) for the reader to free.
    if (from_cupti && o.overheadData) std::free(o.overheadData);
    ++counts.overheads;
    if (!has_time(o.start, o.end)) return;
    Event e;
    const std::uint32_t thread = object_thread(o.objectKind, o.objectId);
    e.lane = thread ? thread_lane(thread) : tracer_lane(overhead_lane, "Tracer overhead", 0);
    e.kind = EventKind::overhead;
    e.category = Category::other;
    e.start_ns = static_cast<std::int64_t>(o.start);
    e.end_ns = static_cast<std::int64_t>(o.end);
    e.name = intern(overhead_name(o.overheadKind));
    e.correlation = o.correlationId;
    write(e);
  }

  void external(const CUpti_ActivityExternalCorrelation& x) {
    ++counts.external_correlations;
    if (x.externalKind != CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2) return;
    step_ring[x.correlationId % kRingSize] = {x.correlationId,
                                              static_cast<std::int32_t>(x.externalId)};
  }

  void retry_waiting(bool final) {
    for (auto it = waiting_nccl.begin(); it != waiting_nccl.end();) {
      const bool give_up = final || it->age >= options.max_wait_buffers;
      if (annotate_nccl(it->event, it->correlation, give_up)) {
        write(it->event, it->launch);
        it = waiting_nccl.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = waiting_sync.begin(); it != waiting_sync.end();) {
      const bool give_up = final || it->age >= options.max_wait_buffers;
      if (place_sync(*it, give_up)) {
        it = waiting_sync.erase(it);
      } else {
        ++it;
      }
    }
  }
};

ActivityDecoder::ActivityDecoder(trace::TraceWriter& writer, DecoderOptions options)
    : impl_(std::make_unique<Impl>(writer, options)) {}

ActivityDecoder::~ActivityDecoder() = default;

void ActivityDecoder::ignore_thread(std::uint32_t system_thread_id) {
  for (auto& slot : ignored_threads_) {
    std::uint32_t empty = 0;
    if (slot.compare_exchange_strong(empty, system_thread_id) || empty == system_thread_id) return;
  }
}

void ActivityDecoder::decode(const ActivityBuffer& buffer) {
  Impl& d = *impl_;
  CUpti_Activity* record = nullptr;
  while (true) {
    const CUptiResult result = cuptiActivityGetNextRecord(buffer.data, buffer.valid, &record);
    if (result == CUPTI_ERROR_MAX_LIMIT_REACHED) break;
    if (result != CUPTI_SUCCESS) {
      ++d.counts.invalid_buffers;
      break;
    }
    const std::size_t offset =
        static_cast<std::size_t>(reinterpret_cast<std::uint8_t*>(record) - buffer.data);
    if (offset + record_size(record->kind) > buffer.valid) {
      ++d.counts.invalid_buffers;  // a record cut short: never read past the buffer
      break;
    }
    ++d.counts.records;
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        d.kernel(*reinterpret_cast<const CUpti_ActivityKernel10*>(record));
        break;
      case CUPTI_ACTIVITY_KIND_MEMCPY:
        d.memcpy_record(*reinterpret_cast<const CUpti_ActivityMemcpy6*>(record));
        break;
      case CUPTI_ACTIVITY_KIND_MEMCPY2:
        d.peer_copy(*reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(record));
        break;
      case CUPTI_ACTIVITY_KIND_MEMSET:
        d.memset_record(*reinterpret_cast<const CUpti_ActivityMemset4*>(record));
        break;
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER: {
        const auto& api = *reinterpret_cast<const CUpti_ActivityAPI*>(record);
        bool ignored = false;
        for (const auto& slot : ignored_threads_)
          ignored = ignored || (api.threadId && slot.load() == api.threadId);
        d.api(api, ignored);
        break;
      }
      case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
        d.sync(*reinterpret_cast<const CUpti_ActivitySynchronization2*>(record));
        break;
      case CUPTI_ACTIVITY_KIND_MARKER:
        d.marker(*reinterpret_cast<const CUpti_ActivityMarker2*>(record));
        break;
      case CUPTI_ACTIVITY_KIND_MARKER_DATA:
        d.marker_data(*reinterpret_cast<const CUpti_ActivityMarkerData2*>(record));
        break;
      case CUPTI_ACTIVITY_KIND_OVERHEAD:
        d.overhead(*reinterpret_cast<const CUpti_ActivityOverhead3*>(record), buffer.from_cupti);
        break;
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
        d.external(*reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record));
        break;
      default:
        ++d.counts.other_kinds;
        break;
    }
  }
  for (auto& w : d.waiting_nccl)
    ++w.age;
  for (auto& w : d.waiting_sync)
    ++w.age;
  d.retry_waiting(false);
}

void ActivityDecoder::finish() {
  Impl& d = *impl_;
  d.retry_waiting(true);
  d.counts.unclosed_ranges += d.open_markers.size();
  d.open_markers.clear();
}

const DecoderCounts& ActivityDecoder::counts() const {
  return impl_->counts;
}

}  // namespace cs::profiler
