#include "profiler/worker/op_tracer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <functional>
#include <limits>
#include <thread>
#include <utility>
#include <vector>

#include "core/run_clock.h"
#include "core/trace_writer.h"

namespace cs::worker {

namespace {

std::int64_t monotonic_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// A thread that ticks every 50 ms: a gap of kStallNs or more between two
// ticks is a time the whole process did not run. A process that comes out
// of a stall runs all its threads again at once, so an op may end before the
// ticker has seen the gap: an op that ends more than kStallNs after the last
// tick is in a stall too. The gap is measured on the monotonic clock; the
// stall is kept on the run clock, as the ops are.
class StallWatch {
 public:
  using OnStall = std::function<void(std::int64_t start_ns, std::int64_t end_ns)>;

  explicit StallWatch(OnStall on_stall) : on_stall_(std::move(on_stall)) {
    last_tick_.store(monotonic_ns());
    thread_ = std::thread([this] { tick(); });
  }
  ~StallWatch() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

  // Whether the process stalled within [start_ns, end_ns), run clock.
  bool stalled_within(std::int64_t start_ns, std::int64_t end_ns) {
    // Acquire: a tick that moved past a stall has recorded it first.
    if (monotonic_ns() - last_tick_.load(std::memory_order_acquire) >= kStallNs) return true;
    if (start_ns >= latest_end_.load(std::memory_order_acquire)) return false;
    std::lock_guard lock(mutex_);
    for (const auto& [from, to] : stalls_) {
      if (from < end_ns && start_ns < to) return true;
    }
    return false;
  }

 private:
  void tick() {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      wake_.wait_for(lock, std::chrono::milliseconds(50));
      const std::int64_t now = monotonic_ns();
      const std::int64_t gap = now - last_tick_.load();
      if (gap >= kStallNs) {
        const std::int64_t end = OpTracer::now_ns();
        stalls_.emplace_back(end - gap, end);
        if (stalls_.size() > 64) stalls_.erase(stalls_.begin());
        latest_end_.store(end, std::memory_order_release);
        lock.unlock();
        on_stall_(end - gap, end);
        lock.lock();
      }
      last_tick_.store(now, std::memory_order_release);
    }
  }

  OnStall on_stall_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;                                          // guarded by mutex_
  std::vector<std::pair<std::int64_t, std::int64_t>> stalls_;  // guarded by mutex_; the latest
  std::atomic<std::int64_t> last_tick_{0};                     // monotonic
  std::atomic<std::int64_t> latest_end_{0};                    // run clock: no stall ends later
  std::thread thread_;
};

OpTracer::OpTracer(trace::TraceWriter& writer, int rank) : writer_(writer), rank_(rank) {
  compute_lane_ = writer_.add_lane(rank, trace::LaneKind::cpu_thread, "compute", 0);
  communication_lane_ = writer_.add_lane(rank, trace::LaneKind::communication, "communication", 1);
  phase_lane_ = writer_.add_lane(rank, trace::LaneKind::annotation, "phases", 2);
  steps_lane_ = writer_.add_lane(rank, trace::LaneKind::steps, "steps", 3);
  stalls_ = std::make_unique<StallWatch>([this](std::int64_t start_ns, std::int64_t end_ns) {
    record(phase_lane_, trace::EventKind::annotation, trace::Category::other, start_ns, end_ns,
           std::string(kStalledPrefix) + "the process did not run");
  });
}

OpTracer::~OpTracer() = default;

std::int64_t OpTracer::now_ns() {
  return trace::run_clock_ns();
}

std::int64_t OpTracer::thread_cpu_ns() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return std::int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

namespace {

// The last CPU-time reading of an op's end on this thread, at run clock `wall`.
struct CpuReading {
  std::int64_t wall = std::numeric_limits<std::int64_t>::min();
  std::int64_t cpu = 0;
};
thread_local CpuReading t_last_end;

}  // namespace

std::int64_t OpTracer::op_start_cpu_ns(std::int64_t wall) {
  const CpuReading last = t_last_end;
  if (last.wall != std::numeric_limits<std::int64_t>::min() && wall >= last.wall &&
      wall - last.wall <= kChainNs) {
    return last.cpu + (wall - last.wall);
  }
  return thread_cpu_ns();
}

void OpTracer::op_ended(std::int64_t wall, std::int64_t cpu) {
  t_last_end = {wall, cpu};
}

void OpTracer::record_timing_cost() {
  // The reads a ScopedOp makes between its span's ends (an op that follows
  // another: its end's CPU time and the clock), repeated; the fastest
  // batch, as ranks sharing cores may be preempted in the others.
  constexpr int kBatches = 16;
  constexpr int kReads = 32;
  std::int64_t best = std::numeric_limits<std::int64_t>::max();
  for (int b = 0; b < kBatches; ++b) {
    const std::int64_t start = now_ns();
    for (int i = 0; i < kReads; ++i) {
      if (times_off_cpu_) (void)thread_cpu_ns();
      (void)now_ns();
    }
    best = std::min(best, now_ns() - start);
  }
  counter(trace::kOpTimingCostCounter, now_ns(), static_cast<double>(best) / kReads);
}

trace::StringId OpTracer::name(std::string_view text) {
  std::lock_guard lock(names_mutex_);
  auto it = names_.find(std::string(text));
  if (it != names_.end()) return it->second;
  const trace::StringId id = writer_.intern(text);
  names_.emplace(std::string(text), id);
  return id;
}

void OpTracer::record(trace::LaneId lane, trace::EventKind kind, trace::Category category,
                      std::int64_t start_ns, std::int64_t end_ns, std::string_view op_name,
                      double flops, std::int64_t bytes, trace::Collective collective,
                      trace::DataType dtype, std::int64_t count, std::int32_t peer,
                      std::int32_t group_size, std::int64_t off_cpu_ns) {
  // The steps and phases keep their spans; an op that a stall fell in did
  // not work for its whole span.
  const bool stalled =
      lane != steps_lane_ && lane != phase_lane_ && stalls_->stalled_within(start_ns, end_ns);
  trace::Event e;
  e.lane = lane;
  e.kind = kind;
  e.category = stalled ? trace::Category::other : category;
  e.start_ns = start_ns;
  e.end_ns = end_ns;
  e.name = stalled ? name(std::string(kStalledPrefix) + std::string(op_name)) : name(op_name);
  e.flops = stalled ? 0 : flops;
  e.bytes = bytes;
  e.collective = collective;
  e.dtype = dtype;
  e.count = count;
  e.peer = peer;
  e.group_size = group_size;
  e.step = step_;
  writer_.add(e);
  if (!stalled && off_cpu_ns >= trace::kOffCpuSampleNs)
    counter(trace::kOffCpuCounter, end_ns, static_cast<double>(off_cpu_ns));
}

void OpTracer::counter(std::string_view counter_name, std::int64_t time_ns, double value) {
  trace::CounterSample s;
  s.rank = rank_;
  s.name = name(counter_name);
  s.time_ns = time_ns;
  s.value = value;
  writer_.add(s);
}

}  // namespace cs::worker
