#pragma once
// The vocabulary of the trace store: what an event is, where it sits (a lane
// of a rank), and what it means (kind, category, collective). Events are
// integer rows; names live once in the store's string table. Times are int64
// nanoseconds on the run's clock; intervals are closed-open [start, end).
// Light on purpose: the worker, the tracers and the GUI all include it.

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/precision.h"

namespace cs::trace {

// Times a store holds lie strictly within +-this (about 73 years of
// nanoseconds; an epoch-based clock of today is 1.8e18): then any span
// between two of them, and the readers' "from the first to the last" range,
// fit an int64. The writer drops events outside it, counted in meta.
inline constexpr std::int64_t kTraceTimeLimitNs = INT64_MAX / 4;

// t + offset, held at the int64 limits where the sum would overflow
// (undefined behaviour): for a time and an offset read from a file, which
// can be anything. A held sum is past kTraceTimeLimitNs, so the writer
// drops it and counts it as any such time.
inline std::int64_t saturating_add(std::int64_t t, std::int64_t offset) {
  if (offset > 0 && t > INT64_MAX - offset) return INT64_MAX;
  if (offset < 0 && t < INT64_MIN - offset) return INT64_MIN;
  return t + offset;
}

struct LaneId {
  std::uint32_t value = 0;
  friend bool operator==(LaneId, LaneId) = default;
};
struct StringId {
  std::uint32_t value = 0;  // 0 is the empty string
  friend bool operator==(StringId, StringId) = default;
};

// What happened. Stored as integers: append new kinds at the end only.
enum class EventKind : std::uint8_t {
  kernel = 0,  // a GPU kernel, or a CPU-engine compute operation on the compute lane
  memcpy = 1,
  memset = 2,
  collective = 3,  // all-reduce, all-gather, ... (an NCCL kernel, an MPI call)
  p2p = 4,         // point-to-point send or receive (pipeline activations)
  annotation = 5,  // an NVTX range or a user annotation
  cpu_op = 6,      // a host-side operation (PyTorch op, worker phase)
  api_call = 7,    // CUDA runtime or driver API call
  step = 8,        // one training step
  sync = 9,        // synchronization (cudaStreamSynchronize, events, barriers)
  overhead = 10,   // the tracer's own overhead (CUPTI OVERHEAD records)
};

// What the time was spent on, as Holistic Trace Analysis classifies it.
enum class Category : std::uint8_t {
  compute = 0,
  communication = 1,
  memory = 2,
  synchronization = 3,
  other = 4,  // idle and everything else
};

// The kind of timeline row an event is drawn in.
enum class LaneKind : std::uint8_t {
  gpu_stream = 0,     // one CUDA stream of one device
  cpu_thread = 1,     // one host thread
  annotation = 2,     // one NVTX domain (or the worker's phase annotations)
  communication = 3,  // the CPU engine's communication thread
  steps = 4,          // training steps of a rank
  predicted = 5,      // the planner's predicted step
};

enum class Collective : std::uint8_t {
  none = 0,
  all_reduce = 1,
  all_gather = 2,
  reduce_scatter = 3,
  broadcast = 4,
  reduce = 5,
  all_to_all = 6,
  send = 7,
  recv = 8,
  barrier = 9,
  send_recv = 10,  // NCCL's fused send/receive kernel (all-to-all, pipeline exchanges)
};

// A send, a receive or NCCL's fused send/receive: between two ranks.
constexpr bool is_point_to_point(Collective c) {
  return c == Collective::send || c == Collective::recv || c == Collective::send_recv;
}

// A collective over a whole communicator: the six that nccl-tests times and
// the planner prices (not point-to-point, not a barrier).
constexpr bool is_group_collective(Collective c) {
  return c == Collective::all_reduce || c == Collective::all_gather ||
         c == Collective::reduce_scatter || c == Collective::broadcast || c == Collective::reduce ||
         c == Collective::all_to_all;
}

// nccl-tests' bus-bandwidth factor (doc/PERFORMANCE.md), busbw = algbw x
// factor: all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all
// (n-1)/n; broadcast, reduce and point-to-point 1 (n <= 1 counts as 1, so
// that these stay 1 on one rank). The one table of these factors: the
// planner's bytes moved per rank (planners/collectives.h) is this factor
// too, except that it is 0 on one rank.
double bus_bandwidth_factor(Collective c, int ranks);

enum class DataType : std::uint8_t {
  none = 0, fp32 = 1, fp16 = 2, bf16 = 3, fp8_e4m3 = 4, fp8_e5m2 = 5,
  int8 = 6, uint8 = 7, int32 = 8, int64 = 9, fp64 = 10,
};

std::string_view to_string(EventKind k);
std::string_view to_string(Category c);
std::string_view to_string(LaneKind k);
std::string_view to_string(Collective c);
std::string_view to_string(DataType t);
std::optional<EventKind> event_kind_from_string(std::string_view text);
std::optional<Category> category_from_string(std::string_view text);
std::optional<Collective> collective_from_string(std::string_view text);
std::optional<DataType> data_type_from_string(std::string_view text);
std::optional<LaneKind> lane_kind_from_string(std::string_view text);
int data_type_bytes(DataType t);
// The precision a GEMM of this element type computes in; none for a type
// that is no GEMM precision (fp64, integers but int8).
std::optional<Precision> precision_of(DataType t);

struct Event {
  LaneId lane;
  EventKind kind = EventKind::kernel;
  Category category = Category::compute;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  StringId name;
  std::int64_t correlation = 0;  // links a launch (api_call) to its GPU work; 0 = none
  std::int64_t bytes = 0;        // bytes moved (copies, collectives: the message size)
  double flops = 0;              // floating-point work, when known (GEMMs)
  Collective collective = Collective::none;
  DataType dtype = DataType::none;
  std::int64_t count = 0;        // elements of a collective
  std::int32_t peer = -1;        // the other rank of a p2p event, or the root
  std::int32_t step = -1;        // training step the event belongs to, when known
  std::int32_t group_size = 0;   // ranks in the collective's communicator; 0 = unknown

  std::int64_t duration_ns() const { return end_ns - start_ns; }
};

// Per-step figures a rank reports.
struct StepMetrics {
  std::int32_t rank = 0;
  std::int32_t step = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  double loss = 0;
  double tokens = 0;             // tokens (samples for generic models) this rank processed
  double loss_scale = 0;         // FP16 dynamic loss scale, 0 when unused
};

// A value sampled over time (GPU memory in use, utilisation, ...).
struct CounterSample {
  std::int32_t rank = 0;
  StringId name;
  std::int64_t time_ns = 0;
  double value = 0;
};

// The CPU engine's record of descheduling (Nsight Systems' "preempted"
// thread state): a sample at a compute op's end is the time within that op
// its thread was off CPU, another thread holding the core (ranks sharing
// cores). Written where a rank computes on one thread (its own CPU time then
// is the op's), for ops off CPU kOffCpuSampleNs or more; the breakdown
// counts that time as the part "descheduled", not as the op's kind.
inline constexpr std::string_view kOffCpuCounter = "compute op off CPU (ns)";
inline constexpr std::int64_t kOffCpuSampleNs = 10'000;
// What timing one compute op adds to its span in the CPU engine: the clock
// reads its tracer makes inside the span (with the time off CPU, a read of
// the thread's CPU time, a system call: 1.3 µs on the development VM; two
// where the op does not follow another closely). One sample per rank before
// its work; calibration fits the ops' own cost beyond it and the planner
// adds it to each op (kernel_launch_us).
inline constexpr std::string_view kOpTimingCostCounter = "compute op timing cost (ns)";
// A counter whose samples belong to ops (the time an op was off CPU, what
// timing one costs): not a quantity over time, so not a timeline lane nor a
// chart line.
inline bool is_op_counter(std::string_view name) {
  return name == kOffCpuCounter || name == kOpTimingCostCounter;
}

// A counter of bytes, which is shown in GiB rather than as a plain number:
// one that says so ("memory in use (bytes)", PyTorch's "GPU 0 memory
// allocated (bytes)"), or the CUDA tracer's "GPU 0 memory used". Not every
// counter about memory is in bytes ("memory utilization", a percentage).
inline bool counter_in_bytes(std::string_view name) {
  return name.find("bytes") != std::string_view::npos ||
         name.find("Bytes") != std::string_view::npos ||
         (name.starts_with("GPU ") && name.ends_with(" memory used"));
}

}  // namespace cs::trace
