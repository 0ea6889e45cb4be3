#pragma once
// Records the worker's own operations into its rank's trace store: each op
// on the calling thread's lane, with its FLOPs or bytes, at CLOCK_REALTIME
// nanoseconds (the run clock of every store). Safe from several threads;
// names are interned once.
//
// Time the whole process did not run (SIGSTOP, a debugger, swapped out, a
// suspended machine: a stall of kStallNs or more) is not passed off as the
// work of the op it fell in: that op is recorded as "stalled: <name>", of
// category other (not compute, not communication; no FLOPs), and the stall
// itself as "stalled: the process did not run" on the phases lane. A stalled
// rank's other ranks keep their waits: they did wait.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/trace_types.h"

namespace cs::trace {
class TraceWriter;
}

namespace cs::worker {

class StallWatch;

// The shortest stall of the process that is told apart from work.
inline constexpr std::int64_t kStallNs = 1'000'000'000;
inline constexpr std::string_view kStalledPrefix = "stalled: ";
// The longest gap between two ops of a thread over which the second takes
// the first's end reading of the thread's CPU time (OpTracer::op_start_cpu_ns).
inline constexpr std::int64_t kChainNs = trace::kOffCpuSampleNs;

class OpTracer {
 public:
  OpTracer(trace::TraceWriter& writer, int rank);
  ~OpTracer();  // stops watching for stalls

  static std::int64_t now_ns();
  // The calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID).
  static std::int64_t thread_cpu_ns();
  // An op's CPU time at its start `wall` (now_ns(), just read) and at its
  // end. Each read is a system call (1.3 us on the development VM), so an
  // op that starts within kChainNs of the last one's end on its thread
  // takes that end's reading plus the time since, as if the thread ran
  // throughout: a deschedule in so short a gap is below what is recorded
  // (trace::kOffCpuSampleNs). One read an op, where there were two.
  static std::int64_t op_start_cpu_ns(std::int64_t wall);
  // The op's end: its CPU time read (thread_cpu_ns) at run clock `wall`.
  static void op_ended(std::int64_t wall, std::int64_t cpu);

  // Whether compute ops time what of them their thread spent off CPU
  // (trace::kOffCpuCounter): only where a rank computes on one thread.
  void set_times_off_cpu(bool on) { times_off_cpu_ = on; }
  bool times_off_cpu() const { return times_off_cpu_; }
  // Measures what ScopedOp's own clock reads add to an op's span (after
  // set_times_off_cpu) and records it (trace::kOpTimingCostCounter).
  void record_timing_cost();

  trace::TraceWriter& writer() { return writer_; }
  int rank() const { return rank_; }
  trace::LaneId compute_lane() const { return compute_lane_; }
  trace::LaneId communication_lane() const { return communication_lane_; }
  trace::LaneId phase_lane() const { return phase_lane_; }
  trace::LaneId steps_lane() const { return steps_lane_; }

  void set_step(int step) { step_ = step; }
  int step() const { return step_; }

  trace::StringId name(std::string_view text);
  // A finished operation [start, end).
  void record(trace::LaneId lane, trace::EventKind kind, trace::Category category,
              std::int64_t start_ns, std::int64_t end_ns, std::string_view name, double flops = 0,
              std::int64_t bytes = 0, trace::Collective collective = trace::Collective::none,
              trace::DataType dtype = trace::DataType::none, std::int64_t count = 0,
              std::int32_t peer = -1, std::int32_t group_size = 0, std::int64_t off_cpu_ns = 0);
  void counter(std::string_view name, std::int64_t time_ns, double value);

 private:
  trace::TraceWriter& writer_;
  int rank_;
  int step_ = -1;
  bool times_off_cpu_ = false;
  trace::LaneId compute_lane_, communication_lane_, phase_lane_, steps_lane_;
  std::mutex names_mutex_;
  std::unordered_map<std::string, trace::StringId> names_;
  std::unique_ptr<StallWatch> stalls_;
};

// What an op processed, for the trace (calibration fits times against it).
struct OpSize {
  double flops = 0;           // floating-point work (GEMMs, attention)
  std::int64_t bytes = 0;     // operands and result (GEMMs), or bytes streamed
  std::int64_t elements = 0;  // elements processed (the event's count)
  trace::DataType dtype = trace::DataType::none;
};

// Times the enclosing scope as one compute op on the compute lane.
class ScopedOp {
 public:
  ScopedOp(OpTracer* tracer, std::string_view name, double flops = 0)
      : ScopedOp(tracer, name, OpSize{flops, 0, 0, trace::DataType::none}) {}
  ScopedOp(OpTracer* tracer, std::string_view name, const OpSize& size)
      : tracer_(tracer),
        name_(name),
        size_(size),
        start_(tracer ? OpTracer::now_ns() : 0),
        cpu_start_(tracer && tracer->times_off_cpu() ? OpTracer::op_start_cpu_ns(start_) : -1) {}
  // The CPU-time reads are system calls, at whose return the scheduler may
  // hand the core to a waiting thread (lazy preemption waits for one): the
  // op's span encloses them, so that such a switch is counted inside it.
  ~ScopedOp() {
    if (tracer_) {
      const std::int64_t cpu_end = cpu_start_ >= 0 ? OpTracer::thread_cpu_ns() : 0;
      const std::int64_t end = OpTracer::now_ns();
      if (cpu_start_ >= 0) OpTracer::op_ended(end, cpu_end);
      const std::int64_t off_cpu = cpu_start_ >= 0 ? (end - start_) - (cpu_end - cpu_start_) : 0;
      tracer_->record(tracer_->compute_lane(), trace::EventKind::kernel, trace::Category::compute,
                      start_, end, name_, size_.flops, size_.bytes, trace::Collective::none,
                      size_.dtype, size_.elements, -1, 0, off_cpu);
    }
  }
  ScopedOp(const ScopedOp&) = delete;
  ScopedOp& operator=(const ScopedOp&) = delete;

 private:
  OpTracer* tracer_;
  std::string_view name_;
  OpSize size_;
  std::int64_t start_;
  std::int64_t cpu_start_;  // -1: not timed
};

}  // namespace cs::worker
